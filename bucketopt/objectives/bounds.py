"""The certified DP: a relaxation bounds every chain from below, the exact DP runs only where a
chain could still beat the bound, and every optimum comes with its proof (docs/method.md).

An objective that offers ``relaxation()`` gives, for every bucket (i, j] of candidate groups, a
lower bound of its cost of the form l(i, j) = A[j] - U[j] P[i] + R[i] (P: prefix sample counts),
and ``pair_costs(starts, ends)``, the exact costs of a list of buckets. Then:

1. The relaxed DP, forward and backward (:func:`._bound_kernels.relaxed_layers`), bounds from
   below the cost of every cover of groups 1..j (``fwd``) and of groups i+1..g (``bwd``) by at
   most t buckets; ``fwd[k, g]`` is a lower bound of the optimum with k buckets, and the
   relaxation's own best chain, priced exactly, an upper bound.
2. For a threshold theta, a bucket (i, j] on layer t can lie on a cover of cost <= theta only if
   fwd[t-1, i] + l(i, j) + bwd[k-t, j] <= theta. The exact DP over those pairs alone
   (:func:`._bound_kernels.pair_dp`) finds every cover of cost <= theta: if its best costs at
   most theta, it is the optimum (every better cover was in the list); if not, no cover costs
   theta or less, and theta is a proven lower bound.
3. theta starts just above the lower bound and grows (x 10) until every k is proven or the list
   of pairs would pass PAIR_LIMIT; then the best cover found is returned with the gap that is
   proven.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..groups import backtrack

# The most pairs one round of the exact DP prices (each an exact bucket cost).
PAIR_LIMIT = 100_000
# The most pairs of the DP that joins the proven ks of a sweep into one table (priced already).
UNION_LIMIT = 20_000_000
# Relative slack of the thresholds over the relaxation's bound, round by round.
ROUND_GAPS = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1)
# Rounding: the relaxed values carry float error; thresholds are widened and lower bounds
# lowered by this much (relative) so that rounding never prunes an optimum.
ROUNDING = 1e-9
# Cells of starts with their own relaxation: this far (share of the samples) below every
# boundary of the first pass's chains, and at most MAX_CELLS of them.
CELL_SHIFTS = np.array([0.0, 0.002, 0.01, 0.04])
MAX_CELLS = 64
CELL_PASSES = 2
# The local search that improves the relaxation's chain: every boundary within BAND groups.
BAND = 12
BAND_ROUNDS = 8
# ... and, for a k the rounds could not prove, every boundary within WIDE_BAND groups.
WIDE_BAND = 32
# A proven gap at or below this is reported as the exact optimum (float rounding).
EXACT_GAP = 1e-12


@dataclass(frozen=True)
class Optimality:
    """What is proven about a solution's value: ``lower_bound <= optimum <= value``.

    Every objective here (padded tokens, seconds) is at least 0, so a lower bound below 0 is
    reported as 0; with a bound of 0 and a positive value no relative gap is proven, and
    ``to_dict`` says ``"gap": null`` (JSON has no infinity)."""

    exact: bool
    lower_bound: float
    value: float

    @property
    def bound(self) -> float:
        return max(float(self.lower_bound), 0.0)

    @property
    def gap(self) -> float:
        if self.exact:
            return 0.0
        if self.bound > 0:
            return max(self.value / self.bound - 1.0, 0.0)
        return 0.0 if self.value <= 0 else float("inf")

    def to_dict(self) -> dict:
        gap = self.gap
        return {"exact": bool(self.exact), "lower_bound": self.bound,
                "gap": float(gap) if np.isfinite(gap) else None}


def exact(value) -> Optimality:
    return Optimality(True, float(value), float(value))


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


class _Costs:
    """Exact bucket costs, each priced once (keyed by start * (g + 1) + end)."""

    def __init__(self, obj, g):
        self.obj = obj
        self.g = g
        self.keys = np.empty(0, dtype=np.int64)
        self.costs = np.empty(0)

    def __call__(self, starts, ends):
        keys = np.asarray(starts, dtype=np.int64) * (self.g + 1) + np.asarray(ends, np.int64)
        uniq, inverse = np.unique(keys, return_inverse=True)
        new = uniq[~np.isin(uniq, self.keys, assume_unique=True)]
        if new.size:
            priced = np.asarray(self.obj.pair_costs(new // (self.g + 1), new % (self.g + 1)),
                                dtype=np.float64)
            keys_all = np.r_[self.keys, new]
            order = np.argsort(keys_all)
            self.keys, self.costs = keys_all[order], np.r_[self.costs, priced][order]
        return self.costs[np.searchsorted(self.keys, uniq)][inverse]


def band_chain(obj, costs, ends, kmax, band=BAND, rounds=BAND_ROUNDS):
    """The best cover with every boundary within ``band`` groups of those of ``ends`` (exact DP
    over those pairs), re-centred until no boundary moves: a local optimum near ``ends``."""
    from ._bound_kernels import pair_dp

    g = obj.groups.g
    k = len(ends)
    value = float(costs(np.r_[0, ends[:-1]], np.asarray(ends)).sum())
    for _ in range(rounds):
        windows = [np.array([0])]
        for b in ends[:-1]:
            windows.append(np.arange(max(1, b - band), min(g - 1, b + band) + 1))
        windows.append(np.array([g]))
        lay, st, en = [], [], []
        for t in range(1, k + 1):
            i, j = np.meshgrid(windows[t - 1], windows[t], indexing="ij")
            i, j = i.ravel(), j.ravel()
            ok = (i < j) & (obj.win_lo[j] <= i) & (i <= obj.win_hi[j])
            lay.append(np.full(int(ok.sum()), kmax - k + t))
            st.append(i[ok])
            en.append(j[ok])
        lay, st, en = (np.concatenate(x).astype(np.int64) for x in (lay, st, en))
        order = np.lexsort((st, en, lay))
        lay, st, en = lay[order], st[order], en[order]
        opt, best = pair_dp(lay, st, en, costs(st, en), g, kmax)
        if not best[kmax - 1] < value:
            break
        new = backtrack(opt, kmax, g)
        value = float(best[kmax - 1])
        if new == list(ends):
            break
        ends = new
    return list(ends), value


def _lower(x) -> float:
    return float(x - ROUNDING * abs(x))


def certified_layers(obj, kmax, ks=None, *, pair_limit=None):
    """(opt, best, certificates) for the objective ``obj`` (fitted), with the contract of
    ``Objective.layers`` for the layers in ``ks`` (default: every layer; the others are nan)
    and ``certificates[k]`` an :class:`Optimality` for every feasible k in ``ks``."""
    from ._bound_kernels import alive_pairs, pair_dp, relaxed_layers

    pair_limit = PAIR_LIMIT if pair_limit is None else pair_limit
    groups = obj.groups
    g = groups.g
    ks = sorted({min(int(k), kmax) for k in (ks if ks is not None else range(1, kmax + 1))})
    P = groups.prefix_count.astype(np.float64)
    win_lo = np.ascontiguousarray(obj.win_lo, dtype=np.int64)
    win_hi = np.ascontiguousarray(obj.win_hi, dtype=np.int64)

    def relax(cells, backward=True):
        rel = _relaxation(obj, cells)
        return (rel, *relaxed_layers(*rel[:5], P, rel.cells, win_lo, win_hi, kmax, backward))

    # first pass: one relaxation for every start (or cells at the seeds' boundaries); then one
    # per cell of starts placed just below each boundary of the best chains so far, where the
    # buckets of near-optimal covers begin (the second pass's chains place them better). Only
    # the last pass needs the backward bounds.
    seeds = obj.seed_chains(kmax, ks)
    cells = _cells(P, [0], seeds.values(), g) if obj.relaxation_cells else np.zeros(1, np.int64)
    for p in range(CELL_PASSES + 1 if obj.relaxation_cells else 1):
        last = p == CELL_PASSES or not obj.relaxation_cells
        rel, fwd, arg, bwd = relax(cells, backward=last)
        if last:
            break
        found = [c for c in (_chain(arg, k, g) for k in ks if np.isfinite(fwd[k, g])) if c]
        new = _cells(P, rel.cells, [*found, *seeds.values()], g)
        if np.array_equal(new, rel.cells):  # every chain already starts its buckets on cells
            rel, fwd, arg, bwd = relax(cells)
            break
        cells = new
    costs = _Costs(obj, g)
    lower = {}
    chains = {}
    upper = {}
    for k in ks:
        if not np.isfinite(fwd[k, g]):
            continue
        lower[k] = _lower(fwd[k, g])
        for chain in (_chain(arg, k, g), seeds.get(k)):
            if chain is not None:
                ends, value = band_chain(obj, costs, chain, k)
                if value < upper.get(k, np.inf):
                    chains[k], upper[k] = ends, value
    feasible = [k for k in ks if k in lower]

    def listed(thresholds, limit):
        ks_ = np.array(list(thresholds), dtype=np.int64)
        th = np.array([t + ROUNDING * abs(t) + 1e-300 for t in thresholds.values()])
        return alive_pairs(*rel[:5], P, rel.cells, win_lo, win_hi, fwd, bwd, ks_, th, kmax,
                           limit)

    # every k on its own (a sweep's union of pairs would pass the limit long before each k's)
    proven = {}
    last = None
    for k in sorted(feasible, reverse=True):
        for gap in ROUND_GAPS:
            theta = min(upper.get(k, np.inf), lower[k] + gap * abs(lower[k]))
            lay, st, en, count = listed({k: theta}, pair_limit)
            if count > pair_limit:
                break
            opt, best = pair_dp(lay, st, en, costs(st, en), g, kmax)
            if best[k - 1] <= theta * (1 + EXACT_GAP) + 1e-300:
                proven[k] = float(best[k - 1])
                last = opt
                break
            lower[k] = max(lower[k], _lower(theta))
    if len(proven) > 1:
        # one table for every proven k: the DP over the union of their pairs (all priced)
        lay, st, en, _ = listed(proven, UNION_LIMIT)
        last, best = pair_dp(lay, st, en, costs(st, en), g, kmax) if lay.size else (None, None)
        if last is None:
            proven.clear()
    # the unproven: the best chain found, polished with a wider band
    for k in feasible:
        if k not in proven and k in chains:
            chains[k], upper[k] = band_chain(obj, costs, chains[k], k, band=WIDE_BAND)
    # the covers: every proven k backtracks from the last round's table (its threshold was kept);
    # the others take the best chain found
    opt_out = np.full((kmax, g + 1), -1, dtype=np.int32)
    best_out = np.full(kmax, np.nan)
    certs = {}
    tables = {}
    for k in feasible:
        if k in proven and last is not None:
            tables[k] = backtrack(last, k, g)
        elif k in chains:
            tables[k] = chains[k]
    written = _write(opt_out, tables, g)
    for k in feasible:
        if k not in written:
            # its cover could not share the table: nothing is claimed (an infinite gap sends
            # the caller to its exact DP)
            certs[k] = Optimality(False, lower[k], float("inf"))
            continue
        ends = written[k]
        value = obj.cost(groups.edges[ends]) if k not in proven else proven[k]
        best_out[k - 1] = value
        if k in proven:
            certs[k] = exact(value)
        else:
            certs[k] = Optimality(value <= lower[k], min(lower[k], value), value)
    for k in ks:
        if k not in lower:
            best_out[k - 1] = np.inf
    return opt_out, best_out, certs


def _write(opt_out, tables, g):
    """Write every k's cover (group ends) into ``opt_out`` so that backtracking layer k gives
    it; a cover that would break one written before is left out (then k is not returned)."""
    written = {}
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


def relaxed_bounds(obj, kmax, chains, values):
    """Certificates for covers found by a search that is not a proof: the relaxation, with cells
    of starts below every boundary of ``chains`` (k -> group ends), bounds each optimum from
    below; ``values``: k -> the cost of that k's cover."""
    from ._bound_kernels import relaxed_layers

    groups = obj.groups
    g = groups.g
    P = groups.prefix_count.astype(np.float64)
    rel = _relaxation(obj, _cells(P, [0], chains.values(), g))
    fwd, _, _ = relaxed_layers(*rel[:5], P, rel.cells, np.ascontiguousarray(obj.win_lo, np.int64),
                               np.ascontiguousarray(obj.win_hi, np.int64), kmax, False)
    out = {}
    for k, value in values.items():
        lower = min(_lower(fwd[k, g]), float(value))
        out[k] = Optimality(False, lower, float(value))
    return out


