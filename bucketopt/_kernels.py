"""Every numba kernel of bucketopt: arrays and numbers in, arrays out.

Kernels never see None, defaults or user errors: the public wrappers validate first. Costs are
exact int64. ``INF`` marks unreachable states; it is a constant per state, so adding it keeps the
Monge property of the edge cost exact (see docs/method.md).
"""

from __future__ import annotations

import numpy as np
from numba import njit

INF = np.int64(2**61)


@njit(cache=True)
def _edge_cost(edges, prefix_count, prefix_tokens, i, j):
    # Bucket made of groups i+1..j (1-based), padded to the edge of group j.
    return edges[j] * (prefix_count[j] - prefix_count[i]) - (prefix_tokens[j] - prefix_tokens[i])


@njit(cache=True)
def edge_layers(edges, prefix_count, prefix_tokens, win_lo, win_hi, kmax):
    """Exact DP for edge padding, one divide-and-conquer pass per bucket count.

    ``edges[j]`` (j = 1..g) is the candidate edge closing group j; ``prefix_count`` and
    ``prefix_tokens`` are prefix sums over groups (index 0 is the empty prefix). A bucket
    (i, j] is allowed when ``win_lo[j] <= i <= win_hi[j]`` (share constraints; both windows are
    nondecreasing in j). Returns ``opt`` with ``opt[k-1, j]`` = start of the last bucket in the
    best cover of groups 1..j by at most k buckets (smallest such start; -1 if none), and
    ``best[k-1]`` = that optimum for j = g (>= INF when infeasible).

    The cost is Monge and the windows are monotone, so the smallest argmin is nondecreasing in j
    and each layer costs O(g log g) instead of O(g^2).
    """
    g = edges.size - 1
    opt = np.full((kmax, g + 1), -1, dtype=np.int32)
    best = np.empty(kmax, dtype=np.int64)
    prev = np.full(g + 1, INF, dtype=np.int64)
    prev[0] = 0
    cur = np.empty(g + 1, dtype=np.int64)
    stack = np.empty((4 * 64 + 8, 4), dtype=np.int64)
    for k in range(kmax):
        cur[:] = INF
        cur[0] = 0
        top = 0
        stack[0, 0] = 1
        stack[0, 1] = g
        stack[0, 2] = 0
        stack[0, 3] = g - 1
        top = 1
        while top > 0:
            top -= 1
            jl = stack[top, 0]
            jh = stack[top, 1]
            ol = stack[top, 2]
            oh = stack[top, 3]
            if jl > jh:
                continue
            mid = (jl + jh) // 2
            lo = max(ol, win_lo[mid])
            hi = min(oh, win_hi[mid], mid - 1)
            best_v = 3 * INF
            best_i = -1
            for i in range(lo, hi + 1):
                v = prev[i] + _edge_cost(edges, prefix_count, prefix_tokens, i, mid)
                if v < best_v:
                    best_v = v
                    best_i = i
            if best_i >= 0:
                cur[mid] = min(best_v, INF)
                opt[k, mid] = best_i
                left_hi = best_i
                right_lo = best_i
            else:
                left_hi = min(oh, win_hi[mid])
                right_lo = max(ol, win_lo[mid])
            stack[top, 0] = jl
            stack[top, 1] = mid - 1
            stack[top, 2] = ol
            stack[top, 3] = left_hi
            stack[top + 1, 0] = mid + 1
            stack[top + 1, 1] = jh
            stack[top + 1, 2] = right_lo
            stack[top + 1, 3] = oh
            top += 2
        best[k] = cur[g]
        prev, cur = cur, prev
    return opt, best


@njit(cache=True)
def edge_layers_quadratic(edges, prefix_count, prefix_tokens, win_lo, win_hi, kmax):
    """The textbook O(k g^2) DP with the same contract as :func:`edge_layers`.

    Shipped only as the yardstick for ``benchmarks/solver.py``; the solver never calls it.
    """
    g = edges.size - 1
    opt = np.full((kmax, g + 1), -1, dtype=np.int32)
    best = np.empty(kmax, dtype=np.int64)
    prev = np.full(g + 1, INF, dtype=np.int64)
    prev[0] = 0
    cur = np.empty(g + 1, dtype=np.int64)
    for k in range(kmax):
        cur[:] = INF
        cur[0] = 0
        for j in range(1, g + 1):
            best_v = 3 * INF
            best_i = -1
            for i in range(win_lo[j], min(win_hi[j], j - 1) + 1):
                v = prev[i] + _edge_cost(edges, prefix_count, prefix_tokens, i, j)
                if v < best_v:
                    best_v = v
                    best_i = i
            if best_i >= 0:
                cur[j] = min(best_v, INF)
                opt[k, j] = best_i
        best[k] = cur[g]
        prev, cur = cur, prev
    return opt, best
