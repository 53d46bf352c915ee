"""The numba kernels of the edge-padding objective (:mod:`bucketopt.objectives.edge`): arrays and
numbers in, arrays out.

Kernels never see None, defaults or user errors: the public wrappers validate first. Costs are
exact int64. ``INF`` marks unreachable states; it is a constant per state, so adding it keeps the
Monge property of the edge cost exact (see docs/method.md).
"""

from __future__ import annotations

import numpy as np

from ..groups import INF
from ..jit import njit


@njit(cache=True)
def _edge_cost(edges, prefix_count, prefix_tokens, i, j):
    # Bucket made of groups i+1..j (1-based), padded to the edge of group j.
    return edges[j] * (prefix_count[j] - prefix_count[i]) - (prefix_tokens[j] - prefix_tokens[i])


@njit(cache=True)
def edge_layers(edges, prefix_count, prefix_tokens, win_lo, win_hi, kmax):
    """Exact DP for edge padding: O(g) per bucket count without share constraints.

    ``edges[j]`` (j = 1..g) is the candidate edge closing group j; ``prefix_count`` and
    ``prefix_tokens`` are prefix sums over groups (index 0 is the empty prefix). A bucket
    (i, j] is allowed when ``win_lo[j] <= i <= win_hi[j]`` (share constraints; both windows are
    nondecreasing in j). Returns ``opt`` with ``opt[k-1, j]`` = start of the last bucket in the
    best cover of groups 1..j by at most k buckets (smallest such start; -1 if none), and
    ``best[k-1]`` = that optimum for j = g (>= INF when infeasible).

    Without share constraints (every start 0..j-1 allowed) each layer is a monotone convex-hull
    pass (:func:`_edge_layers_hull`, O(g)); with them, or on inputs outside its exactness bounds,
    a divide-and-conquer pass over the monotone argmin (:func:`_edge_layers_dc`, O(g log g)).
    Both return exactly what the textbook DP returns.
    """
    if _hull_applies(edges, prefix_count, prefix_tokens, win_lo, win_hi):
        return _edge_layers_hull(edges, prefix_count, prefix_tokens, kmax)
    return _edge_layers_dc(edges, prefix_count, prefix_tokens, win_lo, win_hi, kmax)


_HULL_LIMIT = float(2**57)


@njit(cache=True)
def _hull_applies(edges, prefix_count, prefix_tokens, win_lo, win_hi):
    # The hull pass needs: no share window (win_lo[j] == 0, win_hi[j] >= j-1), nondecreasing
    # edges and counts, every group's tokens within its edge (so every cost is >= 0), and
    # edges[g] * n and the token total below 2**58, so every value it forms fits in int64.
    g = edges.size - 1
    if g < 1 or prefix_count[0] != 0 or prefix_tokens[0] != 0 or edges[1] < 0:
        return False
    if float(edges[g]) * float(prefix_count[g]) >= _HULL_LIMIT:
        return False
    if float(prefix_tokens[g]) >= _HULL_LIMIT:
        return False
    for j in range(1, g + 1):
        if win_lo[j] != 0 or win_hi[j] < j - 1:
            return False
        dc = prefix_count[j] - prefix_count[j - 1]
        dt = prefix_tokens[j] - prefix_tokens[j - 1]
        if dc < 0 or dt < 0 or dt > edges[j] * dc:
            return False
        if j > 1 and edges[j] < edges[j - 1]:
            return False
    return True


# Layers of one group of the hull pass run side by side: each is a separate dependency chain, so
# the CPU overlaps their branches and divisions (about 1.6x faster than one layer at a time).
_LANES = 8
# The lanes' stacks of kept lines together hold at most this many rows (4 int64 each).
_LANE_ROWS = 2**25


