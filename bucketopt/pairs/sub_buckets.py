"""The sub-buckets of one input range: the 1-D DP over the outputs of its samples.

Given the p present outputs of an input range (their counts ``pc``), the best cover by at most
m = 1..mmax sub-buckets, each a bin of the 2-D plan:

- :func:`inner_monge` where the bin cost is a count times a nondecreasing weight of the
  sub-bucket's last output (edge padding; the linear relaxation of time, :func:`monge_weights`):
  Monge, so each layer is a divide-and-conquer pass over the monotone argmin, exact;
- :func:`inner_general` over a matrix of bin costs (:func:`bucketopt.pairs.bin_costs.rect_matrix`:
  dynamic padding, time): the textbook O(m p^2) DP.

With their argmins kept, :func:`arg_cuts` reads the last outputs of the optimum's sub-buckets.
"""

from __future__ import annotations

import numpy as np

from ..jit import njit
from .bin_costs import EDGE, FINF, bin_rate


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
def monge_weights(mode, params, e0, pv, p, gv, sv):
    """The weights of :func:`inner_monge` for the outputs ``pv`` of an input range of edge
    ``e0``: ``gv`` (per sample, by the sub-bucket's last output) and ``sv``."""
    for v in range(1, p + 1):
        if mode == EDGE:
            gv[v] = pv[v - 1]
            sv[v - 1] = pv[v - 1]
        else:
            gv[v] = bin_rate(params, e0, pv[v - 1])
            sv[v - 1] = 0


@njit(cache=True)
def inner_general(R, p, mmax, D, prev, cur, arg, want_arg):
    """Best cover of the p present outputs by at most m = 1..mmax sub-buckets, ``D[m]``, the
    sub-bucket of outputs u+1..v costing ``R[u, v]`` (FINF: no such bin); ``prev``, ``cur``:
    scratch of p + 1; with ``want_arg`` the argmins land in ``arg[m, v]``."""
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


@njit(cache=True)
def arg_cuts(arg, m, p):
    """The indices (into the present outputs) of the last outputs of the best cover by at most
    m sub-buckets, from the argmins ``arg`` of :func:`inner_monge` or :func:`inner_general`."""
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
