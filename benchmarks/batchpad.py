"""pad="batch" solve and simulate() on the embedded example, timed side by side in one run.

Prints absolute times and ratios (the machines are shared and noisy: the ratios travel better):
the pad="batch" DP with the default candidates and with align=64 against the exact edge-padding
solve on the same data; simulate() per strategy against one numpy permutation of the samples; and
the padding each choice of boundaries leaves. Run:

    python benchmarks/batchpad.py
"""

from __future__ import annotations

import time

import numpy as np
from _timing import best_of

import bucketopt
from bucketopt.datasets import seed_like
from bucketopt.heuristics import RULES, rule_of_thumb
from bucketopt.histogram import Histogram

TOKEN_BUDGET = 65_536




def main():
    lengths = seed_like()
    hist = Histogram.from_lengths(lengths)
    print(f"embedded example: {hist.n:,} samples, {hist.m:,} distinct lengths, "
          f"T = {TOKEN_BUDGET:,}")

    t = time.perf_counter()
    bucketopt.solve([3, 5, 8, 9], 2, token_budget=20, pad="batch")
    bucketopt.simulate([3, 5, 8, 9], "packed", token_budget=20)
    bucketopt.simulate([3, 5, 8, 9], "shuffle", token_budget=20)
    print(f"first calls (numba cache load or compile): {time.perf_counter() - t:.2f} s")

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
