"""Expected dynamic padding (``pad="batch"``) as an objective, and its DP.

The bucket cost (:mod:`bucketopt.objectives.batchpad`) is not Monge (B depends on the edge), so
the DP (``batch_layers``) looks at every allowed pair of candidate edges; a pair is skipped only
when a proven lower bound of its cost cannot improve any layer; the starts of one end with a
small batch size are priced together by a sweep (:mod:`bucketopt.objectives._batch_sweep`).
Above EXACT_CANDIDATES groups it runs on a grid of candidate edges and refines the grid optimum
and the best grid chain of another basin (docs/dynamic_padding.md).

``min_fill``: a bucket is allowed only when its largest batch, min(B, N) rows padded to their
longest, is expected to hold at least ``min_fill x token_budget`` padded tokens.
"""

from __future__ import annotations

import functools

import numpy as np

from ..errors import BucketoptError
from ..groups import backtrack
from ..orderstats import walk_tables
from ..validate import shown
from .base import Objective
from .batchpad import expected_padding_per_bucket
from .certified import layers_asked

# Above this many candidate groups the default DP runs on a grid of candidate edges (see
# candidate_grid) and refines its optimum; at or below it every candidate edge is used.
EXACT_CANDIDATES = 256
# The default grid: every GRID_COUNT_STEP of the samples by rank, a geometric sequence of ratio
# GRID_RATIO in length, both sides of every batch-size jump up to THRESHOLD_BATCH; refinement
# windows span REFINE_RADIUS grid steps either side of each boundary.
GRID_COUNT_STEP = 1 / 32
# A sweep over at most this many k refines every row as solve() refines its k, so each row has
# solve()'s boundaries (on the embedded example k = 1..16 took 4.6-5.6 s with its certificates
# where the unrefined rows took 3.4-3.8 s); a longer sweep reads its rows from one finer grid DP
# unrefined (k = 1..64 refined took 46 s), and says so in their warnings.
SWEEP_REFINED_ROWS = 16
GRID_RATIO = 1.06
THRESHOLD_BATCH = 32
REFINE_RADIUS = 4
REFINE_BAND = 40
REFINE_WIDTH = 33
# solve() also refines the best grid chain of another basin (see other_basin) when it costs at
# most OTHER_BASIN_GAINS times the fraction that refining gained on the grid optimum more than
# the grid optimum (never more than OTHER_BASIN_SLACK).
OTHER_BASIN_GAINS = 2.0
OTHER_BASIN_SLACK = 0.01
# A sweep's grid (no refinement) marks every 1 / (2 kmax) of the samples, at most 1 / 256.
SWEEP_GRID_MAX = 256
# Above this many candidate groups the default's certificate is the relaxation's bound alone,
# not the certified DP (BatchPadding.certify), whose relaxed passes grow with the groups times
# the cells times k: with one sample at each of 37,362 distinct lengths (T = 1M) it proved
# k = 6 in 1.9 s and certified 3.7% at k = 16 in 5.4 s (the work limit); at 58,206 lengths
# (T = 2M), k = 16, 18% in 5.9 s; at 259,041, 20% in 20 s (the search: 0.8-1.4 s).
CERTIFY_GROUPS = 40_000


def _is_sweep(kmax, ks) -> bool:
    """Whether ``layers(kmax, ks)`` is asked for several k (a sweep), not one (None: every
    layer, a solve's own DP)."""
    return ks is not None and len(layers_asked(kmax, ks)) > 1


