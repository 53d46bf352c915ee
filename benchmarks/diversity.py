"""Gradient diversity, predicted throughput and sampler build time on the embedded example.

    python benchmarks/diversity.py [--world-size 8] [--grad-accum 4] [--token-budget 65536]
                                   [-k 6] [--packing fixed|greedy] [--bound]

For each strategy (sorted static batches with shuffled order, full shuffle + greedy packing, and
BucketBatchSampler with sync_buckets True / "step" / False) it prints the step mix gap (epoch 0),
the epoch churn (epochs 0 -> 1) and, with the shipped hardware profile, the cost model's Ktok/s on
the strategy's real batch order. Then the sampler's epoch-build time next to a plain
``rng.permutation(n)`` measured in the same run (the machines are shared: read the ratio).
``--bound`` adds a linear-programming estimate of the lowest step mix gap any schedule with one
bucket per micro-step can reach (why sync_buckets=True cannot match the unsynced modes).
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np

import bucketopt
from bucketopt.datasets import seed_like
from bucketopt.training.diversity import decile_bins, measure, strategy_batches
from bucketopt.training.epoch import epoch_from_batches

PROFILE = "rtx-pro-6000-blackwell"
MODES = ((True, "bucketed (sync_buckets=True)"), ("step", 'bucketed (sync_buckets="step")'),
         (False, "bucketed (sync_buckets=False)"))


def cost_model(world_size):
    try:
        from bucketopt.cost.costmodel import load_profile
    except ImportError:
        return None, None
    profile = load_profile(PROFILE)
    return profile.cost_model(world_size=world_size), profile


def rows(lengths, edges, args, model):
    G, A, T = args.world_size, args.grad_accum, args.token_budget
    plans = [("sorted", "sorted", {}), ("shuffle", "shuffle", {})]
    plans += [(label, "bucketed", {"sync_buckets": mode, "packing": args.packing})
              for mode, label in MODES]
    for label, strategy, options in plans:
        epochs = [strategy_batches(lengths, strategy, token_budget=T, epoch=e, boundaries=edges,
                                   world_size=G, grad_accum=A, **options) for e in (0, 1)]
        d = measure(lengths, *epochs, world_size=G, grad_accum=A, strategy=label)
        row = {"strategy": label, "step_mix_gap": d.step_mix_gap, "epoch_churn": d.epoch_churn,
               "batches": d.n_batches, "steps": d.n_steps}
        if model is not None:
            from bucketopt.cost.costmodel import time_epoch

            epoch = epoch_from_batches(lengths, epochs[0], strategy=label, pad="batch")
            timing = time_epoch(epoch, model)
            row.update(ktok_per_s=timing.ktok_per_s, wait=timing.wait_fraction,
                       padding=epoch.padding_fraction)
        yield row


def build_times(lengths, edges, args, repeats=5):
    G, A, T = args.world_size, args.grad_accum, args.token_budget
    rng = np.random.default_rng(0)
    perm = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        rng.permutation(lengths.size)
        perm.append(time.perf_counter() - t0)
    base = float(np.median(perm))
    print(f"\nepoch build (median of {repeats} epochs; rng.permutation(n) = {base * 1e3:.1f} ms "
          "in the same run)")
    for packing in ("fixed", "greedy"):
        for mode, label in MODES:
            t0 = time.perf_counter()
            sampler = bucketopt.BucketBatchSampler(lengths, edges, token_budget=T, world_size=G,
                                                   grad_accum=A, packing=packing,
                                                   sync_buckets=mode)
            init = time.perf_counter() - t0
            times = []
            for epoch in range(1, repeats + 1):
                t0 = time.perf_counter()
                sampler.plan(epoch)
                times.append(time.perf_counter() - t0)
            med = float(np.median(times))
            print(f"  {packing:6s} {label:32s} {med * 1e3:7.1f} ms  ({med / base:5.1f}x the "
                  f"permutation)   construction {init * 1e3:7.1f} ms")


def lp_bound(lengths, edges, args):
    """Lowest mean step mix gap with one bucket per micro-step: an LP over step compositions
    (multisets of grad_accum buckets) whose mix matches every bucket's share of micro-steps."""
    from scipy.optimize import linprog

    G, A, T = args.world_size, args.grad_accum, args.token_budget
    edges = np.asarray(edges)
    bins = decile_bins(lengths)
    dataset = np.bincount(bins, minlength=10) / lengths.size
    bucket = np.searchsorted(edges, lengths, side="left")
    present = np.unique(bucket)
    counts = np.bincount(bucket, minlength=edges.size)[present]
    per_batch = T // edges[present]
    mix = np.array([np.bincount(bins[bucket == k], minlength=10) / c
                    for k, c in zip(present, counts)])
    rate = -(-counts // per_batch) / G
    rate = rate / rate.sum()
    types = list(itertools.combinations_with_replacement(range(present.size), A))
    gaps, uses = [], np.zeros((present.size, len(types)))
    for j, combo in enumerate(types):
        weight = np.zeros(present.size)
        for k in combo:
            weight[k] += G * per_batch[k]
            uses[k, j] += 1
        step = weight @ mix / weight.sum()
        gaps.append(0.5 * np.abs(step - dataset).sum())
    res = linprog(gaps, A_eq=np.vstack([uses, np.ones(len(types))]),
                  b_eq=np.r_[A * rate, 1.0], bounds=(0, None))
    return float(res.fun)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world-size", type=int, default=8)
    parser.add_argument("--grad-accum", type=int, default=4)
    parser.add_argument("--token-budget", type=int, default=65536)
    parser.add_argument("-k", type=int, default=6)
    parser.add_argument("--packing", choices=("fixed", "greedy"), default="fixed")
    parser.add_argument("--bound", action="store_true")
    args = parser.parse_args()

    lengths = seed_like()
    t0 = time.perf_counter()
    edges = bucketopt.solve(lengths, args.k, token_budget=args.token_budget).boundaries
    print(f"embedded example: {lengths.size:,} lengths; solve(k={args.k}, token_budget="
          f"{args.token_budget}) -> {edges} in {time.perf_counter() - t0:.2f} s")
    model, profile = cost_model(args.world_size)
    print(f"world_size={args.world_size}, grad_accum={args.grad_accum}, packing={args.packing}"
          + ("" if model is None else f"; cost model: profile {profile.name!r} "
             f"({profile.description})"))
    head = f"{'strategy':32s} {'mix gap':>8s} {'churn':>7s} {'batches':>8s} {'steps':>6s}"
    if model is not None:
        head += f" {'Ktok/s':>7s} {'wait':>6s} {'padding':>8s}"
    print("\n" + head)
    t0 = time.perf_counter()
    for row in rows(lengths, edges, args, model):
        line = (f"{row['strategy']:32s} {row['step_mix_gap']:8.3f} {row['epoch_churn']:7.2%} "
                f"{row['batches']:8d} {row['steps']:6d}")
        if "ktok_per_s" in row:
            line += f" {row['ktok_per_s']:7.1f} {row['wait']:6.1%} {row['padding']:8.1%}"
        print(line)
    print(f"(table built in {time.perf_counter() - t0:.1f} s)")
    build_times(lengths, edges, args)
    if args.bound:
        print(f"\nLP estimate: with one bucket per micro-step the mean step mix gap cannot go "
              f"below {lp_bound(lengths, edges, args):.3f}")


if __name__ == "__main__":
    main()
