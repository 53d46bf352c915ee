"""numba kernels of the certified DP (:mod:`bucketopt.objectives.certified`; docs/method.md).

The exact DP F_t(j) = min_i F_{t-1}(i) + c(i, j), one layer t per call of
:func:`forward_layer`, evaluated only where bounds cannot rule a bucket out:

- Three lower bounds of a bucket's cost, each a line in P[i] (the prefix sample count) for a
  fixed end j, hence a lower-envelope (hull) query over the points (P[i], F_{t-1}(i)):
  the *fewest-rows* bound A2[c, j] - U2[c, j] P[i] (every bucket), the *full-steps* bound
  A[c, j] - U[c, j] P[i] (buckets of at least split[j] samples: "big"), both for the starts in
  cell c (cells[c] <= i), and the *mean* bound Mm[j] - Um[j] P[i] + R[i] (no padding at all);
  and the *top* bound (:func:`.relaxation.top_at`: the step that holds
  the longest sample), checked start by start and, for an end, at its least F_{t-1}.
- An end j is *alive* at layer t when its least bound plus bwd[k - t, j] (a lower bound of every
  cover of the groups after j by the remaining buckets) stays within an upper bound of the
  optimum; dead ends keep F = inf: no cover below the upper bound passes through them.
- The alive ends' starts are scanned outward from each hull's tangent while the hull stays below
  the end's threshold (the best cost found so far, or its cap): every start left out is proven
  no better. The starts that remain are priced exactly: by rectangles of sweeps
  (:func:`.pricing.rect_costs`) for consecutive ends of one batch size, a
  start being first checked against a priced reference below it
  (:func:`.pricing.tilde`); or, where a step holds more than SWEEP_MAX
  rows, one by one by walks.

:func:`exact_tail` prices the top of the lengths exactly, for the relaxed passes to start from.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...jit import njit
from ...orderstats import walk_moments_capped
from ...sorting import argsort_stable, sort_ints, unique_ints
from .._time_kernels import BOUND_REL, fewest_rows, split_count
from .hulls import hull_add, hull_min, hull_segment, hull_walk
from .pricing import (
    FEW1,
    FEW2,
    MAIN1,
    MAIN2,
    SWEEP_MAX,
    UP1,
    UP2,
    by_padding,
    diluted,
    pair_cost,
    rect_costs,
    step_scratch,
    tilde,
)
from .relaxation import top_at, top_of

MARGIN = 4  # starts priced on each side of a block's predicted best starts
BLOCK = 32  # the most ends of one rectangle (20,000 lengths k = 16: 1.96-2.01 s; 64: 2.06-2.19)
WIDTH = 48  # the widest range of predicted best starts one rectangle spans
# Reference starts at 2^3 .. 2^(LADDER + 2) groups on each side of that range (to 512 before
# the bins below: 20,000 lengths at k = 16 on one GPU, shipped profile, took 2.6 s at 10 and
# 3.0 s at 7, where more of the starts the scan leaves have no reference below them)
LADDER = 10
# An end priced alone (by walks) first bounds its predicted best start and those 2, 4 and 8
# groups above it and 8 below (2^1 .. 2^(LADDER_ALONE + 2)), and prices them while that bound
# is below the best found (:func:`_price_alone`): its other starts make their own
# references (REF_GAP), so a longer ladder only adds walks (at 7, the source-code tail of
# benchmarks/certified.py under alpha 0.5 took 3.1 s; at 1, 2.5 s)
LADDER_ALONE = 1
# Work units (about one bucket priced by a sweep each, 1-2 us) of a bucket priced by walks
# (dynamic padding; 1 with edge padding: O(1)), plus one a WALK_LENGTHS lengths its walks went
# down (about 8 ns each on the 2-core development machine: a bucket of few rows a step over
# most of a heavy tail's tens of thousands of lengths walks them all)
WALK_WORK = 4
WALK_LENGTHS = 256
# And one a SCAN_STARTS starts a scan reads (its hull and bound: some 5 ns each) and a
# BOUND_STARTS starts an end priced alone bounds by its reference (:func:`.pricing.tilde`, and
# their sort): an end whose bounds leave tens of thousands of starts costs milliseconds before
# it prices any. On 100,000 distinct lengths, one sample each, from 1 to 4M tokens (T = 4M,
# k = 6), one layer ran 22 s on 2.5M units when these were not counted; now a unit there costs
# some 1.3 us and the solve stops in 7.5 s (docs/method.md, "The work limit"). At 64 starts a
# unit the edge-padding time DP of the 4M-token corpus of benchmarks/certified.py (k = 16),
# whose scans are most of its work, stopped at the limit in 1.1 s instead of being proven in
# the same time.
SCAN_STARTS = 256
BOUND_STARTS = 16
# A start's bound takes the moments of a reference start below it only while the reference's
# bucket holds at most this many more samples (relative): else the start is made one.
REF_GAP = 0.05
# The starts a rectangle's first check leaves go in bins of REF_BIN groups, whose lowest start
# is priced first as the reference of the others (:func:`_price_block`; 16 and 64 took the same
# time as 32 on 20,000 lengths at k = 16 on one GPU, within 0.1 s)
REF_BIN = 32
# exact_tail's ends a rectangle of sweeps (the starts within a block are walked: TAIL_BLOCK / 2
# buckets a start). On the embedded example with one GPU (456 groups at the top, draws of at
# most 16 rows) it took 0.03 s instead of 0.31 s by walks alone; with 8 GPUs (128 rows), where
# walks of many draws stop early, about the same 0.1 s; on the source-code tail of
# benchmarks/certified.py with 8 GPUs 0.10 s instead of 0.14-0.16 s (each to an ulp or so).
TAIL_BLOCK = 32


class Bounds(NamedTuple):
    """The exact layers' lower bounds of every bucket (i, j] (:class:`.protocol.Rows`, by cell of
    starts), with the cells' layout: start i lies in cell ``cell[i]``, whose starts run from
    ``cells[c]`` to ``cell_end[c]``; starts i <= ``big[j]`` make buckets of at least split[j]
    samples (:func:`.relaxation.big_starts`); P: the prefix sample counts, every line's x."""

    P: np.ndarray
    cells: np.ndarray
    cell: np.ndarray
    cell_end: np.ndarray
    big: np.ndarray
    A: np.ndarray
    A2: np.ndarray
    U: np.ndarray
    U2: np.ndarray
    Mm: np.ndarray
    Um: np.ndarray
    R: np.ndarray
    T: np.ndarray


