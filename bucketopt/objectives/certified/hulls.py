"""Lower convex hulls of DP points and lower envelopes of lines, for the certified DP's bound
queries (numba kernels).

Points are (x, y) pairs held by index in arrays ``xs``, ``ys``. A hull kept left to right in
``stk[off:off + cnt]`` takes points of increasing x (:func:`hull_add`); :func:`hull_min` and
:func:`hull_walk` return the minimum of y - u x over it (the tangent of slope u), and
:func:`hull_segment` the line of the hull between two vertices (its height at any x there).

Lines y = icpt[l] + slope[l] x, held by index: a lower envelope of lines added by decreasing
slope (:func:`envelope_push`, :func:`envelope_place`: the relaxed forward pass), and a Li Chao
tree over a set of points (:func:`lichao_insert`, :func:`lichao_min`: lines in any order, the
backward pass and the mean envelope).
"""

from __future__ import annotations

import numpy as np

from ...jit import njit


@njit(cache=True)
def hull_add(stk, off, cnt, xs, ys, p):
    """Append point ``p`` (x at or right of every point so far); returns the new count."""
    while cnt >= 2:
        a = stk[off + cnt - 2]
        b = stk[off + cnt - 1]
        if (ys[b] - ys[a]) * (xs[p] - xs[a]) >= (ys[p] - ys[a]) * (xs[b] - xs[a]):
            cnt -= 1
        else:
            break
    stk[off + cnt] = p
    return cnt + 1


@njit(cache=True)
def hull_min(stk, off, cnt, xs, ys, u):
    """(min of y - u x over the hull, the vertex index where it is reached), by bisection."""
    lo = 0
    hi = cnt - 1
    while lo < hi:
        mid = (lo + hi) // 2
        a = stk[off + mid]
        b = stk[off + mid + 1]
        if ys[b] - u * xs[b] < ys[a] - u * xs[a]:
            lo = mid + 1
        else:
            hi = mid
    p = stk[off + lo]
    return ys[p] - u * xs[p], lo


@njit(cache=True)
def hull_walk(stk, off, cnt, xs, ys, u, p):
    """:func:`hull_min` from the vertex index ``p`` (clamped), walking to the lower neighbour:
    the slopes of consecutive queries are close, so it takes few steps."""
    if p >= cnt:
        p = cnt - 1
    if p < 0:
        p = 0
    a = stk[off + p]
    va = ys[a] - u * xs[a]
    while p + 1 < cnt:
        b = stk[off + p + 1]
        vb = ys[b] - u * xs[b]
        if vb < va:
            p += 1
            va = vb
        else:
            break
    while p > 0:
        b = stk[off + p - 1]
        vb = ys[b] - u * xs[b]
        if vb <= va:
            p -= 1
            va = vb
        else:
            break
    return va, p


@njit(cache=True)
def hull_segment(stk, off, xs, ys, t):
    """The hull's segment from vertex index t to t + 1 as (x0, y0, slope): its height at x is
    y0 + slope (x - x0); where both vertices share x, (x0, the lower y, nan): then y0 itself."""
    a = stk[off + t]
    b = stk[off + t + 1]
    if xs[b] > xs[a]:
        return xs[a], ys[a], (ys[b] - ys[a]) / (xs[b] - xs[a])
    return xs[a], min(ys[a], ys[b]), np.nan


@njit(cache=True)
def envelope_push(hl, start, cnt, line, slopes, icpt):
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


@njit(cache=True)
def envelope_place(hl, start, cnt, line, slopes, icpt):
    # :func:`envelope_push` by bisection: the position the line takes (the lines from there on
    # are dropped: the test is monotone along a hull), so that the push can be undone by
    # putting back the line it overwrote and the count before it
    b3 = slopes[line]
    a3 = icpt[line]
    lo = 1
    hi = cnt  # the least t in [1, cnt) whose line hl[t] the new one makes useless, else cnt
    while lo < hi:
        mid = (lo + hi) // 2
        l1 = hl[start + mid - 1]
        l2 = hl[start + mid]
        b1 = slopes[l1]
        if (a3 - icpt[l1]) * (b1 - slopes[l2]) <= (icpt[l2] - icpt[l1]) * (b1 - b3):
            hi = mid
        else:
            lo = mid + 1
    return lo if cnt > 0 else 0


@njit(cache=True)
def lichao_insert(tree, node_lo, node_hi, xs, slopes, icpt, line):
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
def lichao_min(tree, node_lo, node_hi, xs, slopes, icpt, q):
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
