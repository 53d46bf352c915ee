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

from ..jit import njit
from ..orderstats import expected_max

INF = np.int64(2**62)
FINF = 1e300

# what the outer DP minimises (its ``mode``)
EDGE = 0  # edge padding, exact integers, Monge inner pass
KIND_BATCH = 1  # expected padded tokens, batches padded to their longest input and output
KIND_TIME = 2  # seconds of static-shape batches (edge padding) under the pair cost model
LINEAR_TIME = 3  # the linear relaxation of KIND_TIME (Monge inner pass; a lower bound)


@njit(cache=True)
def marginal_max(values, counts, lo, hi, s, lf_hi, lf_lo, scratch):
    """E[longest of s samples drawn without replacement] from a marginal: ``counts[t]``
    samples of length ``values[t]`` for t = lo..hi (values ascending, zero counts allowed), by
    :func:`bucketopt.orderstats.expected_max` (``lf_hi``, ``lf_lo``: the log(k!) table of
    :func:`bucketopt.orderstats.log_factorials`) over the lengths present. ``scratch``: int64
    (2, at least hi - lo + 2), overwritten (those lengths, their prefix counts)."""
    present, prefix = scratch[0], scratch[1]
    m = 0
    prefix[0] = 0
    for t in range(lo, hi + 1):
        if counts[t] > 0:
            present[m] = values[t]
            prefix[m + 1] = prefix[m] + counts[t]
            m += 1
    if m == 0 or s <= 0:
        return 0.0
    return expected_max(present, prefix, lf_hi, lf_lo, 0, m, s)


@njit(cache=True)
def rect_cost(kind, params, e0, e1, N, real, a_marg, alo, ahi, b_marg, ulo, uhi):
    """Cost of one bin: N samples, ``real`` tokens (inputs + outputs), edges (e0, e1); its
    input marginal ``a_marg = (values, counts, scratch)`` over ``alo..ahi`` and its output
    marginal ``b_marg`` over ``ulo..uhi`` (``scratch``: int64 (2, one more than values), for
    :func:`marginal_max`). ``params``: token budget, alpha, beta_in, beta_out, gamma_in,
    gamma_out, gamma_cross, world size, then (dynamic padding) the log(k!) table for k = 0..n,
    its hi parts then its lo parts (:func:`bucketopt.orderstats.log_factorials`).
    FINF when the budget holds no sample of this shape."""
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
            comp += q * B * (
                marginal_max(a_marg[0], a_marg[1], alo, ahi, B, lf_hi, lf_lo, a_marg[2])
                + marginal_max(b_marg[0], b_marg[1], ulo, uhi, B, lf_hi, lf_lo, b_marg[2]))
        if r > 0:
            comp += r * (
                marginal_max(a_marg[0], a_marg[1], alo, ahi, r, lf_hi, lf_lo, a_marg[2])
                + marginal_max(b_marg[0], b_marg[1], ulo, uhi, r, lf_hi, lf_lo, b_marg[2]))
        return comp - real
    per = (params[2] * e0 + params[3] * e1 + params[4] * e0 * e0 + params[5] * e1 * e1
           + params[6] * e0 * e1)
    t = q * (params[1] + B * per)
    if r > 0:
        t += params[1] + r * per
    return t / params[7]


@njit(cache=True)
def rect_matrix(i, j, kind, params, a_values, cols, present, p, R, acnt):
    """``R[u, v]``: the cost (:func:`rect_cost`) of the bin made of present outputs u+1..v of
    the input range i..j; ``cols = (b_ptr, b_a, b_count)``, ``present = (pv, pc, pidx)``,
    ``acnt``: int64 scratch over the inputs."""
    b_ptr, b_a, b_count = cols
    pv, pc, pidx = present
    scratch = np.empty((2, max(a_values.size, pv.size) + 1), dtype=np.int64)
    for u in range(p):
        for t in range(i, j + 1):
            acnt[t] = 0
        N = 0
        real = 0
        for v in range(u + 1, p + 1):
            if kind == KIND_TIME:  # static shapes: the count is all the cost needs
                N += pc[v - 1]
                R[u, v] = rect_cost(kind, params, a_values[j], pv[v - 1], N, 0,
                                    (a_values, acnt, scratch), i, j, (pv, pc, scratch), u,
                                    v - 1)
                continue
            bi = pidx[v - 1]
            for e in range(b_ptr[bi], b_ptr[bi + 1]):
                a = b_a[e]
                if i <= a <= j:
                    acnt[a] += b_count[e]
                    N += b_count[e]
                    real += b_count[e] * (a_values[a] + pv[v - 1])
            R[u, v] = rect_cost(kind, params, a_values[j], pv[v - 1], N, real,
                                (a_values, acnt, scratch), i, j, (pv, pc, scratch), u,
                                    v - 1)


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