class Goal(NamedTuple):
    """What an exact layer's ends must reach to be kept: a cover of k in ``ks`` buckets costing
    at most ``ubs`` (its upper bound), the rest of it bounded by the relaxed backward pass
    ``bwd``; ``keep``: the ends the relaxed DP leaves (:func:`.dp._candidate_ends`)."""

    bwd: np.ndarray
    ubs: np.ndarray
    ks: np.ndarray
    keep: np.ndarray


class Hulls(NamedTuple):
    """Lower hulls of the points (P[i], F_{t-1}(i)) of each cell's starts (cell c's in
    stk[cells[c]:cells[c] + hn[c]]): of the starts of big buckets (stk, hn; the full-steps
    bound) and of every start (stk2, hn2; the fewest-rows bound)."""

    stk: np.ndarray
    hn: np.ndarray
    stk2: np.ndarray
    hn2: np.ndarray


class Layer(NamedTuple):
    """The state of exact layer t over a range of ends: ys = F_{t-1}; for each end j its cap
    (the most a cover through it may cost), the best cost found and its start (best, barg);
    ``mark`` and ``cand``: the starts a scan found; the share windows; ``work``: [spent,
    limit] (:func:`_charge`); ``scratch``: :func:`.pricing.step_scratch`."""

    t: int
    g: int
    ys: np.ndarray
    cap: np.ndarray
    best: np.ndarray
    barg: np.ndarray
    mark: np.ndarray
    cand: np.ndarray
    win_lo: np.ndarray
    win_hi: np.ndarray
    work: np.ndarray
    scratch: tuple


@njit(cache=True, inline="always")
def _least_bound(j, stk, hn, ptr, A, U, bd, top, lo, ys):
    # (the least of A[c, j] - U[c, j] P[i] + F over the hulls of the cells holding starts in
    # [lo, top], the start where it is reached or -1); each cell's tangent walks from ptr[c]
    cells, cell_end, xs = bd.cells, bd.cell_end, bd.P
    nc = cells.size
    least = np.inf
    at = -1
    for c in range(nc):
        if cells[c] > top:
            break
        if hn[c] == 0 or cell_end[c] < lo:
            continue
        v, tv = hull_walk(stk, cells[c], hn[c], xs, ys, U[c, j], ptr[c])
        ptr[c] = tv
        if A[c, j] + v < least:
            least = A[c, j] + v
            at = stk[cells[c] + tv]
    return least, at


@njit(cache=True, inline="always")
def _bound(j, i, c, bd):
    # the largest of the four lower bounds of the bucket (i, j] (i in cell c)
    xs = bd.P
    return _bound_of(xs[i], bd.R[i], i <= bd.big[j], top_at(bd.T, j, xs[j] - xs[i]),
                     bd.A2[c, j], bd.U2[c, j], bd.A[c, j], bd.U[c, j], bd.Mm[j], bd.Um[j])


@njit(cache=True, inline="always")
def _bound_of(x, r, is_big, top, a2, u2, a, u, mm, um):
    # _bound from its terms: x = P[i], r = R[i], the top bound, and the lines of the end and
    # cell (a scan reads those once per cell)
    lc = max(a2 - u2 * x, top)
    if is_big:
        lc = max(lc, a - u * x)
    return max(lc, mm - um * x + r)


@njit(cache=True)
def _scan_family(j, lay, bd, stk, hn, row, slope, lo_lim, hi_lim, thr, stamp, ncand):
    # every start in [lo_lim, hi_lim] of end j whose bound stays below thr, appended to cand:
    # per cell, outward from the hull's tangent while the hull (+ row[c, j]) stays below thr
    # (_bound's terms of end j and cell c read once: _bound_of)
    if lo_lim > hi_lim:
        return ncand
    ys, mark, cand = lay.ys, lay.mark, lay.cand
    xs, cells, cell_end, big, R, T = bd.P, bd.cells, bd.cell_end, bd.big, bd.R, bd.T
    A, A2, U, U2, Mm, Um = bd.A, bd.A2, bd.U, bd.U2, bd.Mm, bd.Um
    nc = cells.size
    visited = 0
    t0j, t1j, t2j, t3j = T[0, j], T[1, j], T[2, j], T[3, j]
    mm = Mm[j]
    um = Um[j]
    xj = xs[j]
    bigj = big[j]
    for c in range(nc):
        if cells[c] > hi_lim:
            break
        if hn[c] == 0 or cell_end[c] < lo_lim:
            continue
        off = cells[c]
        h = hn[c]
        u = slope[c, j]
        rc = row[c, j]
        a2 = A2[c, j]
        u2 = U2[c, j]
        af = A[c, j]
        uf = U[c, j]
        _, t0 = hull_min(stk, off, h, xs, ys, u)
        it = stk[off + t0]
        for side in range(2):
            tv = t0
            seg = -1  # the hull segment (its left vertex) whose line is held in xa, ya, k
            xa = ya = k = 0.0
            i = it if side == 0 else it + 1
            while True:
                if side == 0:
                    if i < max(cells[c], lo_lim):
                        break
                    while tv > 0 and stk[off + tv - 1] >= i:
                        tv -= 1
                    if stk[off + tv] == i:
                        sv = -1  # a vertex: the hull's height is its own
                    elif tv == 0:
                        break  # left of the leftmost vertex: no finite point there
                    else:
                        sv = tv - 1
                else:
                    if i > min(cell_end[c], hi_lim):
                        break
                    while tv + 1 < h and stk[off + tv + 1] < i:
                        tv += 1
                    if tv + 1 >= h:
                        break  # right of the rightmost vertex: no finite point there
                    sv = tv
                x = xs[i]
                visited += 1
                if sv < 0:
                    hv = ys[i]
                else:
                    if seg != sv:
                        seg = sv
                        xa, ya, k = hull_segment(stk, off, xs, ys, seg)
                    hv = ya + k * (x - xa) if k == k else ya
                if rc + hv - u * x >= thr:
                    break  # the hull is convex: every start further out is bounded above thr
                # (the hulls may hold starts of later ends, and starts below the window: a
                # tangent outside [lo_lim, hi_lim] is scanned past, never taken)
                if lo_lim <= i <= hi_lim and ys[i] < np.inf and mark[i] != stamp:
                    lb = _bound_of(x, R[i], i <= bigj, top_of(t0j, t1j, t2j, t3j, xj - x), a2,
                                   u2, af, uf, mm, um)
                    if ys[i] + lb < thr:
                        mark[i] = stamp
                        cand[ncand] = i
                        ncand += 1
                i += -1 if side == 0 else 1
    lay.work[0] += visited // SCAN_STARTS
    return ncand


