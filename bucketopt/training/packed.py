"""Packed (padding-free) epochs: documents packed into rows of at most T tokens, timed.

Each micro-batch is one row of whole documents trained with document-masked (variable-length)
attention, as TRL's ``padding_free``, transformers' ``DataCollatorWithFlattening`` and
flash-attn's varlen kernels run it: it computes no padding and costs
``alpha + beta * tokens + gamma * sum d_i**2``
(:meth:`bucketopt.cost.costmodel.CostModel.batch_times`).
With G ranks, rows ``i*G .. i*G + G - 1`` form step ``i`` and the step waits for its heaviest
row. Every epoch is seeded by ``np.random.default_rng((seed, epoch))``.

Strategies (:data:`STRATEGIES`):

- ``"packed"``: greedy packing of a full shuffle (walk the shuffled documents, open a new row
  when the next does not fit), rows in that order. This is the greedy packing most trainers do;
  ``simulate(lengths, "best-fit")`` (formerly ``"packed"``) is another thing, best-fit
  decreasing over the whole sorted data into rows padded to ``row_length``: the padding floor,
  not a training order.
- ``"packed-bfd"``: best-fit decreasing inside consecutive windows of ``window`` shuffled
  documents (default :data:`DEFAULT_WINDOW`), then the rows in random order.
- ``"packed-balanced"``: the greedy rows of ``"packed"``, then the documents of every step
  re-dealt across its G ranks (:func:`bucketopt.training.packing.balance_steps`, weighted by each
  document's time ``beta * d + gamma * d**2`` under a cost model, else ``d**2``), so every rank
  carries nearly the same load; a step keeps its documents, so its length mix is unchanged.
- ``"packed-bucketed"``: K packing levels (inclusive upper edges on document length, chosen by
  :func:`packing_levels`, the exact DP of :mod:`bucketopt.objectives.packed`); each level's
  shuffled documents are packed greedily, every step takes G rows of one level, and the steps
  go in random order. A level's last, partial step is dealt over G rows where it has G
  documents.

:func:`bucketopt.training.packed_rows.packed_rows` builds the ``compare`` rows: each strategy
simulated, timed (``ktok_per_s``, ``eta_days``, ``wait_fraction`` and intervals), with its step
mix gap and epoch churn (:mod:`bucketopt.training.diversity`) and, for ``packed`` and
``packed-bucketed``, the analytic estimate (:func:`analytic_packed_seconds`).
"""

from __future__ import annotations

import numpy as np

from ..data.histogram import as_histogram, validate_lengths
from ..errors import BucketoptError
from ..validate import check_positive_int, check_world_size, shown
from .epoch import Epoch, packed_epoch
from .packing import balance_steps, greedy_row_starts, pack_rows, row_stats

STRATEGIES = ("packed", "packed-bfd", "packed-balanced", "packed-bucketed")
DEFAULT_WINDOW = 4096  # documents per best-fit-decreasing window
# The level DP visits every pair of candidate edges (O(1) each, ~100 M pairs a second): refuse
# beyond this many and ask for align= (compare's packed rows pick the smallest power-of-two
# align under it).
MAX_LEVEL_PAIRS = 4e8


def _check(lengths, token_budget, world_size):
    lengths = validate_lengths(lengths)
    if token_budget is None:
        raise BucketoptError("`token_budget` is required: rows are packed under it.",
                             param="token_budget")
    token_budget = check_positive_int(token_budget, "token_budget")
    longest = int(lengths.max())
    if longest > token_budget:
        raise BucketoptError(f"token_budget={token_budget} is smaller than the longest sample "
                             f"({longest}): no row can hold it.", param="token_budget")
    return lengths, token_budget, check_world_size(world_size)