class BatchPadding(Objective):
    name = "padding"
    pad = "batch"
    relaxation_cells = True

    def __init__(self, min_fill: float = 0.0, candidates="auto", exact=False, memory=None):
        self.min_fill = min_fill
        self.candidates_rule = candidates
        self.exact = exact
        self.memory = memory

    def layers(self, kmax, ks=None):
        free = self._finest_cover(kmax, ks)
        if free is not None:
            return free
        if self.exact:
            return self.certified_layers(kmax, ks)
        opt, best = self.grid_layers(kmax, ks)
        from .certified import exact_value, relaxed_bounds

        g = self.groups.g
        proven = self.candidates_rule == "all" or (self.candidates_rule == "auto"
                                                   and g <= EXACT_CANDIDATES)
        done = [k for k in layers_asked(kmax, ks) if np.isfinite(best[k - 1])]
        if proven:
            self.certificates = {k: exact_value(best[k - 1]) for k in done}
        else:
            # the grid search is not a proof: the certified DP, seeded with its covers, proves
            # them optimal or certifies how far from the optimum they can be; computed when a
            # solution's optimality is first read
            chains = {k: backtrack(opt, k, g) for k in done}
            values = {k: float(best[k - 1]) for k in done}
            memo = {}
            # the relaxation alone (one pass) bounds a sweep's rows, the grid's covers not
            # refined (sweep_rows_are_solves: some 0.3 s on 20,000 distinct lengths at
            # k = 1..16, where the certified DP took 6 s and proved 4 of the 15 rows it had not
            # refined; solve() certifies the k it recommends with the certified DP), and the
            # covers of inputs of more than CERTIFY_GROUPS candidate groups
            cheap = len(done) > 1 or g > CERTIFY_GROUPS

            def certify(k):
                if not memo:
                    memo.update(relaxed_bounds(self, kmax, chains, values) if cheap else
                                self.certify(kmax, chains, values))
                return memo[k]

            self.certificates = {k: functools.partial(certify, k) for k in done}
        return opt, best

    def _finest_cover(self, kmax, ks):
        """(opt, best) at once where only k >= g is asked (k beyond the distinct lengths is
        k = their number): every group one length, its own bucket, pads nothing, so that cover
        is optimal (no padding is below 0) and no DP over g layers runs. None where that does
        not hold (a group of several lengths, min_fill, share windows that refuse a bucket of
        one group)."""
        g = self.groups.g
        if kmax < g or layers_asked(kmax, ks) != [g] or self.min_fill > 0:
            return None
        if g != self.groups.hist.values.size:  # a group of several lengths (align)
            return None
        j = np.arange(1, g + 1)
        if np.any(self.win_lo[j] > j - 1) or np.any(self.win_hi[j] < j - 1):
            return None
        from .certified import exact_value

        opt = np.broadcast_to(np.arange(-1, g, dtype=np.int64), (kmax, g + 1))  # no copy
        best = np.full(kmax, np.nan)
        best[g - 1] = 0.0
        self.certificates = {g: exact_value(0.0)}
        return opt, best

    def certify(self, kmax, chains, values):
        """k -> :class:`.certified.Optimality` of the covers ``chains`` (k -> group ends, each
        bucket meeting ``min_fill``) of expected padding ``values[k]``: the certified DP of
        :meth:`unit` (its default work limit), seeded with them. Its optimum knows no
        ``min_fill``, so it bounds the constrained one from below; a cover is exact when it
        costs no more than that optimum (within rounding). A cover with no padding is exact
        as it stands (none is below 0). On 20,000 distinct lengths at k = 16
        (benchmarks/certified.py) the search and the proof that its cover is optimal take
        2.4-2.9 s, where the relaxation alone certified 44.5% (docs/method.md,
        "Certificates")."""
        from ..progress import Stage
        from .certified import ROUNDING, Optimality, certified_layers, exact_value

        out = {k: exact_value(0.0) for k, v in values.items() if v <= 0.0}
        rest = sorted(set(values) - set(out))
        if not rest:
            return out
        unit, tokens = self.unit(seeds={k: chains[k] for k in rest})
        with Stage(f"certifying k={rest[-1]} ({self.describe()})"):
            _, _, certs = certified_layers(unit, kmax, rest)
        for k in rest:
            cert, value = certs.get(k), values[k]
            if cert is None:  # (no cover of k buckets its relaxation allows: nothing proven)
                out[k] = Optimality(False, 0.0, value)
                continue
            lower = cert.lower_bound - tokens  # (cert.lower_bound: padded plus real tokens)
            if cert.exact and value <= lower + ROUNDING * cert.lower_bound:
                out[k] = exact_value(value)
            else:  # a better cover exists (exact=True finds it), or the DP stopped at its limit
                out[k] = Optimality(False, min(lower, value), value)
        return out

    def unit(self, seeds=None):
        """(the time objective of one second per padded-or-real token on one rank, fitted to
        these groups, the tokens): its bucket cost is the bucket's expected padded size, its
        expected padding plus its tokens, a constant that does not move the optimum; its
        certified DP (:mod:`.certified`) takes ``seeds`` (k -> group ends) for its own."""
        from .time import padding_as_time

        unit = padding_as_time(memory=self.memory)
        unit.fit(self.groups, token_budget=self.token_budget, win_lo=self.win_lo,
                 win_hi=self.win_hi)
        unit.seeds = seeds
        return unit, float(self.groups.prefix_tokens[-1])

    def certified_layers(self, kmax, ks=None):
        """``exact=True``: the certified DP of :meth:`unit` to the end. A proof in seconds where
        the DP over every pair of candidate edges takes minutes (docs/method.md). It knows no
        ``min_fill``: where a bucket of its optimum fills less, the DP over every pair of
        candidate edges (which does) gives the proof."""
        from .certified import certified_layers, exact_value

        unit, tokens = self.unit()
        opt, best, certs = certified_layers(unit, kmax, ks, exact=True)
        if not self._fills_enough(opt, certs):
            opt, best = batch_layers(self.groups, kmax, token_budget=self.token_budget,
                                     sizes=self.batch_sizes(self.groups.edges),
                                     win_lo=self.win_lo, win_hi=self.win_hi, candidates="all",
                                     min_fill=self.min_fill)
            self.certificates = {k: exact_value(best[k - 1]) for k in layers_asked(kmax, ks)
                                 if np.isfinite(best[k - 1])}
            return opt, best
        best = best - tokens  # nan (layers not asked for) and inf stay so
        self.certificates = {k: exact_value(best[k - 1]) for k in certs}
        return opt, best

    def _fills_enough(self, opt, ks) -> bool:
        """Does every bucket of layer k's cover in ``opt`` meet ``min_fill``, for each k?"""
        if self.min_fill <= 0:
            return True
        from ._batch_kernels import fill_ok

        d = _Data(self.groups, self.batch_sizes(self.groups.edges), self.win_lo, self.win_hi,
                  self.min_fill * self.token_budget)
        for k in ks:
            ends = backtrack(opt, k, self.groups.g)
            for i, j in zip([0, *ends[:-1]], ends):
                if not fill_ok(d.values, d.pc, d.lf_hi, d.lf_lo, d.group_end[i],
                               d.group_end[j], d.sizes[j], d.min_fill_tokens):
                    return False
        return True

    def sweep_row_note(self) -> str | None:
        if getattr(self, "rows_refined", True):
            return None
        return (f"a row of a sweep over more than {SWEEP_REFINED_ROWS} k values: read from the "
                "grid DP, not refined; solve() for this k gives the refined plan (a sweep of at "
                f"most {SWEEP_REFINED_ROWS} k refines every row)")

    def sweep_rows_are_solves(self, kmax, ks):
        sweep = _is_sweep(kmax, ks)
        on_grid = self.candidates_rule == "auto" and self.groups.g > EXACT_CANDIDATES
        return not (sweep and on_grid and not self.exact)

    def relaxation(self, cells):
        """The lines A[c, j] - U[c, j] P[i] + R[i] <= the expected padding of the bucket
        (i, j] for every start i >= cells[c] (docs/method.md): q B E[M_B] + r E[M_r] - tokens
        >= (N - B) (E[M_B] - mean) when N >= B, and E[M_B] is at least that of B draws from every
        sample between cells[c] and the edge."""
        from .certified import make_relaxation
        from .certified.relaxation import prefix_moments
        from .synced import TimeArrays

        g = self.groups
        a = TimeArrays(g.hist, "batch")
        group_end = g.value_end
        sizes = self.batch_sizes(g.edges[1:])
        P = g.prefix_count[1:].astype(np.float64)
        Q = g.prefix_tokens.astype(np.float64)
        A = np.zeros((len(cells), g.g + 1))
        U = np.zeros((len(cells), g.g + 1))
        for c, first in enumerate(cells):
            m1, _ = prefix_moments(a.values, a.pcv, a.pq1, a.pq2, group_end, np.r_[0, sizes],
                                   a.lf_hi, a.lf_lo, int(first))
            low = float(a.values[group_end[first]])  # the shortest length of such a bucket
            U[c, 1:] = m1[1:]
            A[c, 1:] = P * m1[1:] - Q[1:] - sizes * np.maximum(m1[1:] - low, 0.0)
        return make_relaxation(cells, A, U, Q)

    def pair_costs(self, starts, ends):
        from ._batch_kernels import pair_costs

        if not hasattr(self, "_data"):
            self._data = _Data(self.groups, self.batch_sizes(self.groups.edges), self.win_lo,
                               self.win_hi)
        d = self._data
        return pair_costs(d.values, d.pc, d.pt, d.lf_hi, d.lf_lo, d.group_end, d.sizes,
                          np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64))

    def grid_layers(self, kmax, ks=None):
        refine_ks = None if ks is None else set(layers_asked(kmax, ks))
        # A sweep (several k) of at most SWEEP_REFINED_ROWS values refines every row on solve()'s
        # grid, so each row is the plan solve() gives for its k (one answer for the same flags);
        # a longer one runs one DP over a grid sized for kmax and refines none. The recommended k
        # is then solved alone, for solve()'s certificate (see sweep_rows_are_solves).
        self.rows_refined = not (_is_sweep(kmax, ks) and len(refine_ks) > SWEEP_REFINED_ROWS)
        if not self.rows_refined:
            refine_ks = set()
        return batch_layers(self.groups, kmax, token_budget=self.token_budget,
                            sizes=self.batch_sizes(self.groups.edges),
                            win_lo=self.win_lo, win_hi=self.win_hi,
                            candidates=self.candidates_rule, refine_ks=refine_ks,
                            min_fill=self.min_fill)

    def cost(self, edges) -> float:
        edges = np.asarray(edges, dtype=np.int64)
        return float(expected_padding_per_bucket(self.groups.hist, edges,
                                                 self.batch_sizes(edges)).sum())


