"""The certified DP: bounds rule buckets out, the exact DP prices every bucket they leave, and
every optimum comes with its proof (docs/method.md, "The algorithm: a certified DP").

An objective offers, for cells of starts (``cells[c] <= i``), line-form lower bounds of every
bucket (i, j] of candidate groups (``rows(cells)``, :class:`Rows`) and the arrays its exact
costs need (``pricing()``). Then:

1. A relaxed DP over the bounds alone (:func:`.relaxation.relaxed_layers`, its backward
   pass by :func:`backward_pass`) bounds from below the cost of
   every cover of groups i+1..g by at most s buckets (``bwd``), and its best chain, priced
   exactly, bounds the optimum from above (as does the objective's seed chain).
2. The exact DP runs layer by layer (:func:`.layers.forward_layer`): an end j is
   kept at layer t only when some start's bound plus bwd keeps a cover within the upper bound,
   and a start only when its bound beats the best cost found for j. Every bucket it leaves out
   is proven no better, so F_k(g) is the optimum over every boundary set.

Two CPUs: the relaxed forward and backward passes run at once, each backward layer's cells in two
halves and each exact layer's ends in PARTS ranges, two at a time (:func:`in_worker`); they
are the same with one CPU (then run one after the other), so the values never depend on the
CPUs.
"""

from __future__ import annotations

import functools
import os

import numpy as np

from ...env import numba_threads
from .protocol import (
    Lines,
    MeanLines,
    Optimality,
    Windows,
    exact_value,
    layers_asked,
)

# Cells of starts with their own bounds: this far (share of the samples) below every boundary of
# the seed chains, and at most MAX_CELLS of them.
CELL_SHIFTS = np.array([0.0, 0.002, 0.01, 0.04])
MAX_CELLS = 64
# And cells at every 1/EVEN_CELLS of the samples: a relaxed chain far from the seed's boundaries
# (a heavy tail, whose seed puts every boundary near the top) would otherwise price its starts
# from a cell far below them. On the source-code tail of benchmarks/certified.py the relaxation
# bound rises from 0.18 to 0.30 of the optimum's 0.41 (million seconds).
EVEN_CELLS = 16
# And top cells, where the samples above a cell grow by TOP_RATIO from TOP_FIRST up to TOP_SHARE
# of them: a bucket near the top of a heavy tail holds few samples, and a cell of starts a few
# hundred samples below its start (the shifts above are shares of every sample) prices its
# longest rows from far shorter ones. On the 4M-token corpus of benchmarks/certified.py (200,000
# samples) the longest bucket's bound was 0.72 of its cost from a cell 248 samples below its 160;
# with these the time DP proves the optimum under all three profiles (2.8-4.2 s, at the work
# limit below), where it stopped at the work limit with gaps of 2.9-8.8% (a ratio of 1.25 left
# 2.8% under alpha 0.5; the top cells add some 0.05 s to the embedded example's 0.25 s). At
# most CELL_ENTRIES cells times candidate groups in all (the rows of the bounds are that
# large): the top cells are thinned evenly past it.
TOP_RATIO = 1.1
TOP_FIRST = 4.0
TOP_SHARE = 0.25
CELL_ENTRIES = 16_000_000
# The top of the lengths where every bucket is priced exactly for the bound of the rest
# (:func:`.layers.exact_tail`): the groups whose samples fill at most TAIL_STEPS
# steps of the longest edge's batch size, and no more than keep the lengths walked under
# TAIL_WORK (some 0.1-0.3 s by walks alone; 0.03-0.1 s where it sweeps). The line bounds
# spread a bucket's steps over its rows, and miss up to a step or two a bucket: where buckets
# hold few steps, a heavy tail's longest samples, that is most of their cost, and there the
# rest's bound is then exact. On the source-code tail of benchmarks/certified.py this proves
# the optimum (the gap was 0.34 without it).
TAIL_STEPS = 64
TAIL_WORK = 16_000_000
# Rounding: upper bounds are widened and lower bounds lowered by this much (relative).
ROUNDING = 1e-9
# The default DP stops past this much work (units of about one bucket priced by a sweep, some
# 1-2 us of CPU each on the 2-core development machine; walks and sweeps also count the lengths
# they go through and scans the starts they read, so a long bucket of a heavy tail, or an end
# with tens of thousands of starts left, weighs what it costs): each of the PARTS ranges of a
# layer may spend 2 / PARTS of what is left, two ranges at once (one past it halts the others);
# past it the DP returns its best cover with the gap the bounds prove. With 8 GPUs under the
# profiles of benchmarks/certified.py, on the machine of the round that set it (one that runs
# the padding DP 1.6-2.5x faster than the next round's: seconds scale with the machine, units
# do not),
# 20,000 distinct lengths are proven in 1.1 s at k = 16 and 2.3 s at k = 32 (shipped profile)
# and stop at k = 64 (5.2 s, a proven gap of 7.9e-4); the source-code tail is proven in at most
# 1.04 s (alpha 0.5); a corpus of 200,000 samples up to 4M tokens is proven in 2.8-4.2 s under
# all three (docs/method.md, "The work limit"). At 5 million units that corpus stopped under
# alpha 0.5 after 4.9-5.5 s with a proven gap of 1.2% (it needed some 5.2 million then, 4.66
# million since tilde's chords): 6 million proved it in about the same time (5.2-5.3 s, before
# the relaxed passes bounded small buckets together), and the stops that remain take 0.2-0.3 s
# more (20,000 lengths at k = 16 on one GPU: 2.2-3.0 s, the same gaps). exact=True has no
# limit.
WORK_LIMIT = 6_000_000


