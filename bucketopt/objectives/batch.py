"""Expected dynamic padding (``pad="batch"``) as an objective, and its DP.

The bucket cost (:mod:`bucketopt.batchpad`) is not Monge (B depends on the edge), so the DP
(``batch_layers``) looks at every allowed pair of candidate edges; a pair is skipped only when a
proven lower bound of its cost cannot improve any layer. Above EXACT_CANDIDATES groups it runs on a
grid of candidate edges and refines the grid optimum (docs/dynamic_padding.md).

``min_fill``: a bucket is allowed only when its largest batch, min(B, N) rows padded to their
longest, is expected to hold at least ``min_fill x token_budget`` padded tokens.
"""

from __future__ import annotations

import numpy as np

from ..batchpad import expected_padding_per_bucket, walk_tables
from ..errors import BucketoptError
from ..groups import backtrack
from .base import Objective

# Above this many candidate groups the default DP runs on a grid of candidate edges (see
# candidate_grid) and refines its optimum; at or below it every candidate edge is used.
EXACT_CANDIDATES = 256
# The default grid: every GRID_COUNT_STEP of the samples by rank, a geometric sequence of ratio
# GRID_RATIO in length, both sides of every batch-size jump up to THRESHOLD_BATCH; refinement
# windows span REFINE_RADIUS grid steps either side of each boundary.
GRID_COUNT_STEP = 1 / 48
GRID_RATIO = 1.04
THRESHOLD_BATCH = 48
REFINE_RADIUS = 3
REFINE_BAND = 24
# A sweep's grid (no refinement) marks every 1 / (2 kmax) of the samples, at most 1 / 256.
SWEEP_GRID_MAX = 256