@njit(cache=True)
def _hull_push(h, n, p, s, b, i, top, ftop):
    # Add the line (slope magnitude s, intercept b, start i) to the stack h[base:n] (rows of 4),
    # whose row p is the query pointer's; returns the new end. See _edge_layers_hull.
    while True:
        q = n - 4
        ds = s - h[q]
        db = b - h[q + 1]
        if ds == 0:
            if db >= 0:
                return n  # never strictly below the kept line of equal slope
            if q > p:
                n = q
                continue
            h[q + 1] = b  # replaces the pointer's line: strictly below it everywhere
            h[q + 3] = i
            return n
        # b - s x < hb - hs x  <=>  x > db / ds
        if q > p and db < h[q + 2] * ds:
            n = q  # its first winning x is not before the new line's: drop it
            continue
        # t = the first integer x >= 0 with db < ds x (then clamped to top): the quotient in
        # floating point, corrected by exact integer products (an estimate below 2**40 is off by
        # under 1e-3, so one step fixes it; the products stay below 2**59).
        if db < 0:
            t = 0
        else:
            f = float(db) / float(ds)
            if f >= 1099511627776.0:
                t = db // ds + 1
            else:
                t = np.int64(f) + 1
                if ds * t <= db:
                    t += 1
                elif ds * (t - 1) > db:
                    t -= 1
            if t > top:
                t = top
        h[n] = s
        h[n + 1] = b
        h[n + 2] = t
        h[n + 3] = i
        return n + 4


@njit(cache=True)
def _hull_query(h, n, p, x):
    # Move the pointer to the envelope's line at x (queries come in nondecreasing x).
    while p + 4 < n and h[p + 6] <= x:
        p += 4
    return p


