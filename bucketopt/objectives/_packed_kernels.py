"""Kernels of the packing-level objective (:mod:`bucketopt.objectives.packed`): arrays and
numbers in, arrays out."""

from __future__ import annotations

import numpy as np

from ..jit import njit


@njit(cache=True)
def level_seconds_kernel(m0, m1, m2, m3, m4, capacity, alpha, beta, gamma, e_g, world):
    """Expected seconds of one packing level from its moments m_p = sum c u**p, u = d / T
    (bucketopt.objectives.packed explains each term); e_g = E[max of G standard normals]."""
    if m0 <= 0.0:
        return 0.0
    r = m2 / m1  # rho / capacity
    rows = m1 / (1.0 - 0.5 * (r - 1.0 / capacity)) + 0.5
    if rows < 1.0:
        rows = 1.0
    b = beta * capacity  # seconds per row of capacity tokens
    c = gamma * capacity * capacity  # seconds per capacity**2 of attention
    var_room = m3 / (3.0 * m1) - 0.25 * r * r
    if var_room < 0.0:
        var_room = 0.0
    var_att = (m4 - 2.0 * r * m3 + r * r * m2) / m1  # (T / E[d]) Var(d^2 - rho d) / T^4
    if var_att < 0.0:
        var_att = 0.0
    sigma = np.sqrt((b + c * r) ** 2 * var_room + c * c * var_att)
    return (rows * alpha + b * m1 + c * m2 + rows * sigma * e_g) / world


@njit(cache=True)
def level_layers_kernel(prefix, win_lo, win_hi, kmax, capacity, alpha, beta, gamma, e_g, world):
    """Exact DP over every pair of candidate edges for the summed level seconds.

    ``prefix`` (g + 1, 5): prefix sums over the groups of the moments; a level (i, j] is allowed
    when ``win_lo[j] <= i <= win_hi[j]``. Returns ``opt`` (kmax, g + 1) int64, ``opt[k-1, j]``
    the start of the last level of the best cover of groups 1..j by at most k levels (-1 if
    none; ties: the smallest start), and ``best`` (kmax,) float64 for j = g (inf if none).
    """
    g = prefix.shape[0] - 1
    inf = np.inf
    prev = np.full(g + 1, inf)
    prev[0] = 0.0
    opt = np.full((kmax, g + 1), -1, dtype=np.int64)
    best = np.full(kmax, inf)
    cur = np.full(g + 1, inf)
    for layer in range(kmax):
        cur[:] = inf
        cur[0] = 0.0
        for j in range(1, g + 1):
            lo = max(win_lo[j], 0)
            hi = min(win_hi[j], j - 1)
            for i in range(lo, hi + 1):
                if prev[i] == inf:
                    continue
                c = level_seconds_kernel(prefix[j, 0] - prefix[i, 0], prefix[j, 1] - prefix[i, 1],
                                         prefix[j, 2] - prefix[i, 2], prefix[j, 3] - prefix[i, 3],
                                         prefix[j, 4] - prefix[i, 4], capacity, alpha, beta,
                                         gamma, e_g, world)
                v = prev[i] + c
                if v < cur[j]:
                    cur[j] = v
                    opt[layer, j] = i
        best[layer] = cur[g]
        for j in range(g + 1):  # (a loop: a slice assignment compiles numba's shape checks)
            prev[j] = cur[j]
    return opt, best