def _cpus() -> int:
    """Two, or fewer where fewer CPUs are free to this process or NUMBA_NUM_THREADS (numba's
    own knob for its threads, read from the environment) asks for fewer."""
    free = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    limit = numba_threads() or 2
    return max(1, min(2, free or 1, limit))


# The CPUs the DP's passes may run on at once (two independent passes, or the two halves of an
# exact layer's ends): the 2-core machines it is measured on. An exact layer's ends are split in
# PARTS ranges with as many candidate ends each, at least SPLIT_ENDS, which two workers take in
# turn: the expected cost of an end is a guess, and on one GPU most of a layer's work sits in a
# fifth of its ends (in 2 ranges, one took 12 times the other). In 8 ranges, 20,000 lengths at
# k = 16 on one GPU stop at the work limit in 2.5-3.3 s instead of 4.3-4.7 s (with the same
# proven gaps), the 4M-token corpus under alpha 0.5 (then stopped too) in 5.6 s instead of
# 5.9 s, and 20,000 lengths at k = 16 with 8 GPUs take the same 1.1 s (interleaved runs; each
# range builds its hulls from the first start again, some 0.04 ms).
CPUS = _cpus()
SPLIT_ENDS = 64
PARTS = 8
# The best cover found is polished before the exact layers where it costs more than 1 +
# POLISH_GAP times the relaxation's bound (on the source-code tail of benchmarks/certified.py,
# 1.55-1.63 -> 1.47-1.51 s and 1.47-1.53 -> 1.22-1.43 s under two profiles, interleaved; at 0.001
# it also ran on 20,000 lengths at k = 16, where the bound is within 0.3% and it cost more than
# it saved), and past the work limit where it was not.
POLISH_GAP = 0.01
# polish(): windows of 2 POLISH_HALF + 1 groups at each of POLISH_STRIDES, at most POLISH_ROUNDS
# re-centred windows a stride.
POLISH_STRIDES = (256, 64, 16, 4, 1)
POLISH_HALF = 8
POLISH_ROUNDS = 4


def _layer_args_like(pricing, win) -> tuple:
    """Small arguments of the types :func:`.layers.forward_layer` is called with below (the
    layer, F, its starts, ``pricing``, :class:`.layers.Bounds`, :class:`.layers.Goal`, ``win``,
    the work counter, the halt flag, the range of ends), to compile it ahead
    (tests/test_compile_ahead.py holds them to the real call's types)."""
    from .layers import Bounds, Goal

    ints = np.zeros(1, np.int64)
    reals = np.zeros(1)
    table = np.zeros((1, 1))
    bounds = Bounds(reals, ints, ints, ints, ints, table, table, table, table, reals, reals,
                    reals, table)
    goal = Goal(table, reals, ints, np.zeros(1, np.bool_))
    return (1, table, np.zeros((1, 1), np.int64), pricing, bounds, goal, win, ints, ints, 0, 1)


