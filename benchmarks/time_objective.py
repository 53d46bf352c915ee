"""objective="time" on heavy tails, and the time DP's speed against the padding DP.

    python benchmarks/time_objective.py

Part 1: on heavy-tailed length distributions (lognormal chat-like, news-like, source code up to
millions of tokens), the predicted Ktok/s of the time-optimal boundaries (pad="batch", 8 GPUs,
buckets synced across ranks) against the edge-optimal, the batch-padding-optimal, Lhotse's rule
and quantile boundaries, all scored by the same step model, under profiles with alpha > 0; and
whether the padding objective's low-fill note fires.
Part 2: the exact time DP at 20,000 distinct lengths, k = 6 and k = 16, beside the padding DP
on the same input, in one run (ratios: the machine is shared and noisy).
"""

from __future__ import annotations

import time

import numpy as np

import bucketopt
from bucketopt.heuristics import rule_of_thumb


def datasets():
    rng = np.random.default_rng(0)
    chat = np.clip(np.rint(rng.lognormal(6.5, 1.2, 200_000)), 1, 32_768).astype(np.int64)
    news = np.clip(np.rint(rng.lognormal(6.8, 0.9, 150_000)), 20, 60_000).astype(np.int64)
    code = np.clip(np.rint(rng.lognormal(7.0, 1.9, 60_000)), 5, 2_000_000).astype(np.int64)
    return {"chat-like lognormal": (chat, 65_536, 8), "news-like": (news, 65_536, 6),
            "source code": (code, 2_097_152, 4)}


PROFILES = {
    "story (alpha 0.1)": "rtx-pro-6000-blackwell",
    "alpha 0.01, gamma x10": dict(alpha=0.01, beta=1.5e-4, gamma=1.9e-7),
}


def part1():
    print("# time-optimal vs other boundaries, predicted Ktok/s on 8 GPUs (synced buckets)")
    for name, (lengths, budget, k) in datasets().items():
        m = np.unique(lengths).size
        print(f"\n{name}: n={lengths.size:,}, distinct={m:,}, max={lengths.max():,}, "
              f"token budget {budget:,}, k={k}")
        padding = bucketopt.solve(lengths, k, pad="batch", token_budget=budget)
        print(f"  padding objective (pad=batch) notes: {len(padding.warnings)}"
              + (f" -> {padding.warnings[0][:110]}..." if padding.warnings else ""))
        sets = {
            "edge-optimal": bucketopt.solve(lengths, k, token_budget=budget).boundaries,
            "batch-padding-optimal": padding.boundaries,
            "lhotse": rule_of_thumb("lhotse", lengths, k, token_budget=budget),
            "quantile": rule_of_thumb("quantile", lengths, k, token_budget=budget),
        }
        for pname, profile in PROFILES.items():
            start = time.perf_counter()
            best = bucketopt.solve(lengths, k, pad="batch", token_budget=budget,
                                   profile=profile, world_size=8)
            seconds = time.perf_counter() - start
            rates = {key: bucketopt.evaluate(lengths, edges, pad="batch", token_budget=budget,
                                             profile=profile, world_size=8).ktok_per_s
                     for key, edges in sets.items()}
            worst = min(best.ktok_per_s / r for r in rates.values())
            cells = ", ".join(f"{key} {r:.2f}" for key, r in rates.items())
            print(f"  {pname}: time-optimal {best.ktok_per_s:.2f} Ktok/s ({seconds:.1f} s) | "
                  f"{cells} | time-optimal / best other = {worst:.3f}")


def part2():
    print("\n# the time DP at 20,000 distinct lengths against the padding DP (one run)")
    rng = np.random.default_rng(1)
    values = np.unique(np.rint(np.exp(rng.uniform(np.log(16), np.log(30_000), 60_000))))
    values = values[:20_000].astype(np.int64)
    if values.size < 20_000:
        values = np.arange(1, 20_001, dtype=np.int64) * 3
    counts = rng.integers(1, 40, size=values.size)
    hist = bucketopt.Histogram(values, counts)
    budget = 65_536 if values.max() <= 65_536 else int(values.max())
    profile = dict(alpha=0.1, beta=1.5e-4, gamma=1.9e-8)
    print(f"distinct lengths {hist.m:,}, samples {hist.n:,}, token budget {budget:,}")
    bucketopt.solve(hist, 2, pad="batch", token_budget=budget, profile=profile)  # compile
    for k in (6, 16):
        row = {}
        for label, kw in (("padding DP, pad=batch", dict(objective="padding")),
                          ("padding DP, pad=edge", dict(objective="padding", pad="edge")),
                          ("time DP, pad=batch, 1 GPU", dict(profile=profile, world_size=1)),
                          ("time DP, pad=edge, 8 GPUs",
                           dict(profile=profile, world_size=8, pad="edge")),
                          ("time DP, pad=batch, 8 GPUs", dict(profile=profile, world_size=8))):
            kw = {"pad": "batch", **kw}
            start = time.perf_counter()
            bucketopt.solve(hist, k, token_budget=budget, **kw)
            row[label] = time.perf_counter() - start
        base = row["padding DP, pad=batch"]
        print(f"k={k}: " + "; ".join(f"{key} {t:.2f} s ({t / base:.1f}x)"
                                     for key, t in row.items()))


if __name__ == "__main__":
    part1()
    part2()
