"""Planning one epoch of ``BucketBatchSampler(..., packing="varlen")``: rows of documents.

A *row* is a list of documents trained as one flattened, document-masked sequence (see
:mod:`bucketopt.integrations.collate`); it holds at most ``token_budget`` real tokens and no
padding. The epoch is planned as the padded sampler's is, with rows in place of batches:

1. the samples of every bucket are shuffled (from ``(seed, epoch)``) and packed greedily into rows
   (:func:`bucketopt.training.packing.pack_rows`): documents of a bucket share rows, so boundaries
   make rows of similar documents (bucketed packing); one bucket is plain packing of a shuffle;
2. the rows are laid out over the ranks by the same code as batches (``_sampler_plan``): equal
   counts on every rank by splitting the rows with most documents in two (a part of a row is still
   under the budget), whole optimizer steps where the data allows, ``sync_buckets`` and
   ``drop_last`` as for batches;
3. ``packing="varlen-balanced"`` then balances the ranks inside every optimizer step (``G * A``
   rows): the documents of every micro-step are re-dealt over its ``G`` rows
   (:func:`bucketopt.training.packing.balance_steps`: longest processing time first by d**2, under
   the budget), after regrouping the step's rows into micro-steps by decreasing attention where that
   lowers the step's sum of heaviest ranks (heavy rows then wait for each other, not for light
   ones). An optimizer step keeps its documents and its ``G * A`` rows, so counts, exactly-once,
   the step's length mix and the resume logic are those of step 2.

Everything is a pure function of the sampler's configuration, the samples to plan and a seeded
generator, so every rank builds the same plan, and a resume (elastic or not) rebuilds it.
"""

from __future__ import annotations

import numpy as np

from ._sampler_plan import EpochPlan, empty_plan, mixed_steps, pack_and_lay_out

VARLEN = ("varlen", "varlen-balanced")


def most_rows(lengths, bucket_of, n_buckets, token_budget) -> int:
    """An upper bound on the rows greedy packing makes in any epoch, from the buckets alone.

    Two consecutive greedy rows of a bucket hold more than ``token_budget`` tokens together (the
    second one's first document did not fit in the first), so a bucket of ``S`` tokens makes at
    most ``2 * ceil(S / token_budget)`` rows, and never more than its documents.
    """
    counts = np.bincount(bucket_of, minlength=n_buckets)
    tokens = np.bincount(bucket_of, weights=lengths, minlength=n_buckets)
    bound = 2 * np.ceil(tokens / token_budget)
    return int(np.minimum(counts, bound).sum())


def build_varlen_plan(sampler, epoch: int, rng, *, world_size: int, grad_accum: int,
                      members=None, segments=()) -> EpochPlan:
    """Plan ``members`` (dataset items; None = every sample) as rows over ``world_size`` ranks."""
    G, A = world_size, grad_accum
    laid = pack_and_lay_out(sampler, rng, G, A, members, segments, _pack)
    if laid is None:
        return empty_plan(epoch, G, A, segments)
    order, starts, stops, buckets, natural, split, n = laid
    # rows in training order, each a contiguous slice of the new order
    sizes = stops - starts
    order = _gather(order, starts, sizes)
    starts = np.r_[0, np.cumsum(sizes)[:-1]].astype(np.int64) if sizes.size else sizes
    if sampler.packing == "varlen-balanced" and G > 1 and starts.size:
        order, starts = _balance(sampler, order, starts, G, A)
    stops = np.r_[starts[1:], order.size].astype(np.int64)
    if starts.size:  # a row's bucket: its longest document's (one bucket unless steps mix)
        buckets = np.maximum.reduceat(sampler._bucket_of[order], starts).astype(np.int64)
    return EpochPlan(epoch=epoch, world_size=G, grad_accum=A, order=order, starts=starts,
                     stops=stops, buckets=buckets, natural_batches=int(natural),
                     split_batches=int(split), dropped=n - int(order.size),
                     dropped_batches=int(natural + split - starts.size),
                     mixed_steps=mixed_steps(buckets, G),
                     segments=tuple(segments))


