"""The rules of thumb used today to pick bucket boundaries, for comparison with the optimum.

Every rule returns at most ``k`` strictly increasing inclusive upper edges whose last one is the
longest length (or, for powers of two, the power of two above it, clipped to the token budget).
Edges below the shortest length are dropped (they would only make empty buckets):

- ``"pow2"``: powers of two, the k largest up to the first power >= the longest length (the
  story's guess 512, 1024, ..., 8192 is this rule with k = 5). On a narrow range it yields fewer
  than k buckets.
- ``"quantile"``: equal-count buckets, edges at the j/k quantiles of the lengths.
- ``"lhotse"``: equal total length per bucket (Lhotse's ``estimate_duration_buckets``, NeMo's
  ``estimate_duration_bins``): edges where the cumulative tokens cross j/k of the total.
- ``"t2t"``: tensor2tensor's geometric ``_bucket_boundaries(max_length, min_length=8,
  length_bucket_step=1.1)``. That list is long (52 edges from 65 to 8,191) and independent of
  k, so it is mapped to k buckets by keeping every s-th of its edges counted down from the
  longest length, with the smallest s that leaves at most k: steps of about 1.1**s, anchored at
  the top.
- ``"linspace"``: NeMo's equal-width buckets, ``linspace(min, max, k + 1)[1:]`` rounded up.
"""

from __future__ import annotations

import numpy as np

from .data.histogram import as_histogram
from .errors import BucketoptError

RULES = ("pow2", "quantile", "lhotse", "t2t", "linspace")


def _finish(edges, longest: int) -> tuple:
    edges = np.unique(np.asarray(edges, dtype=np.int64))
    edges = edges[(edges >= 1) & (edges < longest)]
    return (*(int(e) for e in edges), longest)


def _marked(cum: np.ndarray, k: int) -> np.ndarray:
    """Indices i holding some mark j * T / k, 1 <= j < k, in (cum[i-1], cum[i]] (T = cum[-1]),
    in exact integer arithmetic and O(m) time whatever k is."""
    total = int(cum[-1])
    hits, below = [], 0  # below: floor(cum[i-1] * k / T)
    for i, c in enumerate(cum.tolist()):
        upto = min(c * k // total, k - 1)
        if upto > below:
            hits.append(i)
        below = max(below, upto)
    return np.asarray(hits, dtype=np.int64)


def t2t_boundaries(max_length: int, min_length: int = 8, step: float = 1.1) -> list:
    """tensor2tensor's ``_bucket_boundaries``: geometric edges below ``max_length``."""
    x = min_length
    out = []
    while x < max_length:
        out.append(x)
        x = max(x + 1, int(x * step))
    return out


def rule_of_thumb(name: str, lengths, k: int, *, token_budget=None) -> tuple:
    """Boundaries (at most ``k`` buckets) chosen by a common rule of thumb; see the module doc.

    Examples
    --------
    >>> rule_of_thumb("pow2", [100, 700, 3000, 8191], 5)
    (512, 1024, 2048, 4096, 8192)
    >>> rule_of_thumb("quantile", [1, 2, 3, 4, 5, 6], 3)
    (2, 4, 6)
    """
    from .validate import check_k

    k = check_k(k)
    hist = as_histogram(lengths)
    longest = hist.max_length
    if name == "pow2":
        top = 1 << (longest - 1).bit_length()  # the first power of two >= the longest length
        if token_budget is not None and top > token_budget:
            top = longest
        inner = [1 << p for p in range(longest.bit_length())
                 if hist.min_length <= (1 << p) < longest]
        inner = inner[-(k - 1):] if k > 1 else []
        return (*inner, top)
    # A k far above the data (k = 10**8) must not allocate k marks: where k exceeds what the
    # rule can tell apart, the same edges come from O(m) work (exactly, see each branch).
    if name == "quantile":
        cum = np.cumsum(hist.counts)
        if k > hist.n:  # steps of n / k < 1 hit every rank 1 .. n
            ranks = np.arange(1, hist.n + 1, dtype=np.int64)
        else:
            ranks = np.ceil(np.arange(1, k) * hist.n / k).astype(np.int64)
        idx = np.searchsorted(cum, ranks, side="left")
        return _finish(hist.values[idx], longest)
    if name == "lhotse":
        cum = np.cumsum(hist.values * hist.counts)
        if k > hist.m:  # a mark j * T / k lands in (cum[i-1], cum[i]]: count them exactly
            return _finish(hist.values[_marked(cum, k)], longest)
        marks = np.arange(1, k) * (cum[-1] / k)
        idx = np.searchsorted(cum, marks, side="left")
        return _finish(hist.values[idx], longest)
    if name == "t2t":
        full = t2t_boundaries(longest)
        below = [b for b in full if hist.min_length <= b < longest]
        step = 1
        while len(below[::-1][step - 1::step]) > k - 1:
            step += 1
        inner = below[::-1][step - 1::step] if k > 1 else []
        return _finish(inner, longest)
    if name == "linspace":
        if k >= longest - hist.min_length:  # steps <= 1: every integer above the shortest
            return _finish(np.arange(hist.min_length + 1, longest + 1), longest)
        edges = np.ceil(np.linspace(hist.min_length, longest, k + 1)[1:])
        return _finish(edges, longest)
    raise BucketoptError(f"`name` must be one of {', '.join(RULES)}; got {name!r}.", param="name")
