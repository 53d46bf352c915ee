"""pad="batch" solve and simulate() on the embedded example, timed side by side in one run.

Prints absolute times and ratios (the machines are shared and noisy: the ratios travel better):
the pad="batch" solve at K=6 against ``np.unique`` on the same lengths (the floor of any
histogram-based solver), a sweep over K = 1..64 against that single K, the pad="batch" DP with
the default candidates and with align=64 against the exact edge-padding solve on the same data;
simulate() per strategy against one numpy permutation of the samples; and the padding each choice
of boundaries leaves. ``BUCKETOPT_BENCH_BIG=1`` (or ``--big``) adds `bucketopt solve --pad batch`
on a 30M-row Parquet file it writes to a temporary folder, time and peak RSS against
`bucketopt inspect` on the same file. Run:

    python benchmarks/batchpad.py [--big]

:func:`measure` returns the headline figures as a dict (benchmarks/scale.py reads it).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _timing import best_of

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's bucketopt
import bucketopt
from bucketopt.data.histogram import Histogram
from bucketopt.datasets import seed_like
from bucketopt.heuristics import RULES, rule_of_thumb

TOKEN_BUDGET = 65_536
BIG_ROWS = 30_000_000
# The child reports its own peak RSS from /proc (VmHWM belongs to the process image; getrusage's
# ru_maxrss would also count the parent's peak, inherited through fork and exec).
_CHILD = (
    "import sys, time\n"
    "t = time.perf_counter()\n"
    "from bucketopt.cli import main\n"
    "import contextlib, io\n"
    "with contextlib.redirect_stdout(io.StringIO()):\n"
    "    rc = main(sys.argv[1:])\n"
    "seconds = time.perf_counter() - t\n"
    "hwm = [ln.split()[1] for ln in open('/proc/self/status') if ln.startswith('VmHWM')][0]\n"
    "print(seconds, hwm, rc)\n"
)


def _cpu_best(fn, repeat: int) -> float:
    """Best CPU time of ``repeat`` calls (process time: less disturbed by other jobs)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def measure(repeat: int = 3, big: bool = False) -> dict:
    """Headline figures of pad="batch" on the embedded example (and, with ``big``, on 30M rows).

    Keys: first_call_s (numba cache load or compile, in this process), unique_s, solve_k6_s,
    k6_over_unique, sweep64_s, sweep64_over_k6 (CPU seconds, best of ``repeat``), and with
    ``big``: big_solve_s, big_solve_rss_mb, big_inspect_s, big_inspect_rss_mb, big_time_ratio,
    big_rss_ratio (wall seconds and peak RSS of warm CLI processes).
    """
    lengths = seed_like()
    out = {}
    t = time.perf_counter()
    bucketopt.solve([3, 5, 8, 9, 11] * 60 + list(range(20, 300)), 3, token_budget=4096,
                    pad="batch")
    out["first_call_s"] = time.perf_counter() - t
    bucketopt.solve(lengths, 6, token_budget=TOKEN_BUDGET, pad="batch")  # warm-up
    out["unique_s"] = _cpu_best(lambda: np.unique(lengths, return_counts=True), repeat)
    out["solve_k6_s"] = _cpu_best(
        lambda: bucketopt.solve(lengths, 6, token_budget=TOKEN_BUDGET, pad="batch"), repeat)
    out["sweep64_s"] = _cpu_best(
        lambda: bucketopt.sweep(lengths, range(1, 65), token_budget=TOKEN_BUDGET, pad="batch"),
        repeat)
    out["k6_over_unique"] = out["solve_k6_s"] / out["unique_s"]
    out["sweep64_over_k6"] = out["sweep64_s"] / out["solve_k6_s"]
    if big:
        out.update(measure_big())
    return out


def _child(args) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of one `bucketopt ARGS` process."""
    root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run([sys.executable, "-c", _CHILD, *args], capture_output=True, text=True,
                         env=env, check=True)
    seconds, rss_kb, rc = res.stdout.split()
    if rc != "0":
        raise RuntimeError(f"bucketopt {' '.join(args)} failed: {res.stderr.strip()}")
    return float(seconds), float(rss_kb) / 1e3


def measure_big(rows: int = BIG_ROWS) -> dict:
    """`bucketopt solve --pad batch -k 6` on ``rows`` lengths drawn from the embedded example
    (a Parquet file in a temporary folder) against `bucketopt inspect` on the same file; each
    command runs twice, the second (warm: numba kernels cached) counts."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    hist = Histogram.from_lengths(seed_like())
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "lengths.parquet")
        writer = None
        done = 0
        while done < rows:  # in chunks: the benchmark itself stays small
            size = min(5_000_000, rows - done)
            chunk = rng.choice(hist.values, size=size, p=hist.counts / hist.n).astype(np.int32)
            table = pa.table({"seq_len": chunk})
            writer = writer or pq.ParquetWriter(path, table.schema)
            writer.write_table(table)
            done += size
        writer.close()
        solve = ["solve", "--lens", path, "--pad", "batch", "-k", "6", "--token-budget",
                 str(TOKEN_BUDGET)]
        inspect = ["inspect", path]
        for args in (solve, inspect):
            _child(args)  # cold: compiles or loads the kernels
        solve_s, solve_mb = _child(solve)
        inspect_s, inspect_mb = _child(inspect)
    return {"big_rows": rows, "big_solve_s": solve_s, "big_solve_rss_mb": solve_mb,
            "big_inspect_s": inspect_s, "big_inspect_rss_mb": inspect_mb,
            "big_time_ratio": solve_s / inspect_s, "big_rss_ratio": solve_mb / inspect_mb}


