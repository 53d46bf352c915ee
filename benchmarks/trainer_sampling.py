"""The Trainer's group_by_length against BucketedTrainer's batches, on the embedded example.

    python benchmarks/trainer_sampling.py [--token-budget 65536] [-k 6] [--world-size 1]

``group_by_length`` (transformers' ``LengthGroupedSampler``: megabatches of 50 x batch size
sorted by length, cut into batches of ``per_device_train_batch_size``) at two batch sizes: the
largest that keeps the longest sample within the budget, and the budget over the mean length.
Against it, the batches BucketedTrainer trains on (``BucketBatchSampler``, fixed packing,
boundaries solved with ``pad="batch"``). Every batch is padded to its longest sample. Needs
torch and transformers.
"""

from __future__ import annotations

import argparse

import numpy as np

import bucketopt
from bucketopt.datasets import seed_like


def describe(lengths, batches, budget):
    padded = real = 0
    over = most = 0
    for b in batches:
        x = lengths[b]
        tokens = len(b) * int(x.max())
        real += int(x.sum())
        padded += tokens - int(x.sum())
        most = max(most, tokens)
        over += tokens > budget
    fill = real / len(batches) / budget  # mean real tokens per batch, as a share of the budget
    return padded / (padded + real), len(batches), most / budget, over / len(batches), fill


def main(argv=None):
    import torch
    from transformers.trainer_pt_utils import LengthGroupedSampler

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--token-budget", type=int, default=65536)
    ap.add_argument("-k", type=int, default=6)
    a = ap.parse_args(argv)
    lengths, T = seed_like(), a.token_budget
    print(f"{lengths.size:,} lengths (mean {lengths.mean():,.0f}, max {lengths.max():,}), "
          f"token budget {T:,}")
    print("\n| batches from | batch size | padding | batches | real tokens per batch / budget | "
          "largest batch / budget | batches over the budget |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for bs in (T // int(lengths.max()), int(T // lengths.mean())):
        sampler = LengthGroupedSampler(bs, lengths=lengths.tolist(),
                                       generator=torch.Generator().manual_seed(0))
        order = np.fromiter(iter(sampler), dtype=np.int64, count=lengths.size)
        batches = np.split(order, np.arange(bs, order.size, bs))
        f, n, most, over, fill = describe(lengths, batches, T)
        print(f"| group_by_length | {bs} | {f:.2%} | {n:,} | {fill:.1%} | {most:.2f}x | "
              f"{over:.1%} |")
    edges = bucketopt.solve(lengths, a.k, token_budget=T, pad="batch").boundaries
    plan = bucketopt.BucketBatchSampler(lengths, edges, token_budget=T).plan(0)
    f, n, most, over, fill = describe(lengths, plan.batches(), T)
    sizes = plan.sizes
    print(f"| BucketedTrainer (k={a.k}) | {sizes.min()}-{sizes.max()} by bucket | {f:.2%} | "
          f"{n:,} | {fill:.1%} | {most:.2f}x | {over:.1%} |")
    print(f"\nboundaries: {edges}")


if __name__ == "__main__":
    main()
