"""Does a CPU probe predict what it never timed? Held-out shapes and sorted vs shuffled epochs.

1. ``bucketopt.cost.probe`` times a small causal transformer (defined below) on CPU within a
   2-minute limit and fits a profile.
2. **Held-out shapes** (other lengths, other batch sizes than the probe's design), twice:
   a. timed inside the probe's own rounds (``probe(holdout=...)``: same interleaving, same
      machine conditions, never given to the fit), which is the fair test on a shared machine;
   b. timed by a separate loop, half just before the probe and half just after; some of the
      probe's own shapes are re-timed in the same rounds, and their measured / predicted ratio
      shows how much the machine's speed moved between the probe and this loop.
3. **Epochs.** A sorted and a shuffled epoch of the same lengths (``seed_like()`` scaled to
   the probe's max length) are really trained, one step per batch, their batches interleaved
   in one random order so that drift on a shared machine hits both alike. The measured
   throughput ratio sorted / shuffled is compared with the ratio the profile predicts
   (``time_epoch``) for the same batches.

Run (about 4 minutes; one torch thread, so that a shared 2-core machine times steadily):

    python benchmarks/probe_cpu.py [--time-limit 120] [--samples 3000]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

BUDGET = 1024
MAX_LENGTH = 256


def small_transformer(vocab=1000, width=96, layers=2, heads=4):
    """A GPT-style causal transformer: embedding, pre-norm blocks, tied head; returns logits."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1 = nn.LayerNorm(width)
            self.qkv = nn.Linear(width, 3 * width)
            self.proj = nn.Linear(width, width)
            self.norm2 = nn.LayerNorm(width)
            self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(),
                                     nn.Linear(4 * width, width))

        def forward(self, x):
            b, n, _ = x.shape
            q, k, v = self.qkv(self.norm1(x)).view(b, n, 3, heads, -1).unbind(2)
            att = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                                 v.transpose(1, 2), is_causal=True)
            x = x + self.proj(att.transpose(1, 2).reshape(b, n, width))
            return x + self.mlp(self.norm2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, width)
            self.pos = nn.Embedding(MAX_LENGTH, width)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.norm = nn.LayerNorm(width)

        def forward(self, ids):
            x = self.embed(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
            for block in self.blocks:
                x = block(x)
            return self.norm(x) @ self.embed.weight.T

    torch.manual_seed(0)
    return GPT()


class Trainer:
    """One model and optimizer; ``step(s, L)`` is one timed training step (as probe times)."""

    def __init__(self, model):
        import torch

        self.torch = torch
        self.model = model
        self.opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
        self.gen = torch.Generator().manual_seed(1)

    def step(self, size, length):
        torch = self.torch
        ids = torch.randint(0, 1000, (size, length), generator=self.gen)
        t0 = time.perf_counter()
        self.opt.zero_grad(set_to_none=True)
        logits = self.model(ids)
        loss = torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1),
                                                 ids[:, 1:].flatten())
        loss.backward()
        self.opt.step()
        return time.perf_counter() - t0