@njit(cache=True)
def _scan_end(j, lay, bd, hl, thr, stamp, ncand):
    # every start of end j that the bounds leave below thr: big buckets by their full-steps
    # hulls, the small ones by the fewest-rows hulls of every start
    top = min(lay.win_hi[j], j - 1)
    big = bd.big
    ncand = _scan_family(j, lay, bd, hl.stk, hl.hn, bd.A, bd.U, lay.win_lo[j], min(big[j], top),
                         thr, stamp, ncand)
    return _scan_family(j, lay, bd, hl.stk2, hl.hn2, bd.A2, bd.U2, max(big[j] + 1, lay.win_lo[j]),
                        top, thr, stamp, ncand)


@njit(cache=True, inline="always")
def _quick(pr, xs, i, j, m1, m2):
    # a quick lower bound of the bucket (i, j] whose full steps' rows are, in expectation, at
    # least (m1, m2) long (a reference's, below its start), in O(1) (tilde's bound with the
    # step types summed up): the exact step count (:func:`._time_kernels.bucket_steps` makes
    # ceil(batches / world) steps); the steps of world * size rows its splits leave whole at
    # (m1, m2); and every other step at its rows / world (its largest batch holds at least
    # that many) times the chord of E[max] from one draw (the bucket's mean) to world * size
    # (concave in the draws), a convex function of the rows: at least its value at their mean
    # over those steps, times their number (Jensen)
    pq1, pq2, group_end, size_full, world = pr.pq1, pr.pq2, pr.group_end, pr.sizes[j], pr.world
    alpha, beta, gamma = pr.alpha, pr.beta, pr.gamma
    n = np.int64(xs[j] - xs[i])
    size = min(size_full, n)
    q = n // size
    nb = q + (1 if n > q * size else 0)
    steps = (nb + world - 1) // world
    whole = 0  # the steps of world * size rows
    if size == size_full:
        if world == 1:
            whole = q
        else:
            extra = split_count(n, nb, world)
            if extra <= q:
                whole = (q - extra) // world
    lo = group_end[i]
    hi = group_end[j]
    mean = (beta * (pq1[hi] - pq1[lo]) + gamma * (pq2[hi] - pq2[lo])) / n
    full = world * size
    at_full = max(beta * m1 + gamma * m2, mean)
    rest = n - whole * full  # over steps - whole steps, each of at most full rows
    per_row = mean
    if size == size_full and steps > whole and full > 1:
        per_row += (rest / (steps - whole) - 1.0) / (full - 1.0) * (at_full - mean)
    return alpha * steps + whole * size * at_full + rest * per_row / world


@njit(cache=True)
def _improve(e, i, v, best, barg):
    if v < best[e] or (v == best[e] and i < barg[e]):
        best[e] = v
        barg[e] = i


@njit(cache=True, inline="always")
def _charge(work, scratch, pad_code):
    # the work of the buckets priced since the last charge (:func:`pair_cost` counts the
    # lengths it walks in scratch[7])
    work[0] += (WALK_WORK if pad_code == 1 else 1) + scratch[7][0] // WALK_LENGTHS
    scratch[7][0] = 0


@njit(cache=True)
def _price_alone(pr, j, lay, bd, hl, tang, stamp, refs, ref_m):
    # one end whose steps are too large for sweeps (or edge padding): reference starts (the
    # tangent and a ladder around it) bounded (:func:`_reference_keys`) and priced by walks
    # while that bound is below the best found, then every start the bounds leave, checked
    # against the nearest reference below it (:func:`_start_keys`), priced by capped walks
    zero = np.int64(0)  # not the literal 0: one compiled signature for every call
    ys, cap, best, barg, mark, cand = lay.ys, lay.cap, lay.best, lay.barg, lay.mark, lay.cand
    win_lo, win_hi, scratch, work = lay.win_lo, lay.win_hi, lay.scratch, lay.work
    pad_code = pr.pad_code
    it = tang[j]
    top = min(win_hi[j], j - 1)
    nref = 0
    for k in range(LADDER_ALONE + 2, -1, -1):  # decreasing starts
        i = it + (1 << k) if k > 0 else it
        if (k == 0 or i <= top) and ys[i] < np.inf:
            refs[nref] = i
            nref += 1
    for k in range(3, LADDER_ALONE + 3):
        i = it - (1 << k)
        if i >= win_lo[j] and ys[i] < np.inf:
            refs[nref] = i
            nref += 1
    # their costs, least bound first (most are proven no better than the best found without a
    # walk), while a bound is below the best found (or the cap). A reference left unpriced is
    # not marked: the scan below finds it like any other start.
    rkeys = _reference_keys(pr, j, lay, bd, it, refs, nref, ref_m)
    for r in argsort_stable(rkeys[:nref]):
        i = refs[r]
        if not rkeys[r] < min(best[j], cap[j]):
            break
        mark[i] = stamp
        c, ok = pair_cost(pr, i, j, min(best[j], cap[j]) - ys[i], scratch)
        _charge(work, scratch, pad_code)
        if ok:
            _improve(j, i, ys[i] + c, best, barg)
    ncand = _scan_end(j, lay, bd, hl, min(best[j], cap[j]), stamp, zero)
    # every start the bounds leave, with its best lower bound, then priced best-first: the
    # threshold falls fastest, and once a start's bound reaches it every later one's does
    work[0] += ncand // BOUND_STARTS
    keys, kept = _start_keys(pr, j, lay, bd, refs, nref, ref_m, ncand, min(best[j], cap[j]))
    order = argsort_stable(keys[:kept])
    for q in order:
        i = cand[q]
        thr = min(best[j], cap[j])
        if not keys[q] < thr:
            break
        c, ok = pair_cost(pr, i, j, thr - ys[i], scratch)
        _charge(work, scratch, pad_code)
        if ok:
            _improve(j, i, ys[i] + c, best, barg)


@njit(cache=True)
def _bound_keys(pr, j, lay, bd, it, refs, nref, ref_m):
    # _reference_keys with edge padding: each reference's bound (:func:`_bound`)
    rkeys = np.empty(nref)
    for r in range(nref):
        i = refs[r]
        rkeys[r] = lay.ys[i] + _bound(j, i, bd.cell[i], bd)
    return rkeys


