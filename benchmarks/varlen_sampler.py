"""BucketBatchSampler(packing="varlen"): rows, balance, predicted Ktok/s and plan-build time.

On the embedded example (902,087 lengths), 8 ranks, grad_accum 4, token budget 65,536 tokens
per row: packing a shuffle (one bucket) and bucketed packing (the solved boundaries), unbalanced
and ``"varlen-balanced"``, under ``sync_buckets=True`` and ``False``. For each: rows, the
heaviest-rank attention summed over micro-steps (relative to the same plan unbalanced), Ktok/s and
the share of GPU time waiting for the slowest rank under the shipped profile, and the time to
build one epoch's plan as a ratio to fixed packing's plan and to a numpy permutation, measured
side by side in this run.

    python benchmarks/varlen_sampler.py [--samples N]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from bucketopt import BucketBatchSampler
from bucketopt.cost.costmodel import load_profile, time_epoch
from bucketopt.datasets import seed_like

BOUNDARIES = (1013, 1628, 2340, 3170, 4632, 8191)
BUDGET, G, A = 65536, 8, 4


def best_of(fn, repeat=3):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def heaviest(sampler):
    plan = sampler.plan()
    d = sampler.lengths.astype(np.float64)
    att = np.array([(d[b] ** 2).sum() for b in plan.batches()])
    return float(att.reshape(-1, G).max(axis=1).sum())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=None, help="first N samples only")
    args = parser.parse_args(argv)
    lengths = seed_like()[:args.samples]
    model = load_profile("rtx-pro-6000-blackwell").cost_model(world_size=G)
    rng = np.random.default_rng(0)
    perm = best_of(lambda: rng.permutation(lengths.size))
    fixed = BucketBatchSampler(lengths, BOUNDARIES, token_budget=BUDGET, world_size=G,
                               grad_accum=A)
    fixed_s = best_of(lambda: fixed.plan(1) and fixed.plan(2))  # two epochs: no cache hit
    print(f"{lengths.size:,} samples, {G} ranks, grad_accum {A}, budget {BUDGET:,}")
    print(f"plan of fixed packing: {fixed_s / 2 * 1e3:.0f} ms; numpy permutation "
          f"{perm * 1e3:.0f} ms")
    print("| boundaries | sync_buckets | packing | rows | heaviest rank | Ktok/s | waiting "
          "| plan / fixed | plan / permutation |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, edges in (("one bucket", None), ("6 buckets", BOUNDARIES)):
        for sync in (True, False):
            base = None
            for packing in ("varlen", "varlen-balanced"):
                sampler = BucketBatchSampler(lengths, edges, token_budget=BUDGET, world_size=G,
                                             grad_accum=A, packing=packing, sync_buckets=sync)
                build = best_of(lambda s=sampler: s.plan(1) and s.plan(2)) / 2
                timing = time_epoch(sampler.epoch_view(), model)
                load = heaviest(sampler)
                base = load if base is None else base
                print(f"| {name} | {sync} | {packing} | {sampler.plan().n_batches:,} | "
                      f"{load / base:.3f} | {timing.ktok_per_s:.1f} | "
                      f"{timing.wait_fraction:.1%} | {build / (fixed_s / 2):.1f}x | "
                      f"{build / perm:.1f}x |")


if __name__ == "__main__":
    main()