def packed_plan(lengths, strategy, *, token_budget, world_size=1, boundaries=None, seed=0,
                epoch=0, window=DEFAULT_WINDOW, cost_model=None):
    """The rows of one packed epoch as (order, starts, levels): dataset indices in training
    order, the offset in ``order`` where each row starts, and each row's level (or None).

    Row ``j`` runs on rank ``j % world_size`` of step ``j // world_size``. ``boundaries`` (the
    levels' inclusive upper edges) is needed by ``"packed-bucketed"``; ``cost_model`` sets the
    weights of ``"packed-balanced"`` (default d**2).
    """
    from .simulate import epoch_rng

    lengths, token_budget, g = _check(lengths, token_budget, world_size)
    rng = epoch_rng(seed, epoch)
    n = lengths.size
    perm = rng.permutation(n)
    shuffled = lengths[perm]
    levels = None
    if strategy in ("packed", "packed-balanced"):
        order, starts = pack_rows(shuffled, token_budget)
        if strategy == "packed-balanced":
            order, starts = balance_steps(shuffled, order, starts, g, token_budget,
                                          weights=_weights(shuffled, cost_model))
    elif strategy == "packed-bfd":
        order, starts = pack_rows(shuffled, token_budget, method="bfd", window=window)
        order, starts = _permute_rows(order, starts, rng.permutation(starts.size))
    elif strategy == "packed-bucketed":
        if boundaries is None:
            raise BucketoptError('strategy="packed-bucketed" needs `boundaries` (the levels).',
                                 param="boundaries")
        from ..solution import check_boundaries

        edges = np.asarray(check_boundaries(boundaries, as_histogram(lengths)), dtype=np.int64)
        order, starts, levels = _level_rows(shuffled, edges, token_budget, g, rng)
    else:
        raise BucketoptError(f"`strategy` must be one of {', '.join(STRATEGIES)}; "
                             f"got {shown(strategy)}.", param="strategy")
    return perm[order], starts, levels


def _weights(lengths, cost_model):
    d = lengths.astype(np.float64)
    if cost_model is None:
        return d * d
    return cost_model.beta * d + cost_model.gamma * d * d


def _permute_rows(order, starts, row_order):
    """Rows of (order, starts) taken in ``row_order``."""
    sizes = np.diff(np.r_[starts, order.size])[row_order]
    new_starts = np.r_[0, np.cumsum(sizes)[:-1]].astype(np.int64)
    take = np.repeat(starts[row_order] - new_starts, sizes) + np.arange(order.size)
    return order[take], new_starts


def _level_rows(shuffled, edges, capacity, g, rng):
    """Greedy rows inside each level, steps of G rows of one level in random order."""
    level_of = np.searchsorted(edges, shuffled, side="left")
    by_level = np.argsort(level_of, kind="stable")  # shuffled order inside each level
    blocks = []  # (order positions, starts, level) of each step
    tail = []  # rows of levels with fewer than G documents left over
    bounds = np.r_[0, np.cumsum(np.bincount(level_of, minlength=edges.size))]
    for level in range(edges.size):
        members = by_level[bounds[level]:bounds[level + 1]]
        if members.size == 0:
            continue
        starts = greedy_row_starts(shuffled[members], capacity)
        full = starts.size // g * g
        ends = np.r_[starts, members.size]
        for first in range(0, full, g):
            lo, hi = ends[first], ends[first + g]
            blocks.append((members[lo:hi], starts[first:first + g] - lo, level))
        if full < starts.size:  # the partial step: dealt over G rows where it can be
            part = members[ends[full]:]
            p_order, p_starts = balance_steps(shuffled[part], np.arange(part.size),
                                              starts[full:] - ends[full], g, capacity)
            if p_starts.size == g:
                blocks.append((part[p_order], p_starts, level))
            else:
                tail.append((part[p_order], p_starts, level))
    step_order = rng.permutation(len(blocks))
    pieces = [blocks[i] for i in step_order] + tail
    order_parts, start_parts, level_parts, offset = [], [], [], 0
    for members, starts, level in pieces:
        order_parts.append(members)
        start_parts.append(starts + offset)
        level_parts.append(np.full(starts.size, level, dtype=np.int64))
        offset += members.size
    return (np.concatenate(order_parts), np.concatenate(start_parts).astype(np.int64),
            np.concatenate(level_parts))