@njit(cache=True)
def _moment_keys(pr, j, lay, bd, it, refs, nref, ref_m):
    # _reference_keys with dynamic padding: lower bounds of the references' moments
    # (BOUND_REL) into ref_m, for the starts above; those above the tangent ``it`` take the
    # next one's below them (the tangent's where it is one: a bucket with more, shorter samples
    # gives lower bounds too); each key is tilde from its moments
    ys, scratch, work = lay.ys, lay.scratch, lay.work
    for r in range(nref - 1, -1, -1):
        if refs[r] > it and r + 1 < nref:
            for m in range(4):
                ref_m[m, r] = ref_m[m, r + 1]
        else:
            ref_m[0, r], ref_m[1, r], ref_m[2, r], ref_m[3, r] = _ref_moments(pr, refs[r], j,
                                                                              scratch)
            _charge(work, scratch, pr.pad_code)
    rkeys = np.empty(nref)
    for r in range(nref):
        i = refs[r]
        rkeys[r] = ys[i] + tilde(pr, i, j, ref_m[0, r], ref_m[1, r], ref_m[2, r], ref_m[3, r],
                                 scratch)
    return rkeys


_reference_keys = by_padding(_bound_keys, _moment_keys, "_reference_keys", """The lower
bounds of the buckets (refs[r], j] of an end priced alone (its ladder of references, ``nref``
of them, decreasing; ``it``: its tangent), each plus F_{t-1} of its start; with dynamic
padding the references' moments land in ``ref_m`` (:func:`_price_alone`).""")


@njit(cache=True, inline="always")
def _keep(keys, cand, kept, i, lb, thr):
    # start i with its bound lb, kept in keys[kept], cand[kept] where lb is below thr
    if lb < thr:
        keys[kept] = lb
        cand[kept] = i
        kept += 1
    return kept


@njit(cache=True)
def _bound_start_keys(pr, j, lay, bd, refs, nref, ref_m, ncand, thr):
    # _start_keys with edge padding: each start's bound (:func:`_bound`)
    ys, cand = lay.ys, lay.cand
    up = sort_ints(cand[:ncand].copy())
    keys = np.empty(ncand)
    kept = 0
    for q in range(ncand):
        i = up[q]
        kept = _keep(keys, cand, kept, i, ys[i] + _bound(j, i, bd.cell[i], bd), thr)
    return keys, kept


@njit(cache=True)
def _reference_start_keys(pr, j, lay, bd, refs, nref, ref_m, ncand, thr):
    # _start_keys with dynamic padding: a start's bound has its step types exact, its moments
    # those of the nearest reference below it, a new one (the start itself) where the nearest
    # holds more than REF_GAP more samples than the bucket (a reference far below bounds its
    # E[max] loosely); the scan kept only starts whose _bound is below thr: tilde is the key
    ys, cand, scratch, work = lay.ys, lay.cand, lay.scratch, lay.work
    xs = bd.P
    up = sort_ints(cand[:ncand].copy())
    keys = np.empty(ncand)
    kept = 0
    low = nref - 1  # refs decrease: refs[low] is the lowest ladder reference not above i
    made = -1  # the last start made a reference (below every later one), its moments:
    d1 = d2 = e1 = e2 = 0.0
    for q in range(ncand):
        i = up[q]
        while low > 0 and refs[low - 1] <= i:
            low -= 1
        ref = made
        m1, m2, f1, f2 = d1, d2, e1, e2
        if low >= 0 and refs[low] <= i and refs[low] > made:
            ref = refs[low]
            m1, m2, f1, f2 = ref_m[0, low], ref_m[1, low], ref_m[2, low], ref_m[3, low]
        # the quick line of the reference first (tilde costs some 0.1 us: most starts the
        # scan leaves fail this)
        if ref >= 0 and not ys[i] + _quick(pr, xs, i, j, m1, m2) < thr:
            continue
        far = ref >= 0 and xs[i] - xs[ref] > REF_GAP * (xs[j] - xs[i])
        if far:  # the far reference's bound first (a valid one, only looser): it may rule
            # the start out without the walks of a new reference
            lb = ys[i] + tilde(pr, i, j, m1, m2, f1, f2, scratch)
            if not lb < thr:
                continue
        if ref < 0 or far:
            made = i
            d1, d2, e1, e2 = _ref_moments(pr, i, j, scratch)
            m1, m2, f1, f2 = d1, d2, e1, e2
            _charge(work, scratch, pr.pad_code)
            work[0] += WALK_WORK
        kept = _keep(keys, cand, kept, i, ys[i] + tilde(pr, i, j, m1, m2, f1, f2, scratch), thr)
    return keys, kept


_start_keys = by_padding(_bound_start_keys, _reference_start_keys, "_start_keys", """(keys,
kept): the starts of an end priced alone that the scan found (lay.cand[:ncand]) whose lower
bound (plus F_{t-1}) is below ``thr``, in increasing order into lay.cand[:kept], their bounds
in keys[:kept] (:func:`_price_alone`).""")


@njit(cache=True)
def _moments(pr, lo, hi, draws, scratch):
    m1, m2, _, walked = walk_moments_capped(pr.values, pr.pcv, lo, hi, draws, pr.lf_hi, pr.lf_lo,
                                            0.0, 0.0, np.inf, BOUND_REL)
    scratch[7][0] += walked
    return m1, m2


@njit(cache=True)
def _ref_moments(pr, i, j, scratch):
    # lower bounds of (E[M], E[M^2]) of the full steps' rows and of the fewest rows' draws from
    # the bucket (i, j] (-inf where no step of it has that many rows and fewer than all), for
    # tilde(): walks stopped at BOUND_REL of the top; the lengths walked are counted in
    # scratch[7]
    values, pcv, group_end, world = pr.values, pr.pcv, pr.group_end, pr.world
    size_full = pr.sizes[j]
    lo = group_end[i]
    hi = group_end[j]
    n = pcv[hi] - pcv[lo]
    full = world * min(size_full, n)
    fewest = fewest_rows(world, size_full)
    if full >= n:  # one step holds every row: its longest is the top
        m1 = float(values[hi - 1])
        m2 = m1 * m1
    else:
        m1, m2 = _moments(pr, lo, hi, full, scratch)
    f1 = -np.inf
    f2 = -np.inf
    if 1 < fewest < n:
        f1, f2 = _moments(pr, lo, hi, fewest, scratch)
    return m1, m2, f1, f2


