"""Edge padding (``pad="edge"``): every sample padded to its bucket's upper edge.

Bucket (a, b] costs sum_x c_x (b - x) padded tokens: exact integers. The cost is Monge, so the DP
(``_edge_kernels.edge_layers``) runs divide-and-conquer layers (docs/method.md).

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
    bounded_memory = True  # any k x groups: the table of starts goes to disk when too large

    def __init__(self, min_fill: float = 0.0, memory=None):
        self.min_fill = min_fill
        self.memory = memory

    def candidates(self, groups, token_budget):
        if self.min_fill <= 0:  # (min_fill > 0 comes with a token budget: build_request)
            return groups
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
        from ._edge_kernels import _edge_layers_dc, edge_layers

        if kmax * (g.g + 1) > TABLE_ENTRIES:
            # the table of starts would not fit beside the data (k = 64 on 10**7 lengths:
            # 2.56 GB): one layer at a time, its starts on disk, the paths read back
            from ..progress import Stage
            from ._edge_rows import edge_layers_rows
            from .certified import layers_asked

            done = [0]
            with Stage(f"edge DP, {g.g:,} edges, starts on disk",
                       status=lambda: f"layer {done[0]}/{kmax}"):
                return edge_layers_rows(*args, layers_asked(kmax, ks),
                                        progress=lambda k, _: done.__setitem__(0, k))
        if hull_bytes(g.g, kmax) > HULL_BYTES:
            # the hull's per-lane line stacks (4 int64 a group, up to 3 lanes on 10**7 groups:
            # 960 MB) do not fit beside the data: the divide-and-conquer layers (the same
            # exact DP and the same opt, O(g log g) a layer, memory: opt and two layers)
            return _edge_layers_dc(*args)
        return edge_layers(*args)

    def cost(self, edges) -> int:
        hist = self.groups.hist
        edges = np.asarray(edges, dtype=np.int64)
        idx = np.searchsorted(edges, hist.values, side="left")
        return int(np.sum((edges[idx] - hist.values) * hist.counts))


# Above this many (k, group) starts (256 MB of int32) the edge DP keeps them on disk, a layer at
# a time (bucketopt.objectives._edge_rows): k = 64 and k = 1..16 on 10**7 distinct lengths.
TABLE_ENTRIES = 1 << 26
# Above this many bytes of line stacks the edge DP takes its divide-and-conquer layers.
HULL_BYTES = 256 << 20


def hull_bytes(g: int, kmax: int) -> int:
    """The line stacks ``_edge_kernels._edge_layers_hull`` allocates for ``g`` groups and
    ``kmax`` layers (its lanes: at most 8, kmax - 1, and 2**25 // (g + 1))."""
    lanes = max(1, min(8, kmax - 1, (1 << 25) // (g + 1)))
    return lanes * (4 * (g + 1) + 4 * 37) * 8


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
