"""2-D bins: NeMo's estimator beside bucketopt's exact plans, and the 2-D solve's speed.

    python benchmarks/pairs.py [--samples 200000] [--speed-samples 1000000] [--json]

Padding (for each paired shape of bucketopt.pairs.synthetic: translation-like correlated,
QA-like independent, speech duration x transcript): NeMo's estimator's 6 x 2 and 30 x 2 bins
(``estimate_duration_bins_2d.py`` re-implemented, bucketopt.pairs.nemo) scored as NeMo's
sampler uses them, beside bucketopt's exact plan on the same grid and with the same number of
bins distributed freely. Per row: padding share of computed tokens (total, input, output),
samples left without a bin (and with NeMo's printed ``max_tps`` filter on), and, since NeMo's
padding counts only the samples it keeps, bucketopt's grid plan solved on those same samples.
NeMo merges dim0 buckets whose edges coincide and gives them the sub-buckets of all of them: its
bins are then not a K1 x K2 grid (marked "merged"), and the free plan with the same number of
bins is the row to compare.

Speed: ``--speed-samples`` pairs with a few thousand distinct pairs (both lengths capped at 256),
the 2-D solve (k = 12, 6 x 2, 30 x 2, k = 60) against the 1-D solve of the summed lengths with
the same number of buckets, timed side by side in one run (interleaved, best of 3 each, kernels
compiled first; the 2-D time includes building the pair histogram from the array):
the ratio is the figure (the machine is shared, absolute seconds drift).

Dynamic padding: the exact rectangle DP (pad="batch") on the 3,000 speech pairs of docs/pairs.md
(49 x 42 distinct lengths, token budget 2,048), k = 8 and a 4 x 3 grid: the best of 3 CPU seconds
(``time.process_time``) each, kernels compiled first. Its cost is millions of bin costs, each
two or four expected maxima (bucketopt.orderstats.expected_max): compare it across checkouts in
one run (benchmarks/checkouts_speed.py's way), not across machines.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

import bucketopt
from bucketopt.pairs import PairHistogram, assign_bins
from bucketopt.pairs.nemo import fits_grid, nemo_estimate_bins
from bucketopt.pairs.synthetic import SHAPES, paired_lengths

GRIDS = ((6, 2), (30, 2))


def _row(sol, extra=None):
    out = {"bins": len(sol.bins), "padding": sol.padding_fraction,
           "padding_input": sol.extra["padding_fraction_by_dim"][0],
           "padding_output": sol.extra["padding_fraction_by_dim"][1],
           "unassigned": sol.unassigned}
    out.update(extra or {})
    return out


def padding_rows(samples: int, seed: int = 0) -> list:
    rows = []
    for shape in SHAPES:
        pairs = paired_lengths(shape, samples, seed=seed)
        for grid in GRIDS:
            bins, tps = nemo_estimate_bins(pairs, *grid)
            theirs = bucketopt.evaluate(pairs, bins)
            idx = assign_bins(pairs[:, 0], pairs[:, 1], np.asarray(bins))
            ratio = pairs[:, 1] / pairs[:, 0]
            ok = idx >= 0
            over = int((ratio[ok] > np.asarray(tps)[idx[ok]]).sum())
            kept = pairs[ok]
            same = bucketopt.solve(kept, None, grid=grid)
            rows.append({"shape": shape, "grid": f"{grid[0]}x{grid[1]}", "row": "nemo",
                         **_row(theirs, {"unassigned_with_max_tps": theirs.unassigned + over,
                                         "fits_grid": fits_grid(bins, grid)})})
            rows.append({"shape": shape, "grid": f"{grid[0]}x{grid[1]}",
                         "row": "bucketopt-grid", **_row(bucketopt.solve(pairs, None, grid=grid))})
            rows.append({"shape": shape, "grid": f"{grid[0]}x{grid[1]}",
                         "row": f"bucketopt-k{len(bins)}",
                         **_row(bucketopt.solve(pairs, len(bins)))})
            rows.append({"shape": shape, "grid": f"{grid[0]}x{grid[1]}",
                         "row": "bucketopt-grid on NeMo's kept samples",
                         **_row(same, {"samples": len(kept)})})
    return rows


def speed_rows(samples: int, repeat: int = 3) -> list:
    rows = []
    for shape in SHAPES:
        pairs = paired_lengths(shape, samples, seed=1, cap=256)
        hist = PairHistogram.from_pairs(pairs)
        summed = pairs.sum(axis=1)
        bucketopt.solve(pairs[:2000], 4)  # compile outside the timings
        bucketopt.solve(pairs[:2000], None, grid=(2, 2))
        bucketopt.solve(summed[:2000], 4)
        for label, k, grid in (("k=12", 12, None), ("6x2", None, (6, 2)),
                               ("30x2", None, (30, 2)), ("k=60", 60, None)):
            buckets = k if grid is None else grid[0] * grid[1]
            t2 = t1 = float("inf")
            for _ in range(repeat):  # interleaved: both see the same machine load
                start = time.perf_counter()
                sol = bucketopt.solve(pairs, k, grid=grid)
                t2 = min(t2, time.perf_counter() - start)
                start = time.perf_counter()
                bucketopt.solve(summed, buckets)
                t1 = min(t1, time.perf_counter() - start)
            rows.append({"shape": shape, "plan": label, "pairs": samples,
                         "distinct_pairs": hist.distinct, "seconds_2d": t2, "seconds_1d": t1,
                         "ratio": t2 / t1, "padding": sol.padding_fraction})
    return rows


def dynamic_rows(repeat: int = 3) -> list:
    small = paired_lengths("speech", 3000, seed=1) // [4, 2] + 1
    rows = []
    for label, k, grid in (("k=8", 8, None), ("4x3", None, (4, 3))):
        sol = bucketopt.solve(small, k, grid=grid, pad="batch", token_budget=2048)  # compiled
        best = float("inf")
        for _ in range(repeat):
            start = time.process_time()
            bucketopt.solve(small, k, grid=grid, pad="batch", token_budget=2048)
            best = min(best, time.process_time() - start)
        rows.append({"plan": label, "pairs": len(small), "cpu_seconds": best,
                     "padding": sol.padding_fraction})
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=200_000)
    parser.add_argument("--speed-samples", type=int, default=1_000_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    padding = padding_rows(args.samples)
    speed = speed_rows(args.speed_samples)
    dynamic = dynamic_rows()
    if args.json:
        json.dump({"padding": padding, "speed": speed, "dynamic": dynamic}, sys.stdout, indent=2)
        print()
        return 0
    print(f"padding on {args.samples:,} pairs per shape (share of computed tokens)")
    print(f"{'shape':<12}{'grid':<6}{'row':<40}{'bins':>5}{'total':>9}{'input':>9}"
          f"{'output':>9}{'no bin':>8}{'(max_tps)':>10}")
    for r in padding:
        tps = r.get("unassigned_with_max_tps")
        row = r["row"] + (" (merged: not a grid)" if r.get("fits_grid") is False else "")
        print(f"{r['shape']:<12}{r['grid']:<6}{row:<40}{r['bins']:>5}{r['padding']:>9.2%}"
              f"{r['padding_input']:>9.2%}{r['padding_output']:>9.2%}{r['unassigned']:>8,}"
              f"{'' if tps is None else format(tps, ','):>10}")
    print(f"\nspeed: 2-D solve vs 1-D solve of the summed lengths (same bucket count), "
          f"{args.speed_samples:,} pairs")
    print(f"{'shape':<12}{'plan':<6}{'distinct':>9}{'2-D s':>8}{'1-D s':>8}{'ratio':>7}")
    for r in speed:
        print(f"{r['shape']:<12}{r['plan']:<6}{r['distinct_pairs']:>9,}{r['seconds_2d']:>8.2f}"
              f"{r['seconds_1d']:>8.3f}{r['ratio']:>7.1f}")
    print("\ndynamic padding (pad=\"batch\", exact), 3,000 speech pairs, token budget 2,048")
    print(f"{'plan':<6}{'CPU s':>8}{'padding':>9}")
    for r in dynamic:
        print(f"{r['plan']:<6}{r['cpu_seconds']:>8.3f}{r['padding']:>9.2%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
