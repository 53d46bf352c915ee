"""numba kernels of the certified DP (:mod:`bucketopt.objectives.certified`).

A relaxation bounds every bucket's cost from below by l(i, j) = A[j] - U[j] P[i] + R[i]
(P: prefix sample counts), so that one layer of the relaxed DP,
L_k(j) = A[j] + min_i (L_{k-1}(i) + R[i] - U[j] P[i]), is a lower-envelope query of lines
(:func:`relaxed_layers`). The backward pass (suffix bounds) is the same with the roles of i and
j exchanged; :func:`prefix_moments` gives the moments the bounds of a cell use.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...jit import njit
from ...orderstats import NEGLIGIBLE, binom_ratio, walk_moments
from ...sorting import search_left, search_right
from .hulls import envelope_place, envelope_push, hull_add, hull_min, lichao_insert, lichao_min


@njit(cache=True)
def top_at(T, j, n):
    """The top bound of a bucket of ``n`` samples that ends at j: the step holding its longest
    sample runs it and, in its largest batch, at least max(1, min(n, fewest) / G) rows (a step
    holds at least fewest rows or the whole bucket, a batch of G at least 1 / G of them), all
    padded to that length. ``T`` rows: alpha + q, q (one row's seconds at the longest length),
    fewest / G, 1 / G (Time.top_bound); -inf, 0, 0, 0 where an end has no such bound."""
    return top_of(T[0, j], T[1, j], T[2, j], T[3, j], n)


@njit(cache=True)
def top_of(t0, t1, t2, t3, n):
    """:func:`top_at` from the end's four rows of T (a scan over starts reads them once)."""
    return t0 + max(0.0, min(n * t3, t2) - 1.0) * t1


# The forward pass's small buckets (fewer than split[j] samples, priced one by one) are searched
# by bounds where an end has more than SMALL_DIRECT of them (small_best): lower hulls of the
# starts in aligned blocks of SMALL_LEAF << L starts (block_hulls) bound each block's least at
# once, and a block whose bound is above the best found is skipped; the others are split in
# halves, down to blocks of SMALL_LEAF << PRICED_LEVELS starts, priced start by start. On the
# 4M-token corpus of benchmarks/certified.py with 8 GPUs (T = 4M: a bucket of fewer than
# 2 G B samples spans some 1,400 of its 37,476 groups on average) the small buckets were some
# 54 million evaluations a layer, and the forward pass at k = 16 (alpha 0.5) took 3.2 s, then
# 1.6 s with a bound of all of an end's small buckets at once, priced one by one where it
# failed. On the source-code tail of benchmarks/certified.py (14,641 groups, 118 cells) that
# left 84 million of 137 million small buckets priced over 6 layers; searched by blocks, some
# 30 million, and the forward pass went from 0.41-0.46 to 0.25-0.31 s (the same values). The
# hulls are built once a layer needs them, each block from its halves' hulls: built for every
# layer from every start and tried from 64 small buckets on, they took one GPU's forward pass
# there (some 100 small buckets an end) from 0.67 to 0.90 s.
SMALL_DIRECT = 256
# The backward pass bounds a start's small buckets a block of this many ends at a time (their
# rows' least intercepts and largest slopes over the block, per cell: _small_blocks) and skips
# a block bounded at or above the best found
SMALL_BLOCK = 16
SMALL_LEAF = 16
PRICED_LEVELS = 2


class Blocks(NamedTuple):
    """The forward pass's lower hulls of the starts in aligned blocks (:func:`block_hulls`:
    ``hulls``, ``counts``, ``levels`` of them) and the scratch of their search
    (:func:`small_best`: ``stack`` of (level, first start) pairs and their ``bounds``)."""

    hulls: np.ndarray
    counts: np.ndarray
    levels: int
    stack: np.ndarray
    bounds: np.ndarray


@njit(cache=True)
def block_hulls(xs, ys, n, levels):
    """Lower hulls of the points (xs[i], ys[i]), i < n with ys finite, in aligned blocks of
    SMALL_LEAF << L points for L < levels: block b of level L holds its hull in
    hulls[L, b * size : b * size + counts[L, b]] (size = SMALL_LEAF << L). A block above the
    first level is the hull of its two halves' hulls (the points of neither are not on it)."""
    hulls = np.empty((levels, max(n, 1)), dtype=np.int64)
    counts = np.zeros((levels, n // SMALL_LEAF + 1), dtype=np.int64)
    for b in range(n // SMALL_LEAF):
        cnt = np.int64(0)
        for i in range(b * SMALL_LEAF, b * SMALL_LEAF + SMALL_LEAF):
            if ys[i] < np.inf:
                cnt = hull_add(hulls[0], b * SMALL_LEAF, cnt, xs, ys, i)
        counts[0, b] = cnt
    for L in range(1, levels):
        size = SMALL_LEAF << L
        half = size // 2
        for b in range(n // size):
            cnt = np.int64(0)
            for h in range(2):
                first = b * size + h * half
                for q in range(counts[L - 1, first // half]):
                    cnt = hull_add(hulls[L], b * size, cnt, xs, ys, hulls[L - 1, first + q])
            counts[L, b] = cnt
    return hulls, counts


@njit(cache=True)
def range_min_table(values):
    """table[L, j]: the least of values[j : j + 2^L] (a sparse table: any range's least in two
    reads, :func:`range_min`)."""
    n = values.size
    levels = 1
    while (1 << levels) <= n:
        levels += 1
    table = np.empty((levels, n))
    for j in range(n):  # (a loop: a row assignment compiles numba's shape checks)
        table[0, j] = values[j]
    for L in range(1, levels):
        half = 1 << (L - 1)
        for j in range(n - (1 << L) + 1):
            table[L, j] = min(table[L - 1, j], table[L - 1, j + half])
    return table


@njit(cache=True)
def range_min(table, a, b):
    """The least of values[a:b] (a < b) from :func:`range_min_table`."""
    L = 0
    while b - a >= (2 << L):
        L += 1
    return min(table[L, a], table[L, b - (1 << L)])


@njit(cache=True)
def _small_cost(P, icpt, T, j, i, a2, u, af, uf):
    """The forward pass's bound of the small bucket (i, j] (start i, with icpt[i] finite, in a
    cell whose rows of end j are a2, u, af, uf)."""
    return max(a2 - u * P[i], af - uf * P[i], top_at(T, j, P[j] - P[i])) + icpt[i]


@njit(cache=True)
def _block_floor(blk, P, icpt, T, j, L, first, a2, u, af, uf, stop):
    """A lower bound of :func:`_small_cost` over the aligned block of SMALL_LEAF << L starts
    from ``first`` (:func:`block_hulls`; inf for a block of no finite start): each of its three
    terms at its least over the block (min_i max(x_i, y_i) >= max(min x, min y)), the top bound
    at the block's last start (the fewest samples); returned as soon as a term is above
    ``stop``."""
    size = SMALL_LEAF << L
    cnt = blk.counts[L, first // size]
    if cnt == 0:
        return np.inf
    h = blk.hulls[L]
    # the fewest-rows line first: most often the largest term
    lb = hull_min(h, first, cnt, P, icpt, uf)[0] + af
    if lb > stop:
        return lb
    lb = max(lb, hull_min(h, first, cnt, P, icpt, u)[0] + a2)
    if lb > stop:
        return lb
    top = hull_min(h, first, cnt, P, icpt, 0.0)[0] + top_at(T, j, P[j] - P[first + size - 1])
    return max(lb, top)


@njit(cache=True)
def small_best(blk, P, icpt, rel, few, cell, cell_end, j, a, b, best, at):
    """(best, at) over ``best``, ``at`` and every small bucket (i, j], a <= i <= b, as pricing
    each (:func:`_small_cost`) in turn gives them (the least, then the least start): cell by
    cell, each aligned block of :func:`block_hulls` within the range is split in its halves
    (the lower bound first) only while its bound (:func:`_block_floor`) is not above the best
    found (a margin of 1e-9 of the terms' size for rounding), and priced start by start at
    SMALL_LEAF << PRICED_LEVELS starts; the starts outside the blocks are priced one by one.
    ``blk``: :class:`Blocks`; the bounds: the relaxation's A2, U and T and the fewest-rows
    lines ``few``."""
    levels, stack, bounds = blk.levels, blk.stack, blk.bounds
    A2, U, T, Af, Uf = rel.A2, rel.U, rel.T, few.A, few.U
    i = a
    while i <= b:
        c = cell[i]
        top = min(b, cell_end[c])
        a2 = A2[c, j]
        u = U[c, j]
        af = Af[c, j]
        uf = Uf[c, j]
        scale = 1e-9 * (abs(a2) + abs(af) + (abs(u) + abs(uf)) * P[j] + abs(T[0, j])
                        + abs(T[1, j]) * (T[2, j] + 1.0))
        while i <= top:
            if i % SMALL_LEAF != 0 or i + SMALL_LEAF - 1 > top:
                if icpt[i] < np.inf:
                    v = _small_cost(P, icpt, T, j, i, a2, u, af, uf)
                    if v < best or (v == best and i < at):
                        best = v
                        at = i
                i += 1
                continue
            L = 0
            while (levels > L + 1 and i % (SMALL_LEAF << (L + 1)) == 0
                   and i + (SMALL_LEAF << (L + 1)) - 1 <= top):
                L += 1
            stack[0, 0] = L
            stack[0, 1] = i
            bounds[0] = -np.inf  # (not bounded yet)
            depth = 1
            while depth > 0:
                depth -= 1
                lv = stack[depth, 0]
                first = stack[depth, 1]
                stop = best + scale + 1e-9 * abs(best)
                lb = bounds[depth]
                if lb == -np.inf:
                    lb = _block_floor(blk, P, icpt, T, j, lv, first, a2, u, af, uf, stop)
                if lb - 1e-9 * abs(lb) > stop:
                    continue  # (inf: no finite start) none of the block's starts can win
                if lv <= PRICED_LEVELS:
                    for q in range(first, first + (SMALL_LEAF << lv)):
                        if icpt[q] < np.inf:
                            v = _small_cost(P, icpt, T, j, q, a2, u, af, uf)
                            if v < best or (v == best and q < at):
                                best = v
                                at = q
                    continue
                half = SMALL_LEAF << (lv - 1)
                lo_b = _block_floor(blk, P, icpt, T, j, lv - 1, first, a2, u, af, uf, stop)
                hi_b = _block_floor(blk, P, icpt, T, j, lv - 1, first + half, a2, u, af, uf, stop)
                # the lower bound on top of the stack: searched first
                for h, b_h in ((first + half, hi_b), (first, lo_b)) if lo_b <= hi_b else (
                        (first, lo_b), (first + half, hi_b)):
                    stack[depth, 0] = lv - 1
                    stack[depth, 1] = h
                    bounds[depth] = b_h
                    depth += 1
            i += SMALL_LEAF << L
    return best, at


@njit(cache=True, nogil=True)
def relaxed_layers(rel, few, mean, P, win, kmax, forward, backward, tail):
    """Forward and backward passes of the relaxed DP over groups 0..g.

    Starts i in cells[c] <= i < cells[c + 1] (cells[0] = 0) use the relaxation of row c:
    l(i, j) = max(A[c, j] - U[c, j] P[i], top_at(T, j, P[j] - P[i])) + R[i] when the bucket
    holds at least split[j] samples (P[j] - P[i] >= split[j]), with A2 in place of A when it
    holds fewer (P[j] - split[j] must never decrease with j); T[0, j] = -inf where an end has
    no such bound (``rel``: :class:`.protocol.Relaxation`). ``few`` (:class:`.protocol.Lines`):
    Af[c, j] - Uf[c, j] P[i] bounds every bucket too (the fewest-rows bound of
    :class:`.protocol.Rows`; A2 and U again for none): it joins the buckets priced one by
    one, the small ones. ``mean`` (:class:`.protocol.MeanLines`): Mm[j] - Um[j] P[i] + Rm[i]
    bounds every bucket as well (the mean bound of Rows, with no cell: Um = 0 and Mm = -inf
    for none): its least
    over every start (forward) or end (backward) raises each value where it is higher
    (:func:`mean_layer`). Returns ``fwd`` (kmax + 1, g + 1):
    fwd[k, j] <= the cost of any cover of groups 1..j by at most k buckets (fwd[k, 0] = 0;
    inf everywhere else when not ``forward``), ``arg`` its argmin start (a chain of the
    relaxation, within the share windows where they never move left), and ``bwd``:
    bwd[k, i] <= the cost of any cover of groups i+1..g by at most k buckets (bwd[k, g] = 0;
    inf everywhere else when not ``backward``), never below ``tail[k, i]`` (a bound of its
    own, e.g. :func:`bucketopt.objectives.certified.layers.exact_tail`'s, which the layers
    before carry down; zeros for none). Infeasible: inf.

    In O(g (log g + cells)) a layer plus the small buckets: forward, every cell keeps the lower
    envelope of its starts that make a large bucket for the current end (a prefix of the cell,
    growing with the end); backward (:func:`backward_layer`), a Li Chao tree per cell holds
    the ends that make a large bucket with the current start (a suffix, growing as the start
    falls). Small buckets (fewer than split[j] samples) are priced one by one, within the share
    windows [win_lo[j], win_hi[j]], except those a bound shows no better than the best found
    (forward: by blocks of starts, :func:`small_best`; backward: all of a start's at once, the
    top bound's step, :func:`range_min`; a heavy tail with large batches has hundreds to
    thousands of them an end, where the rows of G B samples span most of its groups). The
    large ones take every start up to :func:`window_tops` (a prefix that holds every start the
    windows allow; its upper side, min_share). Forward, a window's lower side (max_share) cuts
    into one cell at a time, whose starts from it up are a queue of two envelopes (one undone
    push by push); backward, the trees drop it: a min over more buckets is still a lower
    bound. The top bound (:func:`top_at`, at the least count of the envelope's buckets) joins
    each envelope's minimum as that plus the least value among the same starts (forward) or
    ends (backward): min_i max(a_i, T + b_i) >= max(min_i a_i, T + min_i b_i)."""
    zero = np.int64(0)  # not the literal 0: one compiled signature for every call
    A, A2, split, U, R, T, cells = rel.A, rel.A2, rel.split, rel.U, rel.R, rel.T, rel.cells
    Af, Uf, Mm, Um, Rm = few.A, few.U, mean.M, mean.U, mean.R
    win_lo, win_hi = win.lo, win.hi
    g = A.shape[1] - 1
    nc = cells.size
    fwd = np.full((kmax + 1, g + 1), np.inf)
    bwd = np.full((kmax + 1, g + 1), np.inf)
    arg = np.full((kmax + 1, g + 1), -1, dtype=np.int64)
    fwd[:, 0] = 0.0
    bwd[:, g] = 0.0
    cell = cell_of(cells, g)
    big = big_starts(P, split)
    tops = window_tops(win_hi)
    f_slopes = np.empty(g)
    for i in range(g):
        f_slopes[i] = -float(P[i])
    cell_end = np.empty(nc, dtype=np.int64)
    for c in range(nc):
        cell_end[c] = cells[c + 1] - 1 if c + 1 < nc else g - 1
    icpt = np.empty(g)
    hl = np.empty(g, dtype=np.int64)
    cnt = np.zeros(nc, dtype=np.int64)
    least = np.empty(nc)  # the least intercept among each cell's envelope starts (ever)
    # a share window's lower side (win_lo, never decreasing) cuts into one cell at a time: that
    # cell's starts from win_lo up are a queue, in two hulls: those up to mid[c] pushed from the
    # top down (slopes P: queried at -U), whose lowest start leaves by undoing its push, and
    # those above mid[c] in the cell's usual hull; when the first runs empty it takes every
    # start of the second
    fh = np.empty(g, dtype=np.int64)
    fcnt = np.zeros(nc, dtype=np.int64)
    mid = np.empty(nc, dtype=np.int64)
    undo_at = np.full(g, -1, dtype=np.int64)  # a start's push: the position it took,
    undo_line = np.empty(g, dtype=np.int64)  # the line it overwrote
    undo_cnt = np.empty(g, dtype=np.int64)  # and the count before it
    levels = 1
    while (SMALL_LEAF << levels) <= g:
        levels += 1
    stack = np.empty((2 * levels + 2, 2), dtype=np.int64)
    bounds = np.empty(2 * levels + 2)
    mean = Mm[g] > -np.inf
    hm = np.empty(g, dtype=np.int64)  # the mean bound's hull: every start up to tops[j]
    icm = np.empty(g)
    for k in range(1, kmax + 1 if forward else 1):
        for i in range(g):
            icpt[i] = fwd[k - 1, i] + R[i]
            icm[i] = fwd[k - 1, i] + Rm[i]
        cm = np.int64(0)
        nm = np.int64(0)
        built = False  # the block hulls of this layer's starts, once an end needs them
        cnt[:] = 0
        fcnt[:] = 0
        least[:] = np.inf
        for c in range(nc):
            mid[c] = cells[c] - 1
        nxt = np.int64(0)  # starts below nxt are in their cell's hulls
        low = 0  # starts below low have left them
        for j in range(1, g + 1):
            last = min(big[j], tops[j])  # the large buckets' starts: a prefix
            while nxt <= last:
                if icpt[nxt] < np.inf:
                    c = cell[nxt]
                    cnt[c] = envelope_push(hl, cells[c], cnt[c], nxt, f_slopes, icpt)
                    least[c] = min(least[c], icpt[nxt])
                nxt += 1
            while low < min(win_lo[j], nxt):  # the lowest start leaves its queue
                c = cell[low]
                if low <= mid[c] and undo_at[low] >= 0:
                    fh[cells[c] + undo_at[low]] = undo_line[low]
                    fcnt[c] = undo_cnt[low]
                    undo_at[low] = -1
                low += 1
            if low < nxt:
                c = cell[low]
                if low > cells[c] and low > mid[c]:  # the cell's queue: all in the first hull
                    mid[c] = min(nxt - 1, cell_end[c])
                    fcnt[c] = 0
                    for i in range(mid[c], low - 1, -1):
                        undo_at[i] = -1
                        if icpt[i] < np.inf:
                            at = envelope_place(fh, cells[c], fcnt[c], i, P, icpt)
                            undo_at[i] = at
                            undo_line[i] = fh[cells[c] + at]
                            undo_cnt[i] = fcnt[c]
                            fh[cells[c] + at] = i
                            fcnt[c] = at + 1
                    cnt[c] = 0
            best = np.inf
            at = -1
            for c in range(nc if win_lo[j] <= last else 0):
                if cells[c] > last:
                    break
                if cell_end[c] < low:
                    continue
                if cnt[c] > 0:
                    v, a = hull_min(hl, cells[c], cnt[c], P, icpt, U[c, j])
                    a = hl[cells[c] + a]  # the start at that position
                    v = max(v + A[c, j], top_at(T, j, split[j]) + least[c])
                    if v < best or (v == best and a < at):
                        best = v
                        at = a
                if fcnt[c] > 0 and low > cells[c]:
                    v, a = hull_min(fh, cells[c], fcnt[c], P, icpt, U[c, j])
                    a = fh[cells[c] + a]
                    v = max(v + A[c, j], top_at(T, j, split[j]) + least[c])
                    if v < best or (v == best and a < at):
                        best = v
                        at = a
            s_lo = max(big[j] + 1, win_lo[j], 0)
            s_hi = min(win_hi[j], j - 1)
            if s_hi - s_lo >= SMALL_DIRECT:  # small buckets, within the window
                if not built:
                    hulls, counts = block_hulls(P, icpt, g, levels)
                    built = True
                h = arg[k, j - 1]  # the last end's best start first: a bound to prune with
                if s_lo <= h <= s_hi and icpt[h] < np.inf:
                    c = cell[h]
                    v = _small_cost(P, icpt, T, j, h, A2[c, j], U[c, j], Af[c, j], Uf[c, j])
                    if v < best:
                        best = v
                        at = h
                best, at = small_best(Blocks(hulls, counts, levels, stack, bounds), P, icpt, rel,
                                      few, cell, cell_end, j, s_lo, s_hi, best, at)
            else:
                for i in range(s_lo, s_hi + 1):
                    if icpt[i] < np.inf:
                        c = cell[i]
                        v = _small_cost(P, icpt, T, j, i, A2[c, j], U[c, j], Af[c, j], Uf[c, j])
                        if v < best or (v == best and i < at):
                            best = v
                            at = i
            if at >= 0:
                fwd[k, j] = best
                arg[k, j] = at
                if mean:
                    while nm <= tops[j]:
                        if icm[nm] < np.inf:
                            cm = hull_add(hm, zero, cm, P, icm, nm)
                        nm += 1
                    if cm > 0:
                        fwd[k, j] = max(best, hull_min(hm, zero, cm, P, icm, Um[j])[0] + Mm[j])
    if backward:
        from_big = ends_of_big(big, g)
        first = window_firsts(tops, g)
        order = np.arange(nc - 1, -1, -1)
        for k in range(1, kmax + 1):
            backward_layer(k, order, rel, few, P, from_big, first, win, bwd, tail)
            mean_layer(k, Mm, Um, Rm, P, bwd)
    return fwd, arg, bwd


@njit(cache=True, nogil=True)
def mean_layer(k, Mm, Um, Rm, P, bwd):
    """Raise layer k of the backward pass to the mean bound's: every bucket (i, j] costs at
    least Mm[j] - Um[j] P[i] + Rm[i] (every row at its own length, alpha / (G B) a row:
    :class:`bucketopt.objectives.certified.Rows`), so bwd[k, i] >= Rm[i] + the least
    Mm[j] - Um[j] P[i] + bwd[k - 1, j] over every end j > i (a minimum over more ends than the
    share windows allow is still a lower bound), from a Li Chao tree of those lines. Exact for
    buckets of one row a batch on one GPU, which the cells' lines price from shorter samples
    below them; nothing where Mm is -inf (an objective without the bound)."""
    zero = np.int64(0)  # not the literal 0: one compiled signature for every call
    g = P.size - 1
    if not Mm[g] > -np.inf:
        return
    slopes = np.empty(g + 1)
    icpt = np.empty(g + 1)
    for j in range(g + 1):
        slopes[j] = -Um[j]
        icpt[j] = Mm[j] + bwd[k - 1, j]
    tree = np.full(4 * g + 4, -1, dtype=np.int64)
    for i in range(g - 1, -1, -1):
        if icpt[i + 1] < np.inf:
            lichao_insert(tree, zero, g - 1, P, slopes, icpt, i + 1)
        v = lichao_min(tree, zero, g - 1, P, slopes, icpt, i)
        if v < np.inf:
            bwd[k, i] = max(bwd[k, i], Rm[i] + v)


@njit(cache=True)
def window_tops(win_hi):
    """tops[j]: the starts 0..tops[j] hold every start the share window lets end j take (win_hi
    below j), and tops never decreases (the largest such bound of j and every end below it)."""
    tops = np.empty(win_hi.size, dtype=np.int64)
    top = -1
    for j in range(win_hi.size):
        top = max(top, min(win_hi[j], j - 1))
        tops[j] = top
    return tops


@njit(cache=True)
def window_firsts(tops, g):
    """first[i]: the ends first[i]..g hold every end whose share window takes start i (the
    least j with tops[j] >= i: above i; g + 1 for none); never decreases with i."""
    first = np.empty(g, dtype=np.int64)
    for i in range(g):
        first[i] = search_left(tops[1:], i) + 1
    return first


@njit(cache=True)
def cell_of(cells, g):
    """cell[i]: the cell of start i, the last c with cells[c] <= i (cells ascending from 0), in
    O(g + cells) (a slice a cell made it O(g cells): some 3 million writes on 20,000 groups,
    for every part of every exact layer)."""
    cell = np.zeros(g + 1, dtype=np.int64)
    c = 0
    for i in range(g + 1):
        while c + 1 < cells.size and cells[c + 1] <= i:
            c += 1
        cell[i] = c
    return cell


@njit(cache=True)
def big_starts(P, split):
    """big[j]: starts i <= big[j] (and below j) make buckets of >= split[j] samples."""
    g = P.size - 1
    big = np.empty(g + 1, dtype=np.int64)
    for j in range(g + 1):
        big[j] = min(search_right(P, P[j] - split[j]) - 1, j - 1)
    return big


@njit(cache=True)
def ends_of_big(big, g):
    """from_big[i]: ends j >= from_big[i] make large buckets with start i (big[j] never
    decreases: P[j] - split[j] never does)."""
    from_big = np.empty(g, dtype=np.int64)
    for i in range(g):
        from_big[i] = search_left(big[1:], i) + 1
    return from_big


@njit(cache=True)
def _small_blocks(k, c, r0, nb, A2, U, Af, Uf, bwd, floor, g):
    # rows (least A2 + bwd, most U, least Af + bwd, most Uf, least floor) of each block of
    # SMALL_BLOCK ends from r0: every small bucket (i, j] of an end j in block b and a start i
    # of cell c costs, plus bwd[k - 1, j], at least the largest of row0 - row1 P[i],
    # row2 - row3 P[i] and row4 (P[i] >= 0 and U, Uf >= 0: each term's least over the block)
    out = np.empty((5, nb))
    for b in range(nb):
        a2 = af = fl = np.inf
        u = uf = 0.0
        for j in range(r0 + b * SMALL_BLOCK, min(r0 + (b + 1) * SMALL_BLOCK, g + 1)):
            w = bwd[k - 1, j]
            if w < np.inf:
                a2 = min(a2, A2[c, j] + w)
                af = min(af, Af[c, j] + w)
                fl = min(fl, floor[j])
                u = max(u, U[c, j])
                uf = max(uf, Uf[c, j])
        out[0, b], out[1, b], out[2, b], out[3, b], out[4, b] = a2, u, af, uf, fl
    return out


@njit(cache=True, nogil=True)
def backward_layer(k, cs, rel, few, P, from_big, first, win, bwd, tail):
    """Layer k of :func:`relaxed_layers`' backward pass, for the starts of the cells ``cs``:
    bwd[k, i] from bwd[k - 1] alone, so calls on disjoint cells are independent (they may run
    at once). A Li Chao tree per cell, over its starts, holds the ends that make a large bucket
    with the current start, from ``first[i]`` up (:func:`window_firsts`: a suffix, growing as
    the start falls); a cell of few starts scans its ends directly; small buckets are priced one
    by one, unless more than SMALL_DIRECT of them are all bounded (their top bound's step plus
    bwd, :func:`range_min`) at or above the best large one. Ends scanned one by one keep the
    share windows exactly. ``rel``, ``few``: as :func:`relaxed_layers` takes them."""
    A, A2, split, U, R, T, cells = rel.A, rel.A2, rel.split, rel.U, rel.R, rel.T, rel.cells
    Af, Uf, win_lo, win_hi = few.A, few.U, win.lo, win.hi
    g = A.shape[1] - 1
    nc = cells.size
    b_slopes = np.empty(g + 1)
    bicpt = np.empty(g + 1)
    tree = np.empty(4 * g + 4, dtype=np.int64)
    few = 2 * np.log2(g + 2)  # a cell of fewer starts scans its ends directly
    # a small bucket (i, j] costs at least T[0, j] (the top bound's step), so no small bucket of
    # a start beats its best large one where the least T[0, j] + bwd[k - 1, j] over its small
    # ends does not (the same sums, rounded the same way: v >= that sum exactly)
    floor = np.empty(g + 1)
    for j in range(g + 1):
        floor[j] = T[0, j] + bwd[k - 1, j]
    table = range_min_table(floor)
    for q in range(cs.size):
        c = cs[q]
        lo = cells[c]
        hi = cells[c + 1] - 1 if c + 1 < nc else g - 1
        if hi - lo + 1 < few:
            for i in range(hi, lo - 1, -1):
                best = np.inf
                x = P[i]
                for j in range(first[i], g + 1):
                    if not win_lo[j] <= i <= win_hi[j]:
                        continue
                    base = A2[c, j] if j < from_big[i] else A[c, j]  # small or large bucket
                    v = max(base - U[c, j] * x, Af[c, j] - Uf[c, j] * x,
                            top_at(T, j, P[j] - x)) + bwd[k - 1, j]
                    if v < best:
                        best = v
                if best < np.inf:
                    bwd[k, i] = max(R[i] + best, tail[k, i])
            continue
        for j in range(lo + 1, g + 1):
            b_slopes[j] = -U[c, j]
            bicpt[j] = bwd[k - 1, j] + A[c, j]
        # the small ends of the cell's starts, in blocks of SMALL_BLOCK, each with a bound of
        # all of its small buckets from any start of the cell
        r0 = first[lo]
        nb = max(0, (min(from_big[hi], g + 1) - r0 + SMALL_BLOCK - 1) // SMALL_BLOCK)
        blocks = _small_blocks(k, c, r0, nb, A2, U, Af, Uf, bwd, floor, g)
        tree[:4 * (hi - lo + 1)] = -1  # over the cell's starts alone: they are its queries
        top = g + 1  # ends >= top are in the tree
        least_top = np.inf  # the least T[j] + bwd[k - 1, j] over the tree's ends
        for i in range(hi, lo - 1, -1):
            while top > max(from_big[i], first[i]):
                top -= 1
                if bicpt[top] < np.inf:
                    lichao_insert(tree, lo, hi, P, b_slopes, bicpt, top)
                    least_top = min(least_top, top_at(T, top, split[top]) + bwd[k - 1, top])
            best = lichao_min(tree, lo, hi, P, b_slopes, bicpt, i)
            if best < np.inf:
                best = max(best, least_top)
            s_hi = min(from_big[i], g + 1)
            if s_hi - first[i] >= SMALL_DIRECT and not range_min(table, first[i], s_hi) < best:
                s_hi = first[i]  # none of them can win
            j = first[i]
            while j < s_hi:  # small buckets, a block at a time where its bound is below best
                b = (j - r0) // SMALL_BLOCK
                j_end = min(r0 + (b + 1) * SMALL_BLOCK, s_hi)
                x = P[i]
                lb = max(blocks[0, b] - blocks[1, b] * x, blocks[2, b] - blocks[3, b] * x,
                         blocks[4, b])
                if lb - 1e-9 * abs(lb) >= best:  # (a margin for rounding: the same best)
                    j = j_end
                    continue
                while j < j_end:
                    if bwd[k - 1, j] < np.inf and win_lo[j] <= i <= win_hi[j]:
                        v = max(A2[c, j] - U[c, j] * x, Af[c, j] - Uf[c, j] * x,
                                top_at(T, j, P[j] - x)) + bwd[k - 1, j]
                        if v < best:
                            best = v
                    j += 1
            if best < np.inf:
                bwd[k, i] = max(R[i] + best, tail[k, i])


@njit(cache=True, nogil=True)
def prefix_moments(values, pcv, pq1, pq2, group_end, draws, lf_hi, lf_lo, first,
                   rel=NEGLIGIBLE):
    """(E[M], E[M^2]) of the longest of ``draws[j]`` samples drawn without replacement from every
    sample of groups first+1..j (j > first; the others 0); lower bounds where ``rel`` is above
    NEGLIGIBLE (the walks stop there, :func:`bucketopt.orderstats.walk_moments`; each step
    below adds a gap to top - E[M] and scales it by a positive factor, so an upper bound of it
    stays one).

    With D(v) = top - E[M] over the lengths up to v, adding the next length x' (c' samples)
    gives D(v') = (D(v) + x' - x) C(N, s) / C(N + c', s): O(1) a length along a run of ends with
    one draw count, and a walk (:func:`bucketopt.orderstats.walk_moments`) where it
    changes.
    """
    g = group_end.size - 1
    m1 = np.zeros(g + 1)
    m2 = np.zeros(g + 1)
    s = np.int64(-1)
    d1 = 0.0
    d2 = 0.0
    lo = group_end[first]
    base = pcv[lo]
    done = lo  # lengths values[lo:done] are in d1, d2
    for j in range(first + 1, g + 1):
        hi = group_end[j]
        n = pcv[hi] - base
        if draws[j] != s:
            s = draws[j]
            if s <= 1:
                d1 = float(values[hi - 1]) - (pq1[hi] - pq1[lo]) / n
                d2 = float(values[hi - 1]) ** 2 - (pq2[hi] - pq2[lo]) / n
            else:
                e1, e2 = walk_moments(values, pcv, lo, hi, s, lf_hi, lf_lo, rel)
                d1 = float(values[hi - 1]) - e1
                d2 = float(values[hi - 1]) ** 2 - e2
            done = hi
        else:
            for v in range(done, hi):
                x = float(values[v - 1])
                x2 = float(values[v])
                a = pcv[v] - base
                c = pcv[v + 1] - pcv[v]
                if s <= 1:
                    rho = a / (a + c)
                elif a < s:
                    rho = 0.0
                else:
                    rho = binom_ratio(a, c, s, lf_hi, lf_lo)
                d1 = (d1 + x2 - x) * rho
                d2 = (d2 + x2 * x2 - x * x) * rho
            done = hi
        top = float(values[hi - 1])
        m1[j] = top - d1
        m2[j] = top * top - d2
    return m1, m2
