"""Edge padding (``pad="edge"``): every sample padded to its bucket's upper edge.

Bucket (a, b] costs sum_x c_x (b - x) padded tokens: exact integers. The cost is Monge, so the DP
(``_kernels.edge_layers``) runs divide-and-conquer layers (docs/method.md).

``min_fill``: a bucket's padded tokens per full batch, min(B, N) x edge, must reach
``min_fill x token_budget``. With N >= B that depends on the edge alone: an edge below it
cannot close a bucket and is dropped from the candidates (its lengths join the next edge); with
N < B it asks for at least ceil(min_fill x T / edge) samples, a count window that only moves
right, so the DP stays exact. Both hold for any batch-size rule B(edge) (a memory model's too):
the first condition is a filter on the edge, the second does not involve B.
"""

from __future__ import annotations

import numpy as np

from ..errors import BucketoptError
from ..groups import restrict_groups
from .base import Objective


class EdgePadding(Objective):
    name = "padding"
    pad = "edge"

    def __init__(self, min_fill: float = 0.0):
        self.min_fill = min_fill

    def candidates(self, groups, token_budget):
        if self.min_fill <= 0:
            return groups
        if token_budget is None:
            raise BucketoptError("min_fill needs a token_budget (the fill is per batch).",
                                 param=None)
        sizes = self.batch_sizes_at(groups.edges[1:], token_budget)
        return _fill_candidates(groups, token_budget, self.min_fill, sizes)

    def batch_sizes_at(self, edges, token_budget):
        from .sizes import batch_sizes

        return batch_sizes(edges, token_budget, self.memory)

    def fit(self, groups, *, token_budget, win_lo, win_hi):
        if self.min_fill > 0:
            win_hi = _fill_windows(groups, token_budget, self.min_fill, win_hi)
        return super().fit(groups, token_budget=token_budget, win_lo=win_lo, win_hi=win_hi)

    def verify(self, solution, best):
        if solution.padded_tokens != best:
            raise AssertionError("DP optimum and evaluated padding disagree")

    def layers(self, kmax, ks=None):
        from ._edge_numpy import RAN, edge_layers_numpy, use_numpy

        g = self.groups
        args = (g.edges, g.prefix_count, g.prefix_tokens, self.win_lo, self.win_hi, kmax)
        if use_numpy(g.g, kmax):  # small, and the kernel not loaded: its load would dominate
            RAN["numpy"] += 1
            return edge_layers_numpy(*args)
        RAN["kernel"] += 1
        from ._edge_kernels import edge_layers

        return edge_layers(*args)

    def cost(self, edges) -> int:
        hist = self.groups.hist
        edges = np.asarray(edges, dtype=np.int64)
        idx = np.searchsorted(edges, hist.values, side="left")
        return int(np.sum((edges[idx] - hist.values) * hist.counts))


def _fill_candidates(groups, token_budget, min_fill, sizes):
    """The candidate edges whose full batch (``sizes`` rows, any rule) fills at least
    ``min_fill`` of the budget."""
    edges = groups.edges[1:]
    full = sizes * edges  # padded tokens of a full batch
    keep = full >= min_fill * token_budget * (1 - 1e-12)
    if not keep[-1]:
        raise BucketoptError(
            f"min_fill={min_fill} is infeasible: the last bucket, closed by the longest sample "
            f"({int(edges[-1])}), fills at most {full[-1] / token_budget:.3f} of the token "
            "budget per batch.", param="min_fill")
    return restrict_groups(groups, keep)


def _fill_windows(groups, token_budget, min_fill, win_hi):
    """A bucket smaller than one batch fills count x edge: it needs enough samples. The needed
    count falls as the edge grows, so the last allowed start still only moves right."""
    pc = groups.prefix_count
    need = np.ceil(min_fill * token_budget / groups.edges[1:] * (1 - 1e-12)).astype(np.int64)
    last_start = np.searchsorted(pc, pc[1:] - np.maximum(need, 1), side="right") - 1
    out = np.asarray(win_hi, dtype=np.int64).copy()
    out[1:] = np.minimum(out[1:], last_start)
    return out
