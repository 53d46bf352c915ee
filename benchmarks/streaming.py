"""Streamed batching against the indexed sampler, on the embedded example (902,087 lengths).

    python benchmarks/streaming.py [--world-size 8] [--token-budget 65536] [-k 6]
                                   [--sample 10000] [--buffers 0,10000,50000]

Rows (every batch padded to its longest sample, the usual collator):
- ``indexed``: BucketBatchSampler's epoch 0 on the whole dataset, boundaries solved on all of it
  (``pad="batch"``);
- ``stream, buffer B``: StreamBatcher over the same lengths as a stream, the same boundaries,
  buffer of B items (0 = the least that guarantees progress);
- ``stream, sampled edges``: boundaries from a reservoir sample of ``--sample`` lengths
  (``plan_from_sample``), buffer 10,000.
Then the DKW bound of planning on a sample, for several sample sizes. Times are one pass each,
measured in this run; the ratio to the indexed plan is what to read on a shared machine.
"""

from __future__ import annotations

import argparse
import time

import bucketopt
from bucketopt.datasets import seed_like
from bucketopt.training.streaming import StreamBatcher, plan_from_sample, sample_lengths


def indexed(lengths, edges, budget, world):
    t = time.perf_counter()
    sampler = bucketopt.BucketBatchSampler(lengths, edges, token_budget=budget, world_size=world)
    plan = sampler.plan(0)
    elapsed = time.perf_counter() - t
    real = padded = 0
    for b in plan.batches():
        x = lengths[b]
        real += int(x.sum())
        padded += len(b) * int(x.max()) - int(x.sum())
    return padded / (real + padded), plan.n_batches, elapsed


def streamed(lengths, edges, budget, world, buffer):
    stream = lengths.tolist()
    t = time.perf_counter()
    batcher = StreamBatcher(stream, edges, token_budget=budget, length=int, world_size=world,
                            buffer_size=buffer or None)
    if not buffer:
        batcher = StreamBatcher(stream, edges, token_budget=budget, length=int,
                                world_size=world, buffer_size=batcher.minimum_buffer)
    steps = sum(1 for _ in batcher.micro_steps())
    elapsed = time.perf_counter() - t
    s = batcher.stats
    return s.padding_fraction, s.batches, elapsed, batcher.buffer_size, s, steps


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world-size", type=int, default=8)
    ap.add_argument("--token-budget", type=int, default=65536)
    ap.add_argument("-k", type=int, default=6)
    ap.add_argument("--sample", type=int, default=10_000)
    ap.add_argument("--buffers", default="0,10000,50000")
    a = ap.parse_args(argv)
    lengths = seed_like()
    T, G = a.token_budget, a.world_size
    edges = bucketopt.solve(lengths, a.k, token_budget=T, pad="batch").boundaries
    print(f"{lengths.size:,} lengths, token_budget={T:,}, world_size={G}, k={a.k}")
    print(f"boundaries (all data, pad=batch): {edges}")
    frac, n_batches, base = indexed(lengths, edges, T, G)
    print("\n| plan | padding | batches | dropped | max buffered | time | x indexed |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    print(f"| indexed (BucketBatchSampler) | {frac:.2%} | {n_batches:,} | 0 | {lengths.size:,} "
          f"| {base:.2f} s | 1.0 |")
    for buffer in (int(b) for b in a.buffers.split(",")):
        f, nb, el, size, s, _ = streamed(lengths, edges, T, G, buffer)
        print(f"| stream, buffer {size:,} | {f:.2%} | {nb:,} | {s.dropped} | {s.max_buffered:,} "
              f"| {el:.2f} s | {el / base:.1f} |")
    sample = sample_lengths(lengths.tolist(), a.sample, length=int, seed=0)
    plan = plan_from_sample(sample, a.k, token_budget=T, max_length=int(lengths.max()))
    f, nb, el, size, s, _ = streamed(lengths, plan.boundaries, T, G, 10_000)
    print(f"| stream, edges from a {a.sample:,} sample, buffer {size:,} | {f:.2%} | {nb:,} | "
          f"{s.dropped} | {s.max_buffered:,} | {el:.2f} s | {el / base:.1f} |")
    print(f"\nsampled boundaries: {plan.boundaries}")
    print("\nDKW bound of planning on a sample (95%), edge padding of the sampled boundaries:")
    print("| sample | epsilon | on the sample | bound on the stream | stream (true) | "
          "+- padded tokens / sample |")
    print("| ---: | ---: | ---: | --- | ---: | ---: |")
    for n in (1_000, 10_000, 100_000):
        sample = sample_lengths(lengths.tolist(), n, length=int, seed=1)
        p = plan_from_sample(sample, a.k, token_budget=T, max_length=int(lengths.max()),
                             pad="edge")
        true = bucketopt.evaluate(lengths, p.boundaries, pad="edge").padding_fraction
        low, high = p.padding_fraction_bound
        print(f"| {n:,} | {p.epsilon:.4f} | {p.padding_fraction_sample:.2%} | "
              f"[{low:.2%}, {high:.2%}] | {true:.2%} | {p.padded_per_sample_bound:.0f} |")


if __name__ == "__main__":
    main()
