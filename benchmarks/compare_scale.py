"""``bucketopt compare`` on tens of millions of rows: time and peak memory next to ``inspect``.

    python benchmarks/compare_scale.py [--rows 30000000] [--lens FILE] [--full-check] [--json]

Builds its own Parquet file (column ``seq_len``, int32, drawn from the embedded example) in a
temporary directory unless ``--lens`` is given, then runs, each in a fresh process of this
interpreter on this checkout, side by side in one run:

- ``bucketopt inspect FILE`` (the reference: one streaming pass over the file),
- ``bucketopt compare --lens FILE -k 6 --token-budget 65536 --pad batch --json``,
- the same with ``--profile rtx-pro-6000-blackwell --gpus 8``,

and reports seconds and peak RSS of each, and compare's time as a multiple of inspect's (goal:
at most 20x, peak RSS under 1 GB). Peak RSS is ``getrusage(RUSAGE_CHILDREN)`` of a small
parent process whose only child is the command. ``--full-check`` also runs ``compare`` with
``simulated_samples=None`` (every sample simulated: minutes and several GB) and prints how far
the subsampled figures are from it. :func:`measure` is the function other benchmarks call.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROFILE = "rtx-pro-6000-blackwell"
# dynamic padding, as docs/dynamic_padding.md's table was measured (compare defaults to edge)
COMPARE = ["compare", "-k", "6", "--token-budget", "65536", "--pad", "batch", "--json"]
GOAL_RATIO, GOAL_RSS_MB = 20.0, 1024.0

# a parent whose only child is the command: its RUSAGE_CHILDREN peak is the command's own
_PROBE = ("import json, resource, subprocess, sys, time\n"
          "t = time.perf_counter()\n"
          "done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n"
          "seconds = time.perf_counter() - t\n"
          "rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024\n"
          "print(json.dumps({'seconds': seconds, 'rss_mb': rss, 'rc': done.returncode,\n"
          "                  'stderr': done.stderr.decode(errors='replace')[-400:]}))\n")


def _env():
    env = dict(os.environ)  # this checkout, not whatever bucketopt is installed
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def run_cli(*argv) -> dict:
    """Seconds and peak RSS (MB) of ``python -m bucketopt ARGV`` in a fresh process."""
    out = subprocess.run([sys.executable, "-c", _PROBE, sys.executable, "-m", "bucketopt",
                          *argv], capture_output=True, text=True, env=_env(), check=True)
    result = json.loads(out.stdout)
    if result["rc"] != 0:
        raise RuntimeError(f"bucketopt {' '.join(argv)} failed: {result['stderr']}")
    return result


def build_file(path, rows: int, seed: int = 0) -> Path:
    """A Parquet file of ``rows`` int32 lengths drawn from the embedded example."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bucketopt.datasets import seed_like

    base = seed_like().astype(np.int32)
    rng = np.random.default_rng(seed)
    lengths = base[rng.integers(0, base.size, size=rows)]
    pq.write_table(pa.table({"seq_len": lengths}), path, row_group_size=1 << 20)
    return Path(path)


def measure(path) -> dict:
    """inspect, compare and compare with a profile on ``path``: seconds, peak RSS (MB) and
    compare's time as a multiple of inspect's, measured side by side."""
    path = str(path)
    warm = run_cli("inspect", path)  # numba caches and the page cache are warm
    inspect = run_cli("inspect", path)
    inspect = min((inspect, warm), key=lambda r: r["seconds"])
    plain = run_cli(*COMPARE, "--lens", path)
    timed = run_cli(*COMPARE, "--lens", path, "--profile", PROFILE, "--gpus", "8")
    out = {"file": path, "inspect_s": inspect["seconds"], "inspect_rss_mb": inspect["rss_mb"]}
    for name, r in (("compare", plain), ("compare_profile", timed)):
        out.update({f"{name}_s": r["seconds"], f"{name}_rss_mb": r["rss_mb"],
                    f"{name}_vs_inspect": r["seconds"] / inspect["seconds"]})
    out["goal"] = {"ratio": GOAL_RATIO, "rss_mb": GOAL_RSS_MB}
    return out


def full_check(path) -> list[tuple]:
    """(row, figure, subsampled, every sample) for the figures compare simulates."""
    import numpy as np

    from bucketopt import load_lengths
    from bucketopt.training.compare import compare

    lengths = load_lengths(path, column="seq_len")
    kw = dict(token_budget=65536, profile=PROFILE, world_size=8, pad="batch")
    sub = compare(lengths, 6, **kw).strategies
    full = compare(lengths, 6, simulated_samples=None, **kw).strategies
    keys = ("padding_fraction_simulated", "ktok_per_s", "eta_days", "wait_fraction", "batches",
            "step_mix_gap", "epoch_churn")
    rows = []
    for name, row in full.items():
        for key in keys:
            if row.get(key) is not None and sub[name].get(key) is not None:
                rows.append((name, key, float(sub[name][key]), float(row[key])))
    assert all(np.isfinite(r[2]) for r in rows)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=30_000_000)
    parser.add_argument("--lens", help="an existing Parquet file with a seq_len column")
    parser.add_argument("--full-check", action="store_true",
                        help="also simulate every sample and print the differences (slow)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        if args.lens:
            path = Path(args.lens)
        else:
            t = time.perf_counter()
            path = build_file(Path(tmp) / "lengths.parquet", args.rows)
            print(f"built {path.name}: {args.rows:,} rows in {time.perf_counter() - t:.1f} s",
                  file=sys.stderr)
        result = measure(path)
        checks = full_check(path) if args.full_check else None
    if args.json:
        print(json.dumps({**result, **({"full_check": checks} if checks else {})}, indent=2))
        return 0
    print(f"{'command':<34} {'seconds':>8} {'peak RSS':>10} {'x inspect':>10}")
    print(f"{'inspect':<34} {result['inspect_s']:>8.2f} {result['inspect_rss_mb']:>7.0f} MB"
          f" {1.0:>10.1f}")
    for name, label in (("compare", "compare -k 6 -T 65536 --pad batch"),
                        ("compare_profile", f"  + --profile {PROFILE[:9]}.. --gpus 8")):
        print(f"{label:<34} {result[name + '_s']:>8.2f} {result[name + '_rss_mb']:>7.0f} MB"
              f" {result[name + '_vs_inspect']:>10.1f}")
    print(f"goal: compare at most {GOAL_RATIO:.0f}x inspect, peak RSS under "
          f"{GOAL_RSS_MB:.0f} MB")
    if checks:
        print("\nsubsampled route vs every sample simulated:")
        for name, key, sub, full in checks:
            diff = sub - full if key in ("padding_fraction_simulated", "wait_fraction",
                                         "step_mix_gap", "epoch_churn") \
                else (sub / full - 1) * 100 if full else 0.0
            unit = "" if key in ("padding_fraction_simulated", "wait_fraction", "step_mix_gap",
                                 "epoch_churn") else "%"
            print(f"  {name:<16} {key:<28} {sub:>14.6g} {full:>14.6g} {diff:+.4f}{unit}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
