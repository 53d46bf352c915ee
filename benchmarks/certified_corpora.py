"""The certified time DP across corpora, GPUs, paddings and share constraints: how long each
solve takes and what it proves (``exact``, or the gap its bounds prove at the work limit).

    python benchmarks/certified_corpora.py [CORPUS,...] [K,...] [VARIANT,...]

Corpora (synthetic, seeded; benchmarks/_corpora.py): chat, dialogue, news, code32k and code4M
(200,000 samples up to 4M tokens: where some solves stop at the work limit). Variants: 8b (8 GPUs,
pad="batch"), 1b (one GPU), 8e (8 GPUs, pad="edge"), 8bmin (min_share = 0.5 / k), 8bmax
(max_share = 2 / k). Every solve runs under the three profiles of benchmarks/certified.py.
Rows slower than 2 s or not proven are marked "<<<". The full run took 1 min 57 s on a quiet
2-core machine (2 min 49-57 s on slower or busier ones).
"""

from __future__ import annotations

import sys
import time

from _corpora import PROFILES, corpus

import bucketopt


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
                    print(f"{name:9} k={k:2} {pname:22} {variant:6} {took:6.2f}s {said}{mark}",
                          flush=True)


if __name__ == "__main__":
    args = sys.argv[1:] + [None] * 3
    main((args[0] or "chat,dialogue,news,code32k,code4M").split(","),
         [int(v) for v in (args[1] or "6,16").split(",")],
         (args[2] or "8b,1b,8e,8bmin,8bmax").split(","))
