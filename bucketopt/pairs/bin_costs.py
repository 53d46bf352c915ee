"""The cost of one 2-D bin (a rectangle of inputs x outputs) under each objective of the pairs.

A bin holds N samples, ``real`` tokens, and has the edges (e0, e1); with the token budget T its
batches hold B = T // (e0 + e1) samples: q = N // B full ones and one of r = N mod B.

- dynamic padding (KIND_BATCH): every batch padded to its longest input and its longest output,
  q B (E[max_B] of the inputs + of the outputs) + r (the same at r draws) - real, the expected
  maxima of draws without replacement from the bin's marginals (:func:`marginal_max`, by
  :func:`bucketopt.orderstats.expected_max`);
- time (KIND_TIME): static shapes under the pair cost model, q (alpha + B per) + (alpha + r per)
  over the world size, per = beta_in e0 + beta_out e1 + gamma_in e0^2 + gamma_out e1^2 +
  gamma_cross e0 e1;
- its linear relaxation (LINEAR_TIME): :func:`bin_rate` seconds a sample;
- edge padding (EDGE) needs no bin cost: the sub-bucket DP's Monge weights are the outputs
  (:mod:`bucketopt.pairs.sub_buckets`).

:func:`rect_matrix` prices every output interval of one input range at once, the matrix the
general (not Monge) sub-bucket DP reads.
"""

from __future__ import annotations

import numpy as np

from ..jit import NO_REFCOUNTS, njit
from ..orderstats import expected_max

INF = np.int64(2**62)
FINF = 1e300

# what the outer DP minimises (its ``mode``)
EDGE = 0  # edge padding, exact integers, Monge inner pass
KIND_BATCH = 1  # expected padded tokens, batches padded to their longest input and output
KIND_TIME = 2  # seconds of static-shape batches (edge padding) under the pair cost model
LINEAR_TIME = 3  # the linear relaxation of KIND_TIME (Monge inner pass; a lower bound)


# The kernels a bin's cost runs through, millions of times a solve, are compiled without numba's
# reference counting (:data:`bucketopt.jit.NO_REFCOUNTS`, as orderstats' walks are): they allocate
# nothing, and the counts they would take on every array they are passed and every view they make
# (atomic increments and decrements, several per call and call level) cost more than the order
# statistics themselves. Their callers hold the arrays.

@njit(cache=True, **NO_REFCOUNTS)
def present_lengths(values, counts, lo, hi, present, prefix):
    """The lengths of a marginal that are present (``counts[t] > 0`` for t = lo..hi, values
    ascending) into ``present[:m]``, their prefix counts into ``prefix[:m + 1]``; returns m."""
    m = 0
    prefix[0] = 0
    for t in range(lo, hi + 1):
        if counts[t] > 0:
            present[m] = values[t]
            prefix[m + 1] = prefix[m] + counts[t]
            m += 1
    return m


@njit(cache=True, **NO_REFCOUNTS)
def _longest(marg, lo, hi, s, lf_hi, lf_lo):
    # E[longest of s draws] from the lengths marg[0][lo..hi] (all present; marg[1] their prefix
    # counts, index 0 empty): 0 for no length or no draw
    if hi < lo or s <= 0:
        return 0.0
    return expected_max(marg[0], marg[1], lf_hi, lf_lo, lo, hi + 1, s)


@njit(cache=True, **NO_REFCOUNTS)
def marginal_max(values, counts, lo, hi, s, lf_hi, lf_lo, scratch):
    """E[longest of s samples drawn without replacement] from a marginal: ``counts[t]``
    samples of length ``values[t]`` for t = lo..hi (values ascending, zero counts allowed), by
    :func:`bucketopt.orderstats.expected_max` (``lf_hi``, ``lf_lo``: the log(k!) table of
    :func:`bucketopt.orderstats.log_factorials`) over the lengths present. ``scratch``: int64
    (2, at least hi - lo + 2), overwritten (those lengths, their prefix counts)."""
    m = present_lengths(values, counts, lo, hi, scratch[0], scratch[1])
    return _longest((scratch[0], scratch[1]), 0, m - 1, s, lf_hi, lf_lo)


