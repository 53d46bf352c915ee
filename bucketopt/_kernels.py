"""Every numba kernel of bucketopt: arrays and numbers in, arrays out.

Kernels never see None, defaults or user errors: the public wrappers validate first. Costs are
exact int64. ``INF`` marks unreachable states; it is a constant per state, so adding it keeps the
Monge property of the edge cost exact (see docs/method.md).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._time_kernels import walk_moments
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


# --- dynamic padding (pad="batch"): exact expected padding and its DP -------------------------
# log(a!) is tabulated as a double-double (hi + lo, accumulated with TwoSum), so that
# log C(a, b) - log C(N, b) = (L[a] - L[a-b]) - (L[N] - L[N-b]) keeps ~1e-13 relative accuracy:
# the table's rounding cancels in every difference.


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


@njit(cache=True)
def _log_falling(hi, lo, a, b):
    # log(a! / (a-b)!) for 0 <= b <= a, from the double-double table.
    return (hi[a] - hi[a - b]) + (lo[a] - lo[a - b])


@njit(cache=True)
def batch_bucket_cost(values, prefix_count, prefix_tokens, lf_hi, lf_lo, lo, hi, size, cap):
    """Expected dynamic padding of the bucket made of distinct lengths ``values[lo:hi]``.

    The bucket's N samples are shuffled and cut into q = N // size batches of ``size`` and one of
    r = N % size; every batch is padded to its longest member. With c(v) the samples <= v,
    E[max of s draws] = top - sum_{v < top} gap(v) C(c(v), s) / C(N, s) (gap(v) = next length - v).
    The sum runs from the top down and stops once the rest is provably below 1e-15 of N x top.
    ``prefix_count`` / ``prefix_tokens`` are prefix sums over ``values`` (index 0 empty).

    Returns the expectation, or a lower bound of it that is > ``cap`` (then the walk stopped early:
    the bucket cannot beat ``cap``).
    """
    n = prefix_count[hi] - prefix_count[lo]
    tokens = float(prefix_tokens[hi] - prefix_tokens[lo])
    top = float(values[hi - 1])
    if size >= n:
        return n * top - tokens
    if size == 1:
        return 0.0  # every batch is one sample
    q = n // size
    r = n - q * size
    wb = float(q * size)
    wr = float(r) if r >= 2 else 0.0
    const = wb * top + wr * top - tokens
    if r == 1:
        const += tokens / n
    norm_b = _log_falling(lf_hi, lf_lo, n, size)
    norm_r = _log_falling(lf_hi, lf_lo, n, r) if r >= 2 else 0.0
    bottom = float(values[lo])
    tol = 1e-15 * n * top
    sb = 0.0
    sr = 0.0
    pb = 1.0
    pr = 1.0 if r >= 2 else 0.0
    base = prefix_count[lo]
    steps = 0
    for t in range(hi - 2, lo - 1, -1):
        v = float(values[t])
        gap = float(values[t + 1]) - v
        a = prefix_count[t + 1] - base
        if pb > 0.0:
            pb = np.exp(_log_falling(lf_hi, lf_lo, a, size) - norm_b) if a >= size else 0.0
            sb += gap * pb
        if pr > 0.0:
            pr = np.exp(_log_falling(lf_hi, lf_lo, a, r) - norm_r) if a >= r else 0.0
            sr += gap * pr
        rest = (v - bottom) * (wb * pb + wr * pr)
        if rest <= tol:
            break
        steps += 1
        if steps >= 16:
            steps = 0
            if const - wb * sb - wr * sr - rest > cap:
                return const - wb * sb - wr * sr - rest
    return const - wb * sb - wr * sr


@njit(cache=True)
def fill_ok(values, prefix_count, lf_hi, lf_lo, lo, hi, size, need):
    """Does the bucket ``values[lo:hi]`` fill at least ``need`` padded tokens per full batch?

    Its largest batch has s = min(size, N) rows padded to their longest, s x E[max of s]."""
    if need <= 0.0:
        return True
    n = prefix_count[hi] - prefix_count[lo]
    s = min(size, n)
    if s * float(values[hi - 1]) < need:
        return False
    m1, _ = walk_moments(values, prefix_count, lo, hi, s, lf_hi, lf_lo)
    return s * m1 >= need * (1 - 1e-12)


@njit(cache=True)
def batch_layers_kernel(values, prefix_count, prefix_tokens, lf_hi, lf_lo, cand_group, cand_end,
                        cand_size, win_lo, win_hi, g, kmax, min_fill_tokens):
    """Exact DP for expected dynamic padding over candidate edges, same contract as edge_layers.

    Candidate c (c = 0..C-1, increasing) closes group ``cand_group[c]`` (cand_group[0] = 0 is the
    empty prefix); the lengths up to it are ``values[:cand_end[c]]`` and its batch size is
    ``cand_size[c]``. A bucket from candidate i to candidate j (i < j) is allowed when
    ``win_lo[gj] <= gi <= win_hi[gj]`` in group indices. Every allowed pair is considered
    (the cost is not Monge); a pair is skipped only when a proven lower bound of its cost cannot
    improve any layer. Returns opt (kmax, g + 1) int32 indexed by group (-1 where no candidate
    closes there) and best (kmax,) float64 (inf when infeasible).
    """
    C = cand_group.size
    inf = np.inf
    F = np.full((kmax + 1, C), inf)
    F[:, 0] = 0.0
    arg = np.full((kmax + 1, C), -1, dtype=np.int64)
    for j in range(1, C):
        gj = cand_group[j]
        for i in range(j - 1, -1, -1):
            gi = cand_group[i]
            if gi < win_lo[gj] or gi > win_hi[gj]:
                continue
            cap = -inf
            for k in range(1, kmax + 1):
                if F[k - 1, i] < inf:
                    room = F[k, j] - F[k - 1, i]
                    if room > cap:
                        cap = room
            if cap == -inf:
                continue
            if not fill_ok(values, prefix_count, lf_hi, lf_lo, cand_end[i], cand_end[j],
                           cand_size[j], min_fill_tokens):
                continue
            cost = batch_bucket_cost(values, prefix_count, prefix_tokens, lf_hi, lf_lo,
                                     cand_end[i], cand_end[j], cand_size[j], cap)
            for k in range(1, kmax + 1):
                v = F[k - 1, i] + cost
                if v < F[k, j] or (v == F[k, j] and v < inf):
                    F[k, j] = v
                    arg[k, j] = i
    opt = np.full((kmax, g + 1), -1, dtype=np.int32)
    best = np.empty(kmax)
    for k in range(1, kmax + 1):
        for j in range(1, C):
            if arg[k, j] >= 0:
                opt[k - 1, cand_group[j]] = cand_group[arg[k, j]]
        best[k - 1] = F[k, C - 1]
    return opt, best


@njit(cache=True)
def batch_chain_kernel(values, prefix_count, prefix_tokens, lf_hi, lf_lo, group_end, group_size,
                       win_lo, win_hi, windows, offsets, min_fill_tokens):
    """Best chain of buckets whose t-th boundary lies in window t (pad="batch").

    Window t holds the group indices ``windows[offsets[t]:offsets[t + 1]]`` (increasing); window 0
    is the empty prefix {0} and the last window the last group {g}. A bucket closes group j and
    starts after group i; its lengths are ``values[group_end[i]:group_end[j]]`` and its batch size
    ``group_size[j]``. Returns (chain of group indices, one per window, and its cost), with
    chain[0] = -1 when no chain satisfies the share windows.
    """
    nw = offsets.size - 1
    inf = np.inf
    F = np.full(windows.size, inf)
    arg = np.full(windows.size, -1, dtype=np.int64)
    F[0] = 0.0
    for t in range(1, nw):
        for jj in range(offsets[t], offsets[t + 1]):
            j = windows[jj]
            for ii in range(offsets[t], offsets[t - 1], -1):
                i = windows[ii - 1]
                if i >= j or F[ii - 1] == inf or i < win_lo[j] or i > win_hi[j]:
                    continue
                if not fill_ok(values, prefix_count, lf_hi, lf_lo, group_end[i], group_end[j],
                               group_size[j], min_fill_tokens):
                    continue
                cap = F[jj] - F[ii - 1]
                cost = batch_bucket_cost(values, prefix_count, prefix_tokens, lf_hi, lf_lo,
                                         group_end[i], group_end[j], group_size[j], cap)
                v = F[ii - 1] + cost
                if v < F[jj] or (v == F[jj] and v < inf):
                    F[jj] = v
                    arg[jj] = ii - 1
    chain = np.full(nw, -1, dtype=np.int64)
    last = offsets[nw - 1]
    if F[last] == inf:
        return chain, inf
    pos = last
    for t in range(nw - 1, -1, -1):
        chain[t] = windows[pos]
        pos = arg[pos]
    return chain, F[last]


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
