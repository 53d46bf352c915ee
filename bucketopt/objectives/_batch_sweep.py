"""numba kernels of ``pad="batch"``: the exact costs of many buckets that share one end.

A bucket's walk (:func:`bucketopt.objectives._batch_kernels.batch_bucket_cost`) costs one term per
distinct
length; with a small batch size the probabilities fall slowly, so each walk covers nearly the
whole bucket, and a DP that prices many starts for one end walks the same lengths again and again.
For one end (top length, batch size s) and a run of starts, :func:`sweep_costs` keeps instead

    U[m] = sum_{v < top} gap(v) C(c(v) - base, m),   m = 0..s,

(scaled by m! / N^m, so that no sum overflows whatever n and s) and lowers the base start by
start: the binomials of lengths already in the bucket move from x to x + e by Vandermonde's
identity C(x + e, m) = sum_u C(e, u) C(x, m - u), which for the sums reads
U'[m] = sum_u C(e, u) U[m - u], and the lengths that enter add their own terms. Every operation
adds or multiplies non-negative numbers, so each U[m] keeps a relative error of a few ulps per
step, and E[max of m] = top - U[m] / C(N, m) is the walk's sum without its truncation at 1e-15.
One end costs O(D s) for its D distinct lengths plus O(s^2) per start, against O(D) per start.
:func:`window_costs` prices several ends of one batch size from one sweep, and
:func:`stage_costs` a whole stage of a window DP (docs/dynamic_padding.md).
"""

from __future__ import annotations

import numpy as np

from ..jit import njit

# The grid DP prices an end's starts by a sweep when its batch size is at most SWEEP_MAX and it has
# at least SWEEP_MIN_STARTS starts: each start costs a Vandermonde step of s^2 / 2, and above 48 a
# walk's probabilities collapse within a few lengths, which is cheaper. A window DP's stage pays
# one sweep per run of ends with one batch size and O(starts x s) per end after it, cheaper than
# walks up to STAGE_SWEEP_MAX.
SWEEP_MAX = 48
STAGE_SWEEP_MAX = 256
SWEEP_MIN_STARTS = 4


@njit(cache=True)
def sweep_suits(size, starts):
    """Price one end's starts by a sweep rather than by walks (the grid DP)?"""
    return 2 <= size <= SWEEP_MAX and starts >= SWEEP_MIN_STARTS


@njit(cache=True)
def pascal_table():
    """C(m, k) for 0 <= k <= m <= STAGE_SWEEP_MAX + 1, built once per DP (exact up to m = 56,
    then to an ulp: every term of a Vandermonde step is non-negative, so that rounding stays
    relative). The certified DP's rectangles keep one draw count beyond their steps' rows
    (:func:`.pricing.rect_costs`)."""
    size = STAGE_SWEEP_MAX + 2
    out = np.zeros((size, size))
    for m in range(size):
        out[m, 0] = 1.0
        for k in range(1, m + 1):
            out[m, k] = out[m - 1, k - 1] + out[m - 1, k]
    return out


@njit(cache=True)
def _grow(u, n_old, n_new, s, pascal, scratch):
    # The sums are kept scaled, u[m] = U[m] m! / N^m (every term gap (x/N)(x-1)/N... <= gap):
    # first rescale them from N = n_old to N = n_new, then move every binomial C(x, m) to
    # C(x + e, m), e = n_new - n_old: one Pascal step is u[m] += (m / N) u[m - 1]; e of them cost
    # e s, Vandermonde's sum u[m] = sum_k C(m, k) e(e-1)..(e-k+1) / N^k u[m - k] costs s^2 / 2.
    e = n_new - n_old
    fn = float(n_new)
    inv_n = 1.0 / fn
    ratio = float(n_old) * inv_n
    f = 1.0
    for m in range(1, s + 1):
        f *= ratio
        u[m] *= f
    if 2 * e <= s:
        for _ in range(e):
            for m in range(s, 0, -1):
                u[m] += (m * inv_n) * u[m - 1]
        return
    scratch[0] = 1.0
    fe = float(e)
    for k in range(1, s + 1):
        scratch[k] = scratch[k - 1] * ((fe - k + 1.0) * inv_n)
    for m in range(s, 0, -1):
        acc = u[m]
        for k in range(1, m + 1):
            acc += pascal[m, k] * scratch[k] * u[m - k]
        u[m] = acc


