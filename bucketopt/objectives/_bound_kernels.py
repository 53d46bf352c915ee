"""numba kernels of the certified DP (:mod:`bucketopt.objectives.certified`).

A relaxation bounds every bucket's cost from below by l(i, j) = A[j] - U[j] P[i] + R[i]
(P: prefix sample counts), so that one layer of the relaxed DP,
L_k(j) = A[j] + min_i (L_{k-1}(i) + R[i] - U[j] P[i]), is a lower-envelope query of lines. The
allowed starts of an end form a window (share constraints), so the lines sit in a segment tree,
every node holding the lower envelope of its lines (:func:`relaxed_layers`): a query costs
O(log^2 g) whatever the order of the U[j]. The backward pass (suffix bounds) is the same with the
roles of i and j exchanged; :func:`prefix_moments` gives the moments the bounds of a cell use.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._time_kernels import _binom_ratio, walk_moments


@njit(cache=True, inline="always")
def top_at(T, j, n):
    """The top bound of a bucket of ``n`` samples that ends at j: the step holding its longest
    sample runs it and, in its largest batch, at least max(1, min(n, fewest) / G) rows (a step
    holds at least fewest rows or the whole bucket, a batch of G at least 1 / G of them), all
    padded to that length. ``T`` rows: alpha + q, q (one row's seconds at the longest length),
    fewest / G, 1 / G (Time.top_bound); -inf, 0, 0, 0 where an end has no such bound."""
    return top_of(T[0, j], T[1, j], T[2, j], T[3, j], n)


@njit(cache=True, inline="always")
def top_of(t0, t1, t2, t3, n):
    """:func:`top_at` from the end's four rows of T (a scan over starts reads them once)."""
    return t0 + max(0.0, min(n * t3, t2) - 1.0) * t1


@njit(cache=True)
def _sorted_levels(slopes, size, levels):
    # order[level, :]: within every block of 2**level positions, the line indices sorted by slope,
    # largest first (a merge-sort tree; padding positions hold -1 and sort last)
    order = np.full((levels, size), -1, dtype=np.int64)
    n = slopes.size
    for p in range(n):
        order[0, p] = p
    for lev in range(1, levels):
        half = 1 << (lev - 1)
        for start in range(0, size, 2 * half):
            a = start
            b = start + half
            a_end = start + half
            b_end = start + 2 * half
            out = start
            while a < a_end or b < b_end:
                la = order[lev - 1, a] if a < a_end else -1
                lb = order[lev - 1, b] if b < b_end else -1
                if lb < 0 or (la >= 0 and slopes[la] >= slopes[lb]):
                    if la < 0:
                        a = a_end
                        b = b_end
                        break
                    order[lev, out] = la
                    a += 1
                else:
                    order[lev, out] = lb
                    b += 1
                out += 1
            while a < a_end:
                if order[lev - 1, a] >= 0:
                    order[lev, out] = order[lev - 1, a]
                    out += 1
                a += 1
            while b < b_end:
                if order[lev - 1, b] >= 0:
                    order[lev, out] = order[lev - 1, b]
                    out += 1
                b += 1
    return order


@njit(cache=True, inline="always")
def _hull_push(hl, start, cnt, line, slopes, icpt):
    # append ``line`` (slope below every line of the hull hl[start:start+cnt]) to a lower
    # envelope; returns the new count. The last line never wins when the new one overtakes the
    # one before it no later than it does.
    b3 = slopes[line]
    a3 = icpt[line]
    while cnt >= 2:
        l1 = hl[start + cnt - 2]
        l2 = hl[start + cnt - 1]
        b1 = slopes[l1]
        b2 = slopes[l2]
        a1 = icpt[l1]
        a2 = icpt[l2]
        if (a3 - a1) * (b1 - b2) <= (a2 - a1) * (b1 - b3):
            cnt -= 1
        else:
            break
    hl[start + cnt] = line
    return cnt + 1


@njit(cache=True, inline="always")
def _hull_min(hl, start, cnt, slopes, icpt, x):
    lo = 0
    hi = cnt - 1
    while lo < hi:
        mid = (lo + hi) // 2
        l1 = hl[start + mid]
        l2 = hl[start + mid + 1]
        if icpt[l2] + slopes[l2] * x < icpt[l1] + slopes[l1] * x:
            lo = mid + 1
        else:
            hi = mid
    line = hl[start + lo]
    return icpt[line] + slopes[line] * x, line


@njit(cache=True)
def _build_hulls(order, slopes, icpt, hull, hull_n):
    # the lower envelope (min) of every node's lines, slopes falling: hull[level, start..] holds
    # the line indices, hull_n[level, node] how many
    levels, size = order.shape
    for lev in range(levels):
        width = 1 << lev
        for node in range(size // width):
            start = node * width
            cnt = 0
            for p in range(start, start + width):
                line = order[lev, p]
                if line < 0:
                    break
                if not icpt[line] < np.inf:
                    continue
                if cnt > 0 and slopes[hull[lev, start + cnt - 1]] == slopes[line]:
                    if icpt[hull[lev, start + cnt - 1]] <= icpt[line]:
                        continue
                    cnt -= 1
                cnt = _hull_push(hull[lev], start, cnt, line, slopes, icpt)
            hull_n[lev, node] = cnt


@njit(cache=True, inline="always")
def _node_min(hull, hull_n, lev, node, slopes, icpt, x):
    cnt = hull_n[lev, node]
    if cnt == 0:
        return np.inf, -1
    return _hull_min(hull[lev], node << lev, cnt, slopes, icpt, x)


@njit(cache=True)
def _range_min(hull, hull_n, slopes, icpt, lo, hi, x):
    # min over the lines at positions lo..hi (inclusive) of icpt + slope * x, and its line
    best = np.inf
    arg = -1
    left = lo
    right = hi + 1
    lev = 0
    while left < right:
        if left & 1:
            v, a = _node_min(hull, hull_n, lev, left, slopes, icpt, x)
            if v < best or (v == best and a < arg):
                best = v
                arg = a
            left += 1
        if right & 1:
            right -= 1
            v, a = _node_min(hull, hull_n, lev, right, slopes, icpt, x)
            if v < best or (v == best and a >= 0 and a < arg):
                best = v
                arg = a
        left >>= 1
        right >>= 1
        lev += 1
    return best, arg


@njit(cache=True)
def _levels(g):
    size = 1
    levels = 1
    while size < g:
        size *= 2
        levels += 1
    return size, levels


@njit(cache=True)
def _lichao_insert(tree, node_lo, node_hi, xs, slopes, icpt, line):
    # Li Chao tree over the points xs[0..n-1] (increasing): every node keeps the line that is
    # lowest at its middle point; a line goes down the one side where it can still win
    node = 1
    lo = node_lo
    hi = node_hi
    while True:
        cur = tree[node]
        if cur < 0:
            tree[node] = line
            return
        mid = (lo + hi) // 2
        xm = xs[mid]
        if icpt[line] + slopes[line] * xm < icpt[cur] + slopes[cur] * xm:
            tree[node] = line
            line, cur = cur, line
        if lo == hi:
            return
        left_better = icpt[line] + slopes[line] * xs[lo] < icpt[cur] + slopes[cur] * xs[lo]
        if left_better:
            node = 2 * node
            hi = mid
        else:
            right_better = icpt[line] + slopes[line] * xs[hi] < icpt[cur] + slopes[cur] * xs[hi]
            if not right_better:
                return
            node = 2 * node + 1
            lo = mid + 1


@njit(cache=True)
def _lichao_min(tree, node_lo, node_hi, xs, slopes, icpt, q):
    node = 1
    lo = node_lo
    hi = node_hi
    best = np.inf
    x = xs[q]
    while True:
        cur = tree[node]
        if cur < 0:
            return best
        v = icpt[cur] + slopes[cur] * x
        if v < best:
            best = v
        if lo == hi:
            return best
        mid = (lo + hi) // 2
        if q <= mid:
            node = 2 * node
            hi = mid
        else:
            node = 2 * node + 1
            lo = mid + 1


@njit(cache=True, nogil=True)
def _free_layers(A, A2, split, U, R, T, Af, Uf, P, cells, kmax, forward, backward, tail):
    """:func:`relaxed_layers` without share windows, in O(g (log g + cells)) a layer plus the
    small buckets: forward, every cell keeps the lower envelope of its starts that make a large
    bucket for the current end (a prefix of the cell, growing with the end); backward, a Li Chao
    tree per cell holds the ends that make a large bucket with the current start (a suffix,
    growing as the start falls). Small buckets (fewer than split[j] samples) are few per end
    and are priced one by one. The top bound (:func:`top_at`, at the least count of the
    envelope's buckets) joins each envelope's minimum as that plus the
    least value among the same starts (forward) or ends (backward): min_i max(a_i, T + b_i) >=
    max(min_i a_i, T + min_i b_i)."""
    g = A.shape[1] - 1
    nc = cells.size
    fwd = np.full((kmax + 1, g + 1), np.inf)
    bwd = np.full((kmax + 1, g + 1), np.inf)
    arg = np.full((kmax + 1, g + 1), -1, dtype=np.int64)
    fwd[:, 0] = 0.0
    bwd[:, g] = 0.0
    cell = np.zeros(g + 1, dtype=np.int64)
    for c in range(1, nc):
        cell[cells[c]:] = c
    big = big_starts(P, split)
    f_slopes = np.empty(g)
    for i in range(g):
        f_slopes[i] = -float(P[i])
    icpt = np.empty(g)
    hl = np.empty(g, dtype=np.int64)
    cnt = np.zeros(nc, dtype=np.int64)
    least = np.empty(nc)  # the least intercept among each cell's envelope starts
    for k in range(1, kmax + 1 if forward else 1):
        for i in range(g):
            icpt[i] = fwd[k - 1, i] + R[i]
        cnt[:] = 0
        least[:] = np.inf
        nxt = 0  # starts below nxt are in their cell's envelope
        for j in range(1, g + 1):
            while nxt <= big[j]:
                if icpt[nxt] < np.inf:
                    c = cell[nxt]
                    cnt[c] = _hull_push(hl, cells[c], cnt[c], nxt, f_slopes, icpt)
                    least[c] = min(least[c], icpt[nxt])
                nxt += 1
            best = np.inf
            at = -1
            for c in range(nc):
                if cells[c] > big[j]:
                    break
                if cnt[c] == 0:
                    continue
                v, a = _hull_min(hl, cells[c], cnt[c], f_slopes, icpt, U[c, j])
                v = max(v + A[c, j], top_at(T, j, split[j]) + least[c])
                if v < best or (v == best and a < at):
                    best = v
                    at = a
            for i in range(max(big[j] + 1, 0), j):  # small buckets
                if icpt[i] < np.inf:
                    c = cell[i]
                    v = max(A2[c, j] - U[c, j] * P[i], Af[c, j] - Uf[c, j] * P[i],
                            top_at(T, j, P[j] - P[i])) + icpt[i]
                    if v < best or (v == best and i < at):
                        best = v
                        at = i
            if at >= 0:
                fwd[k, j] = best
                arg[k, j] = at
    if backward:
        from_big = ends_of_big(big, g)
        order = np.arange(nc - 1, -1, -1)
        for k in range(1, kmax + 1):
            free_backward_layer(k, order, A, split, U, R, T, Af, Uf, A2, P, cells, from_big,
                                bwd, tail)
    return fwd, arg, bwd


@njit(cache=True)
def big_starts(P, split):
    """big[j]: starts i <= big[j] (and below j) make buckets of >= split[j] samples."""
    g = P.size - 1
    big = np.empty(g + 1, dtype=np.int64)
    for j in range(g + 1):
        big[j] = min(np.searchsorted(P, P[j] - split[j], side="right") - 1, j - 1)
    return big


@njit(cache=True)
def ends_of_big(big, g):
    """from_big[i]: ends j >= from_big[i] make large buckets with start i (big[j] never
    decreases: P[j] - split[j] never does)."""
    from_big = np.empty(g, dtype=np.int64)
    for i in range(g):
        from_big[i] = np.searchsorted(big[1:], i, side="left") + 1
    return from_big


@njit(cache=True, nogil=True)
def free_backward_layer(k, cs, A, split, U, R, T, Af, Uf, A2, P, cells, from_big, bwd, tail):
    """Layer k of :func:`relaxed_layers`' backward pass without share windows, for the starts
    of the cells ``cs``: bwd[k, i] from bwd[k - 1] alone, so calls on disjoint cells are
    independent (they may run at once). A Li Chao tree per cell, over its starts, holds the ends
    that make a large bucket with the current start (a suffix, growing as the start falls); a cell
    of few starts scans its ends directly; small buckets are priced one by one."""
    g = A.shape[1] - 1
    nc = cells.size
    b_slopes = np.empty(g + 1)
    bicpt = np.empty(g + 1)
    tree = np.empty(4 * g + 4, dtype=np.int64)
    few = 2 * np.log2(g + 2)  # a cell of fewer starts scans its ends directly
    for q in range(cs.size):
        c = cs[q]
        first = cells[c]
        last = cells[c + 1] - 1 if c + 1 < nc else g - 1
        if last - first + 1 < few:
            for i in range(last, first - 1, -1):
                best = np.inf
                x = P[i]
                for j in range(i + 1, g + 1):
                    base = A2[c, j] if j < from_big[i] else A[c, j]  # small or large bucket
                    v = max(base - U[c, j] * x, Af[c, j] - Uf[c, j] * x,
                            top_at(T, j, P[j] - x)) + bwd[k - 1, j]
                    if v < best:
                        best = v
                if best < np.inf:
                    bwd[k, i] = max(R[i] + best, tail[k, i])
            continue
        for j in range(first + 1, g + 1):
            b_slopes[j] = -U[c, j]
            bicpt[j] = bwd[k - 1, j] + A[c, j]
        tree[:4 * (last - first + 1)] = -1  # over the cell's starts alone: they are its queries
        top = g + 1  # ends >= top are in the tree
        least_top = np.inf  # the least T[j] + bwd[k - 1, j] over the tree's ends
        for i in range(last, first - 1, -1):
            while top > from_big[i] and top > i + 1:
                top -= 1
                if bicpt[top] < np.inf:
                    _lichao_insert(tree, first, last, P, b_slopes, bicpt, top)
                    least_top = min(least_top, top_at(T, top, split[top]) + bwd[k - 1, top])
            best = _lichao_min(tree, first, last, P, b_slopes, bicpt, i)
            if best < np.inf:
                best = max(best, least_top)
            for j in range(i + 1, min(from_big[i], g + 1)):  # small buckets
                if bwd[k - 1, j] < np.inf:
                    v = max(A2[c, j] - U[c, j] * P[i], Af[c, j] - Uf[c, j] * P[i],
                            top_at(T, j, P[j] - P[i])) + bwd[k - 1, j]
                    if v < best:
                        best = v
            if best < np.inf:
                bwd[k, i] = max(R[i] + best, tail[k, i])


@njit(cache=True, nogil=True)
def relaxed_layers(A, A2, split, U, R, T, Af, Uf, P, cells, win_lo, win_hi, kmax, forward,
                   backward, tail):
    """Forward and backward passes of the relaxed DP over groups 0..g.

    Starts i in cells[c] <= i < cells[c + 1] (cells[0] = 0) use the relaxation of row c:
    l(i, j) = max(A[c, j] - U[c, j] P[i], top_at(T, j, P[j] - P[i])) + R[i] when the bucket
    holds at least split[j] samples (P[j] - P[i] >= split[j]), with A2 in place of A when it
    holds fewer (P[j] - split[j] must never decrease with j); T[0, j] = -inf where an end has
    no such bound. Af[c, j] - Uf[c, j] P[i] bounds every bucket too (the fewest-rows bound
    of :class:`bucketopt.objectives.certified.Rows`; A2 and U again for none): it joins the
    buckets priced one by one, the small ones. Under
    share windows T is left out (still a lower bound, a weaker one). Returns ``fwd``
    (kmax + 1, g + 1): fwd[k, j] <= the cost of any cover of groups 1..j by at most k buckets
    (fwd[k, 0] = 0; inf everywhere else when not ``forward``), ``arg`` its argmin start (a chain
    of the relaxation), and ``bwd``:
    bwd[k, i] <= the cost of any cover of groups i+1..g by at most k buckets (bwd[k, g] = 0;
    inf everywhere else when not ``backward``), never below ``tail[k, i]`` (a bound of its own,
    e.g. :func:`bucketopt.objectives._certified_kernels.exact_tail`'s, which the layers before
    carry down; zeros for none).
    Infeasible: inf.
    """
    g = A.shape[1] - 1
    free = True  # no share window: every start below an end is allowed
    for j in range(1, g + 1):
        if win_lo[j] > 0 or win_hi[j] < j - 1:
            free = False
            break
    if free:
        return _free_layers(A, A2, split, U, R, T, Af, Uf, P, cells, kmax, forward, backward,
                            tail)
    nc = cells.size
    size, levels = _levels(g)
    fwd = np.full((kmax + 1, g + 1), np.inf)
    bwd = np.full((kmax + 1, g + 1), np.inf)
    arg = np.full((kmax + 1, g + 1), -1, dtype=np.int64)
    fwd[:, 0] = 0.0
    bwd[:, g] = 0.0
    hull = np.zeros((levels, size), dtype=np.int64)
    hull_n = np.zeros((levels, size), dtype=np.int64)
    cell_end = np.empty(nc, dtype=np.int64)
    for c in range(nc):
        cell_end[c] = cells[c + 1] - 1 if c + 1 < nc else g - 1
    big = np.empty(g + 1, dtype=np.int64)  # starts i <= big[j] make buckets of >= split[j]
    for j in range(g + 1):
        big[j] = np.searchsorted(P, P[j] - split[j], side="right") - 1
    # forward: line i (position i, i = 0..g-1) has slope -P[i], intercept fwd[k-1, i] + R[i]
    f_slopes = np.empty(g)
    for i in range(g):
        f_slopes[i] = -float(P[i])
    f_order = _sorted_levels(f_slopes, size, levels)
    icpt = np.empty(g)
    for k in range(1, kmax + 1 if forward else 1):
        for i in range(g):
            icpt[i] = fwd[k - 1, i] + R[i]
        _build_hulls(f_order, f_slopes, icpt, hull, hull_n)
        for j in range(1, g + 1):
            for c in range(nc):
                lo = max(win_lo[j], cells[c])
                hi = min(win_hi[j], j - 1, cell_end[c])
                if cells[c] > j - 1:
                    break
                for part in range(2):
                    a_lo = lo if part == 0 else max(lo, big[j] + 1)
                    a_hi = min(hi, big[j]) if part == 0 else hi
                    if a_lo > a_hi:
                        continue
                    v, a = _range_min(hull, hull_n, f_slopes, icpt, a_lo, a_hi, U[c, j])
                    base = A[c, j] if part == 0 else A2[c, j]
                    if a >= 0 and base + v < fwd[k, j]:
                        fwd[k, j] = base + v
                        arg[k, j] = a
    if not backward:
        return fwd, arg, bwd
    # backward: for the starts of cell c, line j (position j - 1) has slope -U[c, j], intercept
    # bwd[k-1, j] + A[c, j]; the ends that accept start i form a range, since both window ends
    # only move right. Cells from the last: every end after a start is final when it is needed.
    first = np.empty(g, dtype=np.int64)
    last = np.empty(g, dtype=np.int64)
    for i in range(g):
        a = np.searchsorted(win_hi[1:], i, side="left") + 1
        b = np.searchsorted(win_lo[1:], i, side="right")
        first[i] = max(a, i + 1)
        last[i] = b
    # the ends whose bucket from start i holds >= split[j] samples: j >= from_big[i] (big[j]
    # never decreases: P[j] - split[j] never does)
    from_big = np.empty(g, dtype=np.int64)
    for i in range(g):
        from_big[i] = np.searchsorted(big[1:], i, side="left") + 1
    b_slopes = np.empty(g)
    bicpt = np.empty(g)
    bicpt2 = np.empty(g)
    hull2 = np.zeros((levels, size), dtype=np.int64)
    hull2_n = np.zeros((levels, size), dtype=np.int64)
    for c in range(nc - 1, -1, -1):
        for j in range(1, g + 1):
            b_slopes[j - 1] = -U[c, j]
        b_order = _sorted_levels(b_slopes, size, levels)
        for k in range(1, kmax + 1):
            for j in range(1, g + 1):
                on = j > cells[c]
                bicpt[j - 1] = bwd[k - 1, j] + A[c, j] if on else np.inf
                bicpt2[j - 1] = bwd[k - 1, j] + A2[c, j] if on else np.inf
            _build_hulls(b_order, b_slopes, bicpt, hull, hull_n)
            _build_hulls(b_order, b_slopes, bicpt2, hull2, hull2_n)
            for i in range(cells[c], cell_end[c] + 1):
                if first[i] > last[i]:
                    continue
                best = np.inf
                cut = from_big[i]  # ends >= cut: big buckets
                if max(first[i], cut) <= last[i]:
                    v, a = _range_min(hull, hull_n, b_slopes, bicpt, max(first[i], cut) - 1,
                                      last[i] - 1, float(P[i]))
                    if a >= 0:
                        best = v
                if first[i] <= min(last[i], cut - 1):
                    v, a = _range_min(hull2, hull2_n, b_slopes, bicpt2, first[i] - 1,
                                      min(last[i], cut - 1) - 1, float(P[i]))
                    if a >= 0 and v < best:
                        best = v
                if best < np.inf:
                    bwd[k, i] = max(R[i] + best, tail[k, i])
    return fwd, arg, bwd


@njit(cache=True, nogil=True)
def prefix_moments(values, pcv, pq1, pq2, group_end, draws, lf_hi, lf_lo, first):
    """(E[M], E[M^2]) of the longest of ``draws[j]`` samples drawn without replacement from every
    sample of groups first+1..j (j > first; the others 0).

    With D(v) = top - E[M] over the lengths up to v, adding the next length x' (c' samples)
    gives D(v') = (D(v) + x' - x) C(N, s) / C(N + c', s): O(1) a length along a run of ends with
    one draw count, and a walk (:func:`bucketopt.objectives._time_kernels.walk_moments`) where it
    changes.
    """
    g = group_end.size - 1
    m1 = np.zeros(g + 1)
    m2 = np.zeros(g + 1)
    s = -1
    d1 = 0.0
    d2 = 0.0
    lo = group_end[first]
    base = pcv[lo]
    done = lo  # lengths values[lo:done] are in d1, d2
    for j in range(first + 1, g + 1):
        hi = group_end[j]
        n = pcv[hi] - base
        if draws[j] != s:
            s = draws[j]
            if s <= 1:
                d1 = float(values[hi - 1]) - (pq1[hi] - pq1[lo]) / n
                d2 = float(values[hi - 1]) ** 2 - (pq2[hi] - pq2[lo]) / n
            else:
                e1, e2 = walk_moments(values, pcv, lo, hi, s, lf_hi, lf_lo)
                d1 = float(values[hi - 1]) - e1
                d2 = float(values[hi - 1]) ** 2 - e2
            done = hi
        else:
            for v in range(done, hi):
                x = float(values[v - 1])
                x2 = float(values[v])
                a = pcv[v] - base
                c = pcv[v + 1] - pcv[v]
                if s <= 1:
                    rho = a / (a + c)
                elif a < s:
                    rho = 0.0
                else:
                    rho = _binom_ratio(a, c, s, lf_hi, lf_lo)
                d1 = (d1 + x2 - x) * rho
                d2 = (d2 + x2 * x2 - x * x) * rho
            done = hi
        top = float(values[hi - 1])
        m1[j] = top - d1
        m2[j] = top * top - d2
    return m1, m2
