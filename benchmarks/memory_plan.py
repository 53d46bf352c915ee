"""Batch sizes from memory against the best single token budget that fits the same card.

    python benchmarks/memory_plan.py [--k 6] [--budgets 24] [--pad batch]

On the embedded example (bucketopt.datasets.seed_like(), 902,087 lengths up to 8,191), with the
shipped profile rtx-pro-6000-blackwell (8 GPUs, buckets synced across ranks) and a memory model
where m2 > 0, it prints the predicted Ktok/s of

- the memory-aware plan: solve(objective="time", memory=MODEL), every bucket's batch the largest
  whose predicted peak fits 0.9 x 96 GB, boundaries and batch sizes optimised together;
- the best single-token-budget plan whose every batch fits the same capacity: for each budget T
  on a grid (bucketopt.training.compare.budget_plan), the time-optimal boundaries under
  B_k = floor(T / b_k), kept when every bucket's predicted peak fits; the fastest is shown;

and their ratio. Every figure is a prediction of the cost model; nothing here ran on a GPU.

The memory model (bytes; an 8B Llama-like model: 32 layers, hidden 4,096, 32 heads, FFN
14,336, vocabulary 128,256, trained with FSDP over the 8 cards, bf16 weights and gradients,
fp32 AdamW, activation checkpointing per layer, a fused cross-entropy that never holds the
logits, eager attention):
- m0 = 22e9: 8.03e9 parameters x 16 bytes (bf16 weight and gradient, fp32 master weight and
  two moments) / 8 cards = 16.1e9, plus ~6e9 of all-gather buffers, CUDA context and allocator
  slack;
- m1 = 4.7e5 per token: the 32 layer-input checkpoints (32 x 4,096 x 2 bytes = 262 KB) plus one
  layer's activations while it is recomputed (~50 x hidden bytes with the SwiGLU FFN, 205 KB);
- m2 = 160 per token x length: eager attention of the layer being recomputed, scores, softmax
  and dropout mask, 5 bytes x 32 heads per pair of positions;
- capacity 96 GB (2**30 bytes each; the card's 96 GB GDDR7), headroom 0.9.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import bucketopt
from bucketopt.cost.memory import MemoryModel
from bucketopt.training.compare import budget_plan

MODEL = dict(m0=22e9, m1=4.7e5, m2=160.0, capacity=96 * 2**30, headroom=0.9)
PROFILE = "rtx-pro-6000-blackwell"
# The same per-step overhead (alpha 0.1 s) with 10x faster compute per token: where the step
# overhead weighs more, batch sizes weigh more.
FAST = dict(name="alpha 0.1 s, beta and gamma / 10", alpha=0.1, beta=1.5476546611142047e-05,
            gamma=1.924355612090662e-09, world_size=8)


def row(name, sol, model):
    peaks = model.peak_bytes(sol.batch_sizes, sol.boundaries) / 2**30
    budget = "-" if sol.token_budget is None else f"{sol.token_budget:,}"
    print(f"{name:<22} {sol.ktok_per_s:8.2f}  {sol.eta_days:6.3f}  {budget:>8}  "
          f"{','.join(map(str, sol.boundaries)):<38} {','.join(map(str, sol.batch_sizes)):<24} "
          f"{peaks.max():5.1f}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--k", type=int, nargs="+", default=[4, 6, 8])
    parser.add_argument("--budgets", type=int, default=24)
    parser.add_argument("--pad", default="batch", choices=("batch", "edge"))
    parser.add_argument("--fast-k", type=int, nargs="*", default=[6],
                        help="k values also run under the profile with 10x faster compute")
    args = parser.parse_args()
    from bucketopt.datasets import seed_like

    lengths = seed_like()
    hist = bucketopt.Histogram.from_lengths(lengths)
    model = MemoryModel(**MODEL)
    print(f"memory model: m0 {model.m0:.3g} B, m1 {model.m1:.3g} B/token, m2 {model.m2:.3g} "
          f"B/(token x length), capacity {model.capacity / 2**30:.0f} GB, headroom "
          f"{model.headroom}; 8 GPUs, synced buckets, pad={args.pad}")
    print("largest batch per length: " + ", ".join(
        f"{b}: {s}" for b, s in zip((512, 1024, 2048, 4096, 8191),
                                   model.batch_size([512, 1024, 2048, 4096, 8191]))))
    runs = [(PROFILE, k) for k in args.k] + [(FAST, k) for k in args.fast_k]
    for profile, k in runs:
        name = profile if isinstance(profile, str) else profile["name"]
        print(f"\n## profile {name}, k = {k}")
        start = time.perf_counter()
        mem = bucketopt.solve(hist, k, pad=args.pad, objective="time", profile=profile,
                              memory=MODEL, world_size=None)
        t_mem = time.perf_counter() - start
        start = time.perf_counter()
        fit, tried = budget_plan(hist, k, model, profile=profile, pad=args.pad,
                                 budgets=args.budgets)
        t_fit = time.perf_counter() - start
        fitting = [t for t in tried if t["fits"]]
        print(f"budgets searched: {tried[0]['token_budget']:,} .. {tried[-1]['token_budget']:,}"
              f" ({len(tried)}; {len(fitting)} fit)")
        print(f"{'plan':<22} {'Ktok/s':>8}  {'ETA d':>6}  {'budget':>8}  {'boundaries':<38} "
              f"{'batch sizes':<24} {'peak GB':>5}")
        row("memory-aware", mem, model)
        row("best fitting budget", fit, model)
        print(f"ratio memory-aware / best fitting budget: {mem.ktok_per_s / fit.ktok_per_s:.4f}"
              f"  (optimality of the memory plan: {mem.optimality})")
        print(f"wall: memory-aware solve {t_mem:.2f} s, budget search {t_fit:.2f} s "
              f"({t_fit / max(len(tried), 1):.2f} s per budget)")
        assert np.all(model.peak_bytes(mem.batch_sizes, mem.boundaries) <= model.usable)


if __name__ == "__main__":
    main()
