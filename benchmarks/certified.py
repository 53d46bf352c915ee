"""The certified time DP against the padding DP, side by side in one run (ratios: the machine is
shared and noisy), under the shipped profile and others.

    python benchmarks/certified.py [NAME]     (NAME: only the inputs whose name holds it)

Inputs: the embedded example (8 GPUs, both paddings), 20,000 distinct lengths (k = 6 and 16,
8 GPUs; k = 16 also on one GPU and under min_share = 1/32, the padding DP too) and source-code-like
heavy tails: up to 2M tokens (60,000 samples, 8 GPUs; T = 2M, and T = 4M, where no batch holds
one row and the padding DP's problem is not trivial) and up to 4M tokens (200,000 samples,
37,477 distinct lengths, T = 4M: the heaviest the DP proves here). Profiles: the shipped
rtx-pro-6000-blackwell (alpha 0.1 s), a small-alpha one (alpha 0.01 s, gamma x 10) and a
large-alpha one (alpha 0.5 s, gamma 0). Each row: the padding DP (pad="batch", the same token
budget) and the time DP (certified: `exact` says whether the optimum is proven), best of
REPEATS runs each, interleaved. The padding DP is timed twice: its grid search alone, and with
the certificate every solve reports beside its value (`optimality`, computed when first read: the
CLI's table and JSON read it): the certified DP seeded with the search's cover, the same proof
the time DP's time includes ("proven": exact, or the gap it certifies at its work limit). Both
ratios are printed.
"""

from __future__ import annotations

import numpy as np
from _corpora import PROFILES, STORY, corpus
from _timing import best_of

import bucketopt
from bucketopt import datasets

REPEATS = 2


def inputs():
    rng = np.random.default_rng(1)
    values = np.unique(np.rint(np.exp(rng.uniform(np.log(16), np.log(30_000), 60_000))))
    values = values[:20_000].astype(np.int64)
    wide = bucketopt.Histogram(values, rng.integers(1, 40, size=values.size))
    code = np.clip(np.rint(np.random.default_rng(0).lognormal(7.0, 1.9, 60_000)), 5,
                   2_000_000).astype(np.int64)
    code4m, _ = corpus("code4M")
    seed = datasets.seed_like()
    # (name, lengths, k, pad, token budget, what both solves add, what the time DP adds)
    return [
        ("embedded, pad=batch", seed, 6, "batch", None, {}, {}),
        ("embedded, pad=edge", seed, 6, "edge", None, {}, {}),
        ("20,000 lengths, k=6", wide, 6, "batch", 65_536, {}, {}),
        ("20,000 lengths, k=16", wide, 16, "batch", 65_536, {}, {}),
        ("20,000, k=16, 1 GPU", wide, 16, "batch", 65_536, {}, {"world_size": 1}),
        ("20,000, k=16, share 1/32", wide, 16, "batch", 65_536, {"min_share": 1 / 32}, {}),
        ("source-code tail", code, 6, "batch", 2_097_152, {}, {}),
        # the same tail with batches of at least 2 rows: its padding optimum is no longer 0
        ("source tail, T = 4M", code, 6, "batch", 4_194_304, {}, {}),
        ("source code to 4M", code4m, 6, "batch", 4_194_304, {}, {}),
    ]


def main(only=None):
    """Every input, or those whose name contains ``only`` (e.g. ``source``)."""
    bucketopt.solve([1, 2, 3, 5, 8], 2, pad="batch", profile="rtx-pro-6000-blackwell",
                    token_budget=64)  # load the kernels
    print(f"{'input':24} {'profile':22} {'padding DP':>11} {'+ its cert':>10} {'proven':>7} "
          f"{'time DP':>9} {'ratios':>13}  exact  gap       Ktok/s")
    worst = [0.0, 0.0]
    for name, lengths, k, pad, budget, both, time_only in inputs():
        if only and only not in name:
            continue
        for pname, profile in PROFILES.items():
            tb = budget
            if tb is None:
                tb = STORY.token_budget
            padding = dict(pad="batch", token_budget=tb, **both)
            timed = {**dict(pad=pad, token_budget=tb, profile=profile, world_size=8), **both,
                     **time_only}
            t_pad, _ = best_of(lambda x=lengths, k=k, kw=padding: bucketopt.solve(x, k, **kw),
                               REPEATS)
            t_cert, pcert = best_of(
                lambda x=lengths, k=k, kw=padding: bucketopt.solve(x, k, **kw).optimality,
                REPEATS)
            t_time, sol = best_of(lambda x=lengths, k=k, kw=timed: bucketopt.solve(x, k, **kw),
                                  REPEATS)
            cert = sol.optimality
            ratios = (t_time / t_pad, t_time / t_cert)
            worst = [max(w, r) for w, r in zip(worst, ratios)]
            gap = "none" if cert["gap"] is None else f"{cert['gap']:.1e}"  # None: no bound > 0
            proven = "exact" if pcert["exact"] else (
                "none" if pcert["gap"] is None else f"{pcert['gap']:.1e}")
            print(f"{name:24} {pname:22} {t_pad:10.3f}s {t_cert:9.3f}s {proven:>7} {t_time:8.3f}s "
                  f"{ratios[0]:5.1f}x {ratios[1]:5.1f}x  {cert['exact']!s:5}  {gap:7}  "
                  f"{sol.ktok_per_s:.3f}")
    print(f"worst time DP / padding DP: {worst[0]:.1f}x (its search alone), {worst[1]:.1f}x "
          "(with its certificate)")


if __name__ == "__main__":
    import sys

    main(sys.argv[1] if len(sys.argv) > 1 else None)