@njit(cache=True, inline="always")
def _full_moments(m1, m2, u1, u2, xs, i, ref, j, full):
    # the full steps' (E[M], E[M^2]) of the bucket (i, j] from those of (ref, j] (ref <= i) at
    # full and full + 1 draws: diluted (:func:`.pricing.diluted`) where the bucket has more
    # samples than a full step's rows
    n = xs[j] - xs[i]
    if full < n:
        n_ref = xs[j] - xs[ref]
        return diluted(m1, u1, full, n_ref, n), diluted(m2, u2, full, n_ref, n)
    return m1, m2


@njit(cache=True)
def _price_block(pr, block, nb, bsz, blo, bhi, lay, bd, hl):
    # consecutive ends of one batch size: a rectangle over their predicted best starts and a
    # ladder of references, then each end's remaining starts (checked against the nearest
    # reference below them) priced by rectangles, in bins (:func:`_price_in_bins`), each start
    # carried only up to the last end that needs it
    zero = np.int64(0)  # not the literal 0: one compiled signature for every call
    ys, cap, best, barg, mark, cand = lay.ys, lay.cap, lay.best, lay.barg, lay.mark, lay.cand
    win_lo, win_hi, scratch, work = lay.win_lo, lay.win_hi, lay.scratch, lay.work
    t, g, xs, sizes, world, pad_code = lay.t, lay.g, bd.P, pr.sizes, pr.world, pr.pad_code
    first = block[0]
    s = world * bsz
    lo_s = max(blo, 0)
    hi_s = min(bhi, first - 1)
    n0 = np.int64(0)
    for k in range(LADDER + 2, 2, -1):
        i = hi_s + (1 << k)
        if i <= first - 1 and ys[i] < np.inf:
            cand[n0] = i
            n0 += 1
    for i in range(hi_s, lo_s - 1, -1):
        if ys[i] < np.inf:
            cand[n0] = i
            n0 += 1
    for k in range(3, LADDER + 3):
        i = lo_s - (1 << k)
        if i >= 0 and ys[i] < np.inf:
            cand[n0] = i
            n0 += 1
    # (none when every start there is dead: then the scan below still finds every start left)
    starts = unique_ints(cand[:n0])[::-1].copy()
    ns = starts.size
    ends = block[:nb].copy()
    out = np.empty((nb, ns))
    moments = np.empty((6, nb, ns))
    main1, main2, few1, few2 = moments[MAIN1], moments[MAIN2], moments[FEW1], moments[FEW2]
    up1, up2 = moments[UP1], moments[UP2]
    if ns > 0:
        work[0] += rect_costs(pr, starts, ends, s, np.full(ns, nb - 1, np.int64), out, moments)
    for a in range(nb):
        e = ends[a]
        for q in range(ns):
            i = starts[q]
            if win_lo[e] <= i <= win_hi[e]:
                _improve(e, i, ys[i] + out[a, q], best, barg)
    need_a = np.empty(0, np.int64)
    need_i = np.empty(0, np.int64)
    pairs_a = []
    pairs_i = []
    pairs_b = []  # their bounds (-inf: none below them to bound from)
    down = -starts  # (ascending, for searchsorted: negated once, not for every start found)
    for a in range(nb):
        e = ends[a]
        stamp = t * (g + 1) + e
        for q in range(ns):
            mark[starts[q]] = stamp
        ncand = _scan_end(e, lay, bd, hl, min(best[e], cap[e]), stamp, zero)
        for q in range(ncand):
            i = cand[q]
            r = np.searchsorted(down, -i)  # the nearest priced start at or below i
            lb = -np.inf
            if r < ns:
                thr = min(best[e], cap[e])
                m1, m2 = _full_moments(main1[a, r], main2[a, r], up1[a, r], up2[a, r], xs, i,
                                       starts[r], e, world * sizes[e])
                if not ys[i] + _quick(pr, xs, i, e, m1, m2) < thr:
                    continue
                lt = tilde(pr, i, e, m1, m2, few1[a, r], few2[a, r], scratch)
                lb = ys[i] + lt
                if not lb < thr:
                    continue
            pairs_a.append(a)
            pairs_i.append(i)
            pairs_b.append(lb)
    if len(pairs_i) == 0:
        return
    need_a = np.array(pairs_a)
    need_i = np.array(pairs_i)
    need_b = np.array(pairs_b)
    for p in range(need_i.size):
        i = need_i[p]
        if i >= first:  # small buckets of later ends, above the rectangle's first end
            e = ends[need_a[p]]
            thr = min(best[e], cap[e])
            c, ok = pair_cost(pr, i, e, thr - ys[i], scratch)
            _charge(work, scratch, pad_code)
            if ok:
                _improve(e, i, ys[i] + c, best, barg)
            need_i[p] = -1
    keep = need_i >= 0
    need_a = need_a[keep]
    need_i = need_i[keep]
    need_b = need_b[keep]
    if need_i.size == 0:
        return
    _price_in_bins(need_a, need_i, need_b, ends, nb, lay, bd, pr, s)


