"""numba kernels of the exact 2-D (hierarchical) DP.

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
Monge: their inner DP is the textbook O(m p^2) over a matrix of rectangle costs.
"""

from __future__ import annotations

import math

import numpy as np

from ..jit import njit

INF = np.int64(2**62)
FINF = 1e300

# what the outer DP minimises (its ``mode``)
EDGE = 0  # edge padding, exact integers, Monge inner pass
KIND_BATCH = 1  # expected padded tokens, batches padded to their longest input and output
KIND_TIME = 2  # seconds of static-shape batches (edge padding) under the pair cost model
LINEAR_TIME = 3  # the linear relaxation of KIND_TIME (Monge inner pass; a lower bound)


@njit(cache=True)
def inner_monge(gv, pc, sv, p, mmax, D, work, arg, want_arg, big):
    """Best cover of the p present outputs (counts ``pc``) by at most m = 1..mmax sub-buckets,
    ``D[m]``, where the sub-bucket of outputs u+1..v costs gv[v] (C[v] - C[u]) - (S[v] - S[u])
    (C: prefix counts, S: prefix sums of pc x sv). With ``gv`` nondecreasing this cost is Monge
    (edge padding: gv = sv = the outputs; the relaxed time: gv = seconds per sample, sv = 0), so
    each layer is a divide-and-conquer pass over the monotone argmin. ``gv[v] >= big`` from some
    v on marks bins the budget cannot hold. ``work = (prev, cur, prefc, prefs)``; with
    ``want_arg`` the argmins land in ``arg[m, v]``."""
    prev, cur, prefc, prefs = work
    prefc[0] = 0
    prefs[0] = 0
    for v in range(1, p + 1):
        prefc[v] = prefc[v - 1] + pc[v - 1]
        prefs[v] = prefs[v - 1] + pc[v - 1] * sv[v - 1]
    vmax = p
    while vmax > 0 and gv[vmax] >= big:
        vmax -= 1
    prev[0] = 0
    for v in range(1, p + 1):
        prev[v] = gv[v] * prefc[v] - prefs[v] if v <= vmax else big
        if want_arg:
            arg[1, v] = 0
    D[1] = prev[p]
    stack = np.empty((4 * (p + 2), 4), dtype=np.int64)
    for m in range(2, mmax + 1):
        cur[0] = 0
        for v in range(vmax + 1, p + 1):
            cur[v] = big
        top = 0
        if vmax >= 1:
            stack[0, 0], stack[0, 1], stack[0, 2], stack[0, 3] = 1, vmax, 0, vmax - 1
            top = 1
        while top > 0:
            top -= 1
            lo, hi, olo, ohi = stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3]
            if lo > hi:
                continue
            mid = (lo + hi) // 2
            best = big
            bu = olo
            for u in range(olo, min(mid - 1, ohi) + 1):
                val = prev[u] + gv[mid] * (prefc[mid] - prefc[u]) - (prefs[mid] - prefs[u])
                if val < best:
                    best = val
                    bu = u
            cur[mid] = best
            if want_arg:
                arg[m, mid] = bu
            stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3] = lo, mid - 1, olo, bu
            top += 1
            stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3] = mid + 1, hi, bu, ohi
            top += 1
        D[m] = cur[p]
        for v in range(p + 1):
            prev[v] = cur[v]


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
def _monge_weights(mode, params, e0, pv, p, gv, sv):
    # the inner cost's gv (per sample, by the sub-bucket's last output) and sv
    for v in range(1, p + 1):
        if mode == EDGE:
            gv[v] = pv[v - 1]
            sv[v - 1] = pv[v - 1]
        else:
            gv[v] = _bin_rate(params, e0, pv[v - 1])
            sv[v - 1] = 0


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
    acnt = np.zeros(ma, dtype=np.int64)
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
                _monge_weights(mode, params, a_values[j], pv, p, gv, sv)
                if gv[p] >= big:
                    continue  # the range's widest bin exceeds the budget: no plan has it
                inner_monge(gv, pc, sv, p, mmax, D, work, noarg, False, big)
                if mode == EDGE:
                    extra = a_values[j] * state[2] - state[3]  # the inputs' edge padding
            else:
                R = np.empty((p + 1, p + 1))
                _rect_matrix(i, j, mode, params, a_values, cols, (pv, pc, pidx), p, R, acnt)
                _inner_general(R, p, mmax, D, work[0], work[1], noarg, False)
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
def _cuts(arg, m, p):
    out = np.empty(m, dtype=np.int64)
    n = 0
    v = p
    layer = m
    while v > 0:
        out[n] = v - 1
        n += 1
        v = arg[layer, v] if layer > 1 else 0
        layer -= 1
    return out[:n][::-1].copy()


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
        _monge_weights(mode, params, a_values[j], pv, p, gv, sv)
        work = (np.full(p + 1, big), np.full(p + 1, big), np.zeros(p + 1, dtype=np.int64),
                np.full(p + 1, big))
        inner_monge(gv, pc, sv, p, m, np.full(m + 2, big), work, arg, True, big)
    else:
        R = np.empty((p + 1, p + 1))
        acnt = np.zeros(a_values.size, dtype=np.int64)
        _rect_matrix(i, j, mode, params, a_values, cols, (pv, pc, pidx), p, R, acnt)
        _inner_general(R, p, m, np.empty(m + 2), np.empty(p + 1), np.empty(p + 1), arg, True)
    return pv[_cuts(arg, m, p)]


# ---- the general rectangle DP (dynamic padding, time) -------------------------------------

