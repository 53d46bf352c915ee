"""Estimated time (``objective="time"``): the expected epoch seconds under a cost model.

Both paddings. With one rank the objective is the summed micro-batch time; with G ranks and
buckets synced across them (the sampler's default, ``sync_buckets=True``) each bucket runs in
micro-steps of G of its batches, each as long as the slowest of them, so the epoch time is still
a sum over buckets and the certified DP (:mod:`.certified`, with :meth:`Time.rows` and
:meth:`Time.pricing`) minimises it exactly over every boundary set (docs/method.md). With
``sync_buckets`` False or "step" ranks hold different buckets, the wait for the slowest rank
depends on the mix of all buckets and is not separable: the DP then minimises the summed
micro-batch time (GPU-seconds) and :func:`refine_time` polishes the boundaries on the analytic
epoch time of a random batch order.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from ..groups import backtrack
from .base import Objective
from .certified import Pricing, Rows, in_worker, make_pricing
from .synced import TimeArrays, bucket_seconds, kernel_args


class TokenCost(NamedTuple):
    """The cost model under which a bucket's seconds are its padded tokens: no step overhead
    (alpha = 0), one second a padded token (beta = 1), no attention term, one rank."""

    alpha: float = 0.0
    beta: float = 1.0
    gamma: float = 0.0
    world_size: int = 1


def padding_as_time(memory=None) -> Time:
    """Dynamic padding priced as a time with alpha = 0 and beta = 1 (:class:`TokenCost`): the
    time objective whose bucket cost is the bucket's expected padded size (its expected padding
    plus its tokens), run to the end (``exact``). The certified DP proves dynamic padding's
    optimum through it (:meth:`.batch.BatchPadding.unit`)."""
    return Time(TokenCost(), pad="batch", exact=True, memory=memory)


class Time(Objective):
    name = "time"

    def __init__(self, cost_model, pad: str = "edge", sync_buckets=True, exact=False,
                 memory=None):
        self.cost_model = cost_model
        self.memory = memory
        self.exact = exact
        self.seeds = None  # k -> group ends of covers found elsewhere (seed_chains)
        self.relaxation_cells = pad == "batch"
        self.pad = pad
        self.sync_buckets = sync_buckets
        synced = sync_buckets is True
        self.world = cost_model.world_size if synced else 1

    def fit(self, groups, *, token_budget, win_lo, win_hi):
        for memo in ("_sizes", "_moments", "_relaxed"):  # of the groups fitted before
            self.__dict__.pop(memo, None)
        self.arrays = TimeArrays(groups.hist, self.pad)
        self.group_end = groups.value_end
        return super().fit(groups, token_budget=token_budget, win_lo=win_lo, win_hi=win_hi)

    def layers(self, kmax, ks=None):
        from .certified import certified_layers

        opt, best, certs = certified_layers(self, kmax, ks, exact=self.exact)
        self.certificates = certs
        return opt, best

    def seed_chains(self, kmax, ks):
        """pad="batch": the time-optimal covers with edge padding (near the dynamic-padding
        ones: the same steps, rows a little longer), or past SEED_WORK the best covers its bounds
        find (a seed needs no proof: on the 4M-token corpus of benchmarks/certified.py the proof
        took 0.65 s of a time DP of 3.8-5.9 s, which was 0.1-0.3 s faster without it; the
        embedded example's seed is proven in milliseconds either way). ``seeds``, where set,
        replace them (the padding DP's grid search: see BatchPadding.certify)."""
        if self.seeds is not None:
            return {k: list(self.seeds[k]) for k in ks if k in self.seeds}
        if self.pad != "batch":
            return {}
        from .certified import certified_layers

        edge = Time(self.cost_model, pad="edge", sync_buckets=self.sync_buckets,
                    memory=self.memory)
        edge.fit(self.groups, token_budget=self.token_budget, win_lo=self.win_lo,
                 win_hi=self.win_hi)
        opt, best, _ = certified_layers(edge, kmax, ks, limit=SEED_WORK)
        return {k: backtrack(opt, k, self.groups.g) for k in ks if np.isfinite(best[k - 1])}

    def relaxation(self, cells):
        """(A, U, R, A2, split, T): A[c, j] - U[c, j] P[i] + R[i] <= the seconds of the bucket
        (i, j] for every start i >= cells[c] of a bucket of at least split[j] samples, A2 in
        place of A for smaller ones, and T[j] (:meth:`top_bound`) <= the seconds of every
        bucket that ends at j (docs/method.md).

        A bucket of N samples at edge e with B = B(e) rows a batch runs at least N / (G B)
        steps, and its steps' largest batches hold at least N / G rows together, each padded to
        the edge (pad="edge"). With pad="batch" all its rows but at most 2 G B (G = 1: B) sit in
        full steps of G B rows, whose longest row is at least as long in expectation as the
        longest of G B draws from every sample between cells[c] and e (removing the shorter
        samples of a set never shortens its expected maximum). The other rows are at least as
        long as the shortest length after cells[c]; in a bucket of at least 2 G B samples
        (G = 1: B) they also sit in steps of at least (G - 1) floor(B / 2) + 1 rows (a full
        batch split in two leaves halves of at least floor(B / 2) rows, and every step then
        holds G batches), priced by that many draws. With B = 1 no batch can be split: all
        rows but at most G - 1 sit in full steps. On one GPU the last batch of r = N mod B rows
        is priced by the chords of the moments at 1, B / MID_SHARE and B draws
        (:func:`._time_kernels.last_batch_deficit`), for every bucket.
        """
        from .certified import make_relaxation

        A, U, R, A2, split = self.bounds(cells)[:5]
        return make_relaxation(cells, A, U, R, A2=A2, split=split, T=self.top_bound())

    def bounds(self, cells):
        """(A, U, R, A2, split, U2, U2 P) for :meth:`relaxation` and :meth:`rows`, once for a
        set of cells (the certified DP asks for both): the moments of each cell (kept for cells
        asked again) and its rows (:func:`._time_kernels.cell_rows`), every other cell on each
        of two workers (a cell's sweep is as long as the ends above it)."""
        key = np.asarray(cells, dtype=np.int64).tobytes()
        kept = self.__dict__.get("_relaxed")
        if kept is not None and kept[0] == key:
            return kept[1]
        parts = self._bounds(np.asarray(cells, dtype=np.int64))
        self._relaxed = (key, parts)
        return parts

    def _bounds(self, cells):
        from ._time_kernels import BOUND_REL, SCALE, cell_rows
        from .certified.relaxation import prefix_moments

        g, m, a = self.groups, self.cost_model, self.arrays
        sizes = self.sizes.astype(np.float64)
        world = float(self.world)
        P = g.prefix_count.astype(np.float64)
        shape = (len(cells), g.g + 1)
        if self.pad == "edge":
            e = g.edges[1:].astype(np.float64)
            U = m.alpha / (world * sizes[1:]) + (m.beta * e + m.gamma * e * e) / world
            A = np.r_[0.0, U * P[1:]][None, :]
            U = np.r_[0.0, U][None, :]
            return A, U, np.zeros(g.g + 1), A, np.zeros(g.g + 1), U.copy(), A.copy()
        isizes = self.sizes[1:]
        full = self.world * isizes
        fewest = self.fewest_rows(isizes)
        rest = (2.0 * world if self.world > 1 else 1.0) * sizes
        # one row a batch: no batch can be split, every step but the last holds G rows
        rest[self.sizes == 1] = world - 1.0
        rest[0] = 0.0
        spare = rest
        draws = [full, fewest, SCALE * full]
        mids = np.ones(g.g + 1)
        if self.world == 1:  # the last batch's rows: see _spare_rows and last_batch_deficit
            spare = _spare_rows(sizes)
            mids[1:] = np.maximum(1, np.ceil(isizes / MID_SHARE))
            draws.append(mids[1:].astype(np.int64))
        A, A2, U, U2, U2P = (np.empty(shape) for _ in range(5))
        memo = self.__dict__.setdefault("_moments", {})  # cell start -> phi of each of draws

        def fill(cs):
            for c in cs:
                first = int(cells[c])
                if first not in memo:
                    memo[first] = tuple(
                        m.beta * m1 + m.gamma * m2
                        for m1, m2 in (prefix_moments(a.values, a.pcv, a.pq1, a.pq2,
                                                      self.group_end,
                                                      np.r_[0, d].astype(np.int64), a.lf_hi,
                                                      a.lf_lo, first, BOUND_REL)
                                       for d in draws))
                phi, phi2, phik = memo[first][:3]
                phim = memo[first][3] if len(memo[first]) > 3 else phi2
                x = float(a.values[self.group_end[first]])
                low = m.beta * x + m.gamma * x * x  # the shortest row of such a bucket
                last = int(cells[c + 1]) - 1 if c + 1 < len(cells) else g.g - 1
                cell_rows(c, phi, phi2, phik, phim, mids, low, float(m.alpha), world, sizes, P,
                          first, last, rest, spare, A, A2, U, U2, U2P)

        order = np.arange(len(cells))
        in_worker(*(functools.partial(fill, order[h::2]) for h in range(2)))
        return A, U, np.zeros(g.g + 1), A2, rest, U2, U2P

    def top_bound(self) -> np.ndarray:
        """The rows of the top bound (:func:`.relaxation.top_at`), a bound of every bucket
        that ends at candidate j (column 0 unused): the step that holds the bucket's longest
        sample (pad="batch": the longest length of group j; pad="edge": the edge) runs at least
        max(1, min(n, fewest) / G) rows padded to it in its largest batch (a step holds at
        least (G - 1) floor(B / 2) + 1 rows or all n of the bucket, a batch of G at least 1 / G
        of them), so the bucket costs at least alpha + that many times beta x + gamma x^2.
        Tight for buckets of one step, where the line bounds (which spread a bucket's steps over
        its rows) are weakest: a heavy tail's longest samples, or short ones in huge batches.
        Rows: alpha + q, q, fewest / G, 1 / G, with q = beta x + gamma x^2."""
        m = self.cost_model
        if self.pad == "edge":
            x = self.groups.edges[1:].astype(np.float64)
        else:
            x = self.arrays.values[self.group_end[1:] - 1].astype(np.float64)
        q = m.beta * x + m.gamma * x * x
        fewest = self.fewest_rows(self.sizes[1:]).astype(np.float64)
        world = float(self.world)
        return np.vstack([np.r_[-np.inf, m.alpha + q], np.r_[0.0, q], np.r_[0.0, fewest / world],
                          np.r_[0.0, np.full(q.size, 1.0 / world)]])

    def fewest_rows(self, sizes) -> np.ndarray:
        """The fewest rows a step holds, unless it holds all of its bucket, at batch sizes
        ``sizes``: (G - 1) floor(B / 2) + 1 (:func:`._time_kernels.fewest_rows`, which the
        certified DP's kernels call)."""
        from ._time_kernels import fewest_rows

        return fewest_rows.py_func(self.world, np.asarray(sizes, dtype=np.int64))

    @property
    def sizes(self) -> np.ndarray:
        """Rows a batch at every candidate edge (index 0 unused), by the one rule."""
        if "_sizes" not in self.__dict__:
            self._sizes = self.batch_sizes(self.groups.edges)
        return self._sizes

    def pricing(self) -> Pricing:
        """What the certified DP's kernels price a bucket with (:class:`.certified.Pricing`)."""
        return make_pricing(self.arrays, self.group_end, self.groups.edges, self.sizes,
                            self.world, self.cost_model)

    def rows(self, cells) -> Rows:
        """The certified DP's lower bounds of every bucket (:class:`.certified.Rows`).

        Full steps: :meth:`relaxation`'s A and U (big buckets). Fewest rows: every step of a
        bucket holds at least (G - 1) floor(B / 2) + 1 rows (G = 1: one row) or all of them,
        and the largest batch of a step at least 1 / G of its rows, so the bucket costs at least
        N (alpha / (G B) + phi / G), phi the moments of that many draws from every sample
        between the cell's start and the edge. Mean: every row is at least as long as itself.
        """
        g, m, a = self.groups, self.cost_model, self.arrays
        P = g.prefix_count.astype(np.float64)
        world = float(self.world)
        A, U, _, _, split, U2, U2P = self.bounds(cells)
        Um = np.r_[0.0, m.alpha / (world * self.sizes[1:])]
        R = -(m.beta * a.pq1[self.group_end] + m.gamma * a.pq2[self.group_end]) / world
        Mm = Um * P - R
        return Rows(A, U, U2P, U2, split, Mm, Um, R, self.top_bound())

    def kernels_ahead(self) -> list:
        from ._time_kernels import bucket_features

        return [(bucket_features, kernel_args(self.arrays, 0, 1, 1, 1, self.world))]

    def cost(self, edges) -> float:
        edges = np.asarray(edges, dtype=np.int64)
        return float(bucket_seconds(self.arrays, edges, self.batch_sizes(edges), self.cost_model,
                                    self.world).sum())

    def optimality(self, k, best):
        cert = super().optimality(k, best)
        if self.world == 1 and self.cost_model.world_size > 1:
            # the DP certified the summed micro-batch seconds; the epoch waits for the slowest
            # rank, is at least that sum / G, and is polished by finish(): nothing exact remains
            from .certified import Optimality

            g = self.cost_model.world_size
            return Optimality(False, cert.lower_bound / g, cert.value / g)
        return cert

    def notes(self, certificate):
        if certificate.exact or not certificate.gap > GAP_NOTE:
            return ()
        if self.sync_buckets is True or self.cost_model.world_size == 1:
            return (f"the certified DP stopped at its work limit: these boundaries are proven "
                    f"within {certificate.gap:.2e} of the optimum; exact=True (--exact) runs it "
                    "to the end, which can take minutes on inputs this large.",)
        return ("ranks that do not share a bucket at each step wait for each other in a way no "
                "sum over buckets captures: these boundaries are a local optimum, proven within "
                f"{certificate.gap:.2e} of the optimum (sync_buckets=True is solved exactly).",)

    def refine(self, solution):
        if self.world == 1 and self.cost_model.world_size > 1:
            return refine_time(solution, self.groups, self.cost_model, self.memory)
        return None


# The work limit of the seed's certified DP (Time.seed_chains).
SEED_WORK = 300_000
# On one GPU the last batch's chords take the moments at B / MID_SHARE draws too
# (_time_kernels.last_batch_deficit).
MID_SHARE = 8
# A solution whose proven gap exceeds this carries a warning (Solution.optimality has it).
GAP_NOTE = 1e-6
# refine_time(): coarse points scanned per edge, and the most analytic evaluations it spends.
REFINE_POINTS = 64
MAX_REFINE_EVALUATIONS = 3000


def _spare_rows(sizes) -> np.ndarray:
    """On one GPU: how many rows the scaled-draws line of a bucket prices at the cell's mean
    (its one-draw moments) instead of at B draws, at batch sizes ``sizes`` (index 0 unused: 0):
    B^2 / (4 (B - 1)), 0 for B = 1 (the plain line takes the chords through B / MID_SHARE draws
    too: :func:`._time_kernels.last_batch_deficit`). A bucket of N samples runs q = N // B
    batches of B rows and one of r = N mod B, and r draws have an E[max] (and E[max^2])
    concave in r, so at least the chord between one draw (phi_1, the mean) and B draws
    (phi_B): its rows cost at least (N - r) phi_B + r (phi_1 + (r - 1) / (B - 1) (phi_B -
    phi_1)) = N phi_B - w (phi_B - phi_1), w = r (B - r) / (B - 1) <= B^2 / (4 (B - 1)), and
    the same for a bucket of N < B samples (one batch: r = N), with the cell's moments in
    place of the bucket's (at or below them, and the bound grows with both). Before, all B
    rows of the last batch took the mean."""
    B = np.asarray(sizes, dtype=np.float64)
    out = np.zeros(B.size)
    many = B >= 2.0
    out[many] = B[many] * B[many] / (4.0 * (B[many] - 1.0))
    out[0] = 0.0
    return out


def refine_time(solution, groups, cost_model, memory=None):
    """Polish the DP's boundaries on the full objective, slowest-of-G wait included:
    (the new boundaries or None when ``solution``'s stay, their certificate), or None when
    nothing is polished.

    The DP minimises the summed micro-batch time, which is the analytic epoch time exactly when
    ``world_size == 1``; then None is returned. With more GPUs the slowest rank
    adds a wait that depends on the mix of all buckets, so the inner edges are moved one at a
    time (coordinate descent: each edge scans the candidates between its neighbours, coarsely
    then around the best) while the analytic epoch time drops and every bucket keeps its share
    bounds. The result is never slower than the DP's; it is a local optimum of the full
    objective, not a proven global one.
    """
    if cost_model.world_size == 1:
        return None
    from ..groups import share_count_bounds
    from .random_order import _seconds_from_atoms, bucket_time_atoms
    from .sizes import batch_sizes

    hist = groups.hist
    candidates = groups.edges[1:]
    pc = groups.prefix_count
    lo_count, hi_count = share_count_bounds(hist.n, solution.min_share, solution.max_share)
    ends = [int(np.searchsorted(candidates, b)) + 1 for b in solution.boundaries]  # group index
    first = np.r_[groups.first_value, hist.m]
    cache = {}  # (start group, end group) -> that bucket's batch-time atoms
    evaluations = 0

    def atoms(start, end):
        if (start, end) not in cache:
            lo, hi = first[start], first[end]
            edge = int(candidates[end - 1])
            size = int(batch_sizes([edge], solution.token_budget, memory)[0])
            cache[start, end] = bucket_time_atoms(hist.values[lo:hi], hist.counts[lo:hi], edge,
                                                  size, solution.pad, cost_model)
        return cache[start, end]

    def seconds(ends_):
        nonlocal evaluations
        evaluations += 1
        parts = [atoms(start, end) for start, end in zip([0, *ends_[:-1]], ends_)]
        return _seconds_from_atoms(np.concatenate([p[0] for p in parts]),
                                   np.concatenate([p[1] for p in parts]), cost_model.world_size)

    def allowed(ends_, i):
        low = ends_[i - 1] if i else 0
        for count in (pc[ends_[i]] - pc[low], pc[ends_[i + 1]] - pc[ends_[i]]):
            if not lo_count <= count <= hi_count:
                return False
        return True

    def scan(ends_, i, positions, best):
        for pos in positions:
            trial = list(ends_)
            trial[i] = int(pos)
            if trial[i] == ends_[i] or not allowed(trial, i):
                continue
            value = seconds(trial)
            if value < best[0] * (1 - 1e-12):
                best = (value, trial)
        return best

    best = (seconds(ends), ends)
    improved = True
    while improved and evaluations < MAX_REFINE_EVALUATIONS:
        improved = False
        for i in range(len(ends) - 1):  # the last edge stays at the longest length
            current = best
            low = best[1][i - 1] + 1 if i else 1
            high = best[1][i + 1] - 1
            stride = max(1, (high - low) // REFINE_POINTS)
            best = scan(best[1], i, range(low, high + 1, stride), best)
            if stride > 1:
                centre = best[1][i]
                best = scan(best[1], i, range(max(low, centre - stride),
                                              min(high, centre + stride) + 1), best)
            improved |= best[0] < current[0]
    ends = best[1]
    cert = solution.certificate
    if cert is not None and not callable(cert):
        # the DP's bound (the summed GPU-seconds / G) stays a bound of the epoch with its waits;
        # the value is the polished boundaries' epoch time
        from .certified import Optimality

        cert = Optimality(False, min(cert.lower_bound, best[0]), best[0])
    if [int(b) for b in candidates[np.asarray(ends) - 1]] == list(solution.boundaries):
        return None, cert
    return candidates[np.asarray(ends) - 1], cert