@njit(cache=True)
def _price_in_bins(need_a, need_i, need_b, ends, nb, lay, bd, pr, s):
    # the buckets (need_i[p], ends[need_a[p]]] a rectangle's first check left (need_b[p]: their
    # bounds), by references in bins: the lowest start left in every REF_BIN groups, and each
    # end's start of the least bound (the bounds' guess of its best start), priced first with
    # their moments; the others are then bounded again from the reference of their bin, at
    # most REF_BIN - 1 groups below them, and against the best costs found, and the starts
    # that remain priced (docs/method.md, "References in bins")
    ys, cap, best, g, scratch = lay.ys, lay.cap, lay.best, lay.g, lay.scratch
    xs, sizes, world = bd.P, pr.sizes, pr.world
    bins = need_i // REF_BIN
    ubins = unique_ints(bins)
    lowest = np.full(ubins.size, g + 1, np.int64)
    kb = np.searchsorted(ubins, bins)
    for p in range(need_i.size):
        lowest[kb[p]] = min(lowest[kb[p]], need_i[p])
    least = np.full(nb, -1, np.int64)
    for p in range(need_a.size):
        a = need_a[p]
        if least[a] < 0 or need_b[p] < need_b[least[a]]:
            least[a] = p
    firsts = np.concatenate((lowest, need_i[least[least >= 0]]))
    refs = unique_ints(firsts)[::-1].copy()
    if refs.size >= need_i.size:
        _price_pairs(need_a, need_i, ends, nb, lay, pr, s)
        return
    used = np.zeros(nb, np.bool_)
    for p in range(need_a.size):
        used[need_a[p]] = True
    ends2 = ends[used].copy()
    row = np.cumsum(used) - 1  # block end -> its row among ends2
    down = -refs
    qref = np.searchsorted(down, -lowest[kb])  # each pair's reference
    own = np.searchsorted(down, -need_i)
    priced = refs[own] == need_i  # the pairs whose start is a reference
    last = np.zeros(refs.size, np.int64)
    for p in range(need_i.size):
        last[qref[p]] = max(last[qref[p]], row[need_a[p]])
        if priced[p]:
            last[own[p]] = max(last[own[p]], row[need_a[p]])
    moments = np.empty((6, ends2.size, refs.size))
    rm1, rm2, rf1, rf2 = moments[MAIN1], moments[MAIN2], moments[FEW1], moments[FEW2]
    ru1, ru2 = moments[UP1], moments[UP2]
    _rect_best(refs, ends2, last, moments, lay, pr, s)
    left = np.zeros(need_a.size, np.bool_)
    for p in range(need_a.size):
        if priced[p]:
            continue
        i = need_i[p]
        a = need_a[p]
        e = ends[a]
        b = row[a]
        r = qref[p]
        thr = min(best[e], cap[e])
        if not need_b[p] < thr:
            continue
        m1, m2 = _full_moments(rm1[b, r], rm2[b, r], ru1[b, r], ru2[b, r], xs, i, refs[r], e,
                               world * sizes[e])
        if not ys[i] + _quick(pr, xs, i, e, m1, m2) < thr:
            continue
        if not ys[i] + tilde(pr, i, e, m1, m2, rf1[b, r], rf2[b, r], scratch) < thr:
            continue
        left[p] = True
    need_a = need_a[left]
    need_i = need_i[left]
    if need_i.size == 0:
        return
    _price_pairs(need_a, need_i, ends, nb, lay, pr, s)


@njit(cache=True)
def _price_pairs(need_a, need_i, ends, nb, lay, pr, s):
    # the buckets (need_i[p], ends[need_a[p]]] by one rectangle of sweeps, each start carried
    # only up to the last end that needs it (the ends between priced as well)
    extra = unique_ints(need_i)[::-1].copy()
    used = np.zeros(nb, np.bool_)
    for p in range(need_a.size):
        used[need_a[p]] = True
    ends2 = ends[used].copy()
    row = np.cumsum(used) - 1  # block end -> its row among ends2
    last = np.zeros(extra.size, np.int64)  # the last row that needs each start
    down = -extra  # (negated once: for each of tens of thousands of pairs it took seconds)
    for p in range(need_a.size):
        q = np.searchsorted(down, -need_i[p])
        last[q] = max(last[q], row[need_a[p]])
    moments = np.empty((6, ends2.size, extra.size))  # (not read: the rectangle's costs suffice)
    _rect_best(extra, ends2, last, moments, lay, pr, s)


@njit(cache=True)
def _rect_best(starts, ends, last, moments, lay, pr, s):
    # a rectangle of sweeps (:func:`.pricing.rect_costs`, its moments into ``moments``), each
    # bucket within its share window taken as a candidate best of its end
    ys, best, barg, win_lo, win_hi = lay.ys, lay.best, lay.barg, lay.win_lo, lay.win_hi
    work = lay.work
    out = np.full((ends.size, starts.size), np.inf)
    work[0] += rect_costs(pr, starts, ends, s, last, out, moments)
    for b in range(ends.size):
        e = ends[b]
        for q in range(starts.size):
            i = starts[q]
            if b <= last[q] and win_lo[e] <= i <= win_hi[e]:
                _improve(e, i, ys[i] + out[b, q], best, barg)


@njit(cache=True)
def _no_block(pr, block, nb, bsz, blo, bhi, lay, bd, hl):
    # price_block with edge padding: never called (its ends are priced alone)
    return


price_block = by_padding(_no_block, _price_block, "price_block", """Consecutive ends of one
batch size priced by rectangles of sweeps (dynamic padding: :func:`_price_block`; edge padding
prices every end alone).""")


