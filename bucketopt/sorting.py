"""Small sorts and searches for the kernels, in place of numba's ``np.sort``, ``np.unique``,
``np.argsort(kind="mergesort")`` and ``np.searchsorted``: the same results, a few lines each to
compile where numba's own compile its whole quicksort or mergesort (a second or more each on a
first run), or a search generic over every dtype numpy orders, complex numbers included (0.9 s
for the relaxation's three calls).
"""

from __future__ import annotations

import numpy as np

from .jit import njit


@njit(cache=True)
def _sift(a, i, n):
    # move a[i] down the max-heap a[:n]
    while True:
        left = 2 * i + 1
        big = i
        if left < n and a[left] > a[big]:
            big = left
        if left + 1 < n and a[left + 1] > a[big]:
            big = left + 1
        if big == i:
            return
        a[i], a[big] = a[big], a[i]
        i = big


@njit(cache=True)
def sort_ints(a):
    """``a`` (integers) sorted increasing in place, and returned: ``np.sort``'s values."""
    n = a.size
    for start in range(n // 2 - 1, -1, -1):
        _sift(a, start, n)
    for end in range(n - 1, 0, -1):
        a[0], a[end] = a[end], a[0]
        _sift(a, np.int64(0), end)
    return a


@njit(cache=True)
def unique_ints(a):
    """``np.unique(a)`` of integers: the distinct values, increasing (a new array)."""
    b = sort_ints(a.copy())
    m = 0
    for t in range(b.size):
        if t == 0 or b[t] != b[m - 1]:
            b[m] = b[t]
            m += 1
    return b[:m].copy()


@njit(cache=True)
def _before(x, y):
    # x sorts strictly before y: numpy's order (NaN after every number)
    return x < y or (y != y and x == x)


@njit(cache=True)
def argsort_stable(keys):
    """``np.argsort(keys, kind="mergesort")``: the stable order of ``keys`` (floats or ints;
    NaN last), by a bottom-up merge sort."""
    n = keys.size
    idx = np.empty(n, dtype=np.int64)
    for t in range(n):
        idx[t] = t
    tmp = np.empty(n, dtype=np.int64)
    width = 1
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i = lo
            j = mid
            k = lo
            while i < mid and j < hi:
                if _before(keys[idx[j]], keys[idx[i]]):  # ties: the left one first
                    tmp[k] = idx[j]
                    j += 1
                else:
                    tmp[k] = idx[i]
                    i += 1
                k += 1
            while i < mid:
                tmp[k] = idx[i]
                i += 1
                k += 1
            while j < hi:
                tmp[k] = idx[j]
                j += 1
                k += 1
        idx, tmp = tmp, idx
        width *= 2
    return idx


@njit(cache=True)
def search_left(a, v):
    """``np.searchsorted(a, v)`` for a scalar ``v`` in the increasing array ``a`` (no NaN): the
    first index whose entry is at least ``v`` (``a.size`` for none)."""
    lo = 0
    hi = a.size
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < v:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def search_right(a, v):
    """``np.searchsorted(a, v, side="right")`` for a scalar ``v`` in the increasing array ``a``
    (no NaN): the first index whose entry is above ``v`` (``a.size`` for none)."""
    lo = 0
    hi = a.size
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] <= v:
            lo = mid + 1
        else:
            hi = mid
    return lo
