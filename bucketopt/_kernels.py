"""Every numba kernel of bucketopt: arrays and numbers in, arrays out.

Kernels never see None, defaults or user errors: the public wrappers validate first. Costs are
exact int64. ``INF`` marks unreachable states; it is a constant per state, so adding it keeps the
Monge property of the edge cost exact (see docs/method.md).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .groups import INF


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


@njit(cache=True)
def _edge_layers_hull(edges, prefix_count, prefix_tokens, kmax):
    """Layers of the edge DP by a monotone convex-hull trick, O(g) each (no share windows).

    prev[i] + cost(i, j) = (prev[i] + pt[i] - pc[i] * x) + (x * pc[j] - pt[j]) with x = edges[j]:
    a lower envelope of lines with slopes -pc[i] (added in order, nonincreasing) queried at
    nondecreasing integer x. Each kept line stores the first integer x where it is strictly below
    the line kept before it (floor division, exact in int64; clamped to [0, edges[g] + 1], which
    changes no answer at a query). A line whose stretch of such x is empty is dropped; on equal
    slopes the smaller intercept stays (the earlier on a tie); the query pointer moves only on a
    strict improvement. So the earliest kept line wins every tie, and a dropped line ties the
    envelope only where an earlier kept line does: the smallest best start, exactly as the
    textbook DP. Needs :func:`_hull_applies` (every value below 2**59).
    """
    g = edges.size - 1
    opt = np.empty((kmax, g + 1), dtype=np.int32)
    best = np.empty(kmax, dtype=np.int64)
    prev = np.empty(g + 1, dtype=np.int64)
    cur = np.empty(g + 1, dtype=np.int64)
    if kmax < 1:
        return opt, best
    # layer 1: one bucket (0, j]; every other start is unreachable
    for j in range(g + 1):
        prev[j] = edges[j] * prefix_count[j] - prefix_tokens[j]
        opt[0, j] = 0
    prev[0] = 0
    opt[0, 0] = -1
    best[0] = prev[g]
    # the kept lines, one row each: slope magnitude pc[i], intercept prev[i] + pt[i], first x
    # where the line is strictly below the one kept before it, and the start index i
    h = np.empty((g + 1, 4), dtype=np.int64)
    top = edges[g] + 1
    for k in range(1, kmax):
        cur[0] = 0
        opt[k, 0] = -1
        h[0, 0] = 0
        h[0, 1] = 0
        h[0, 2] = 0
        h[0, 3] = 0
        n = 1
        p = 0
        for j in range(1, g + 1):
            i = j - 1
            if i > 0:
                s = prefix_count[i]
                b = prev[i] + prefix_tokens[i]
                while True:
                    ds = s - h[n - 1, 0]
                    db = b - h[n - 1, 1]
                    if ds == 0:
                        if db >= 0:
                            break  # never strictly below the kept line of equal slope
                        if n - 1 > p:
                            n -= 1
                            continue
                        h[p, 0] = s  # replaces the pointer's line: strictly below it everywhere
                        h[p, 1] = b
                        h[p, 3] = i
                        break
                    # b - s x < hb - hs x  <=>  x > db / ds
                    if n - 1 > p and db < h[n - 1, 2] * ds:
                        n -= 1  # its first winning x is not before the new line's: drop it
                        continue
                    t = db // ds + 1
                    if t < 0:
                        t = 0
                    elif t > top:
                        t = top
                    h[n, 0] = s
                    h[n, 1] = b
                    h[n, 2] = t
                    h[n, 3] = i
                    n += 1
                    break
            x = edges[j]
            while p + 1 < n and h[p + 1, 2] <= x:
                p += 1
            cur[j] = h[p, 1] - h[p, 0] * x + x * prefix_count[j] - prefix_tokens[j]
            opt[k, j] = h[p, 3]
        best[k] = cur[g]
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


# --- log(a!) for the time objective ----------------------------------------------------------
# A double-double table (hi + lo, accumulated with TwoSum), so that
# log C(a, b) - log C(N, b) = (L[a] - L[a-b]) - (L[N] - L[N-b]) keeps ~1e-13 relative accuracy.
# The pad="batch" kernels live in bucketopt/_batch_kernels.py.


@njit(cache=True)
def log_factorial_table(n):
    """hi, lo with hi[a] + lo[a] = log(a!) for a = 0..n, to about 1e-16 relative."""
    hi = np.zeros(n + 1)
    lo = np.zeros(n + 1)
    s = 0.0
    c = 0.0
    for a in range(2, n + 1):
        x = np.log(a)
        t = s + x
        bp = t - s
        err = (s - (t - bp)) + (x - bp)
        c += err
        s = t + c
        c = c - (s - t)
        hi[a] = s
        lo[a] = c
    return hi, lo


# --- sequence packing for simulate("packed") ------------------------------------------------


@njit(cache=True)
def best_fit_decreasing(lengths_desc, capacity):
    """Best-fit-decreasing bin packing of lengths (sorted decreasing) into rows of ``capacity``.

    Each length goes to the open row with the least room that still fits it (ties: the row that
    reached that room last), else to a new row. A segment tree over the room values finds that
    row in O(log capacity). Returns the row of every length, in input order.
    """
    n = lengths_desc.size
    size = 1
    while size < capacity + 1:
        size *= 2
    tree = np.zeros(2 * size, dtype=np.int64)  # rows with room r live in leaf size + r
    head = np.full(capacity + 1, -1, dtype=np.int64)  # rows per room value, a linked stack
    nxt = np.full(n, -1, dtype=np.int64)
    row_of = np.empty(n, dtype=np.int64)
    rows = 0
    for t in range(n):
        x = lengths_desc[t]
        # smallest room r >= x with a row in it
        r = -1
        node = x + size
        if tree[node] > 0:
            r = x
        else:
            while node > 1:
                if node % 2 == 0 and tree[node + 1] > 0:
                    node = node + 1
                    break
                node //= 2
            if node > 1:
                while node < size:
                    node = 2 * node if tree[2 * node] > 0 else 2 * node + 1
                r = node - size
        if r < 0:
            b = rows
            rows += 1
            left = capacity - x
        else:
            # take the row that reached room r last (the head of its stack)
            b = head[r]
            head[r] = nxt[b]
            node = r + size
            while node >= 1:
                tree[node] -= 1
                node //= 2
            left = r - x
        row_of[t] = b
        nxt[b] = head[left]
        head[left] = b
        node = left + size
        while node >= 1:
            tree[node] += 1
            node //= 2
    return row_of