@njit(cache=True, nogil=True)
def forward_layer(t, F, arg, pr, bd, goal, win, work, halt, j_lo, j_hi):
    """Layer t of the exact DP at the ends j_lo <= j < j_hi: F[t, j] (and arg[t, j], its
    smallest best start) for every such end j that a cover of k in ``ks`` buckets costing at
    most ubs[k] may pass at layer t; inf (and -1) for the others. F[t, 0] = 0: covers of fewer
    buckets carry over. ``big``: :func:`.relaxation.big_starts` of P and split (starts
    i <= big[j] make buckets of >= split[j] samples). ``keep``: the ends the relaxed DP leaves
    (its F_t, a lower bound of the exact one, plus bwd within some k's upper bound: the
    caller's candidates); the others are dead whatever the bounds here say. Calls on disjoint
    ranges of ends are independent (they read F[t - 1] alone), so they may run at once.
    ``work``: [spent, limit] in units of about a priced bucket; past the limit the layer stops
    (then its F is incomplete: the caller knows by work[0] > work[1]) and sets ``halt[0]``,
    which the calls on other ranges of the layer read before each end: the layer is incomplete
    whatever they find, so they stop too (an incomplete layer proves nothing)."""
    zero = np.int64(0)  # not the literal 0: one compiled signature for every call
    P, cells, cell, big, A, A2, U, U2 = bd.P, bd.cells, bd.cell, bd.big, bd.A, bd.A2, bd.U, bd.U2
    Mm, Um, R, T = bd.Mm, bd.Um, bd.R, bd.T
    bwd, ubs, ks, keep = goal.bwd, goal.ubs, goal.ks, goal.keep
    win_lo, win_hi = win.lo, win.hi
    sizes, world, pad_code = pr.sizes, pr.world, pr.pad_code
    g = P.size - 1
    nc = cells.size
    inf = np.inf
    xs = P
    ys = F[t - 1]
    F[t, 0] = 0.0
    stk = np.empty(g + 1, np.int64)
    hn = np.zeros(nc, np.int64)
    stk2 = np.empty(g + 1, np.int64)
    hn2 = np.zeros(nc, np.int64)
    ptr = np.zeros(nc, np.int64)
    ptr2 = np.zeros(nc, np.int64)
    mstk = np.empty(g + 1, np.int64)
    ym = np.empty(g + 1)
    for i in range(g + 1):
        ym[i] = ys[i] + R[i]
    cap = np.full(g + 1, -inf)
    tang = np.full(g + 1, -1, np.int64)
    best = np.full(g + 1, inf)
    barg = np.full(g + 1, -1, np.int64)
    mark = np.full(g + 1, -1, np.int64)
    cand = np.empty(g + 1, np.int64)
    # layer 1 has one start, 0 (F[0] is inf elsewhere): its ends take one rectangle while
    # their steps fit its sweeps' draw counts (ends of smaller batches too), for a rectangle's
    # first sweep goes down over every length below its first end. On the 4M-token corpus of
    # benchmarks/certified.py with one GPU (22,250 ends of 1-256 rows a step, 810 rectangles of
    # at most BLOCK ends of one batch size) layer 1 took 3.4 s that way and takes 1.2 s so,
    # most of it the ends priced by walks.
    one_start = t == 1
    block = np.empty(g + 1 if one_start else BLOCK, np.int64)
    refs = np.empty(2 * LADDER_ALONE + 8, np.int64)
    ref_m = np.empty((4, 2 * LADDER_ALONE + 8))  # each reference's _ref_moments
    scratch = step_scratch()
    hl = Hulls(stk, hn, stk2, hn2)
    lay = Layer(t, g, ys, cap, best, barg, mark, cand, win_lo, win_hi, work, scratch)
    # where pricing starts: each end's tangent (the least bound's start) shifted by the offset of
    # the last priced end's best start from its own tangent (the bounds are looser for starts
    # further from their cell, so tangents lag the best starts by a slowly changing amount)
    drift = 0
    # the first end of a range is priced alone in its block: until an end is priced the drift
    # is a guess, and a block of BLOCK ends priced from it took 5% more work in all on 20,000
    # lengths at k = 16 in 8 ranges a layer
    learned = False
    tangent = np.zeros(g + 1, np.int64)  # each alive end's tangent, unshifted
    mh = np.int64(0)
    ymin = inf  # the least F_{t-1} of the starts in the hulls (the top bound's term)
    nxt = np.int64(0)
    nxt_big = np.int64(0)
    nb = np.int64(0)
    bsz = np.int64(-1)
    blo = g
    bhi = np.int64(-1)
    for j in range(j_lo, j_hi + 1):
        if work[0] > work[1]:
            halt[0] = 1
            return
        if halt[0] != 0:
            return
        alive = False
        sweep = False
        flush = j == j_hi
        if not flush:
            cj = -inf
            for kk in range(ks.size):
                k = ks[kk]
                if k >= t and bwd[k - t, j] < inf:
                    v = ubs[kk] * (1.0 + 1e-9) + 1e-300 - bwd[k - t, j]
                    if v > cj:
                        cj = v
            cap[j] = cj
            top = min(win_hi[j], j - 1)
            while nxt <= top:  # every start up to top: the mean hull and the fewest-rows hulls
                if ys[nxt] < inf:
                    ymin = min(ymin, ys[nxt])
                    mh = hull_add(mstk, zero, mh, xs, ym, nxt)
                    c = cell[nxt]
                    hn2[c] = hull_add(stk2, cells[c], hn2[c], xs, ys, nxt)
                nxt += 1
            while nxt_big <= min(big[j], top):  # the big buckets' starts: full-steps hulls
                if ys[nxt_big] < inf:
                    c = cell[nxt_big]
                    hn[c] = hull_add(stk, cells[c], hn[c], xs, ys, nxt_big)
                nxt_big += 1
            if (keep[j] and cj > -inf and mh > 0 and win_lo[j] <= top
                    and T[0, j] + ymin <= cj):
                vm, _ = hull_min(mstk, zero, mh, xs, ym, Um[j])
                if Mm[j] + vm <= cj:
                    # the full-steps bound over the big buckets, the fewest-rows bound over
                    # every start
                    lb_a, at_a = _least_bound(j, stk, hn, ptr, A, U, bd, top, win_lo[j], ys)
                    lb_f, at_f = _least_bound(j, stk2, hn2, ptr2, A2, U2, bd, top, win_lo[j], ys)
                    if big[j] < top or at_a < 0:  # small buckets: only the fewest-rows bound
                        lb = lb_f
                        at = at_f
                    else:
                        lb = max(lb_a, lb_f)
                        at = at_a
                    if at >= 0 and max(lb, Mm[j] + vm) <= cj:
                        alive = True
                        tangent[j] = at
                        tang[j] = min(max(at + drift, win_lo[j]), top)
            sweep = pad_code == 1 and world * sizes[j] <= SWEEP_MAX
            if alive and nb > 0:
                if one_start:
                    flush = not sweep or sizes[j] > bsz
                elif (not sweep or sizes[j] != bsz or nb == BLOCK or not learned
                      or max(bhi, tang[j] + MARGIN) - min(blo, tang[j] - MARGIN) > WIDTH):
                    flush = True
        if flush and nb > 0:
            price_block(pr, block, nb, bsz, blo, bhi, lay, bd, hl)
            learned = True
            for a in range(nb):
                e = block[a]
                if barg[e] >= 0:
                    drift = barg[e] - tangent[e]
                if best[e] <= cap[e]:
                    F[t, e] = best[e]
                    arg[t, e] = barg[e]
            nb = np.int64(0)
        if not alive:
            continue
        if not sweep:
            _price_alone(pr, j, lay, bd, hl, tang, t * (g + 1) + j, refs, ref_m)
            if barg[j] >= 0:
                drift = barg[j] - tangent[j]
                learned = True
            if best[j] <= cap[j]:
                F[t, j] = best[j]
                arg[t, j] = barg[j]
            continue
        if nb == 0:
            bsz = sizes[j]
            blo = tang[j] - MARGIN
            bhi = tang[j] + MARGIN
        else:
            blo = min(blo, tang[j] - MARGIN)
            bhi = max(bhi, tang[j] + MARGIN)
        block[nb] = j
        nb += 1
    if work[0] > work[1]:
        halt[0] = 1