def _chain(arg, k, g):
    """Group ends of the relaxation's best cover of 1..g by at most k buckets."""
    ends = []
    j = g
    t = k
    while j > 0:
        ends.append(j)
        j = int(arg[t, j])
        t -= 1
        if j < 0:
            return None
    return ends[::-1]


def _lower(x) -> float:
    return float(x - ROUNDING * abs(x))


def certified_layers(obj, kmax, ks=None, *, exact=False, limit=None):
    """(opt, best, certificates) for the fitted objective ``obj``, with the contract of
    ``Objective.layers``: ``opt[k-1, j]`` the smallest best start of the last bucket of the best
    cover of groups 1..j by at most k buckets, ``best[k-1]`` the optimum for j = g (inf when
    infeasible, nan for layers outside ``ks``), ``certificates[k]`` its :class:`Optimality`:
    exact (the DP over every bucket the bounds leave is a proof), unless the DP would pass
    ``limit`` (default WORK_LIMIT; not with ``exact``): then every k takes the best cover the
    bounds found (polished: :func:`polish`), with the gap they prove."""
    from ...jit import compile_ahead
    from .layers import TAIL_BLOCK, Goal, exact_tail, forward_layer
    from .relaxation import relaxed_layers

    groups = obj.groups
    g = groups.g
    ks = layers_asked(kmax, ks)
    P = groups.prefix_count.astype(np.float64)
    win = windows(obj)
    pricing = obj.pricing()
    sizes, world = pricing.sizes, pricing.world
    first = _tail_start(groups.value_end, P, TAIL_STEPS * int(world) * int(sizes[-1]))
    seeds = {}
    top = {}
    # a first run compiles the exact layers (and the objective's cost) in a second process
    # while this one compiles the tail and the relaxation, which run first (bucketopt.jit)
    ahead = compile_ahead([(forward_layer, _layer_args_like(pricing, win)),
                           *obj.kernels_ahead()])

    def exact_top():
        top["tail"] = exact_tail(pricing, first, kmax, win, TAIL_BLOCK)

    in_worker(lambda: seeds.update(obj.seed_chains(kmax, ks)), exact_top)  # independent
    tail = top["tail"]
    cells = np.zeros(1, np.int64)
    if obj.relaxation_cells:
        cells = _top_cells(P, _cells(P, [0], seeds.values(), g), g)
    rel = obj.relaxation(cells)
    rows = obj.rows(rel.cells)
    relaxed = {}

    def relaxed_forward():  # while the backward pass runs
        relaxed["fwd"], relaxed["arg"], _ = relaxed_layers(
            rel, rows.fewest, rows.mean, P, win, kmax, True, False, tail)

    def relaxed_bwd():
        relaxed["bwd"] = backward_pass(rel, rows, P, win, kmax, tail)

    in_worker(relaxed_forward, relaxed_bwd)
    ahead.wait()
    fwd, arg, bwd = relaxed["fwd"], relaxed["arg"], relaxed["bwd"]
    feasible = [k for k in ks if np.isfinite(fwd[k, g])]
    chains = {}
    upper = {}
    for k in feasible:
        for chain in (_chain(arg, k, g), seeds.get(k)):
            if chain and _in_windows(chain, win.lo, win.hi):  # (windows that move left would
                # let the relaxation's chain out of them)
                value = float(obj.cost(groups.edges[chain]))
                if value < upper.get(k, np.inf):
                    chains[k], upper[k] = list(chain), value
    polished = {k for k in chains if upper[k] > fwd[k, g] * (1.0 + POLISH_GAP)}
    for k in polished:  # a tighter upper bound prunes more
        chains[k] = polish(pricing, chains[k], win)
        upper[k] = float(obj.cost(groups.edges[chains[k]]))
    F = np.full((kmax + 1, g + 1), np.inf)
    F[0, 0] = 0.0
    start = np.full((kmax + 1, g + 1), -1, dtype=np.int64)
    best = np.full(kmax, np.nan)
    for k in ks:
        best[k - 1] = np.inf
    work = np.array([0, 2**62 if exact else WORK_LIMIT if limit is None else limit],
                    dtype=np.int64)
    done = [0]
    if feasible:
        ks_arr = np.asarray(feasible, dtype=np.int64)
        ub = np.asarray([upper.get(k, np.inf) for k in feasible], dtype=np.float64)

        # an end's pricing costs about its steps' rows (the sweeps' draw counts) plus a little,
        # and its scan of the starts grows with how many lie below it (on the source-code tail
        # of benchmarks/certified.py under alpha 0.5 the upper half of a layer's ends took twice
        # the time of the lower one without this term: 3.34 -> 3.12 s)
        cost = np.minimum(world * sizes.astype(np.float64), 256.0) + 16.0
        cost *= 1.0 + 2.0 * np.arange(g + 1) / g
        bounds = exact_bounds(rows, rel.cells, P)
        keep = np.zeros(g + 1, dtype=np.bool_)
        goal = Goal(bwd, ub, ks_arr, keep)

        def layer(t, lo, hi, spent, halt):
            forward_layer(t, F, start, pricing, bounds, goal, win, spent, halt, lo, hi)

        for t in range(1, max(feasible) + 1):
            candidates = _candidate_ends(fwd, bwd, t, ks_arr, ub)
            keep[:] = False
            keep[candidates] = True
            parts = _parts(candidates, cost, g)
            # each part on its own counter with its share of the work left (the parts run two
            # at a time, so a layer's parts take at most the time of the work left): the stop
            # is the same with one CPU or two
            left = work[1] - work[0]
            share = left if len(parts) == 1 else left // len(parts) * 2
            spent = [np.array([0, share], dtype=np.int64) for _ in parts]
            # a part past its share halts the others (the layer is incomplete whatever they
            # find, and proves nothing): which parts pass their shares does not depend on the
            # CPUs, so neither does the stop
            halt = np.zeros(1, dtype=np.int64)
            in_worker(*(functools.partial(layer, t, lo, hi, w, halt)
                        for (lo, hi), w in zip(parts, spent)))
            over = bool(halt[0])
            work[0] += sum(int(w[0]) for w in spent)
            if over:
                work[0] = max(work[0], work[1] + 1)
                break
            done[0] = t  # layers 1..t are whole: F[k, g] is proven for every k <= t
    certs = {}
    if work[0] <= work[1]:
        for k in feasible:
            best[k - 1] = F[k, g]
            certs[k] = exact_value(F[k, g])
        return start[1:].astype(np.int32), best, certs
    # past the work limit: the layers finished before it prove their k; the others take the best
    # covers found, with the gaps the bounds prove
    from ...groups import backtrack

    opt = np.full((kmax, g + 1), -1, dtype=np.int32)
    opt[:done[0]] = start[1:done[0] + 1]
    proven = {k: backtrack(opt, k, g) for k in feasible if k <= done[0]}
    for k in set(chains) - set(proven) - polished:  # the best one near each cover found
        chains[k] = polish(pricing, chains[k], win)
        upper[k] = float(obj.cost(groups.edges[chains[k]]))
    written = _write(opt, {k: c for k, c in chains.items() if k not in proven}, g, proven)
    floor = _lower(_mean_floor(rows, groups.prefix_count))
    for k in feasible:
        lower = max(_lower(fwd[k, g]), floor, _through_layers(F, bwd, k, done[0], g))
        if k in proven:
            best[k - 1] = F[k, g]
            certs[k] = exact_value(F[k, g])
        elif k in written:
            best[k - 1] = upper[k]
            certs[k] = Optimality(False, min(lower, upper[k]), upper[k])
        else:  # no cover of its own fits the table: nothing is claimed
            certs[k] = Optimality(False, lower, float("inf"))
    return opt, best, certs


