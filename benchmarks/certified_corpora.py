"""The certified time DP across corpora, GPUs, paddings and share constraints: how long each
solve takes and what it proves (``exact``, or the gap its bounds prove at the work limit).

    python benchmarks/certified_corpora.py [CORPUS,...] [K,...] [VARIANT,...]

Corpora (synthetic, seeded): chat (1M samples, lognormal up to 32,768 tokens, T = 65,536),
dialogue (500,000, two modes up to 16,384, T = 32,768), news (300,000, gamma up to 8,192,
T = 65,536), code32k (300,000 source-code-like lengths cut at 32,768, T = 262,144) and code4M
(200,000 up to 4M tokens, T = 4M: where the DP stops at its work limit). Variants: 8b (8 GPUs,
pad="batch"), 1b (one GPU), 8e (8 GPUs, pad="edge"), 8bmin (min_share = 0.5 / k), 8bmax
(max_share = 2 / k). Every solve runs under the three profiles of benchmarks/certified.py.
Rows slower than 2 s or not proven are marked "<<<". The full run takes some 15 minutes.
"""

from __future__ import annotations

import sys
import time

import numpy as np

import bucketopt
from bucketopt.cost.costmodel import load_profile

STORY = load_profile("rtx-pro-6000-blackwell")
PROFILES = {"shipped": "rtx-pro-6000-blackwell",
            "small": dict(alpha=0.01, beta=STORY.beta, gamma=10 * STORY.gamma),
            "large": dict(alpha=0.5, beta=STORY.beta, gamma=0.0)}
SEEDS = {"chat": 1, "dialogue": 2, "news": 3, "code4M": 4, "code32k": 5}


def corpus(name):
    """(lengths, token budget) of one corpus."""
    rng = np.random.default_rng(SEEDS[name])
    if name == "chat":
        x, budget = np.clip(np.rint(rng.lognormal(5.5, 1.0, 1_000_000)), 4, 32_768), 65_536
    elif name == "dialogue":
        short, long = rng.lognormal(4.0, 0.6, 250_000), rng.lognormal(6.5, 0.8, 250_000)
        x, budget = np.clip(np.rint(np.r_[short, long]), 2, 16_384), 32_768
    elif name == "news":
        x, budget = np.clip(np.rint(rng.gamma(3.0, 250, 300_000)), 20, 8_192), 65_536
    elif name == "code4M":
        x, budget = np.clip(np.rint(rng.lognormal(7.5, 2.0, 200_000)), 5, 4_000_000), 4_194_304
    else:
        x, budget = np.clip(np.rint(rng.lognormal(7.0, 1.9, 300_000)), 5, 32_768), 262_144
    return x.astype(np.int64), budget


def options(variant, k):
    """solve()'s keywords of a variant (see the module's docstring)."""
    kw = dict(world_size=int(variant[0]), pad="batch" if variant[1] == "b" else "edge")
    if variant.endswith("min"):
        kw["min_share"] = 0.5 / k
    if variant.endswith("max"):
        kw["max_share"] = 2.0 / k
    return kw


def main(names, ks, variants):
    bucketopt.solve([1, 2, 3, 5, 8], 2, pad="batch", profile="rtx-pro-6000-blackwell",
                    token_budget=64)  # load the kernels
    for name in names:
        lengths, budget = corpus(name)
        for k in ks:
            for pname, profile in PROFILES.items():
                for variant in variants:
                    start = time.perf_counter()
                    try:
                        cert = bucketopt.solve(lengths, k, token_budget=budget, profile=profile,
                                               **options(variant, k)).optimality
                        said = (f"exact={cert['exact']!s:5} gap={cert['gap']:.1e}"
                                if cert["gap"] is not None else f"exact={cert['exact']}")
                        flag = not cert["exact"]
                    except bucketopt.BucketoptError as exc:
                        said, flag = str(exc).split(":")[0], False
                    took = time.perf_counter() - start
                    mark = "  <<<" if flag or took > 2.0 else ""
                    print(f"{name:9} k={k:2} {pname:7} {variant:6} {took:6.2f}s {said}{mark}",
                          flush=True)


if __name__ == "__main__":
    args = sys.argv[1:] + [None] * 3
    main((args[0] or "chat,dialogue,news,code32k,code4M").split(","),
         [int(v) for v in (args[1] or "6,16").split(",")],
         (args[2] or "8b,1b,8e,8bmin,8bmax").split(","))