@njit(cache=True, nogil=True)
def exact_tail(pr, first, kmax, win, block):
    """out[s, i] = the least exact cost of a cover of groups i+1..g by at most s buckets, for
    the starts i >= ``first`` (the top of the lengths), every bucket priced exactly; 0 (a
    bound of every cover: no cost is negative) below ``first``. With dynamic padding and steps
    of at most SWEEP_MAX rows, the ends in blocks of ``block`` (TAIL_BLOCK): one rectangle of
    sweeps from the starts below a block (:func:`.pricing.rect_costs`), walks for the starts
    within it; else every bucket by walks (:func:`.pricing.pair_cost`)."""
    group_end, sizes, world, pad_code = pr.group_end, pr.sizes, pr.world, pr.pad_code
    win_lo, win_hi = win.lo, win.hi
    g = group_end.size - 1
    out = np.zeros((kmax + 1, g + 1))
    out[0, first:g] = np.inf
    scratch = step_scratch()
    m = g - first
    cost = np.full((m + 1, m + 1), np.inf)  # cost[i - first, j - first] of the bucket (i, j]
    s = np.int64(0)
    for j in range(first + 1, g + 1):
        s = max(s, world * sizes[j])
    sweep = pad_code == 1 and s <= SWEEP_MAX
    for e0 in range(first + 1, g + 1, block):
        e1 = min(e0 + block, g + 1)
        low = e0 - 1 if sweep else first - 1  # starts above it: walks
        if sweep:
            starts = np.arange(e0 - 1, first - 1, -1)
            ends = np.arange(e0, e1)
            rect = rect_seconds(pr, starts, ends, s)
            for a in range(ends.size):
                for q in range(starts.size):
                    cost[starts[q] - first, ends[a] - first] = rect[a, q]
        for j in range(e0, e1):
            for i in range(max(low + 1, win_lo[j]), min(j, win_hi[j] + 1)):
                cost[i - first, j - first], _ = pair_cost(pr, i, j, np.inf, scratch)
    for i in range(g - 1, first - 1, -1):
        for s_ in range(1, kmax + 1):
            best = out[s_ - 1, i]
            for j in range(i + 1, g + 1):
                if win_lo[j] <= i <= win_hi[j]:
                    best = min(best, cost[i - first, j - first] + out[s_ - 1, j])
            out[s_, i] = best
    return out


@njit(cache=True)
def _rect_seconds(pr, starts, ends, s):
    # the seconds of every bucket of the rectangle (:func:`.pricing.rect_costs`: starts
    # decreasing, ends increasing, steps of at most s rows), out[a, q]; its moments unread
    out = np.empty((ends.size, starts.size))
    moments = np.empty((6, ends.size, starts.size))
    rect_costs(pr, starts, ends, s, np.full(starts.size, ends.size - 1, np.int64), out, moments)
    return out


@njit(cache=True)
def _no_rect(pr, starts, ends, s):
    # rect_seconds with edge padding: never called (its buckets are priced one by one)
    return np.empty((ends.size, starts.size))


rect_seconds = by_padding(_no_rect, _rect_seconds, "rect_seconds", """The seconds of every
bucket of a rectangle by sweeps (dynamic padding: :func:`_rect_seconds`).""")


@njit(cache=True)
def _window_rect(pr, win, flat, offsets, t, val, back):
    # window_chain's buckets from the starts of window t - 1 below every end of window t to
    # those ends, as one rectangle of sweeps where every step holds at most SWEEP_MAX rows;
    # returns the least end: the starts below it are done (0: none is)
    sizes, world, win_lo, win_hi = pr.sizes, pr.world, win.lo, win.hi
    s = np.int64(0)
    for q in range(offsets[t], offsets[t + 1]):
        s = max(s, world * sizes[flat[q]])
    if s > SWEEP_MAX:
        return 0
    least = flat[offsets[t]]
    at = np.empty(offsets[t] - offsets[t - 1], np.int64)  # positions in flat, starts decreasing
    nq = 0
    for p in range(offsets[t] - 1, offsets[t - 1] - 1, -1):
        if val[p] < np.inf and flat[p] < least:
            at[nq] = p
            nq += 1
    if nq == 0:
        return 0
    at = at[:nq]
    starts = flat[at]
    ends = flat[offsets[t]:offsets[t + 1]].copy()
    nb = ends.size
    out = _rect_seconds(pr, starts, ends, s)
    for a in range(nb):
        q = offsets[t] + a
        e = ends[a]
        for r in range(nq - 1, -1, -1):  # increasing starts: a tie keeps the smallest, as
            p = at[r]  # the walks do
            if win_lo[e] <= starts[r] <= win_hi[e] and val[p] + out[a, r] < val[q]:
                val[q] = val[p] + out[a, r]
                back[q] = p
    return least


@njit(cache=True)
def _no_window_rect(pr, win, flat, offsets, t, val, back):
    # window_rect with edge padding: no rectangle, every bucket priced one by one
    return np.int64(0)


window_rect = by_padding(_no_window_rect, _window_rect, "window_rect", """window_chain's
rectangle of sweeps (dynamic padding: :func:`_window_rect`; edge padding: none, 0).""")


@njit(cache=True, nogil=True)
def window_chain(pr, win, flat, offsets):
    """(ends, cost): the cheapest cover whose t-th bucket ends in window t (``flat[offsets[t]:
    offsets[t + 1]]``, increasing; window 0 is [0], the last [g]), every bucket priced exactly:
    where its steps hold at most SWEEP_MAX rows (dynamic padding), those from the starts below
    every end of the next window by one rectangle of sweeps
    (:func:`.pricing.rect_costs`), the others one by one
    (:func:`.pricing.pair_cost`, stopped once it cannot improve the best
    found for its end); cost inf when no cover passes the windows. (On one GPU, where every
    step is a batch, polish() took 0.9-1.3 s of the 20,000 lengths at k = 16 by walks.)"""
    win_lo, win_hi, pad_code = win.lo, win.hi, pr.pad_code
    nw = offsets.size - 1
    val = np.full(flat.size, np.inf)
    back = np.full(flat.size, -1, np.int64)
    val[0] = 0.0
    scratch = step_scratch()
    for t in range(1, nw):
        done = 0  # the starts below it are priced (by a rectangle)
        if pad_code == 1:
            done = window_rect(pr, win, flat, offsets, t, val, back)
        for q in range(offsets[t], offsets[t + 1]):
            e = flat[q]
            for p in range(offsets[t - 1], offsets[t]):
                i = flat[p]
                if i < done or i >= e or not val[p] < val[q] or not win_lo[e] <= i <= win_hi[e]:
                    continue
                c, ok = pair_cost(pr, i, e, val[q] - val[p], scratch)
                if ok and val[p] + c < val[q]:
                    val[q] = val[p] + c
                    back[q] = p
    ends = np.empty(nw - 1, np.int64)
    q = flat.size - 1
    cost = val[q]
    for t in range(nw - 1, 0, -1):
        if q < 0:
            return ends, np.inf
        ends[t - 1] = flat[q]
        q = back[q]
    return ends, cost