def candidate_grid(groups, sizes, *, count_step=None, ratio=None) -> np.ndarray:
    """Group indices (increasing, 0 and g included) of the default candidate grid.

    A group is a candidate when it closes a new ``count_step`` of the samples by rank, when its
    edge is the first at or below a geometric sequence of ratio ``ratio`` (so the grid is dense
    both where the samples are and along long tails), or when it is the last group with its batch
    size B(edge) or the first with the next one, for batch sizes up to THRESHOLD_BATCH.
    ``sizes``: the batch size at every candidate edge (index 0 unused), or a token budget T
    (then B = T // edge).
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
    if np.ndim(sizes) == 0:
        sizes = np.r_[0, int(sizes) // groups.edges[1:]]
    sizes = np.asarray(sizes, dtype=np.int64)[1:]
    last_of_size = np.flatnonzero(np.r_[sizes[1:] != sizes[:-1], True]) + 1
    by_size = last_of_size[sizes[last_of_size - 1] <= THRESHOLD_BATCH]
    by_size = np.r_[by_size, by_size + 1]  # both sides of every jump
    keep = np.unique(np.r_[0, by_rank, by_length, by_size, g])
    return keep[(keep >= 0) & (keep <= g)].astype(np.int64)


class _Data:
    """The arrays every kernel call needs, built once per DP."""

    def __init__(self, groups, sizes, win_lo, win_hi, min_fill_tokens=0.0):
        hist = groups.hist
        self.g = groups.g
        self.values = hist.values
        self.pc = np.r_[0, np.cumsum(hist.counts)].astype(np.int64)
        self.pt = np.r_[0, np.cumsum(hist.values * hist.counts)].astype(np.int64)
        self.lf_hi, self.lf_lo = walk_tables(hist.n)
        self.min_fill_tokens = float(min_fill_tokens)
        self.group_end = groups.value_end
        if np.ndim(sizes) == 0:  # a token budget: B = T // edge
            sizes = int(sizes) // np.maximum(groups.edges, 1)
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.win_lo = np.asarray(win_lo, dtype=np.int64)
        self.win_hi = np.asarray(win_hi, dtype=np.int64)

    def layers(self, cand, kmax, bound=np.inf, last_only=False, costs=None):
        """The DP over the candidates ``cand``; ``costs``, a (C, C) array, receives every pair
        cost priced (see batch_layers_kernel)."""
        from ._batch_kernels import batch_layers_kernel

        return batch_layers_kernel(self.values, self.pc, self.pt, self.lf_hi, self.lf_lo, cand,
                                   self.group_end[cand], self.sizes[cand], self.win_lo,
                                   self.win_hi, self.g, kmax, self.min_fill_tokens,
                                   float(bound), bool(last_only),
                                   np.empty((0, 0)) if costs is None else costs)

    def chain_cost(self, chain) -> float:
        from ._batch_kernels import batch_bucket_cost

        return float(sum(
            batch_bucket_cost(self.values, self.pc, self.pt, self.lf_hi, self.lf_lo,
                              self.group_end[i], self.group_end[j], self.sizes[j], np.inf)
            for i, j in zip(chain[:-1], chain[1:])))

    def chain(self, windows, bound=np.inf):
        """Best chain through ``windows``; ``bound``: the cost of a chain through them, if
        known (it only prunes: the result is the same)."""
        from ._batch_kernels import batch_chain_kernel

        offsets = np.r_[0, np.cumsum([w.size for w in windows])].astype(np.int64)
        flat = np.concatenate(windows).astype(np.int64)
        return batch_chain_kernel(self.values, self.pc, self.pt, self.lf_hi, self.lf_lo,
                                  self.group_end, self.sizes, self.win_lo, self.win_hi, flat,
                                  offsets, self.min_fill_tokens, float(bound))


def batch_layers(groups, kmax, *, token_budget, win_lo, win_hi, candidates="auto", refine_ks=None,
                 min_fill=0.0, sizes=None):
    """The pad="batch" DP: (opt, best) with the contract of ``_edge_kernels.edge_layers``.

    ``refine_ks``: the bucket counts whose grid optimum is refined (default: every layer);
    solve() asks for its k alone, sweep() for its ks, so a large k refines one layer, not k.

    ``candidates``: "all" (every group edge: the exact optimum over them), "auto" (all when there
    are at most EXACT_CANDIDATES groups, else the grid of :func:`candidate_grid` followed by
    :func:`refine_chain` on every layer's optimum), "grid" (the grid alone) or an array of group
    indices (0 and g are always added).

    ``sizes``: the batch size at every candidate edge (index 0 unused; default T // edge).
    """
    if sizes is None:
        sizes = token_budget // np.maximum(groups.edges, 1)
    data = _Data(groups, sizes, win_lo, win_hi, min_fill * (token_budget or 0))
    g = groups.g
    if isinstance(candidates, str):
        if candidates not in ("auto", "all", "grid"):
            raise BucketoptError(
                f"`candidates` must be 'auto', 'all', 'grid' or group indices"
                f"; got {shown(candidates)}.",
                param="candidates",
            )
        if candidates == "all" or (candidates == "auto" and g <= EXACT_CANDIDATES):
            return data.layers(np.arange(g + 1, dtype=np.int64), kmax)
        refine = candidates == "auto" and refine_ks != set()
        # Without refinement the grid is finer for many buckets: 1 / (2 kmax) of the samples.
        step = GRID_COUNT_STEP if refine else 1 / min(SWEEP_GRID_MAX, max(1 / GRID_COUNT_STEP,
                                                                            2 * kmax))
        cand = candidate_grid(groups, data.sizes, count_step=step)
    else:
        cand = np.unique(np.r_[0, np.asarray(candidates, dtype=np.int64), g])
        refine = False
    # solve() reads layer kmax alone: its DP keeps only the states a chain of kmax buckets can
    # pass, which leaves layer kmax exact and the others unknown (nan). (A bound from a cheap
    # chain no longer pays here: the sweeps price every start of an end regardless of it, and
    # the chain cost 4 ms of the 38 ms K=6 solve on the embedded example.)
    last_only = refine and refine_ks == {kmax} and kmax > 1
    costs = np.empty((cand.size, cand.size)) if refine else None
    opt, best = data.layers(cand, kmax, np.inf, last_only, costs)
    if last_only:
        best[:-1] = np.nan
    if refine:
        others = {}
        for k in range(1, kmax + 1):
            if (refine_ks is None or k in refine_ks) and np.isfinite(best[k - 1]):
                other = other_basin(costs, cand, backtrack(opt, k, g), best[k - 1])
                if other is not None:
                    others[k] = other
        opt, best = _refine_layers(data, cand, opt, best, refine_ks, others)
    return opt, best


def other_basin(costs, cand, ends, best, *, radius=None, slack=None):
    """The best grid chain of len(ends) buckets with some boundary more than ``radius`` grid
    steps from the same boundary of ``ends`` (the grid optimum, cost ``best``), as group
    indices ending at g, when it costs at most (1 + ``slack``) x best; else None.

    Refining only the grid optimum finds the best chain of its basin; the cost has other
    basins, near in cost and far in edges, which a grid sees only roughly. ``costs`` holds the
    grid DP's pair costs (inf: not priced); the cheapest chain through every candidate comes from
    a forward and a backward pass over them (min-plus, C^2 per layer)."""
    radius = REFINE_RADIUS if radius is None else radius
    slack = OTHER_BASIN_SLACK if slack is None else slack
    k = len(ends)
    size = cand.size
    fwd = np.full((k + 1, size), np.inf)
    fwd_arg = np.zeros((k + 1, size), dtype=np.int64)
    fwd[0, 0] = 0.0
    bwd = np.full((k + 1, size), np.inf)
    bwd_arg = np.zeros((k + 1, size), dtype=np.int64)
    bwd[0, -1] = 0.0
    with np.errstate(invalid="ignore"):
        for layer in range(1, k + 1):
            through = fwd[layer - 1][:, None] + costs
            fwd_arg[layer] = np.argmin(through, axis=0)
            fwd[layer] = through[fwd_arg[layer], np.arange(size)]
            through = costs + bwd[layer - 1][None, :]
            bwd_arg[layer] = np.argmin(through, axis=1)
            bwd[layer] = through[np.arange(size), bwd_arg[layer]]
    at = np.searchsorted(cand, ends)
    top, where = np.inf, None
    for u in range(1, k):
        total = fwd[u] + bwd[k - u]
        total[max(0, at[u - 1] - radius):at[u - 1] + radius + 1] = np.inf
        c = int(np.argmin(total))
        if total[c] < top:
            top, where = float(total[c]), (u, c)
    if where is None or not top <= best * (1 + slack):
        return None
    u, c = where
    chain = [c]
    for layer in range(u, 1, -1):
        chain.insert(0, int(fwd_arg[layer, chain[0]]))
    for layer in range(k - u, 0, -1):
        chain.append(int(bwd_arg[layer, chain[-1]]))
    return [int(cand[p]) for p in chain], top


def _refine_layers(data, cand, opt, best, refine_ks=None, others=None):
    """Refine the grid optimum of every layer (:func:`refine_chain`) and write the new chains
    into ``opt``: k = kmax (the one :func:`solve` reads) first, then each other layer when
    writing it leaves every chain written so far intact. A chain written for one layer can
    share a DP state with another layer's grid chain; ``best`` is therefore recomputed from the
    chain every layer finally backtracks to, so it always states that chain's exact cost.
    ``others``: layer -> (ends, grid cost) of a chain in another basin, refined as well; the
    better of the two refined chains is written."""
    others = others or {}
    g = data.g
    kmax = best.size
    finite = [k for k in range(kmax, 0, -1) if np.isfinite(best[k - 1])]
    layers = [k for k in finite if refine_ks is None or k in refine_ks]
    opt = opt.copy()
    best = best.copy()
    written = {}
    for k in layers:
        chain, cost = refine_chain(data, cand, backtrack(opt, k, g), cost=best[k - 1])
        # the other basin, when its grid chain is within OTHER_BASIN_GAINS times what refining
        # gained on the grid optimum (refining it may gain as much, and more where the grid
        # sees it worse)
        gain = (best[k - 1] - cost) / best[k - 1] if best[k - 1] > 0 and np.isfinite(cost) \
            else 0.0
        if k in others and others[k][1] <= best[k - 1] * (1 + OTHER_BASIN_GAINS * gain):
            ends = others[k][0]  # its grid cost may rest on lower bounds: price it exactly
            chain2, cost2 = refine_chain(data, cand, ends, cost=data.chain_cost([0, *ends]))
            if cost2 < cost:
                chain, cost = chain2, cost2
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


def refine_chain(data, cand, ends, *, width=None, max_rounds=40, band=None, cost=np.inf):
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
    width = REFINE_WIDTH if width is None else width
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