class Relaxation(NamedTuple):
    """l(i, j) = A[c, j] - U[c, j] P[i] + R[i] for starts i in cell c (cells[c] <= i <
    cells[c + 1]) of buckets with at least split[j] samples; A2 in place of A for smaller ones."""

    A: np.ndarray
    A2: np.ndarray
    split: np.ndarray
    U: np.ndarray
    R: np.ndarray
    cells: np.ndarray


def _relaxation(obj, cells) -> Relaxation:
    """The objective's relaxation (``obj.relaxation(cells)``: (A, U, R) or (A, U, R, A2,
    split)) as contiguous arrays; an objective with one row uses cell 0 alone."""
    parts = obj.relaxation(cells)
    A, U, R = (np.ascontiguousarray(x, dtype=np.float64) for x in parts[:3])
    if len(parts) > 3:
        A2, split = np.ascontiguousarray(parts[3], np.float64), np.asarray(parts[4], np.float64)
    else:
        A2, split = A, np.zeros(A.shape[1])
    cells = np.asarray(cells[:A.shape[0]], dtype=np.int64)
    return Relaxation(A, A2, np.ascontiguousarray(split), U, R, cells)


def _cells(P, cells, chains, g):
    """Cells of starts: ``cells`` and, below every boundary of every chain, CELL_SHIFTS of the
    samples; at most MAX_CELLS (the new chains' cells kept first), 0 always first."""
    n = P[-1]
    marks = [0]
    for ends in chains:
        for j in list(ends)[:-1]:
            marks.extend(np.searchsorted(P, P[j] - CELL_SHIFTS * n, side="right") - 1)
    new = np.unique(np.clip(marks, 0, g - 1)).astype(np.int64)
    old = np.setdiff1d(np.asarray(cells, dtype=np.int64), new)
    room = MAX_CELLS - new.size
    if room <= 0:
        pick = np.linspace(0, new.size - 1, MAX_CELLS).astype(np.int64)
        return np.unique(np.r_[0, new[pick]])
    if old.size > room:
        old = old[np.linspace(0, old.size - 1, room).astype(np.int64)]
    return np.unique(np.r_[new, old])
