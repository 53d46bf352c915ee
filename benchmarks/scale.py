"""Every row of the scale table, each measured against its reference side by side in one run.

    python benchmarks/scale.py [--rows 30000000] [--fresh-venv] [--json]

Rows (work: reference; goal):

- ``compare -k 6`` on a Parquet ``seq_len`` column of ``--rows`` rows: ``inspect`` on the file;
  at most 20x, peak RSS under 1 GB.
- ``solve --pad batch -k 6`` on that file: ``inspect``; a few seconds (5 s or less), RSS < 1 GB.
- ``pad="batch"``, K = 6, embedded example: ``np.unique`` on the same lengths; < 0.2 s, <= 5x.
- exact edge DP, m = 1,048,576, K = 64: one memory pass over the K x m table; < 1 s, <= 10x.
- exact edge DP, m = 131,072, K = 32: the same memory pass; under 0.05 s.
- ``bucketopt solve -k 6``, warm: ``python -c "import numba, pyarrow"``; at most 2.5x.
- first run in a fresh virtualenv (``--fresh-venv``): absolute; under 3 s.

The Parquet file (int32 lengths drawn from the embedded example) is written to a temporary folder
and removed afterwards. The CLI rows run fresh processes of this interpreter on this checkout
(benchmarks/compare_scale.py's ``run_cli``: wall seconds and the child's peak RSS); the pad="batch"
row is benchmarks/batchpad.py's ``measure()`` (CPU seconds, best of 3); the edge DP rows are
benchmarks/solver.py's ``large_row`` (best of 3 after compilation). ``--fresh-venv`` creates a
virtualenv, ``pip install``s this checkout into it (PyPI must be reachable for the
dependencies) and times its first ``bucketopt solve -k 6`` (numba, if used, compiles there).
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
sys.path.insert(0, str(ROOT))  # this checkout's bucketopt

import batchpad  # noqa: E402  (benchmarks/ is on the path: this script's folder)
import compare_scale  # noqa: E402
import solver  # noqa: E402


def _wall(argv, env=None) -> float:
    t = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
                   env=env)
    return time.perf_counter() - t


def warm_solve(repeat: int = 5) -> dict:
    """Warm ``bucketopt solve -k 6`` against importing numba and pyarrow, interleaved."""
    env = compare_scale._env()
    solve = [sys.executable, "-m", "bucketopt", "solve", "-k", "6"]
    ref = [sys.executable, "-c", "import numba, pyarrow"]
    _wall(solve, env)
    _wall(ref, env)
    ts, tr = [], []
    for _ in range(repeat):
        ts.append(_wall(solve, env))
        tr.append(_wall(ref, env))
    return {"solve_s": min(ts), "import_s": min(tr), "ratio": min(ts) / min(tr)}


def fresh_venv() -> dict:
    """A new virtualenv with this checkout installed: its first and second ``solve -k 6``."""
    with tempfile.TemporaryDirectory() as tmp:
        venv = Path(tmp) / "v"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(ROOT)], check=True)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        cmd = [str(venv / "bin" / "bucketopt"), "solve", "-k", "6"]
        first = _wall(cmd, env)
        second = _wall(cmd, env)
        ref = _wall([str(venv / "bin" / "python"), "-c", "import numba, pyarrow"], env)
    return {"first_s": first, "second_s": second, "import_s": ref}


def measure(rows: int = 30_000_000, venv: bool = False) -> dict:
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = compare_scale.build_file(Path(tmp) / "lengths.parquet", rows)
        print(f"built {path.name}: {rows:,} rows", file=sys.stderr, flush=True)
        cmp = compare_scale.measure(path)
        batch = compare_scale.run_cli("solve", "--lens", str(path), "--pad", "batch", "-k", "6",
                                      "--token-budget", "65536", "--json")
        out["rows"] = rows
        out["compare"] = cmp
        out["batch_big"] = {"seconds": batch["seconds"], "rss_mb": batch["rss_mb"],
                            "vs_inspect": batch["seconds"] / cmp["inspect_s"]}
    out["batch_embedded"] = batchpad.measure()
    out["edge_1m"] = solver.large_row(1_048_576, 64, 1.0, dc=False)
    out["edge_131k"] = solver.large_row(131_072, 32, 0.05, repeat=5, dc=False)
    out["warm_solve"] = warm_solve()
    if venv:
        out["fresh_venv"] = fresh_venv()
    return out


def table(r: dict) -> str:
    def met(ok):
        return "met" if ok else "NOT met"

    c, b, e = r["compare"], r["batch_big"], r["batch_embedded"]
    e1, e2, w = r["edge_1m"], r["edge_131k"], r["warm_solve"]
    rows = [
        (f"`compare -k 6 --pad batch`, {r['rows']:,} rows",
         f"{c['compare_s']:.1f} s, {c['compare_rss_mb']:.0f} MB",
         f"inspect {c['inspect_s']:.2f} s, {c['inspect_rss_mb']:.0f} MB",
         f"{c['compare_vs_inspect']:.1f}x", "<= 20x, < 1 GB",
         met(c["compare_vs_inspect"] <= 20 and c["compare_rss_mb"] < 1024)),
        (f"`solve --pad batch -k 6`, {r['rows']:,} rows",
         f"{b['seconds']:.1f} s, {b['rss_mb']:.0f} MB",
         f"inspect {c['inspect_s']:.2f} s", f"{b['vs_inspect']:.1f}x", "<= 5 s, < 1 GB",
         met(b["seconds"] <= 5 and b["rss_mb"] < 1024)),
        ("pad=\"batch\" K=6, embedded example", f"{e['solve_k6_s']:.3f} s",
         f"np.unique {e['unique_s']:.3f} s", f"{e['k6_over_unique']:.1f}x", "< 0.2 s, <= 5x",
         met(e["solve_k6_s"] < 0.2 and e["k6_over_unique"] <= 5)),
        ("exact edge DP, m = 1,048,576, K = 64", f"{e1['hull_s']:.3f} s",
         f"memory pass {e1['memory_pass_s']:.3f} s", f"{e1['hull_over_memory_pass']:.1f}x",
         "< 1 s, <= 10x", met(e1["hull_s"] < 1 and e1["hull_over_memory_pass"] <= 10)),
        ("exact edge DP, m = 131,072, K = 32", f"{e2['hull_s']:.4f} s",
         f"memory pass {e2['memory_pass_s']:.4f} s", f"{e2['hull_over_memory_pass']:.1f}x",
         "< 0.05 s", met(e2["hull_s"] < 0.05)),
        ("`bucketopt solve -k 6`, warm", f"{w['solve_s']:.2f} s",
         f"import numba, pyarrow {w['import_s']:.2f} s", f"{w['ratio']:.2f}x", "<= 2.5x",
         met(w["ratio"] <= 2.5)),
    ]
    if "fresh_venv" in r:
        v = r["fresh_venv"]
        rows.append(("first run in a fresh virtualenv", f"{v['first_s']:.2f} s",
                     f"second run {v['second_s']:.2f} s", "-", "< 3 s", met(v["first_s"] < 3)))
    lines = ["| work | measured | reference | ratio | goal | |", "|---|---|---|---|---|---|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=30_000_000)
    ap.add_argument("--fresh-venv", action="store_true",
                    help="also time the first run in a new virtualenv (installs from PyPI)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    result = measure(args.rows, args.fresh_venv)
    print(json.dumps(result, indent=2, default=str) if args.json else table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