@njit(cache=True)
def log_factorials(n):
    """log(k!) for k = 0..n: the table the order statistics read (lgamma once per count)."""
    out = np.empty(n + 1)
    for k in range(n + 1):
        out[k] = math.lgamma(k + 1.0)
    return out


@njit(cache=True)
def _ratio(M, s, N, lf):
    # C(M, s) / C(N, s) for 0 <= s <= M <= N (0 when M < s); lf[k] = log(k!)
    if s > M:
        return 0.0
    if M == N:
        return 1.0
    return math.exp(lf[M] - lf[M - s] - lf[N] + lf[N - s])


@njit(cache=True)
def _expected_max(values, counts, lo, hi, N, s, lf):
    # E[max of s draws without replacement] from counts[lo..hi] (values ascending), N samples
    if s <= 0:
        return 0.0
    total = 0.0
    below = 0
    r_below = 0.0
    for t in range(lo, hi + 1):
        c = counts[t]
        if c == 0:
            continue
        upto = below + c
        r_upto = _ratio(upto, s, N, lf)
        total += values[t] * (r_upto - r_below)
        below = upto
        r_below = r_upto
    return total


@njit(cache=True)
def rect_cost(kind, params, e0, e1, N, real, a_marg, alo, ahi, b_marg, ulo, uhi):
    """Cost of one bin: N samples, ``real`` tokens (inputs + outputs), edges (e0, e1); its
    input marginal ``a_marg = (values, counts)`` over ``alo..ahi`` and its output marginal
    ``b_marg`` over ``ulo..uhi``. ``params``: token budget, alpha, beta_in, beta_out, gamma_in,
    gamma_out, gamma_cross, world size, then (dynamic padding) log(k!) for k = 0..n.
    FINF when the budget holds no sample of this shape."""
    B = np.int64(params[0]) // (e0 + e1)
    if B < 1:
        return FINF
    q = N // B
    r = N - q * B
    if kind == KIND_BATCH:
        lf = params[8:]
        comp = 0.0
        if q > 0:
            comp += q * B * (_expected_max(a_marg[0], a_marg[1], alo, ahi, N, B, lf)
                             + _expected_max(b_marg[0], b_marg[1], ulo, uhi, N, B, lf))
        if r > 0:
            comp += r * (_expected_max(a_marg[0], a_marg[1], alo, ahi, N, r, lf)
                         + _expected_max(b_marg[0], b_marg[1], ulo, uhi, N, r, lf))
        return comp - real
    per = (params[2] * e0 + params[3] * e1 + params[4] * e0 * e0 + params[5] * e1 * e1
           + params[6] * e0 * e1)
    t = q * (params[1] + B * per)
    if r > 0:
        t += params[1] + r * per
    return t / params[7]


@njit(cache=True)
def _rect_matrix(i, j, kind, params, a_values, cols, present, p, R, acnt):
    # R[u, v]: cost of the bin made of present outputs u+1..v of the input range i..j;
    # cols = (b_ptr, b_a, b_count), present = (pv, pc, pidx)
    b_ptr, b_a, b_count = cols
    pv, pc, pidx = present
    for u in range(p):
        for t in range(i, j + 1):
            acnt[t] = 0
        N = 0
        real = 0
        for v in range(u + 1, p + 1):
            if kind == KIND_TIME:  # static shapes: the count is all the cost needs
                N += pc[v - 1]
                R[u, v] = rect_cost(kind, params, a_values[j], pv[v - 1], N, 0,
                                    (a_values, acnt), i, j, (pv, pc), u, v - 1)
                continue
            bi = pidx[v - 1]
            for e in range(b_ptr[bi], b_ptr[bi + 1]):
                a = b_a[e]
                if i <= a <= j:
                    acnt[a] += b_count[e]
                    N += b_count[e]
                    real += b_count[e] * (a_values[a] + pv[v - 1])
            R[u, v] = rect_cost(kind, params, a_values[j], pv[v - 1], N, real,
                                (a_values, acnt), i, j, (pv, pc), u, v - 1)


@njit(cache=True)
def _inner_general(R, p, mmax, D, prev, cur, arg, want_arg):
    prev[0] = 0.0
    for v in range(1, p + 1):
        prev[v] = R[0, v]
        if want_arg:
            arg[1, v] = 0
    D[1] = prev[p]
    for m in range(2, mmax + 1):
        cur[0] = 0.0
        for v in range(1, p + 1):
            best = FINF
            bu = 0
            for u in range(v):
                if prev[u] >= FINF or R[u, v] >= FINF:
                    continue
                val = prev[u] + R[u, v]
                if val < best:
                    best = val
                    bu = u
            cur[v] = best
            if want_arg:
                arg[m, v] = bu
        D[m] = cur[p]
        for v in range(p + 1):
            prev[v] = cur[v]


# ---- the linear relaxation of time (Monge, fast) -------------------------------------------
# A bin's time under static shapes is N per(e0, e1) + alpha ceil(N / B(e0, e1)) (over the world
# size): between its linear part L = N (per + alpha / B) and L + alpha. L is a count times a
# function of the edges that grows with e1, so the inner cost is Monge (as edge padding) and the
# DP over L is exact and fast; its optimum is a lower bound of the time optimum and its plan is
# within alpha per bin of it.

@njit(cache=True)
def _bin_rate(params, e0, e1):
    # seconds per sample of the relaxed cost; FINF when the budget holds no sample of the shape
    B = np.int64(params[0]) // (e0 + e1)
    if B < 1:
        return FINF
    per = (params[2] * e0 + params[3] * e1 + params[4] * e0 * e0 + params[5] * e1 * e1
           + params[6] * e0 * e1)
    return (per + params[1] / B) / params[7]
