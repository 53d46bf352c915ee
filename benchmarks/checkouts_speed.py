"""Two (or more) checkouts side by side in one run: the solver's warm speed and the first run's
compile time, for a change that must keep both (a restructure of the engine, say).

    python benchmarks/checkouts_speed.py --code before=/path/to/old --code after=.

For each checkout, in turn and interleaved round by round (the machine is shared: only ratios
from one run mean anything):

- **cold**: ``bucketopt solve --lens <the embedded example> -k 6 --profile
  rtx-pro-6000-blackwell --epochs 6`` (the time objective: the largest set of kernels a
  documented command compiles) in a subprocess with an empty numba cache of its own; wall and
  CPU seconds (user + system of the subprocess);
- **warm**: a set of solves in a subprocess whose kernels are compiled (its checkout's own
  cache, filled first): the best of ``--repeats`` CPU seconds of each (``time.process_time``:
  the two worker threads of the certified DP both count).

The outputs are not compared here: benchmarks/outputs_matrix.py does that, byte for byte.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COLD = ["solve", "-k", "6", "--profile", "rtx-pro-6000-blackwell", "--epochs", "6", "-q",
        "--json"]
WARM = r"""
import json, sys, time
import numpy as np
import bucketopt
from bucketopt.datasets import seed_like

lengths = seed_like()
wide = np.random.default_rng(0).integers(1, 20_001, 400_000)
profile = "rtx-pro-6000-blackwell"
cases = {
    "edge padding, k=6": lambda: bucketopt.solve(lengths, 6),
    "dynamic padding + certificate, k=16":
        lambda: bucketopt.solve(lengths, 16, pad="batch", token_budget=65_536),
    "time (edge), k=6, 8 GPUs":
        lambda: bucketopt.solve(lengths, 6, profile=profile, world_size=8),
    "time (dynamic), k=6, 8 GPUs":
        lambda: bucketopt.solve(lengths, 6, pad="batch", token_budget=65_536, profile=profile,
                                world_size=8),
    "time (edge), 20,000 lengths, k=16, 1 GPU":
        lambda: bucketopt.solve(wide, 16, profile=profile, world_size=1),
}
repeats = int(sys.argv[1])
out = {}
for name, solve in cases.items():
    solve().optimality  # compiled and loaded
    best = float("inf")
    for _ in range(repeats):
        t = time.process_time()
        solve().optimality
        best = min(best, time.process_time() - t)
    out[name] = best
print(json.dumps(out))
"""


def _env(code: Path, cache: Path | None) -> dict:
    env = dict(os.environ, PYTHONPATH=str(code))
    if cache is not None:
        env["NUMBA_CACHE_DIR"] = str(cache)
    else:
        env.pop("NUMBA_CACHE_DIR", None)
    return env


def cold(code: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of the cold time solve, with an empty cache of its own."""
    with tempfile.TemporaryDirectory() as cache:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "bucketopt", *COLD], env=_env(code, Path(cache)),
                       check=True, capture_output=True, cwd=tempfile.gettempdir())
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def warm(code: Path, repeats: int) -> dict:
    done = subprocess.run([sys.executable, "-c", WARM, str(repeats)], env=_env(code, None),
                          check=True, capture_output=True, text=True,
                          cwd=tempfile.gettempdir())
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", action="append", required=True, metavar="NAME=PATH",
                        help="a checkout to measure (repeat: two or more)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    codes = {}
    for item in args.code:
        name, _, path = item.rpartition("=")
        codes[name or path] = Path(path).resolve()
    for code in codes.values():  # every checkout's own cache filled before any timing
        warm(code, 1)
    colds = {name: [] for name in codes}
    warms = {name: [] for name in codes}
    for _ in range(args.rounds):
        for name, code in codes.items():
            colds[name].append(cold(code))
            warms[name].append(warm(code, args.repeats))
    names = list(codes)
    print("| | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    print("| cold time solve, wall / CPU s (best of rounds) | " + " | ".join(
        f"{min(w for w, _ in colds[n]):.1f} / {min(c for _, c in colds[n]):.1f}"
        for n in names) + " |")
    for case in warms[names[0]][0]:
        print(f"| warm: {case}, CPU s | " + " | ".join(
            f"{min(r[case] for r in warms[n]):.3f}" for n in names) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