def simulate_packed(lengths, strategy, *, token_budget, world_size=1, boundaries=None, seed=0,
                    epoch=0, window=DEFAULT_WINDOW, cost_model=None) -> Epoch:
    """One packed epoch as an :class:`~bucketopt.training.epoch.Epoch` of padding-free rows (tokens
    and the sum of d**2 per row, ``buckets`` the level of each row for ``"packed-bucketed"``).

    Examples
    --------
    >>> e = simulate_packed([5, 1, 4, 2, 3], "packed", token_budget=8)
    >>> e.total_real_tokens, e.padding_fraction, e.n_batches
    (15, 0.0, 2)
    """
    lengths = validate_lengths(lengths)
    order, starts, levels = packed_plan(lengths, strategy, token_budget=token_budget,
                                        world_size=world_size, boundaries=boundaries, seed=seed,
                                        epoch=epoch, window=window, cost_model=cost_model)
    tokens, attention = row_stats(lengths, order, starts)
    return packed_epoch(strategy, tokens, attention, levels)


def packed_batches(lengths, strategy, **kwargs) -> list[np.ndarray]:
    """The rows (dataset indices) of one packed epoch in training order (see
    :func:`packed_plan` for the keyword arguments)."""
    order, starts, _ = packed_plan(lengths, strategy, **kwargs)
    return np.split(order, starts[1:])


# --- analytic estimate and levels --------------------------------------------------------------


def analytic_packed_seconds(lengths, boundaries, token_budget, cost_model) -> float:
    """Expected epoch seconds of greedy packing with levels ``boundaries`` (None: one level,
    plain ``"packed"``), from the histogram: the sum of
    :func:`bucketopt.objectives.packed.level_seconds` over the levels."""
    from ..objectives.packed import level_seconds, moments_of

    hist = as_histogram(lengths)
    edges = [int(hist.max_length)] if boundaries is None else [int(b) for b in boundaries]
    per_value = moments_of(hist.values, hist.counts, token_budget)
    level_of = np.searchsorted(np.asarray(edges), hist.values, side="left")
    total = 0.0
    for level in range(len(edges)):
        total += level_seconds(per_value[level_of == level].sum(axis=0), token_budget,
                               cost_model.alpha, cost_model.beta, cost_model.gamma,
                               cost_model.world_size)
    return total


def packing_levels(lengths, k, *, token_budget, cost_model, min_share=0.0, max_share=1.0,
                   align=1) -> tuple:
    """The at most ``k`` packing levels (inclusive upper edges) of least expected epoch time
    under ``cost_model``: the exact DP of :mod:`bucketopt.objectives.packed` over every
    candidate edge (every distinct length, or multiples of ``align``)."""
    from ..groups import backtrack, make_groups
    from ..objectives import make_objective
    from ..solver import run_layers
    from ..validate import check_align, check_edge_fits, check_k, check_shares

    k = check_k(k)
    hist = as_histogram(lengths)
    _check(np.array([hist.max_length]), token_budget, cost_model.world_size)
    min_share, max_share = check_shares(min_share, max_share)
    groups = make_groups(hist, check_align(align))
    pairs = groups.g * (groups.g + 1) / 2
    if pairs > MAX_LEVEL_PAIRS:
        raise BucketoptError(f"packing levels over {groups.g:,} candidate edges visit "
                             f"{pairs:,.0f} pairs of edges, too many for the exact DP; pass "
                             "align= (e.g. align=16) to merge nearby edges.", param="align")
    check_edge_fits(groups.edges[-1], token_budget, align)
    objective = make_objective("packed", "varlen", cost_model=cost_model)
    kmax, opt, best = run_layers(objective, groups, k, token_budget=int(token_budget),
                                 min_share=min_share, max_share=max_share, stage=False)
    if not np.isfinite(best[kmax - 1]):
        raise BucketoptError(f"infeasible constraints: no set of at most {k} packing levels "
                             f"satisfies min_share={min_share}, max_share={max_share}.", param=None)
    ends = backtrack(opt, kmax, groups.g)
    return tuple(int(e) for e in groups.edges[ends])


def level_align(lengths) -> int:
    """The smallest power of two ``align`` whose candidate edges keep the level DP under
    :data:`MAX_LEVEL_PAIRS` pairs (1 for the embedded example's 8,133 distinct lengths)."""
    values = as_histogram(lengths).values
    align = 1
    while True:
        g = np.unique(-(-values // align)).size
        if g * (g + 1) / 2 <= MAX_LEVEL_PAIRS:
            return align
        align *= 2
