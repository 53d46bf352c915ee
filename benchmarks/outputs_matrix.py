"""Every output of a matrix of commands as one canonical JSON: the record that a change to the
engine leaves behaviour identical.

The matrix runs solve, sweep, compare and evaluate through the Python API (and the tables a
person reads, through ``bucketopt.cli.main``), and a few commands as ``python -m bucketopt ...
--json`` subprocesses: the three objectives (edge padding, dynamic padding, time), 1 and 8 GPUs,
sync_buckets on and off, min_share / max_share / align / min_fill, a memory model, exact=True,
several k, on the embedded example (``bucketopt.datasets.seed_like``) and synthetic lengths (a
lognormal, a bimodal mix and a heavy Pareto tail). Each case records its result's ``to_dict()``
(boundaries, batch sizes, values, optimality certificates), its table text, or the error it
raised (class and message); floats are written at full precision (``repr``), keys sorted, so
two runs agree byte for byte exactly when every output does. Wall times are not recorded.

Compare two checkouts (each run imports the checkout it is given, with its own kernel cache)::

    python benchmarks/outputs_matrix.py --code /path/to/before --out before.json
    python benchmarks/outputs_matrix.py --code . --out after.json
    cmp before.json after.json && echo identical

``--list`` prints the case names; ``--only SUBSTRING`` runs the cases whose name holds it.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

PROFILE = "rtx-pro-6000-blackwell"
MEMORY = {"m0": 2.0e9, "m1": 6.0e5, "m2": 20.0, "capacity": 24.0e9}


def datasets():
    """name -> lengths (int64), each built from a fixed seed."""
    import numpy as np

    from bucketopt.datasets import seed_like

    rng = np.random.default_rng(20261207)
    lognormal = np.minimum(rng.lognormal(6.5, 0.9, 20_000), 16_384).astype(np.int64) + 1
    bimodal = np.r_[rng.normal(300, 60, 6_000), rng.normal(3_000, 500, 4_000)]
    bimodal = np.clip(bimodal, 8, 8_192).astype(np.int64)
    heavy = np.minimum(50 + 200 * rng.pareto(1.2, 15_000), 32_768).astype(np.int64)
    return {"example": seed_like(), "lognormal": lognormal, "bimodal": bimodal, "heavy": heavy}


def cases():
    """(name, kind, data, arguments): kind is solve, sweep, evaluate, compare, cli-table or
    cli-json."""
    out = []

    def add(kind, data, args, **kw):
        label = " ".join(f"{k}={v}" for k, v in sorted(kw.items()))
        out.append((f"{kind} {data} {args} {label}".strip(), kind, data, (args, kw)))

    budget = {"example": 65_536, "lognormal": 32_768, "bimodal": 16_384, "heavy": 65_536}
    for data in ("example", "lognormal", "bimodal", "heavy"):
        T = budget[data]
        for k in (1, 4, 8, 16):
            add("solve", data, k, token_budget=T, pad="edge")
        for k in (3, 6):
            add("solve", data, k, token_budget=T, pad="batch")
        add("solve", data, 6, token_budget=T, pad="edge", min_share=0.05, max_share=0.5)
        add("solve", data, 6, token_budget=T, pad="edge", align=64)
        add("solve", data, 5, token_budget=T, pad="batch", min_share=0.05)
        for gpus in (1, 8):
            for pad in ("edge", "batch"):
                add("solve", data, 6, token_budget=T, pad=pad, profile=PROFILE,
                    world_size=gpus, epochs=6)
            add("solve", data, 6, token_budget=T, pad="batch", profile=PROFILE, world_size=gpus,
                sync_buckets=False)
        add("solve", data, 4, token_budget=T, pad="batch", objective="padding", profile=PROFILE,
            world_size=8, min_fill=0.3)
        add("sweep", data, (2, 4, 6, 8), token_budget=T, pad="edge")
        add("sweep", data, (2, 3, 4, 6), token_budget=T, pad="batch", profile=PROFILE,
            world_size=8)
        add("evaluate", data, "quantiles4", token_budget=T, pad="batch", profile=PROFILE,
            world_size=8)
        add("evaluate", data, "quantiles4", token_budget=T, pad="edge")
    for data in ("example", "lognormal"):
        add("solve", data, 6, token_budget=65_536, pad="batch", memory=MEMORY)
        add("solve", data, 6, pad="edge", memory=MEMORY, profile=PROFILE, world_size=8)
        add("solve", data, 6, token_budget=65_536, pad="batch", profile=PROFILE, world_size=8,
            exact=True)
        add("solve", data, 8, token_budget=65_536, pad="edge", profile=PROFILE,
            sync_buckets="step", world_size=8)
        add("compare", data, 6, token_budget=65_536, pad="batch", profile=PROFILE, world_size=8)
        add("compare", data, 4, token_budget=65_536, pad="edge")
        add("evaluate", data, "quantiles4", token_budget=65_536, pad="edge", memory=MEMORY)
    add("solve", "heavy", 6, token_budget=65_536, pad="batch", profile=PROFILE, world_size=1,
        exact=True)
    add("solve", "lognormal", 6, token_budget=1_000, pad="edge")  # an error: edge > budget
    add("solve", "lognormal", 6, token_budget=32_768, pad="edge", min_share=0.4)  # infeasible
    for argv in (["solve", "-k", "6", "--token-budget", "65536", "--pad", "batch"],
                 ["solve", "-k", "6", "--profile", PROFILE, "--epochs", "6"],
                 ["sweep", "-k", "2:8", "--token-budget", "65536"],
                 ["compare", "-k", "6", "--token-budget", "65536", "--profile", PROFILE]):
        add("cli-table", "example", tuple(argv))
    for argv in (["solve", "-k", "6", "--token-budget", "65536", "--pad", "batch"],
                 ["solve", "-k", "6", "--profile", PROFILE, "--epochs", "6", "--gpus", "8"],
                 ["sweep", "-k", "3:6", "--token-budget", "65536", "--pad", "batch"],
                 ["compare", "-k", "4", "--token-budget", "65536"]):
        add("cli-json", "lognormal", tuple(argv))
    return out


def canonical(value):
    """JSON-ready, floats as repr (nan and infinities as strings), tuples as lists."""
    import numpy as np

    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    if isinstance(value, np.ndarray):
        return canonical(value.tolist())
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return repr(value) if not math.isfinite(value) else value
    if value is None or isinstance(value, str):
        return value
    return repr(value)


def run_case(kind, lengths, args, kw, files):
    import numpy as np

    import bucketopt
    from bucketopt.cli import main

    if kind == "solve":
        sol = bucketopt.solve(lengths, args, **kw)
        return {"dict": sol.to_dict(), "optimality": sol.optimality}
    if kind == "sweep":
        return bucketopt.sweep(lengths, list(args), **kw).to_dict()
    if kind == "evaluate":
        edges = np.unique(np.quantile(lengths, [0.25, 0.5, 0.75, 1.0]).astype(np.int64))
        return bucketopt.evaluate(lengths, edges, **kw).to_dict()
    if kind == "compare":
        return bucketopt.compare(lengths, args, **kw).to_dict()
    argv = [*args[:1], "--lens", files, *args[1:]]
    if kind == "cli-table":
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([*argv, "--quiet"] if "--quiet" not in argv else argv)
        return {"code": code, "stdout": out.getvalue()}
    proc = subprocess.run([sys.executable, "-m", "bucketopt", *argv, "--json", "--quiet"],
                          capture_output=True, text=True, check=False)
    return {"code": proc.returncode, "json": json.loads(proc.stdout or "null")}


def run_all(only=None) -> dict:
    import numpy as np

    data = datasets()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for name, lengths in data.items():
            files[name] = os.path.join(tmp, f"{name}.npy")
            np.save(files[name], lengths)
        for name, kind, which, (args, kw) in cases():
            if only and only not in name:
                continue
            print(name, file=sys.stderr, flush=True)
            try:
                got = run_case(kind, data[which], args, kw, files[which])
            except Exception as exc:  # an error is an output too
                got = {"error": f"{type(exc).__name__}: {exc}"}
            results[name] = canonical(got)
        # the lengths' files lie in a new temporary folder each run: named the same in the record
        return json.loads(json.dumps(results).replace(tmp, "$TMP"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--code", default=None,
                        help="the checkout to run (default: the one this script belongs to)")
    parser.add_argument("--out", default=None, help="the JSON file (default: stdout)")
    parser.add_argument("--only", default=None, help="the cases whose name holds this")
    parser.add_argument("--list", action="store_true", help="print the case names and stop")
    args = parser.parse_args(argv)
    if args.list:
        for name, *_ in cases():
            print(name)
        print(f"{len(cases())} cases", file=sys.stderr)
        return 0
    code = str(Path(args.code or Path(__file__).resolve().parent.parent).resolve())
    out = str(Path(args.out).resolve()) if args.out else None
    if os.environ.get("BUCKETOPT_MATRIX_CODE") != code:  # run again on that checkout
        env = dict(os.environ, PYTHONPATH=code, BUCKETOPT_MATRIX_CODE=code)
        forward = ["--code", code] + (["--out", out] if out else [])
        forward += ["--only", args.only] if args.only else []
        return subprocess.call([sys.executable, os.path.abspath(__file__), *forward], env=env,
                               cwd=code)
    import bucketopt

    assert str(Path(bucketopt.__file__).resolve()).startswith(code), bucketopt.__file__
    text = json.dumps(run_all(args.only), indent=1, sort_keys=True) + "\n"
    if out:
        Path(out).write_text(text)
        print(f"{text.count(chr(10))} lines to {out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