def polish(pricing, ends, win):
    """A cover at most as costly as ``ends`` (group ends, g last): every boundary moved, jointly,
    to the best of the groups within POLISH_HALF strides of it (exact costs,
    :func:`.layers.window_chain`), again around the new ones while that gains, the
    stride falling from POLISH_STRIDES[0] groups to 1. No proof: a stop at the work limit
    returns it with the gap the bounds prove. (On the source-code tail of
    benchmarks/certified.py under alpha 0.5 it takes the best cover found from 3.0% above the
    optimum to 0.3%, in 0.03 s.)"""
    from .layers import window_chain

    g = int(ends[-1])
    ends = [int(e) for e in ends]
    value = np.inf
    out = []

    def run_windows(windows):
        flat = np.concatenate(windows).astype(np.int64)
        offsets = np.r_[0, np.cumsum([w.size for w in windows])].astype(np.int64)
        out.append(window_chain(pricing, win, flat, offsets))

    for stride in POLISH_STRIDES:
        for _ in range(POLISH_ROUNDS):
            steps = stride * np.arange(-POLISH_HALF, POLISH_HALF + 1)
            windows = [np.array([0]), *(np.unique(np.clip(b + steps, 1, g - 1))
                                        for b in ends[:-1]), np.array([g])]
            in_worker(functools.partial(run_windows, windows))
            new, cost = out.pop()
            if not cost < value:
                break
            moved = [int(e) for e in new] != ends
            ends, value = [int(e) for e in new], float(cost)
            if not moved:
                break
    return ends


