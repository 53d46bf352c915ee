"""Candidate edges ("groups"), share windows and backtracking: the low level every objective uses.

The DP runs over *groups*: runs of distinct lengths that share one candidate edge. With
``align=1`` each distinct length is a group and its edge is the length itself (an optimal edge
always sits on a length present in the data: lowering an edge to the longest length in its bucket
never adds padding). With ``align=a`` the edge of length x is ceil(x / a) * a, so lengths that round
up to the same multiple form one group.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .data.histogram import Histogram
from .errors import BucketoptError
from .validate import TOKEN_LIMIT

# The DP's "unreachable" sentinel (exact int64 padding stays far below it); the kernels use it too.
INF = np.int64(2**61)


@dataclass(frozen=True)
class Groups:
    """Candidate edges and prefix sums over them (index 0 is the empty prefix)."""

    hist: Histogram
    edges: np.ndarray  # (g + 1,), edges[0] = 0
    prefix_count: np.ndarray  # (g + 1,)
    prefix_tokens: np.ndarray  # (g + 1,)
    first_value: np.ndarray  # (g,) index into hist.values of each group's first length

    @property
    def g(self) -> int:
        return self.edges.size - 1

    @property
    def value_end(self) -> np.ndarray:
        """(g + 1,) int64: group j holds the distinct lengths hist.values[value_end[j-1]:
        value_end[j]] (value_end[0] = 0)."""
        return np.r_[0, self.first_value[1:], self.hist.m].astype(np.int64)


def share_count_bounds(n: int, min_share: float, max_share: float) -> tuple[int, int]:
    """Smallest and largest sample count a non-empty bucket may hold.

    A bucket with c samples is allowed when min_share * n <= c <= max_share * n; products within
    1e-9 of an integer count as that integer, so min_share=0.25 with n=8 allows exactly 2.
    """

    def snap(x):
        r = round(x)
        return r if abs(x - r) <= 1e-9 * max(1.0, abs(x)) else None

    lo = min_share * n
    hi = max_share * n
    lo_int = snap(lo)
    hi_int = snap(hi)
    lo_count = max(1, lo_int if lo_int is not None else math.ceil(lo))
    hi_count = hi_int if hi_int is not None else math.floor(hi)
    return int(lo_count), int(hi_count)


def make_groups(hist: Histogram, align: int) -> Groups:
    values = hist.values
    if align == 1:
        edges = values
        starts = np.arange(values.size)
    else:
        edges_all = -(-values // align) * align
        starts = np.flatnonzero(np.r_[True, edges_all[1:] != edges_all[:-1]])
        edges = edges_all[starts]
    tokens = hist.values * hist.counts
    if align == 1:  # a group a length: no sums to take (and no copies of 10**7 counts)
        group_counts, group_tokens = hist.counts, tokens
    else:
        group_counts = np.add.reduceat(hist.counts, starts)
        group_tokens = np.add.reduceat(tokens, starts)
    del tokens
    if float(edges[-1]) * float(hist.n) >= TOKEN_LIMIT:
        raise BucketoptError(
            f"n x last edge = {hist.n:,} x {int(edges[-1]):,} exceeds 2**60 tokens: padding "
            "could not be computed exactly in int64."
        )
    return Groups(
        hist=hist,
        edges=np.r_[0, edges].astype(np.int64, copy=False),  # (no copy more than needed:
        prefix_count=_prefix(group_counts),  # 10**7 distinct lengths are 80 MB an array)
        prefix_tokens=_prefix(group_tokens),
        first_value=starts.astype(np.int64, copy=False),
    )


def _prefix(values: np.ndarray) -> np.ndarray:
    """[0, cumulative sums of ``values``] as int64, in one new array."""
    out = np.empty(values.size + 1, dtype=np.int64)
    out[0] = 0
    np.cumsum(values, out=out[1:])
    return out


def share_windows(groups: Groups, min_share: float, max_share: float):
    """For each group end j, the allowed bucket starts i form [win_lo[j], win_hi[j]]."""
    n = int(groups.prefix_count[-1])
    lo_count, hi_count = share_count_bounds(n, min_share, max_share)
    pc = groups.prefix_count
    # count of bucket (i, j] = pc[j] - pc[i]; need lo_count <= pc[j] - pc[i] <= hi_count.
    win_lo = np.searchsorted(pc, pc - hi_count, side="left").astype(np.int64, copy=False)
    win_hi = np.searchsorted(pc, pc - lo_count, side="right").astype(np.int64, copy=False)
    win_hi -= 1
    return win_lo, win_hi


def backtrack(opt: np.ndarray, k: int, g: int) -> list[int]:
    """Group indices j that close each bucket of the best cover by at most k buckets."""
    ends = []
    j = g
    layer = k - 1
    while j > 0:
        ends.append(j)
        i = int(opt[layer, j])
        if i < 0:
            raise AssertionError("backtracking reached an unreachable state")
        j = i
        layer -= 1
    return ends[::-1]


def restrict_groups(groups: Groups, keep) -> Groups:
    """The groups whose edge is kept (``keep[j-1]`` for group j; the last is always kept): the
    lengths of a dropped group join the next kept one, padded to its edge."""
    keep = np.asarray(keep, dtype=bool).copy()
    keep[-1] = True
    idx = np.r_[0, np.flatnonzero(keep) + 1]
    # kept group p spans the original groups idx[p-1] + 1 .. idx[p] (1-based)
    return Groups(hist=groups.hist, edges=groups.edges[idx], prefix_count=groups.prefix_count[idx],
                  prefix_tokens=groups.prefix_tokens[idx], first_value=groups.first_value[idx[:-1]])