class BatchPadding(Objective):
    name = "padding"
    pad = "batch"

    def __init__(self, min_fill: float = 0.0, candidates="auto"):
        self.min_fill = min_fill
        self.candidates_rule = candidates

    def fit(self, groups, *, token_budget, win_lo, win_hi):
        if token_budget is None:
            raise BucketoptError('pad="batch" needs a token_budget (the batch size comes from it).')
        return super().fit(groups, token_budget=token_budget, win_lo=win_lo, win_hi=win_hi)

    def layers(self, kmax, ks=None):
        refine_ks = None if ks is None else {min(k, kmax) for k in ks}
        # A sweep (several k): one DP over a grid sized for kmax gives every layer; only the
        # recommended k is then refined, by solve() (solver.sweep reads ``sweep_rows_on_grid``).
        sweep = refine_ks is not None and len(refine_ks) > 1
        self.sweep_rows_on_grid = sweep and self.candidates_rule == "auto" \
            and self.groups.g > EXACT_CANDIDATES
        return batch_layers(self.groups, kmax, token_budget=self.token_budget,
                            win_lo=self.win_lo, win_hi=self.win_hi,
                            candidates=self.candidates_rule,
                            refine_ks=set() if sweep else refine_ks,
                            min_fill=self.min_fill)

    def cost(self, edges) -> float:
        edges = np.asarray(edges, dtype=np.int64)
        return float(expected_padding_per_bucket(self.groups.hist, edges,
                                                 self.token_budget // edges).sum())


def candidate_grid(groups, token_budget, *, count_step=None, ratio=None) -> np.ndarray:
    """Group indices (increasing, 0 and g included) of the default candidate grid.

    A group is a candidate when it closes a new ``count_step`` of the samples by rank, when its
    edge is the first at or below a geometric sequence of ratio ``ratio`` (so the grid is dense
    both where the samples are and along long tails), or when it is the last group with its batch
    size T // edge or the first with the next one, for batch sizes up to THRESHOLD_BATCH.
    """
    count_step = GRID_COUNT_STEP if count_step is None else count_step
    ratio = GRID_RATIO if ratio is None else ratio
    g = groups.g
    pc = groups.prefix_count
    n = int(pc[-1])
    marks = np.arange(1, int(np.ceil(1 / count_step))) * (count_step * n)
    by_rank = np.searchsorted(pc, marks, side="left")
    edges = groups.edges.astype(np.float64)
    targets = []
    e = float(edges[1])
    while e < edges[-1]:
        targets.append(e)
        e *= ratio
    by_length = np.searchsorted(edges, np.asarray(targets), side="right") - 1
    # The cost jumps where the batch size T // edge changes: the last group of every batch size
    # up to THRESHOLD_BATCH and the group after it are candidates (above it, one step of the
    # batch size changes the cost little).
    sizes = token_budget // groups.edges[1:]
    last_of_size = np.flatnonzero(np.r_[sizes[1:] != sizes[:-1], True]) + 1
    by_size = last_of_size[sizes[last_of_size - 1] <= THRESHOLD_BATCH]
    by_size = np.r_[by_size, by_size + 1]  # both sides of every jump
    keep = np.unique(np.r_[0, by_rank, by_length, by_size, g])
    return keep[(keep >= 0) & (keep <= g)].astype(np.int64)


class _Data:
    """The arrays every kernel call needs, built once per DP."""

    def __init__(self, groups, token_budget, win_lo, win_hi, min_fill=0.0):
        hist = groups.hist
        self.g = groups.g
        self.values = hist.values
        self.pc = np.r_[0, np.cumsum(hist.counts)].astype(np.int64)
        self.pt = np.r_[0, np.cumsum(hist.values * hist.counts)].astype(np.int64)
        self.lf_hi, self.lf_lo = walk_tables(hist.n)
        self.min_fill_tokens = float(min_fill * token_budget)
        self.group_end = np.r_[0, groups.first_value[1:], hist.m].astype(np.int64)
        self.sizes = (token_budget // np.maximum(groups.edges, 1)).astype(np.int64)
        self.win_lo = np.asarray(win_lo, dtype=np.int64)
        self.win_hi = np.asarray(win_hi, dtype=np.int64)

    def layers(self, cand, kmax, bound=np.inf, last_only=False):
        from .._batch_kernels import batch_layers_kernel

        return batch_layers_kernel(self.values, self.pc, self.pt, self.lf_hi, self.lf_lo, cand,
                                   self.group_end[cand], self.sizes[cand], self.win_lo,
                                   self.win_hi, self.g, kmax, self.min_fill_tokens,
                                   float(bound), bool(last_only))

    def bucket_cost(self, i, j, cap=np.inf) -> float:
        """The cost of the bucket closing group j after group i, inf unless it satisfies the
        share windows and min_fill; above ``cap`` it may be a lower bound (still > cap)."""
        from .._batch_kernels import batch_bucket_cost, fill_ok

        lo, hi = self.group_end[i], self.group_end[j]
        if not (self.win_lo[j] <= i <= self.win_hi[j]) or not fill_ok(
                self.values, self.pc, self.lf_hi, self.lf_lo, lo, hi, self.sizes[j],
                self.min_fill_tokens):
            return np.inf
        return float(batch_bucket_cost(self.values, self.pc, self.pt, self.lf_hi, self.lf_lo,
                                       lo, hi, self.sizes[j], float(cap)))

    def feasible_chain_cost(self, chain) -> float:
        """The cost of ``chain`` (group indices, 0 first, g last), inf unless every bucket
        satisfies the share windows and min_fill."""
        return float(sum(self.bucket_cost(i, j) for i, j in zip(chain[:-1], chain[1:])))

    def chain_cost(self, chain) -> float:
        from .._batch_kernels import batch_bucket_cost

        return float(sum(
            batch_bucket_cost(self.values, self.pc, self.pt, self.lf_hi, self.lf_lo,
                              self.group_end[i], self.group_end[j], self.sizes[j], np.inf)
            for i, j in zip(chain[:-1], chain[1:])))

    def chain(self, windows, bound=np.inf):
        """Best chain through ``windows``; ``bound``: the cost of a chain through them, if
        known (it only prunes: the result is the same)."""
        from .._batch_kernels import batch_chain_kernel

        offsets = np.r_[0, np.cumsum([w.size for w in windows])].astype(np.int64)
        flat = np.concatenate(windows).astype(np.int64)
        return batch_chain_kernel(self.values, self.pc, self.pt, self.lf_hi, self.lf_lo,
                                  self.group_end, self.sizes, self.win_lo, self.win_hi, flat,
                                  offsets, self.min_fill_tokens, float(bound))


def batch_layers(groups, kmax, *, token_budget, win_lo, win_hi, candidates="auto", refine_ks=None,
                 min_fill=0.0):
    """The pad="batch" DP: (opt, best) with the contract of ``_kernels.edge_layers``.

    ``refine_ks``: the bucket counts whose grid optimum is refined (default: every layer);
    solve() asks for its k alone, sweep() for its ks, so a large k refines one layer, not k.

    ``candidates``: "all" (every group edge: the exact optimum over them), "auto" (all when there
    are at most EXACT_CANDIDATES groups, else the grid of :func:`candidate_grid` followed by
    :func:`refine_chain` on every layer's optimum), "grid" (the grid alone) or an array of group
    indices (0 and g are always added).
    """
    data = _Data(groups, token_budget, win_lo, win_hi, min_fill)
    g = groups.g
    if isinstance(candidates, str):
        if candidates not in ("auto", "all", "grid"):
            raise BucketoptError(
                f"`candidates` must be 'auto', 'all', 'grid' or group indices; got {candidates!r}."
            )
        if candidates == "all" or (candidates == "auto" and g <= EXACT_CANDIDATES):
            return data.layers(np.arange(g + 1, dtype=np.int64), kmax)
        refine = candidates == "auto" and refine_ks != set()
        # Without refinement the grid is finer for many buckets: 1 / (2 kmax) of the samples.
        step = GRID_COUNT_STEP if refine else 1 / min(SWEEP_GRID_MAX, max(1 / GRID_COUNT_STEP,
                                                                            2 * kmax))
        cand = candidate_grid(groups, token_budget, count_step=step)
    else:
        cand = np.unique(np.r_[0, np.asarray(candidates, dtype=np.int64), g])
        refine = False
    # solve() reads layer kmax alone: its DP keeps only the states a chain of kmax buckets can
    # pass and is bounded by the cost of a cheap chain on the grid, which leaves layer kmax exact
    # and the others unknown (nan).
    last_only = refine and refine_ks == {kmax} and kmax > 1
    bound = _grid_bound(data, groups, cand, kmax) if last_only else np.inf
    opt, best = data.layers(cand, kmax, bound, last_only)
    if last_only:
        best[:-1] = np.nan
    if refine:
        opt, best = _refine_layers(data, cand, opt, best, refine_ks)
    return opt, best


def _grid_bound(data, groups, cand, kmax) -> float:
    """The least cost of a few chains of at most kmax buckets on the grid ``cand`` (edges at
    quantiles of the samples, denser towards the long tail), inf when none is feasible: an upper
    bound of the grid optimum of layer kmax."""
    g = data.g
    n = float(groups.prefix_count[-1])
    t = np.arange(1, kmax) / kmax
    best, chain = np.inf, None
    for power in (1.0, 1.25, 1.5):
        marks = n * (1.0 - (1.0 - t) ** power)
        at = np.searchsorted(groups.prefix_count, marks, side="left")
        snapped = cand[np.minimum(np.searchsorted(cand, at), cand.size - 1)]
        trial = np.unique(np.r_[0, snapped[(snapped > 0) & (snapped < g)], g])
        cost = data.feasible_chain_cost(trial)
        if cost < best:
            best, chain = cost, trial
    if chain is None:
        return best
    # then each boundary in turn moves to a nearby grid edge while that lowers the cost
    pos = list(np.searchsorted(cand, chain))
    costs = [data.bucket_cost(cand[a], cand[b]) for a, b in zip(pos[:-1], pos[1:])]
    for _ in range(2):
        for u in range(1, len(pos) - 1):
            for step in (-4, -2, -1, 1, 2, 4):
                p = pos[u] + step
                if not pos[u - 1] < p < pos[u + 1]:
                    continue
                here = costs[u - 1] + costs[u]
                left = data.bucket_cost(cand[pos[u - 1]], cand[p], here)
                if not left < here:
                    continue
                right = data.bucket_cost(cand[p], cand[pos[u + 1]], here - left)
                if left + right < here:
                    pos[u], costs[u - 1], costs[u] = p, left, right
    return min(best, float(sum(costs)))


def _refine_layers(data, cand, opt, best, refine_ks=None):
    """Refine the grid optimum of every layer (:func:`refine_chain`) and write the new chains
    into ``opt``: k = kmax (the one :func:`solve` reads) first, then each other layer when
    writing it leaves every chain written so far intact. A chain written for one layer can
    share a DP state with another layer's grid chain; ``best`` is therefore recomputed from the
    chain every layer finally backtracks to, so it always states that chain's exact cost."""
    g = data.g
    kmax = best.size
    finite = [k for k in range(kmax, 0, -1) if np.isfinite(best[k - 1])]
    layers = [k for k in finite if refine_ks is None or k in refine_ks]
    opt = opt.copy()
    best = best.copy()
    written = {}
    for k in layers:
        chain, cost = refine_chain(data, cand, backtrack(opt, k, g), cost=best[k - 1])
        if not cost < best[k - 1]:
            continue
        trial = opt.copy()
        row = k - 1
        for t in range(len(chain) - 1, 0, -1):
            trial[row, chain[t]] = chain[t - 1]
            row -= 1
        new = [int(c) for c in chain[1:]]
        if backtrack(trial, k, g) == new and all(
                backtrack(trial, layer, g) == ends for layer, ends in written.items()):
            opt = trial
            written[k] = new
    for k in finite:
        best[k - 1] = data.chain_cost([0, *backtrack(opt, k, g)])
    return opt, best


def refine_chain(data, cand, ends, *, width=33, max_rounds=40, band=None, cost=np.inf):
    """Move every boundary of a grid optimum to the best group nearby, jointly (exact DP).

    Each boundary gets a window of about ``width`` groups spanning its grid neighbours; the best
    chain with one boundary per window is found exactly; a boundary that lands on its window's
    edge is re-centred, otherwise the window shrinks to twice the spacing just used, down to
    every group.
    The previous boundaries are always in their windows, so the cost never rises (``cost``: that
    of ``ends``, if known; each DP is bounded by the previous chain's cost, which only prunes).
    Returns (chain with 0 first and g last, cost).
    """
    g = data.g
    band = REFINE_BAND if band is None else band
    bounds = [int(e) for e in ends[:-1]]
    pos = np.searchsorted(cand, bounds)
    r = REFINE_RADIUS
    half = [int(max(cand[min(p + r, cand.size - 1)] - b, b - cand[max(p - r, 0)], 1))
            for p, b in zip(pos, bounds)]
    chain = np.r_[0, bounds, g].astype(np.int64)
    cost = float(cost)
    for _ in range(max_rounds):
        windows = [np.array([0])]
        strides = []
        for b, h in zip(bounds, half):
            stride = max(1, -(-2 * h // (width - 1)))
            lo, hi = max(1, b - h), min(g - 1, b + h)
            windows.append(np.unique(np.r_[np.arange(lo, hi + 1, stride), hi, b]))
            strides.append(stride)
        windows.append(np.array([g]))
        new_chain, new_cost = data.chain(windows, cost)
        if new_chain[0] < 0:
            break
        chain, cost = new_chain, new_cost
        done = True
        for t, b in enumerate(chain[1:-1]):
            w = windows[t + 1]
            at_edge = (b == w[0] and w[0] > 1) or (b == w[-1] and w[-1] < g - 1)
            if at_edge:
                done = False
            elif strides[t] > 1:
                half[t] = 2 * strides[t]  # the next, finer window overlaps the lattice cell
                done = False
            bounds[t] = int(b)
        if done:
            break
    if band > 0 and np.isfinite(cost):
        chain, cost = band_chain(data, chain, cost, band)
    return chain, cost


def band_chain(data, chain, cost, band, *, max_rounds=8):
    """The best chain with every boundary within ``band`` groups of the given one (every group
    of the band, exact DP), re-centred until no boundary moves. The cost never rises."""
    g = data.g
    for _ in range(max_rounds):
        windows = [np.array([0])]
        for b in chain[1:-1]:
            windows.append(np.arange(max(1, b - band), min(g - 1, b + band) + 1))
        windows.append(np.array([g]))
        new_chain, new_cost = data.chain(windows, cost)
        if new_chain[0] < 0 or not new_cost < cost:
            break
        moved = not np.array_equal(new_chain, chain)
        chain, cost = new_chain, new_cost
        if not moved:
            break
    return chain, cost
