"""Estimated time (``objective="time"``): the expected epoch seconds under a cost model.

Both paddings. With one rank the objective is the summed micro-batch time; with G ranks and
buckets synced across them (the sampler's default, ``sync_buckets=True``) each bucket runs in
micro-steps of G of its batches, each as long as the slowest of them, so the epoch time is still
a sum over buckets and the DP (``_time_kernels.time_layers_kernel``) minimises it exactly over
every pair of candidate edges (docs/method.md). With ``sync_buckets`` False or "step" ranks hold
different buckets, the wait for the slowest rank depends on the mix of all buckets and is not
separable: the DP then minimises the summed micro-batch time (GPU-seconds) and
:func:`refine_time` polishes the boundaries on the analytic epoch time of a random batch order.
"""

from __future__ import annotations

import numpy as np

from ..errors import BucketoptError
from ..synced import TimeArrays, bucket_seconds
from .base import Objective

# The DP visits every allowed pair of candidate edges, each in O(draw counts kept): refuse beyond
# this many pairs (a few minutes) and ask for align=.
MAX_TIME_PAIRS = 1.2e9


class Time(Objective):
    name = "time"

    def __init__(self, cost_model, pad: str = "edge", sync_buckets=True):
        self.cost_model = cost_model
        self.pad = pad
        self.sync_buckets = sync_buckets
        synced = sync_buckets is True
        self.world = cost_model.world_size if synced else 1

    def fit(self, groups, *, token_budget, win_lo, win_hi):
        if token_budget is None:
            raise BucketoptError(
                'objective="time" needs a token_budget (or a profile that has one).')
        if groups.edges[-1] > token_budget:
            raise BucketoptError(
                f"the last bucket edge {int(groups.edges[-1])} exceeds token_budget="
                f"{token_budget}: a batch of that bucket cannot hold one sample.")
        pairs = _pairs(win_lo, win_hi)
        if pairs > MAX_TIME_PAIRS:
            raise BucketoptError(
                f'objective="time" over {groups.g:,} candidate edges visits {pairs:,.0f} pairs of '
                "edges, too many for the exact DP; pass align= (e.g. align=16) to merge nearby "
                "edges.")
        self.arrays = TimeArrays(groups.hist, self.pad)
        return super().fit(groups, token_budget=token_budget, win_lo=win_lo, win_hi=win_hi)

    def layers(self, kmax, ks=None):
        from .._time_kernels import time_layers_kernel

        a, g, m = self.arrays, self.groups, self.cost_model
        group_end = np.r_[0, g.first_value[1:], g.hist.m].astype(np.int64)
        return time_layers_kernel(a.values, a.pcv, a.pq1, a.pq2, group_end, g.edges,
                                  self.win_lo, self.win_hi, int(kmax), int(self.token_budget),
                                  m.alpha, m.beta, m.gamma, int(self.world), a.pad_code,
                                  a.lf_hi, a.lf_lo, int(a.s0))

    def cost(self, edges) -> float:
        return float(bucket_seconds(self.arrays, edges, self.token_budget, self.cost_model,
                                    self.world).sum())

    def finish(self, solution):
        if self.world == 1 and self.cost_model.world_size > 1:
            return refine_time(solution, self.groups, self.cost_model)
        return solution


def _pairs(win_lo, win_hi) -> float:
    """How many (start, end) pairs the share windows allow."""
    lo = np.asarray(win_lo, dtype=np.float64)[1:]
    hi = np.minimum(np.asarray(win_hi, dtype=np.float64)[1:], np.arange(lo.size))
    return float(np.maximum(hi - lo + 1, 0).sum())


# refine_time(): coarse points scanned per edge, and the most analytic evaluations it spends.
REFINE_POINTS = 64
MAX_REFINE_EVALUATIONS = 3000


def refine_time(solution, groups, cost_model):
    """Polish the DP's boundaries on the full objective, slowest-of-G wait included.

    The DP minimises the summed micro-batch time, which is the analytic epoch time exactly when
    ``world_size == 1``; then ``solution`` is returned unchanged. With more GPUs the slowest rank
    adds a wait that depends on the mix of all buckets, so the inner edges are moved one at a
    time (coordinate descent: each edge scans the candidates between its neighbours, coarsely
    then around the best) while the analytic epoch time drops and every bucket keeps its share
    bounds. The result is never slower than the DP's; it is a local optimum of the full
    objective, not a proven global one.
    """
    if cost_model.world_size == 1 or len(solution.boundaries) < 2:
        return solution
    from ..cost.costmodel import _seconds_from_atoms, bucket_time_atoms
    from ..groups import share_count_bounds
    from ..solution import make_solution

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
            cache[start, end] = bucket_time_atoms(hist.values[lo:hi], hist.counts[lo:hi],
                                                  int(candidates[end - 1]),
                                                  solution.token_budget, solution.pad, cost_model)
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
    if [int(b) for b in candidates[np.asarray(ends) - 1]] == list(solution.boundaries):
        return solution
    return make_solution(hist, candidates[np.asarray(ends) - 1],
                         token_budget=solution.token_budget, pad=solution.pad, k=solution.k,
                         align=solution.align, min_share=solution.min_share,
                         max_share=solution.max_share, objective=solution.objective)
