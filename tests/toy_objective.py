"""A toy objective for tests/test_toy_objective.py: the fewest optimizer steps.

A bucket of N samples at edge b takes ceil(N / B(b)) batches (B: the batch-size rule, T // b
with a token budget), one optimizer step each; the objective is their sum over the buckets.
It is not Monge (B depends on the edge), so the certified DP proves its optimum. Everything it
needs is the protocol of :mod:`bucketopt.objectives.certified`: ``pricing`` (a step costs
alpha = 1, whatever its rows: a Pricing of edge padding on one rank), ``relaxation`` and
``rows`` (N / B(b) <= ceil(N / B(b)): one line per end, no other bound), and ``cost``.

Importing this module registers it (the one registration line at the bottom).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from bucketopt.objectives import register_objective
from bucketopt.objectives.base import Objective
from bucketopt.objectives.certified import Rows, certified_layers, make_pricing, make_relaxation
from bucketopt.objectives.certified.protocol import no_top
from bucketopt.objectives.synced import TimeArrays


class StepCost(NamedTuple):
    """One second a step, nothing a token: the seconds of a bucket are its steps."""

    alpha: float = 1.0
    beta: float = 0.0
    gamma: float = 0.0


class FewestSteps(Objective):
    name = "steps"
    pad = "edge"

    def __init__(self, memory=None):
        self.memory = memory

    def fit(self, groups, *, token_budget, win_lo, win_hi):
        super().fit(groups, token_budget=token_budget, win_lo=win_lo, win_hi=win_hi)
        self.sizes = self.batch_sizes(groups.edges)
        return self

    def layers(self, kmax, ks=None):
        opt, best, self.certificates = certified_layers(self, kmax, ks, exact=True)
        return opt, best

    def cost(self, edges) -> float:
        edges = np.asarray(edges, dtype=np.int64)
        hist = self.groups.hist
        below = np.searchsorted(hist.values, edges, side="right")
        counts = np.diff(np.r_[0, np.cumsum(hist.counts)[below - 1]])
        return float(np.sum(-(-counts // self.batch_sizes(edges))))

    def pricing(self):
        g = self.groups
        return make_pricing(TimeArrays(g.hist, "edge"), g.value_end, g.edges, self.sizes, 1,
                            StepCost())

    def _line(self):
        P = self.groups.prefix_count.astype(np.float64)
        U = np.r_[0.0, 1.0 / self.sizes[1:]]
        return U * P, U  # (P[j] - P[i]) / B_j = A[j] - U[j] P[i]

    def relaxation(self, cells):
        A, U = self._line()
        return make_relaxation(cells, A[None, :], U[None, :], np.zeros(A.size))

    def rows(self, cells):
        A, U = self._line()
        A, U = A[None, :], U[None, :]
        none = np.zeros(A.shape[1])
        return Rows(A, U, A, U, none, np.full(none.size, -np.inf), none, none,
                    no_top(none.size))


register_objective("steps", "edge", lambda *, memory=None, **_: FewestSteps(memory=memory))