def heldout_shapes(design):
    """Shapes the probe's design never timed: other lengths, and other sizes at its lengths."""
    taken = set(design)
    out = []
    for length in (24, 48, 72, 112, 160, 200, 240):
        top = BUDGET // length
        for size in (2, max(3, top // 2), top):
            if (size, length) not in taken and size * length <= BUDGET:
                out.append((size, length))
    design_lengths = sorted({L for _, L in design})
    for length in design_lengths:
        size = max(2, (BUDGET // length) * 2 // 3)
        if (size, length) not in taken:
            out.append((size, length))
    return sorted(set(out), key=lambda sl: (sl[1], sl[0]))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=120.0)
    parser.add_argument("--samples", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=20, help="held-out timing rounds")
    args = parser.parse_args(argv)

    import torch

    import bucketopt
    from bucketopt.cost.costmodel import time_epoch
    from bucketopt.cost.probe import design_shapes, probe
    from bucketopt.datasets import seed_like

    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    print(f"torch {torch.__version__}, 1 thread; model: small_transformer() "
          f"({sum(p.numel() for p in small_transformer().parameters()):,} parameters), "
          f"token budget {BUDGET}, max length {MAX_LENGTH}")

    trainer = Trainer(small_transformer())
    for _ in range(3):
        trainer.step(BUDGET // MAX_LENGTH, MAX_LENGTH)
    design = design_shapes(BUDGET, MAX_LENGTH)
    shapes = heldout_shapes(design)
    reference = design[::3]  # some of the probe's own shapes, re-timed alongside
    everything = shapes + reference
    times = {s: [] for s in everything}
    rng = np.random.default_rng(0)
    for s in everything:  # untimed first visit
        trainer.step(*s)

    def rounds(n):
        for _ in range(n):
            for i in rng.permutation(len(everything)):
                times[everything[i]].append(trainer.step(*everything[i]))
        return {s: list(times[s]) for s in reference}

    before = (args.rounds + 1) // 2
    reference_before = rounds(before)

    start = time.monotonic()
    result = probe(small_transformer, token_budget=BUDGET, max_length=MAX_LENGTH,
                   time_limit=args.time_limit, threads=1, progress=True, holdout=shapes)
    cal = result.calibration
    print(f"\nprobe: {len(result.measurements)} steps over {len(result.shapes)} shapes, "
          f"{result.rounds} rounds, {result.elapsed_s:.1f} s (limit {args.time_limit:.0f} s); "
          f"alpha {cal.alpha:.4g} s, beta {cal.beta:.4g} s/token, gamma {cal.gamma:.4g}")
    h = cal.heldout
    print(f"probe k-fold held-out error over its shapes: median {h['median_rel_error']:.1%}, "
          f"max {h['max_rel_error']:.1%}")
    model = result.profile.cost_model()

    held = result.holdout
    print(f"\n(a) {len(held['shapes'])} held-out shapes timed inside the probe's rounds, never "
          "fitted:")
    for e in held["shapes"]:
        print(f"  {e['batch_size']:>4} x {e['padded_len']:<4} measured "
              f"{e['measured_s'] * 1e3:7.2f} ms  predicted {e['predicted_s'] * 1e3:7.2f} ms  "
              f"{e['rel_error']:+6.1%}  ({e['repeats']} repeats)")
    inside = np.abs([e["rel_error"] for e in held["shapes"]])
    print(f"(a) held-out shapes: median |error| {np.median(inside):.1%}, 90th percentile "
          f"{np.quantile(inside, 0.9):.1%}, max {inside.max():.1%}")

    rounds(args.rounds - before)

    def drift_of(samples):
        return float(np.median([np.median(samples[s]) / model.micro_batch_time(*s)
                                for s in reference]))

    drift = drift_of(times)
    drift_before = drift_of(reference_before)
    drift_after = drift_of({s: times[s][len(reference_before[s]):] for s in reference})
    errors = []
    print(f"\n(b) the same shapes timed by a separate loop (never by the probe), median of "
          f"{args.rounds} ({before} before the probe, {args.rounds - before} after):")
    for s in shapes:
        measured = float(np.median(times[s]))
        predicted = float(model.micro_batch_time(*s))
        errors.append(predicted / measured - 1)
        print(f"  {s[0]:>4} x {s[1]:<4} measured {measured * 1e3:7.2f} ms  predicted "
              f"{predicted * 1e3:7.2f} ms  {errors[-1]:+6.1%}")
    abs_err = np.abs(errors)
    print(f"(b) held-out shapes: median |error| {np.median(abs_err):.1%}, 90th percentile "
          f"{np.quantile(abs_err, 0.9):.1%}, max {abs_err.max():.1%}")
    print(f"machine drift: {len(reference)} of the probe's own shapes re-timed alongside ran at "
          f"{drift:.3f}x their predicted time (1.000 = as fast as during the probe; before "
          f"the probe {drift_before:.3f}x, after {drift_after:.3f}x); "
          f"held-out median |error| after that correction "
          f"{np.median(np.abs((1 + np.asarray(errors)) * drift - 1)):.1%}")

    # --- sorted vs shuffled epochs, really trained ---
    base = seed_like()
    lengths = np.maximum(1, np.rint(base[np.random.default_rng(1).choice(
        base.size, args.samples, replace=False)] * MAX_LENGTH / 8191)).astype(np.int64)
    epochs = {name: bucketopt.simulate(lengths, name, token_budget=BUDGET, seed=0)
              for name in ("sorted", "shuffle")}
    predicted = {name: time_epoch(ep, model) for name, ep in epochs.items()}
    jobs = [(name, i) for name, ep in epochs.items() for i in range(ep.n_batches)]
    order = np.random.default_rng(2).permutation(len(jobs))
    spent = {name: 0.0 for name in epochs}
    t0 = time.monotonic()
    for j in order:
        name, i = jobs[j]
        ep = epochs[name]
        spent[name] += trainer.step(int(ep.sizes[i]), int(ep.padded_lens[i]))
    took = time.monotonic() - t0
    real = {name: ep.total_real_tokens for name, ep in epochs.items()}
    measured_rate = {name: real[name] / spent[name] / 1e3 for name in epochs}
    print(f"\nepochs of {args.samples:,} lengths (seed_like scaled to {MAX_LENGTH}), "
          f"{len(jobs):,} training steps interleaved, {took:.0f} s:")
    for name in epochs:
        print(f"  {name:<8} {epochs[name].n_batches:>5} batches, padding "
              f"{epochs[name].padding_fraction:6.1%}: measured {measured_rate[name]:6.2f} Ktok/s,"
              f" predicted {predicted[name].ktok_per_s:6.2f} Ktok/s "
              f"({predicted[name].ktok_per_s / measured_rate[name] - 1:+.1%})")
    ratio_measured = measured_rate["sorted"] / measured_rate["shuffle"]
    ratio_predicted = predicted["sorted"].ktok_per_s / predicted["shuffle"].ktok_per_s
    print(f"throughput ratio sorted / shuffled: measured {ratio_measured:.3f}, predicted "
          f"{ratio_predicted:.3f} ({ratio_predicted / ratio_measured - 1:+.1%})")
    print(f"\ntotal {time.monotonic() - start:.0f} s")
    ratio_ok = abs(ratio_predicted / ratio_measured - 1) <= 0.10
    print(f"targets: held-out median <= 20%: (a) {'yes' if np.median(inside) <= 0.2 else 'no'}, "
          f"(b) {'yes' if np.median(abs_err) <= 0.2 else 'no'}; sorted/shuffled ratio within "
          f"10%: {'yes' if ratio_ok else 'no'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
