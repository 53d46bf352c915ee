"""numba kernels of the certified DP (:mod:`bucketopt.objectives.bounds`).

A relaxation bounds every bucket's cost from below by l(i, j) = A[j] - U[j] P[i] + R[i]
(P: prefix sample counts), so that one layer of the relaxed DP,
L_k(j) = A[j] + min_i (L_{k-1}(i) + R[i] - U[j] P[i]), is a lower-envelope query of lines. The
allowed starts of an end form a window (share constraints), so the lines sit in a segment tree,
every node holding the lower envelope of its lines (:func:`relaxed_layers`): a query costs
O(log^2 g) whatever the order of the U[j]. The backward pass (suffix bounds) is the same with the
roles of i and j exchanged. :func:`alive_pairs` lists the pairs (i, j) that the bounds cannot rule
out of a chain below a threshold, and :func:`pair_dp` runs the exact DP over them.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .._time_kernels import _binom_ratio, walk_moments


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
                b3 = slopes[line]
                a3 = icpt[line]
                if cnt > 0 and slopes[hull[lev, start + cnt - 1]] == b3:
                    if icpt[hull[lev, start + cnt - 1]] <= a3:
                        continue
                    cnt -= 1
                while cnt >= 2:
                    l1 = hull[lev, start + cnt - 2]
                    l2 = hull[lev, start + cnt - 1]
                    b1 = slopes[l1]
                    b2 = slopes[l2]
                    a1 = icpt[l1]
                    a2 = icpt[l2]
                    # l2 never wins when l3 overtakes l1 no later than l2 does
                    if (a3 - a1) * (b1 - b2) <= (a2 - a1) * (b1 - b3):
                        cnt -= 1
                    else:
                        break
                hull[lev, start + cnt] = line
                cnt += 1
            hull_n[lev, node] = cnt


@njit(cache=True, inline="always")
def _node_min(hull, hull_n, lev, node, slopes, icpt, x):
    cnt = hull_n[lev, node]
    if cnt == 0:
        return np.inf, -1
    start = node << lev
    lo = 0
    hi = cnt - 1
    while lo < hi:  # the values along a convex envelope are unimodal
        mid = (lo + hi) // 2
        l1 = hull[lev, start + mid]
        l2 = hull[lev, start + mid + 1]
        if icpt[l2] + slopes[l2] * x < icpt[l1] + slopes[l1] * x:
            lo = mid + 1
        else:
            hi = mid
    line = hull[lev, start + lo]
    return icpt[line] + slopes[line] * x, line


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
def relaxed_layers(A, U, R, P, cells, win_lo, win_hi, kmax):
    """Forward and backward passes of the relaxed DP over groups 0..g.

    Starts i in cells[c] <= i < cells[c + 1] (cells[0] = 0) use the relaxation of row c:
    l(i, j) = A[c, j] - U[c, j] P[i] + R[i]. Returns ``fwd`` (kmax + 1, g + 1): fwd[k, j] <= the
    cost of any cover of groups 1..j by at most k buckets (fwd[k, 0] = 0), ``arg`` its argmin
    start (a chain of the relaxation), and ``bwd``: bwd[k, i] <= the cost of any cover of groups
    i+1..g by at most k buckets (bwd[k, g] = 0). Infeasible: inf.
    """
    g = A.shape[1] - 1
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
    # forward: line i (position i, i = 0..g-1) has slope -P[i], intercept fwd[k-1, i] + R[i]
    f_slopes = np.empty(g)
    for i in range(g):
        f_slopes[i] = -float(P[i])
    f_order = _sorted_levels(f_slopes, size, levels)
    icpt = np.empty(g)
    for k in range(1, kmax + 1):
        for i in range(g):
            icpt[i] = fwd[k - 1, i] + R[i]
        _build_hulls(f_order, f_slopes, icpt, hull, hull_n)
        for j in range(1, g + 1):
            for c in range(nc):
                lo = max(win_lo[j], cells[c])
                hi = min(win_hi[j], j - 1, cell_end[c])
                if cells[c] > j - 1:
                    break
                if lo > hi:
                    continue
                v, a = _range_min(hull, hull_n, f_slopes, icpt, lo, hi, U[c, j])
                if a >= 0 and A[c, j] + v < fwd[k, j]:
                    fwd[k, j] = A[c, j] + v
                    arg[k, j] = a
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
    b_slopes = np.empty(g)
    bicpt = np.empty(g)
    for c in range(nc - 1, -1, -1):
        for j in range(1, g + 1):
            b_slopes[j - 1] = -U[c, j]
        b_order = _sorted_levels(b_slopes, size, levels)
        for k in range(1, kmax + 1):
            for j in range(1, g + 1):
                bicpt[j - 1] = bwd[k - 1, j] + A[c, j] if j > cells[c] else np.inf
            _build_hulls(b_order, b_slopes, bicpt, hull, hull_n)
            for i in range(cells[c], cell_end[c] + 1):
                if first[i] > last[i]:
                    continue
                v, a = _range_min(hull, hull_n, b_slopes, bicpt, first[i] - 1, last[i] - 1,
                                  float(P[i]))
                if a >= 0:
                    bwd[k, i] = R[i] + v
    return fwd, arg, bwd


@njit(cache=True)
def alive_pairs(A, U, R, P, cells, win_lo, win_hi, fwd, bwd, ks, thresholds, kmax, limit):
    """Every (layer t, start i, end j) that a cover of groups 1..g by at most k buckets (k in
    ``ks``) costing at most ``thresholds[kk]`` may use: fwd[t-1, i] + l(i, j) + bwd[k-t, j] <=
    threshold, t <= k. (Such a cover reaches F_k(g) with its buckets on layers ending at k; the
    buckets before layer t are at most t - 1, the ones after it at most k - t.) Returns (layers,
    starts, ends, count) sorted by layer, then end, then start; or empty arrays and a count above
    ``limit`` when there are more.
    """
    g = A.shape[1] - 1
    cell = np.zeros(g + 1, dtype=np.int64)
    for c in range(1, cells.size):
        cell[cells[c]:] = c
    count = 0
    empty = np.empty(0, dtype=np.int64)
    lay = empty
    st = empty
    en = empty
    for rep in range(2):
        if rep == 1:
            lay = np.empty(count, dtype=np.int64)
            st = np.empty(count, dtype=np.int64)
            en = np.empty(count, dtype=np.int64)
            count = 0
        for t in range(1, kmax + 1):
            for j in range(1, g + 1):
                ok_j = False
                for kk in range(ks.size):
                    k = ks[kk]
                    if t <= k and fwd[t, j] + bwd[k - t, j] <= thresholds[kk]:
                        ok_j = True
                        break
                if not ok_j:
                    continue
                lo = win_lo[j]
                hi = min(win_hi[j], j - 1)
                for i in range(lo, hi + 1):
                    li = A[cell[i], j] - U[cell[i], j] * P[i] + R[i]
                    keep = False
                    for kk in range(ks.size):
                        k = ks[kk]
                        if t <= k and fwd[t - 1, i] + li + bwd[k - t, j] <= thresholds[kk]:
                            keep = True
                            break
                    if keep:
                        if rep == 1:
                            lay[count] = t
                            st[count] = i
                            en[count] = j
                        count += 1
                        if rep == 0 and count > limit:
                            return empty, empty, empty, count
    return lay, st, en, count


@njit(cache=True)
def pair_dp(layers, starts, ends, costs, g, kmax):
    """The exact DP over the listed pairs (sorted by layer, end, start): ``opt`` (kmax, g + 1)
    int32 (smallest best start, -1 if none) and F[k, g] for every k (inf if no chain)."""
    F = np.full((kmax + 1, g + 1), np.inf)
    F[:, 0] = 0.0
    opt = np.full((kmax, g + 1), -1, dtype=np.int32)
    for p in range(layers.size):
        t = layers[p]
        i = starts[p]
        j = ends[p]
        v = F[t - 1, i] + costs[p]
        if v < F[t, j]:
            F[t, j] = v
            opt[t - 1, j] = i
    best = np.empty(kmax)
    for k in range(1, kmax + 1):
        best[k - 1] = F[k, g]
    return opt, best


@njit(cache=True)
def prefix_moments(values, pcv, pq1, pq2, group_end, draws, lf_hi, lf_lo, first):
    """(E[M], E[M^2]) of the longest of ``draws[j]`` samples drawn without replacement from every
    sample of groups first+1..j (j > first; the others 0).

    With D(v) = top - E[M] over the lengths up to v, adding the next length x' (c' samples)
    gives D(v') = (D(v) + x' - x) C(N, s) / C(N + c', s): O(1) a length along a run of ends with
    one draw count, and a walk (:func:`bucketopt._time_kernels.walk_moments`) where it changes.
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