def report(figures: dict) -> None:
    f = figures
    print(f"first pad=batch call in this process (numba cache load or compile): "
          f"{f['first_call_s']:.2f} s")
    print("\nheadline, CPU seconds (best of 3, warm)")
    print(f"  np.unique(lengths, return_counts=True)  {f['unique_s'] * 1e3:9.1f} ms")
    print(f"  solve pad=batch K=6                     {f['solve_k6_s'] * 1e3:9.1f} ms   "
          f"x{f['k6_over_unique']:6.1f} of np.unique")
    print(f"  sweep pad=batch K=1..64 (one DP pass)   {f['sweep64_s'] * 1e3:9.1f} ms   "
          f"x{f['sweep64_over_k6']:6.1f} of K=6")
    if "big_solve_s" in f:
        print(f"\n{f['big_rows']:,} rows (Parquet), warm CLI processes, wall time / peak RSS")
        print(f"  bucketopt inspect                       {f['big_inspect_s']:7.2f} s "
              f"{f['big_inspect_rss_mb']:7.0f} MB")
        print(f"  bucketopt solve --pad batch -k 6        {f['big_solve_s']:7.2f} s "
              f"{f['big_solve_rss_mb']:7.0f} MB   x{f['big_time_ratio']:.1f} time, "
              f"x{f['big_rss_ratio']:.1f} RSS of inspect")


def main():
    lengths = seed_like()
    hist = Histogram.from_lengths(lengths)
    print(f"embedded example: {hist.n:,} samples, {hist.m:,} distinct lengths, "
          f"T = {TOKEN_BUDGET:,}")

    big = "--big" in sys.argv[1:] or os.environ.get("BUCKETOPT_BENCH_BIG") == "1"
    report(measure(big=big))
    t = time.perf_counter()
    bucketopt.simulate([3, 5, 8, 9], "best-fit", token_budget=20)
    bucketopt.simulate([3, 5, 8, 9], "shuffle", token_budget=20)
    print(f"\nfirst simulate() calls (numba cache load or compile): "
          f"{time.perf_counter() - t:.2f} s")

    print("\nsolve, K=6 (best of 3 after warm-up)")
    edge, _ = best_of(lambda: bucketopt.solve(hist, 6, token_budget=TOKEN_BUDGET), 3)
    rows = [("pad=edge (exact, Monge DP)", edge)]
    for label, kw in (("pad=batch, align=64", dict(align=64)),
                      ("pad=batch, default candidates", {})):
        seconds, _ = best_of(lambda kw=kw: bucketopt.solve(hist, 6, token_budget=TOKEN_BUDGET,
                                                        pad="batch", **kw), 3)
        rows.append((label, seconds))
    for label, seconds in rows:
        print(f"  {label:<32} {seconds * 1e3:9.1f} ms   x{seconds / edge:7.1f} of pad=edge")

    print("\nsimulate(), one epoch of 902,087 samples (best of 3)")
    best = bucketopt.solve(hist, 6, token_budget=TOKEN_BUDGET, pad="batch").boundaries
    base, _ = best_of(lambda: np.random.default_rng(0).permutation(lengths.size), 3)
    print(f"  {'numpy permutation (yardstick)':<32} {base * 1e3:9.1f} ms")
    for strategy, kw in (("sorted", {}), ("shuffle", {}),
                         ("bucketed", dict(boundaries=best)),
                         ("bucketed", dict(boundaries=best, packing="greedy")),
                         ("packed", {})):
        seconds, _ = best_of(lambda s=strategy, kw=kw: bucketopt.simulate(
            lengths, s, token_budget=TOKEN_BUDGET, **kw), 3)
        label = strategy + (" (greedy)" if kw.get("packing") == "greedy" else "")
        print(f"  {label:<32} {seconds * 1e3:9.1f} ms   x{seconds / base:6.1f} of a permutation")

    print("\nexpected dynamic padding (pad=batch) of each choice of boundaries")
    header = ["k", "batch-optimal", "edge-optimal", *RULES]
    print("  " + "".join(f"{h:>14}" for h in header))
    for k in (4, 6, 8, 12):
        cells = [bucketopt.solve(hist, k, token_budget=TOKEN_BUDGET, pad="batch")]
        edges = bucketopt.solve(hist, k, token_budget=TOKEN_BUDGET).boundaries
        cells.append(bucketopt.evaluate(hist, edges, token_budget=TOKEN_BUDGET, pad="batch"))
        for name in RULES:
            edges = rule_of_thumb(name, hist, k, token_budget=TOKEN_BUDGET)
            cells.append(bucketopt.evaluate(hist, edges, token_budget=TOKEN_BUDGET, pad="batch"))
        print("  " + f"{k:>14}" + "".join(f"{c.padding_fraction * 100:>13.2f}%" for c in cells))

    print("\nanalytic expectation vs the mean of 20 simulated epochs (K=6 batch-optimal)")
    sol = bucketopt.evaluate(hist, best, token_budget=TOKEN_BUDGET, pad="batch")
    sims = [bucketopt.simulate(lengths, "bucketed", token_budget=TOKEN_BUDGET, boundaries=best,
                               epoch=e).padded_tokens for e in range(20)]
    gap = np.mean(sims) / sol.padded_tokens - 1
    print(f"  analytic {sol.padded_tokens:,.0f}  simulated mean {np.mean(sims):,.0f}  "
          f"gap {gap * 100:+.4f}%  (one epoch's sd {np.std(sims) / sol.padded_tokens * 100:.3f}%)")


if __name__ == "__main__":
    main()