@njit(cache=True, fastmath={"reassoc", "contract"})
def _enter(u, s, xs1, cs, inv_n):
    # The lengths that enter, with x + 1 in ``xs1`` and their gaps in ``cs`` (overwritten): add
    # gap x(x-1)..(x-m+1) / N^m to u[m] for m = 0..s. Once m > x the product holds a factor 0
    # and stays 0, so no length needs a test; the sums may be reordered (all terms are >= 0).
    acc = 0.0
    for t in range(cs.size):
        acc += cs[t]
    u[0] += acc
    for m in range(1, s + 1):
        acc = 0.0
        fm = float(m)
        for t in range(cs.size):
            c = cs[t] * ((xs1[t] - fm) * inv_n)
            cs[t] = c
            acc += c
        u[m] += acc


@njit(cache=True)
def _cost(u, s, n, top, tokens):
    # The bucket's expected padding from its scaled sums (n samples, batch size s >= 2).
    if s >= n:
        return n * top - tokens
    full = n // s
    r = n - full * s
    norm = 1.0  # C(n, m) m! / n^m, m = 1..s
    norm_r = 1.0
    fn = float(n)
    inv_n = 1.0 / fn
    for m in range(1, s + 1):
        norm *= (fn - m + 1.0) * inv_n
        if m == r:
            norm_r = norm
    cost = float(full * s) * (top - u[s] / norm) - tokens
    if r <= 1:
        return cost + r * (tokens / n)  # E[max of 1] is the mean
    return cost + r * (top - u[r] / norm_r)


@njit(cache=True)
def _sweep(values, prefix_count, prefix_tokens, hi, s, starts, out, states, xs, cs, pascal):
    # sweep_costs; with ``states`` of one row per start, each start's scaled sums are kept there;
    # xs, cs: room for the lengths that enter (x + 1 and their gaps), at least hi of each.
    top = float(values[hi - 1])
    keep = states.shape[0] == starts.size
    u = np.zeros(s + 1)
    scratch = np.empty(s + 1)
    lo = hi - 1  # the bucket values[lo:hi] holds the top alone: no term yet
    n = prefix_count[hi] - prefix_count[lo]
    for q in range(starts.size):
        new_lo = starts[q]
        if new_lo < lo:
            new_n = prefix_count[hi] - prefix_count[new_lo]
            if lo < hi - 1:
                _grow(u, n, new_n, s, pascal, scratch)
            base = prefix_count[new_lo]
            count = lo - new_lo
            for t in range(new_lo, lo):
                xs[t - new_lo] = prefix_count[t + 1] - base + 1.0
                cs[t - new_lo] = values[t + 1] - values[t]
            _enter(u, s, xs[:count], cs[:count], 1.0 / new_n)
            lo = new_lo
            n = new_n
        out[q] = _cost(u, s, n, top, float(prefix_tokens[hi] - prefix_tokens[lo]))
        if keep:
            for m in range(u.size):  # (loops: a slice assignment compiles numba's shape checks)
                states[q, m] = u[m]


@njit(cache=True)
def sweep_costs(values, prefix_count, prefix_tokens, hi, s, starts, out, pascal):
    """out[q] = the expected dynamic padding of the bucket ``values[starts[q]:hi]`` with batch
    size ``s`` (2 <= s), for ``starts`` non-increasing and below ``hi``: the cost of
    :func:`bucketopt.objectives._batch_kernels.batch_bucket_cost` without its truncation."""
    _sweep(values, prefix_count, prefix_tokens, hi, s, starts, out, np.empty((0, s + 1)),
           np.empty(hi), np.empty(hi), pascal)