@njit(cache=True, **NO_REFCOUNTS)
def rect_cost(kind, params, e0, e1, N, real, a_marg, alo, ahi, b_marg, ulo, uhi):
    """Cost of one bin: N samples, ``real`` tokens (inputs + outputs), edges (e0, e1); its
    input marginal ``a_marg = (lengths, prefix counts)``: the lengths alo..ahi, all present
    (:func:`present_lengths`), and its output marginal ``b_marg``, the same over ``ulo..uhi``.
    ``params``: token budget, alpha, beta_in, beta_out, gamma_in, gamma_out, gamma_cross, world
    size, then (dynamic padding) the log(k!) table for k = 0..n, its hi parts then its lo parts
    (:func:`bucketopt.orderstats.log_factorials`). FINF when the budget holds no sample of this
    shape."""
    B = np.int64(params[0]) // (e0 + e1)
    if B < 1:
        return FINF
    q = N // B
    r = N - q * B
    if kind == KIND_BATCH:
        half = (params.size - 8) // 2
        lf_hi = params[8:8 + half]
        lf_lo = params[8 + half:]
        comp = 0.0
        if q > 0:
            comp += q * B * (_longest(a_marg, alo, ahi, B, lf_hi, lf_lo)
                             + _longest(b_marg, ulo, uhi, B, lf_hi, lf_lo))
        if r > 0:
            comp += r * (_longest(a_marg, alo, ahi, r, lf_hi, lf_lo)
                         + _longest(b_marg, ulo, uhi, r, lf_hi, lf_lo))
        return comp - real
    per = (params[2] * e0 + params[3] * e1 + params[4] * e0 * e0 + params[5] * e1 * e1
           + params[6] * e0 * e1)
    t = q * (params[1] + B * per)
    if r > 0:
        t += params[1] + r * per
    return t / params[7]


@njit(cache=True)
def rect_scratch(ma, mb):
    """The int64 work arrays of :func:`rect_matrix` for ``ma`` distinct inputs and ``mb``
    distinct outputs: the input counts (zeros), the present inputs and their prefix counts, the
    outputs' prefix counts."""
    return (np.zeros(ma, dtype=np.int64), np.empty(ma, dtype=np.int64),
            np.empty(ma + 1, dtype=np.int64), np.empty(mb + 1, dtype=np.int64))


@njit(cache=True)
def rect_matrix(i, j, kind, params, a_values, cols, present, p, R, scratch):
    """``R[u, v]``: the cost (:func:`rect_cost`) of the bin made of present outputs u+1..v of
    the input range i..j; ``cols = (b_ptr, b_a, b_count)``, ``present = (pv, pc, pidx)``,
    ``scratch``: :func:`rect_scratch`."""
    b_ptr, b_a, b_count = cols
    pv, pc, pidx = present
    acnt, a_present, a_prefix, b_prefix = scratch
    a_marg = (a_present, a_prefix)
    b_marg = (pv, b_prefix)  # every output present: its prefix counts once for all u, v
    b_prefix[0] = 0
    for v in range(p):
        b_prefix[v + 1] = b_prefix[v] + pc[v]
    for u in range(p):
        for t in range(i, j + 1):
            acnt[t] = 0
        N = 0
        real = 0
        for v in range(u + 1, p + 1):
            if kind == KIND_TIME:  # static shapes: the count is all the cost needs
                N += pc[v - 1]
                R[u, v] = rect_cost(kind, params, a_values[j], pv[v - 1], N, 0, a_marg, 0, -1,
                                    b_marg, u, v - 1)
                continue
            bi = pidx[v - 1]
            for e in range(b_ptr[bi], b_ptr[bi + 1]):
                a = b_a[e]
                if i <= a <= j:
                    acnt[a] += b_count[e]
                    N += b_count[e]
                    real += b_count[e] * (a_values[a] + pv[v - 1])
            m = present_lengths(a_values, acnt, i, j, a_present, a_prefix)
            R[u, v] = rect_cost(kind, params, a_values[j], pv[v - 1], N, real, a_marg, 0,
                                m - 1, b_marg, u, v - 1)


# ---- the linear relaxation of time (Monge, fast) -------------------------------------------
# A bin's time under static shapes is N per(e0, e1) + alpha ceil(N / B(e0, e1)) (over the world
# size): between its linear part L = N (per + alpha / B) and L + alpha. L is a count times a
# function of the edges that grows with e1, so the inner cost is Monge (as edge padding) and the
# DP over L is exact and fast; its optimum is a lower bound of the time optimum and its plan is
# within alpha per bin of it.

@njit(cache=True)
def bin_rate(params, e0, e1):
    """Seconds per sample of the linear relaxation of time, N (per + alpha / B) over the world
    size: FINF when the budget holds no sample of the shape."""
    B = np.int64(params[0]) // (e0 + e1)
    if B < 1:
        return FINF
    per = (params[2] * e0 + params[3] * e1 + params[4] * e0 * e0 + params[5] * e1 * e1
           + params[6] * e0 * e1)
    return (per + params[1] / B) / params[7]
