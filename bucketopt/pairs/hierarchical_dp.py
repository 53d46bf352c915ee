"""The exact 2-D (hierarchical) DP: the outer DP over input ranges, and its backtrack.

A 2-D plan is a set of dim0 buckets (consecutive distinct inputs, edge = the bucket's largest
input), each cut into dim1 sub-buckets (consecutive distinct outputs of that bucket's samples,
edge = the sub-bucket's largest output). Every bin is a rectangle and every objective is a sum
over bins of a cost that depends only on the bin's samples and edges, so the optimum is an outer
DP over dim0 ranges whose cost with m sub-buckets is an inner 1-D DP over the outputs of the
samples in that range:

    F[j][k] = min over i < j, 1 <= m <= k of  F[i][k - m] + C(i, j, m)

(free distribution of k bins; with a grid (K1, K2) every dim0 bucket counts one layer and takes
at most K2 sub-buckets). The outer loop walks each range end j and extends the range downwards
one distinct input at a time, so the range's output histogram is built incrementally.

Edge padding is Monge in the inner dimension (the 1-D edge cost): each inner layer is a
divide-and-conquer pass over the monotone argmin, exact. Dynamic padding and time are not
Monge: their inner DP is the textbook O(m p^2) over a matrix of rectangle costs. The inner DPs:
:mod:`bucketopt.pairs.sub_buckets`; the cost of a bin: :mod:`bucketopt.pairs.bin_costs`.
"""

from __future__ import annotations

import numpy as np

from ..jit import njit
from .bin_costs import EDGE, LINEAR_TIME, rect_matrix, rect_scratch
from .sub_buckets import arg_cuts, inner_general, inner_monge, monge_weights


@njit(cache=True)
def _add_column(i, a_values, a_ptr, a_b, a_count, h, state):
    # state: lo, hi, N, sum of inputs
    for e in range(a_ptr[i], a_ptr[i + 1]):
        bi = a_b[e]
        h[bi] += a_count[e]
        if bi < state[0]:
            state[0] = bi
        if bi > state[1]:
            state[1] = bi
        state[2] += a_count[e]
        state[3] += a_count[e] * a_values[i]


@njit(cache=True)
def _present(h, lo, hi, b_values, pv, pc, pidx):
    p = 0
    for bi in range(lo, hi + 1):
        if h[bi] > 0:
            pv[p] = b_values[bi]
            pc[p] = h[bi]
            pidx[p] = bi
            p += 1
    return p


@njit(cache=True)
def _relax(F, arg_i, arg_m, i, j, D, mmax, grid, big, extra):
    # the outer update of range i..j (0-based, inclusive) whose best covers cost D[1..mmax]
    # (plus ``extra``): F[j + 1, k] over every layer k
    for k in range(1, F.shape[1]):
        mlo = mmax if grid else 1
        mhi = mmax if grid else min(k, mmax)
        for m in range(mlo, mhi + 1):
            base = F[i, k - 1] if grid else F[i, k - m]
            if base >= big or D[m] >= big:
                continue
            val = base + extra + D[m]
            if val < F[j + 1, k]:
                F[j + 1, k] = val
                arg_i[j + 1, k] = i
                arg_m[j + 1, k] = m


