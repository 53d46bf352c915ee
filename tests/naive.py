"""Slow, obviously-correct reference implementations (oracles) for the tests.

Nothing here is fast or clever: loops over samples, brute force over every boundary subset, the
textbook O(k m^2) dynamic program.
"""

from __future__ import annotations

import itertools
import math


def edge_padding(lengths, boundaries):
    """Padded tokens when every sample is padded to the edge of its bucket (per-sample loop)."""
    total = 0
    for x in lengths:
        for b in boundaries:
            if x <= b:
                total += b - x
                break
        else:
            raise ValueError(f"length {x} above the last boundary")
    return total


def bucket_counts(lengths, boundaries):
    counts = [0] * len(boundaries)
    for x in lengths:
        for i, b in enumerate(boundaries):
            if x <= b:
                counts[i] += 1
                break
    return counts


def shares_ok(lengths, boundaries, min_share, max_share):
    """Every non-empty bucket holds between min_share and max_share of the samples."""
    n = len(lengths)
    tol = 1e-9 * n
    for c in bucket_counts(lengths, boundaries):
        if c and not (min_share * n - tol <= c <= max_share * n + tol):
            return False
    return True


def candidate_last_edge(lengths, align):
    return math.ceil(max(lengths) / align) * align


def brute_force_edge(lengths, k, *, min_share=0.0, max_share=1.0, align=1):
    """Minimum edge padding over every set of at most k edges (all multiples of align).

    Returns (padding, boundaries) or None when no set satisfies the constraints.
    """
    last = candidate_last_edge(lengths, align)
    inner = list(range(align, last, align))
    best = None
    for size in range(0, k):
        for combo in itertools.combinations(inner, size):
            edges = (*combo, last)
            if not shares_ok(lengths, edges, min_share, max_share):
                continue
            cost = edge_padding(lengths, edges)
            if best is None or cost < best[0]:
                best = (cost, edges)
    return best


def textbook_dp_edge(lengths, k, *, min_share=0.0, max_share=1.0, align=1):
    """The textbook O(k m^2) DP over candidate edges (each distinct length rounded up to align).

    Returns the minimum padding with at most k non-empty buckets, or None if infeasible.
    """
    n = len(lengths)
    edges = sorted({math.ceil(x / align) * align for x in lengths})
    m = len(edges)
    # cnt[j], tok[j]: samples and tokens with edge <= edges[j-1]
    cnt = [0] * (m + 1)
    tok = [0] * (m + 1)
    for j, e in enumerate(edges, start=1):
        members = [x for x in lengths if math.ceil(x / align) * align <= e]
        cnt[j] = len(members)
        tok[j] = sum(members)
    tol = 1e-9 * n
    inf = float("inf")
    prev = [0] + [inf] * m
    best = inf
    for _ in range(k):
        cur = [0] + [inf] * m
        for j in range(1, m + 1):
            for i in range(j):
                c = cnt[j] - cnt[i]
                if not (min_share * n - tol <= c <= max_share * n + tol):
                    continue
                cost = prev[i] + edges[j - 1] * c - (tok[j] - tok[i])
                cur[j] = min(cur[j], cost)
        prev = cur
        best = min(best, cur[m])
    return None if best == inf else best
