"""Kernels of :mod:`bucketopt.training.packing` (rows of documents under a token capacity).

Arrays and numbers in, arrays out; the callers in ``packing.py`` validate first. Kept apart from
``_kernels.py`` (the solver's DP kernels) so the sampler does not load those.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _lay_out(row_of, items, rows, order, starts, out, first_row):
    """Write ``items`` (item t goes to row ``row_of[t]`` of ``rows``) into ``order`` from ``out``,
    row after row in row order, items in their given order; the rows' offsets go to ``starts``
    from ``first_row``."""
    count = np.zeros(rows + 1, dtype=np.int64)
    for t in range(row_of.size):
        count[row_of[t] + 1] += 1
    for r in range(rows):
        count[r + 1] += count[r]
    for r in range(rows):
        starts[first_row + r] = out + count[r]
    for t in range(row_of.size):
        order[out + count[row_of[t]]] = items[t]
        count[row_of[t]] += 1


@njit(cache=True)
def bfd_windows(lengths, capacity, window):
    """Best-fit decreasing inside consecutive windows of ``window`` documents.

    Returns (order, starts): ``order`` lists positions of ``lengths``, row after row; rows never
    cross a window and appear in the order they were opened. Inside a window the documents go
    longest first (ties: the earlier position first) to the open row with the least room that
    still fits them (ties: the row opened first), else to a new row.
    """
    n = lengths.size
    order = np.empty(n, dtype=np.int64)
    starts = np.empty(n, dtype=np.int64)
    n_rows = 0
    out = 0
    for lo in range(0, n, window):
        hi = min(n, lo + window)
        w = hi - lo
        # longest first, stable
        idx = np.argsort(-lengths[lo:hi], kind="mergesort") + lo
        room = np.empty(w, dtype=np.int64)
        row_of = np.empty(w, dtype=np.int64)
        rows = 0
        for t in range(w):
            x = lengths[idx[t]]
            best = -1
            best_room = capacity + 1
            for r in range(rows):
                if x <= room[r] < best_room:
                    best = r
                    best_room = room[r]
            if best < 0:
                best = rows
                room[rows] = capacity
                rows += 1
            room[best] -= x
            row_of[t] = best
        _lay_out(row_of, idx, rows, order, starts, out, n_rows)
        out += w
        n_rows += rows
    return order, starts[:n_rows].copy()


@njit(cache=True)
def balance_kernel(lengths, weights, order, starts, world_size, capacity):
    """Longest-processing-time dealing of each step's documents over ``world_size`` rows.

    ``order``/``starts`` are rows in training order (step i = rows i*G .. i*G + G - 1). For each
    step the documents are taken by decreasing weight (ties: longer first, then earlier) and each
    goes to the row of least weight among those it fits in (tokens <= capacity; ties: the lower
    rank). The dealt rows replace the step's rows only when every document found a row and the
    heaviest row is strictly lighter than the heaviest original row; otherwise the step keeps
    its rows. A last step of fewer than G rows is dealt over G rows when it has at least G
    documents. Returns (order, starts, dealt steps).
    """
    n = order.size
    n_rows = starts.size
    g = world_size
    new_order = np.empty(n, dtype=np.int64)
    new_starts = np.empty(n_rows + g, dtype=np.int64)
    bounds = np.empty(n_rows + 1, dtype=np.int64)
    bounds[:n_rows] = starts
    bounds[n_rows] = n
    out = 0
    rows_out = 0
    dealt = 0
    load = np.empty(g, dtype=np.float64)
    tokens = np.empty(g, dtype=np.int64)
    for first in range(0, n_rows, g):
        last = min(n_rows, first + g)
        lo = bounds[first]
        hi = bounds[last]
        m = hi - lo
        # the heaviest original row
        old_max = 0.0
        for r in range(first, last):
            s = 0.0
            for t in range(bounds[r], bounds[r + 1]):
                s += weights[order[t]]
            if s > old_max:
                old_max = s
        ok = m >= g
        if ok:
            docs = order[lo:hi]
            w = weights[docs]
            ln = lengths[docs]
            # decreasing weight, then decreasing length, then position (lexsort: last key first)
            rank = np.argsort(np.arange(m), kind="mergesort")
            rank = rank[np.argsort(-ln[rank], kind="mergesort")]
            rank = rank[np.argsort(-w[rank], kind="mergesort")]
            load[:] = 0.0
            tokens[:] = 0
            row_of = np.empty(m, dtype=np.int64)
            for t in range(m):
                j = rank[t]
                x = ln[j]
                best = -1
                for r in range(g):
                    if tokens[r] + x <= capacity and (best < 0 or load[r] < load[best]):
                        best = r
                if best < 0:
                    ok = False
                    break
                load[best] += w[j]
                tokens[best] += x
                row_of[t] = best
            if ok:
                new_max = 0.0
                for r in range(g):
                    if load[r] > new_max:
                        new_max = load[r]
                ok = new_max < old_max
            if ok:
                _lay_out(row_of, docs[rank], g, new_order, new_starts, out, rows_out)
                rows_out += g
                dealt += 1
        if not ok:
            for r in range(first, last):
                new_starts[rows_out] = out + bounds[r] - lo
                rows_out += 1
            new_order[out:out + m] = order[lo:hi]
        out += m
    return new_order, new_starts[:rows_out].copy(), dealt


# --- packing levels for time (bucketopt.objectives.packed) --------------------------------------
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
        prev[:] = cur
    return opt, best