@njit(cache=True)
def outer_dp(rows, cols, k2, grid, mode, params, F, big):
    """The outer DP over input ranges (see the module), filling ``F`` in place: ``F[j, k]``
    the least cost of the first j distinct inputs with at most k layers (bins, or input buckets
    on a grid; ``F`` has layers + 1 columns, row 0 zero, the rest ``big``). Returns (arg_i,
    arg_m): the start and sub-bucket count of the last input bucket. ``rows = (a_values,
    b_values, a_ptr, a_b, a_count)``, ``cols = (b_ptr, b_a, b_count)``; ``mode``: EDGE
    (integer ``F``), KIND_BATCH, KIND_TIME or LINEAR_TIME (float ``F``)."""
    a_values, b_values, a_ptr, a_b, a_count = rows
    ma, mb = a_values.size, b_values.size
    layers = F.shape[1] - 1
    arg_i = np.full((ma + 1, layers + 1), -1, dtype=np.int64)
    arg_m = np.full((ma + 1, layers + 1), -1, dtype=np.int64)
    h = np.zeros(mb, dtype=np.int64)
    pv = np.empty(mb, dtype=np.int64)
    pc = np.empty(mb, dtype=np.int64)
    pidx = np.empty(mb, dtype=np.int64)
    gv = np.empty(mb + 1, dtype=F.dtype)
    sv = np.empty(mb, dtype=F.dtype)
    work = (np.empty(mb + 1, dtype=F.dtype), np.empty(mb + 1, dtype=F.dtype),
            np.empty(mb + 1, dtype=np.int64), np.empty(mb + 1, dtype=F.dtype))
    scratch = rect_scratch(ma, mb)
    D = np.empty(max(layers, k2) + 2, dtype=F.dtype)
    noarg = np.empty((1, 1), dtype=np.int64)
    state = np.empty(4, dtype=np.int64)
    for j in range(ma):
        h[:] = 0
        state[0], state[1], state[2], state[3] = mb, -1, 0, 0
        for i in range(j, -1, -1):
            _add_column(i, a_values, a_ptr, a_b, a_count, h, state)
            p = _present(h, state[0], state[1], b_values, pv, pc, pidx)
            mmax = min(k2, p) if grid else min(layers, p)
            extra = 0
            if mode in (EDGE, LINEAR_TIME):
                monge_weights(mode, params, a_values[j], pv, p, gv, sv)
                if gv[p] >= big:
                    continue  # the range's widest bin exceeds the budget: no plan has it
                inner_monge(gv, pc, sv, p, mmax, D, work, noarg, False, big)
                if mode == EDGE:
                    extra = a_values[j] * state[2] - state[3]  # the inputs' edge padding
            else:
                R = np.empty((p + 1, p + 1))
                rect_matrix(i, j, mode, params, a_values, cols, (pv, pc, pidx), p, R, scratch)
                inner_general(R, p, mmax, D, work[0], work[1], noarg, False)
            _relax(F, arg_i, arg_m, i, j, D, mmax, grid, big, extra)
    return arg_i, arg_m


@njit(cache=True)
def range_outputs(i, j, a_values, b_values, a_ptr, a_b, a_count):
    """Present outputs (values, counts, indices) of the samples whose input index is in i..j."""
    mb = b_values.size
    h = np.zeros(mb, dtype=np.int64)
    state = np.empty(4, dtype=np.int64)
    state[0], state[1], state[2], state[3] = mb, -1, 0, 0
    for t in range(i, j + 1):
        _add_column(t, a_values, a_ptr, a_b, a_count, h, state)
    pv = np.empty(mb, dtype=np.int64)
    pc = np.empty(mb, dtype=np.int64)
    pidx = np.empty(mb, dtype=np.int64)
    p = _present(h, state[0], state[1], b_values, pv, pc, pidx)
    return pv[:p].copy(), pc[:p].copy(), pidx[:p].copy()


@njit(cache=True)
def cuts(i, j, m, rows, cols, mode, params, big):
    """The output edges of the best at-most-m cover of the input range i..j (0-based,
    inclusive) under ``mode``: the sub-buckets of that input bucket in the optimum."""
    a_values, b_values, a_ptr, a_b, a_count = rows
    pv, pc, pidx = range_outputs(i, j, a_values, b_values, a_ptr, a_b, a_count)
    p = pv.size
    arg = np.zeros((m + 1, p + 1), dtype=np.int64)
    if mode in (EDGE, LINEAR_TIME):  # arrays of big's type: int64 or float64
        gv = np.full(p + 1, big)
        sv = np.full(p + 1, big)
        monge_weights(mode, params, a_values[j], pv, p, gv, sv)
        work = (np.full(p + 1, big), np.full(p + 1, big), np.zeros(p + 1, dtype=np.int64),
                np.full(p + 1, big))
        inner_monge(gv, pc, sv, p, m, np.full(m + 2, big), work, arg, True, big)
    else:
        R = np.empty((p + 1, p + 1))
        rect_matrix(i, j, mode, params, a_values, cols, (pv, pc, pidx), p, R,
                    rect_scratch(a_values.size, b_values.size))
        inner_general(R, p, m, np.empty(m + 2), np.empty(p + 1), np.empty(p + 1), arg, True)
    return pv[arg_cuts(arg, m, p)]