def backward_pass(rel, rows, P, win, kmax, tail):
    """The backward pass of :func:`.relaxation.relaxed_layers` (the same values), layer by
    layer, each layer's cells in two halves at once (every other cell from the top: a cell's
    work grows with the ends above it), then the mean bound over every end
    (:func:`.relaxation.mean_layer`)."""
    from .relaxation import (
        backward_layer,
        big_starts,
        ends_of_big,
        mean_layer,
        window_firsts,
        window_tops,
    )

    g = P.size - 1
    bwd = np.full((kmax + 1, g + 1), np.inf)
    bwd[:, g] = 0.0
    from_big = ends_of_big(big_starts(P, rel.split), g)
    first = window_firsts(window_tops(win.hi), g)
    order = np.arange(rel.cells.size - 1, -1, -1)
    for k in range(1, kmax + 1):
        in_worker(*(functools.partial(backward_layer, k, cs, rel, rows.fewest, P, from_big,
                                      first, win, bwd, tail)
                    for cs in (np.ascontiguousarray(order[0::2]), np.ascontiguousarray(order[1::2]))
                    if cs.size))
        mean_layer(k, rows.Mm, rows.Um, rows.R, P, bwd)
    return bwd


def _in_windows(ends, win_lo, win_hi) -> bool:
    """Whether every bucket of the cover (group ends, from 0) starts within its share window."""
    starts = [0, *ends[:-1]]
    return all(win_lo[e] <= s <= win_hi[e] for s, e in zip(starts, ends))


def _candidate_ends(fwd, bwd, t, ks, ub):
    """The ends the exact layer t may keep: those where the relaxed bound of the first t
    buckets (at most t of them) plus that of the rest stays within some k's upper bound (its F
    is at least the relaxed one). The exact layer prices no other end: its own bounds (the
    hulls of F_{t-1}) miss the exact top that the relaxed passes carry, and passed 56 times
    as many ends in one range of one GPU's heavy tail (docs/method.md)."""
    keep = np.zeros(fwd.shape[1], dtype=bool)
    for k, u in zip(ks, ub):
        if k >= t:
            keep |= fwd[t] + bwd[k - t] <= u * (1.0 + 1e-9)
    keep[0] = False
    return np.flatnonzero(keep)