@njit(cache=True)
def _edge_layers_hull(edges, prefix_count, prefix_tokens, kmax):
    """Layers of the edge DP by a monotone convex-hull trick, O(g) each (no share windows).

    prev[i] + cost(i, j) = (prev[i] + pt[i] - pc[i] * x) + (x * pc[j] - pt[j]) with x = edges[j]:
    a lower envelope of lines with slopes -pc[i] (added in order, nonincreasing) queried at
    nondecreasing integer x. Each kept line stores the first integer x where it is strictly below
    the line kept before it (exact: see :func:`_hull_push`; clamped to [0, edges[g] + 1], which
    changes no answer at a query). A line whose stretch of such x is empty is dropped; on equal
    slopes the smaller intercept stays (the earlier on a tie); the query pointer moves only on a
    strict improvement. So the earliest kept line wins every tie, and a dropped line ties the
    envelope only where an earlier kept line does: the smallest best start, exactly as the
    textbook DP. Needs :func:`_hull_applies` (every value below 2**59).

    Layer k at group j needs layer k-1 only up to group j-1, so up to ``_LANES`` layers advance
    together in one sweep over j, each with its own stack (independent work the CPU overlaps).
    """
    g = edges.size - 1
    opt = np.empty((kmax, g + 1), dtype=np.int32)
    best = np.empty(kmax, dtype=np.int64)
    if kmax < 1:
        return opt, best
    prev = np.empty(g + 1, dtype=np.int64)
    cur = np.empty(g + 1, dtype=np.int64)
    # layer 1: one bucket (0, j]; every other start is unreachable
    for j in range(g + 1):
        prev[j] = edges[j] * prefix_count[j] - prefix_tokens[j]
        opt[0, j] = 0
    prev[0] = 0
    opt[0, 0] = -1
    best[0] = prev[g]
    if kmax == 1:
        return opt, best
    lanes = max(1, min(_LANES, kmax - 1, _LANE_ROWS // (g + 1)))
    # the kept lines of lane l, one row each from l * stride: slope magnitude pc[i], intercept
    # prev[i] + pt[i], the first x where the line is strictly below the one kept before it, and
    # the start index i (the 4 * 37 skew keeps the lanes' stack tops off the same cache sets)
    stride = 4 * (g + 1) + 4 * 37
    h = np.empty(lanes * stride, dtype=np.int64)
    top = edges[g] + 1
    ftop = float(top)
    for k0 in range(1, kmax, lanes):
        nl = min(lanes, kmax - k0)
        for lane in range(nl):
            h[lane * stride:lane * stride + 4] = 0  # line 0: the empty prefix
        p0, p1, p2, p3 = 0, stride, 2 * stride, 3 * stride
        p4, p5, p6, p7 = 4 * stride, 5 * stride, 6 * stride, 7 * stride
        n0, n1, n2, n3 = p0 + 4, p1 + 4, p2 + 4, p3 + 4
        n4, n5, n6, n7 = p4 + 4, p5 + 4, p6 + 4, p7 + 4
        # rows of opt a lane past nl would write (it never does: every lane is guarded)
        r0 = opt[k0]
        r1 = opt[min(k0 + 1, kmax - 1)]
        r2 = opt[min(k0 + 2, kmax - 1)]
        r3 = opt[min(k0 + 3, kmax - 1)]
        r4 = opt[min(k0 + 4, kmax - 1)]
        r5 = opt[min(k0 + 5, kmax - 1)]
        r6 = opt[min(k0 + 6, kmax - 1)]
        r7 = opt[min(k0 + 7, kmax - 1)]
        # group 1: only the empty prefix (line 0) exists
        x = edges[1] if g >= 1 else 0
        v = x * prefix_count[1] - prefix_tokens[1] if g >= 1 else 0
        v0 = v1 = v2 = v3 = v4 = v5 = v6 = v7 = v
        for lane in range(nl):
            opt[k0 + lane, 0] = -1
            if g >= 1:
                opt[k0 + lane, 1] = 0
        cur[0] = 0
        if g >= 1:
            cur[1] = v
        for j in range(2, g + 1):
            i = j - 1
            x = edges[j]
            c = x * prefix_count[j] - prefix_tokens[j]
            s = prefix_count[i]
            pti = prefix_tokens[i]
            # lane l reads lane l-1's value at i before lane l-1 moves on: last lane first
            if nl > 7:
                n7 = _hull_push(h, n7, p7, s, v6 + pti, i, top, ftop)
                p7 = _hull_query(h, n7, p7, x)
                v7 = h[p7 + 1] - h[p7] * x + c
                r7[j] = h[p7 + 3]
            if nl > 6:
                n6 = _hull_push(h, n6, p6, s, v5 + pti, i, top, ftop)
                p6 = _hull_query(h, n6, p6, x)
                v6 = h[p6 + 1] - h[p6] * x + c
                r6[j] = h[p6 + 3]
            if nl > 5:
                n5 = _hull_push(h, n5, p5, s, v4 + pti, i, top, ftop)
                p5 = _hull_query(h, n5, p5, x)
                v5 = h[p5 + 1] - h[p5] * x + c
                r5[j] = h[p5 + 3]
            if nl > 4:
                n4 = _hull_push(h, n4, p4, s, v3 + pti, i, top, ftop)
                p4 = _hull_query(h, n4, p4, x)
                v4 = h[p4 + 1] - h[p4] * x + c
                r4[j] = h[p4 + 3]
            if nl > 3:
                n3 = _hull_push(h, n3, p3, s, v2 + pti, i, top, ftop)
                p3 = _hull_query(h, n3, p3, x)
                v3 = h[p3 + 1] - h[p3] * x + c
                r3[j] = h[p3 + 3]
            if nl > 2:
                n2 = _hull_push(h, n2, p2, s, v1 + pti, i, top, ftop)
                p2 = _hull_query(h, n2, p2, x)
                v2 = h[p2 + 1] - h[p2] * x + c
                r2[j] = h[p2 + 3]
            if nl > 1:
                n1 = _hull_push(h, n1, p1, s, v0 + pti, i, top, ftop)
                p1 = _hull_query(h, n1, p1, x)
                v1 = h[p1 + 1] - h[p1] * x + c
                r1[j] = h[p1 + 3]
            n0 = _hull_push(h, n0, p0, s, prev[i] + pti, i, top, ftop)
            p0 = _hull_query(h, n0, p0, x)
            v0 = h[p0 + 1] - h[p0] * x + c
            r0[j] = h[p0 + 3]
            # the group's last layer feeds the next group
            if nl == 1:
                cur[j] = v0
            elif nl == 2:
                cur[j] = v1
            elif nl == 3:
                cur[j] = v2
            elif nl == 4:
                cur[j] = v3
            elif nl == 5:
                cur[j] = v4
            elif nl == 6:
                cur[j] = v5
            elif nl == 7:
                cur[j] = v6
            else:
                cur[j] = v7
        vals = (v0, v1, v2, v3, v4, v5, v6, v7)
        for lane in range(nl):
            best[k0 + lane] = vals[lane]
        prev, cur = cur, prev
    return opt, best


@njit(cache=True)
def _edge_layers_dc(edges, prefix_count, prefix_tokens, win_lo, win_hi, kmax):
    """Edge DP layers by divide and conquer, O(g log g) each; any share windows.

    The cost is Monge and the windows are monotone, so the smallest argmin is nondecreasing in j.
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


