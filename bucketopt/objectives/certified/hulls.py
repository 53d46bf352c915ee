"""Lower convex hulls of DP points, for the certified DP's bound queries (numba kernels).

Points are (x, y) pairs held by index in arrays ``xs``, ``ys``. A hull kept left to right in
``stk[off:off + cnt]`` takes points of increasing x (:func:`hull_add`); :func:`hull_min` and
:func:`hull_walk` return the minimum of y - u x over it (the tangent of slope u), and
:func:`hull_segment` the line of the hull between two vertices (its height at any x there).
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