def _pack(sampler, rng, grouped, counts):
    """Shuffle inside buckets and pack each bucket's documents into greedy rows."""
    from .packing import pack_rows

    order = np.empty_like(grouped)
    offsets = np.r_[0, np.cumsum(counts)]
    parts = []
    for k in np.flatnonzero(counts):
        lo, hi = offsets[k], offsets[k + 1]
        order[lo:hi] = grouped[lo:hi][rng.permutation(hi - lo)]
        _, row_starts = pack_rows(sampler.lengths[order[lo:hi]], sampler.token_budget)
        parts.append(row_starts + lo)
    starts = np.concatenate(parts).astype(np.int64)
    stops = np.r_[starts[1:], order.size].astype(np.int64)
    buckets = (np.searchsorted(offsets, starts, side="right") - 1).astype(np.int64)
    return order, starts, stops, buckets


def _gather(order, starts, sizes):
    if not sizes.size:
        return np.zeros(0, dtype=np.int64)
    offsets = np.r_[0, np.cumsum(sizes)[:-1]]
    return order[np.repeat(starts - offsets, sizes) + np.arange(int(sizes.sum()))]


def _balance(sampler, order, starts, G, A):
    """Balance the ranks inside every optimizer step, keeping its documents and row count.

    Two candidates per optimizer step (``G * A`` rows): (a) every micro-step's documents re-dealt
    over its G rows (:func:`bucketopt.training.packing.balance_steps`); (b) the same after the
    step's rows are regrouped into micro-steps by decreasing attention (by bucket first with
    ``sync_buckets=True``, so a micro-step keeps one bucket), which puts the heavy rows of a step
    side by side instead of one per micro-step. Each optimizer step keeps the candidate whose
    micro-steps' heaviest ranks sum lower, so it is never above the unbalanced rows (candidate
    (a) never is, micro-step by micro-step).
    """
    n, R = order.size, starts.size
    sizes = np.diff(np.r_[starts, n])
    row_of = np.repeat(np.arange(R), sizes)
    d = sampler.lengths[order].astype(np.float64)
    attention = np.bincount(row_of, weights=d * d, minlength=R)
    step = np.arange(R) // (G * A)
    keys = [-attention]
    if sampler.sync_buckets is True:
        keys.append(np.maximum.reduceat(sampler._bucket_of[order], starts))
    regroup = np.lexsort((*keys, step))
    grouped = _gather(order, starts[regroup], sizes[regroup])
    candidates = []
    for rows, first in ((order, starts), (grouped, np.r_[0, np.cumsum(sizes[regroup])[:-1]])):
        rows, first = _deal(sampler, rows, first.astype(np.int64), G)
        if first.size != R:  # a micro-step always has G rows here; keep the plan if not
            return order, starts
        d = sampler.lengths[rows].astype(np.float64)
        att = np.bincount(np.repeat(np.arange(R), np.diff(np.r_[first, n])), weights=d * d,
                          minlength=R)
        cost = np.bincount(step[::G], weights=att.reshape(-1, G).max(axis=1))
        candidates.append((rows, first, cost))
    (a, a_first, a_cost), (b, b_first, b_cost) = candidates
    take_b = (b_cost < a_cost)[step]  # per row: from candidate b
    both = np.r_[a, b]
    firsts = np.where(take_b, b_first + n, a_first)
    lens = np.where(take_b, np.diff(np.r_[b_first, n]), np.diff(np.r_[a_first, n]))
    out = _gather(both, firsts, lens)
    return out, np.r_[0, np.cumsum(lens)[:-1]].astype(np.int64)


def _deal(sampler, order, starts, G):
    """Every micro-step's documents re-dealt over its G rows (longest processing time)."""
    from .packing import balance_steps

    positions, new_starts = balance_steps(sampler.lengths[order], np.arange(order.size), starts,
                                          G, sampler.token_budget)
    return order[positions], new_starts.astype(np.int64)