@njit(cache=True)
def window_costs(values, prefix_count, prefix_tokens, ends, s, starts, out, pascal):
    """out[a, q] = the cost of the bucket ``values[starts[q]:ends[a]]`` with batch size ``s``
    (2 <= s), for ``ends`` increasing, ``starts`` non-increasing and ``starts[0] < ends[0]``.

    The first end is one sweep that keeps every start's sums; each next end only rescales them
    to the larger bucket and adds the lengths that join at the top, so a window of E ends and Q
    starts costs one sweep plus O(Q s) per length between the ends, not E sweeps."""
    nq = starts.size
    states = np.empty((nq, s + 1))
    xs = np.empty(ends[-1])
    cs = np.empty(ends[-1])
    _sweep(values, prefix_count, prefix_tokens, ends[0], s, starts, out[0], states, xs, cs,
           pascal)
    for a in range(1, ends.size):
        old_hi = ends[a - 1]
        hi = ends[a]
        top = float(values[hi - 1])
        for q in range(nq):
            lo = starts[q]
            base = prefix_count[lo]
            n = prefix_count[hi] - base
            u = states[q]
            ratio = float(prefix_count[old_hi] - base) / n
            f = 1.0
            for m in range(1, s + 1):  # rescale the sums from the old bucket size to n
                f *= ratio
                u[m] *= f
            count = hi - old_hi
            for t in range(old_hi - 1, hi - 1):  # the old top and the lengths above it join
                xs[t - old_hi + 1] = prefix_count[t + 1] - base + 1.0
                cs[t - old_hi + 1] = values[t + 1] - values[t]
            _enter(u, s, xs[:count], cs[:count], 1.0 / n)
            out[a, q] = _cost(u, s, n, top, float(prefix_tokens[hi] - prefix_tokens[lo]))


@njit(cache=True)
def stage_costs(values, prefix_count, prefix_tokens, group_end, group_size, windows, offsets,
                t, pascal):
    """The costs of stage ``t`` of a window DP (batch_chain_kernel) that sweeps price:
    out[a, q] for the a-th end of window t and the q-th start of window t - 1 counted from its
    top, nan for the pairs left to walks.

    Runs of consecutive ends with one batch size are priced by :func:`window_costs` from the
    starts below every end of the window (all of them unless the windows overlap), when
    their batch size is 2..STAGE_SWEEP_MAX and there are at least SWEEP_MIN_STARTS starts."""
    lo_w = offsets[t - 1]
    width = offsets[t] - lo_w
    n_ends = offsets[t + 1] - offsets[t]
    out = np.full((n_ends, width), np.nan)
    first_end = windows[offsets[t]]
    below = 0  # starts below every end: the top `below` of window t - 1 are not
    while below < width and windows[offsets[t] - 1 - below] >= first_end:
        below += 1
    starts = np.empty(width - below, dtype=np.int64)
    for q in range(below, width):
        starts[q - below] = group_end[windows[offsets[t] - 1 - q]]
    a = 0
    while a < n_ends:
        size = group_size[windows[offsets[t] + a]]
        b = a + 1
        while b < n_ends and group_size[windows[offsets[t] + b]] == size:
            b += 1
        if 2 <= size <= STAGE_SWEEP_MAX and starts.size >= SWEEP_MIN_STARTS:
            ends = np.empty(b - a, dtype=np.int64)
            for e in range(a, b):
                ends[e - a] = group_end[windows[offsets[t] + e]]
            block = np.empty((b - a, starts.size))
            window_costs(values, prefix_count, prefix_tokens, ends, size, starts, block, pascal)
            for e in range(b - a):  # (loops, not a slice assignment: a smaller compile)
                for q in range(starts.size):
                    out[a + e, below + q] = block[e, q]
        a = b
    return out