def _parts(candidates, weight, g):
    """The ranges of ends [lo, hi) an exact layer is computed in: PARTS with as much weight of
    candidate ends each (``weight[j]``: what an end is expected to cost), two workers taking
    them in turn where two CPUs are free, else one after the other (the same values either
    way); one where few ends are candidates."""
    parts = min(PARTS, candidates.size // SPLIT_ENDS)
    if parts < 2:
        return [(1, g + 1)]
    total = np.cumsum(weight[candidates], dtype=np.float64)
    at = np.searchsorted(total, total[-1] * np.arange(1, parts) / parts)
    cuts = sorted({int(candidates[min(a + 1, candidates.size - 1)]) for a in at})
    return list(zip([1, *cuts], [*cuts, g + 1]))


def _tail_start(value_end, P, samples) -> int:
    """The lowest start of the top of the lengths whose every bucket :func:`exact_tail` prices:
    the groups that hold at most ``samples`` samples, and as many as keep the lengths those
    buckets walk under TAIL_WORK."""
    ends = np.asarray(value_end, dtype=np.float64)
    g = ends.size - 1
    suffix = 0.0  # sum of value_end[j] over j > i
    work = 0.0
    for i in range(g - 1, -1, -1):
        suffix += ends[i + 1]
        work += suffix - (g - i) * ends[i]  # the lengths of every bucket (i, j]
        if work > TAIL_WORK or P[g] - P[i] > samples:
            return i + 1
    return 0


def _through_layers(F, bwd, k, done, g) -> float:
    """A lower bound of every cover of at most k buckets that costs less than the upper bound,
    from the finished layers t <= ``done``: such a cover's t-th bucket ends at some j where
    F[t, j] is finite (the exact DP drops only ends that no such cover passes) and at most the
    cost of its first t buckets, and the rest costs at least bwd[k - t, j]."""
    lower = -np.inf
    for t in range(1, min(done, k) + 1):
        through = F[t] + bwd[k - t]
        lower = max(lower, _lower(float(np.min(through))))
    return lower


def _mean_floor(rows, prefix_count) -> float:
    """A lower bound of every cover, whatever its k: the mean bounds of its buckets summed, with
    each group's share priced at the least per-sample term Um of any edge at or above it (a
    bucket's edge is at or above each of its groups): every row at its own length."""
    counts = np.diff(np.asarray(prefix_count, dtype=np.float64))
    um = np.minimum.accumulate(np.asarray(rows.Um, dtype=np.float64)[::-1])[::-1]
    return float(rows.R[0] - rows.R[-1] + np.sum(counts * um[1:]))


def _write(opt_out, tables, g, kept=None):
    """Write every k's cover (group ends) into ``opt_out`` so that backtracking layer k gives
    it; a cover that would break one written before, or one of ``kept`` (k -> the ends its
    backtracking gives now), is left out (then k is not returned)."""
    from ...groups import backtrack

    written = dict(kept or {})
    for k in sorted(tables, reverse=True):
        ends = list(tables[k])
        trial = opt_out.copy()
        starts = [0, *ends[:-1]]
        for t in range(len(ends)):
            trial[k - len(ends) + t, ends[t]] = starts[t]
        if backtrack(trial, k, g) == ends and all(
                backtrack(trial, other, g) == e for other, e in written.items()):
            opt_out[:] = trial
            written[k] = ends
    return written


def in_worker(*fns):
    """Run ``fns`` (long numba calls that release the GIL) on worker threads, at most CPUS of
    them, each taking the next function left in order (one CPU: one worker runs them all one
    after the other), and wait for them in short slices, so that Ctrl-C reaches the main thread
    at once (a signal handler runs only between bytecodes of the main thread); the first
    exception is raised here."""
    import collections
    import threading

    failure = []
    left = collections.deque(fns)
    lock = threading.Lock()

    def target():
        while not failure:
            with lock:
                if not left:
                    return
                fn = left.popleft()
            try:
                fn()
            except BaseException as exc:  # re-raised in the caller's thread
                failure.append(exc)

    workers = [threading.Thread(target=target, daemon=True)
               for _ in range(max(1, min(CPUS, len(fns))))]
    for worker in workers:
        worker.start()
    for worker in workers:
        while worker.is_alive():
            worker.join(0.05)
    if failure:
        raise failure[0]


def relaxed_bounds(obj, kmax, chains, values):
    """Certificates for covers found by a search that is not a proof: the relaxation, with cells
    of starts below every boundary of ``chains`` (k -> group ends), bounds each optimum from
    below; ``values``: k -> the cost of that k's cover."""
    from .relaxation import relaxed_layers

    groups = obj.groups
    g = groups.g
    P = groups.prefix_count.astype(np.float64)
    rel = obj.relaxation(_cells(P, [0], chains.values(), g))
    none = MeanLines(np.full(g + 1, -np.inf), np.zeros(g + 1), np.zeros(g + 1))
    fwd, _, _ = relaxed_layers(rel, Lines(rel.A2, rel.U), none, P, windows(obj), kmax, True,
                               False, np.zeros((kmax + 1, g + 1)))
    out = {}
    for k, value in values.items():
        lower = min(_lower(fwd[k, g]), float(value))
        out[k] = Optimality(False, lower, float(value))
    return out


def windows(obj) -> Windows:
    """The fitted objective's share windows, as the kernels take them."""
    return Windows(np.ascontiguousarray(obj.win_lo, dtype=np.int64),
                   np.ascontiguousarray(obj.win_hi, dtype=np.int64))


def exact_bounds(rows, cells, P):
    """The exact layers' :class:`.layers.Bounds` of the objective's ``rows`` on ``cells``
    (their layout once for every layer and range of ends)."""
    from .layers import Bounds
    from .relaxation import big_starts, cell_of

    g = P.size - 1
    nc = cells.size
    cell_end = np.array([cells[c + 1] - 1 if c + 1 < nc else g for c in range(nc)],
                        dtype=np.int64)
    split = np.ascontiguousarray(rows.split, dtype=np.float64)
    return Bounds(P, cells, cell_of(cells, g), cell_end, big_starts(P, split), rows.A, rows.A2,
                  rows.U, rows.U2, rows.Mm, rows.Um, rows.R, rows.T)


def _top_cells(P, cells, g):
    """``cells`` and the top cells: the groups below which TOP_FIRST, TOP_FIRST TOP_RATIO, ...
    samples lie, up to TOP_SHARE of them, evenly thinned to keep ``cells`` and them within
    CELL_ENTRIES entries a row of bounds."""
    n = float(P[-1])
    count = int(np.ceil(np.log(max(n * TOP_SHARE / TOP_FIRST, 1.0)) / np.log(TOP_RATIO)))
    above = TOP_FIRST * TOP_RATIO ** np.arange(count)
    top = np.setdiff1d(np.clip(np.searchsorted(P, n - above, side="right") - 1, 0, g - 1), cells)
    room = max(0, CELL_ENTRIES // (g + 1) - cells.size)
    if top.size > room:
        top = _evenly(top, room)
    return np.union1d(cells, top).astype(np.int64)


def _evenly(cells, count):
    """``count`` of ``cells``, evenly spread from the first to the last (the first alone for
    1, none for 0)."""
    return cells[np.linspace(0, cells.size - 1, count).astype(np.int64)]


def _cells(P, cells, chains, g):
    """Cells of starts: ``cells``, EVEN_CELLS evenly spread over the samples and, below every
    boundary of every chain, CELL_SHIFTS of the samples; at most MAX_CELLS (the new cells kept
    first), 0 always first."""
    n = P[-1]
    even = np.arange(1, EVEN_CELLS) * n / EVEN_CELLS
    marks = [0, *(np.searchsorted(P, even, side="right") - 1)]
    for ends in chains:
        for j in list(ends)[:-1]:
            marks.extend(np.searchsorted(P, P[j] - CELL_SHIFTS * n, side="right") - 1)
    new = np.unique(np.clip(marks, 0, g - 1)).astype(np.int64)
    old = np.setdiff1d(np.asarray(cells, dtype=np.int64), new)
    room = MAX_CELLS - new.size
    if room <= 0:
        return np.unique(np.r_[0, _evenly(new, MAX_CELLS)])
    if old.size > room:
        old = _evenly(old, room)
    return np.unique(np.r_[new, old])

