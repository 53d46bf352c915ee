"""simulate(): one real epoch of a batching strategy, batch by batch, as an :class:`Epoch`.

Strategies (all seeded per epoch with ``np.random.default_rng((seed, epoch))``):

- ``"sorted"``: sort all samples by length once, pack greedily (the story's first build_batches);
  the batch order is shuffled each epoch, the batches themselves never change.
- ``"shuffle"``: a full random permutation every epoch, then greedy packing.
- ``"bucketed"``: shuffle inside each bucket, then batches of B_k = floor(T / b_k)
  (``packing="fixed"``, the model of ``pad="batch"``) or greedy packing inside the bucket
  (``packing="greedy"``); the batches of all buckets are then put in random order.
- ``"best-fit"``: best-fit-decreasing sequence packing into rows of ``row_length`` tokens
  (default: the token budget), ``token_budget // row_length`` rows per batch: the padding floor.
  Its old name ``"packed"`` still works, with a ``DeprecationWarning``: compare's ``packed`` row
  is another thing, greedy packing of a shuffle (:mod:`bucketopt.training.packed`).

Greedy packing walks the samples in order and adds each to the current batch while
(count + 1) x max_len <= token_budget.

At scale: :func:`simulate` never builds sample indices. "sorted" comes from the histogram alone
(:func:`sorted_epoch`); "shuffle" and "bucketed" shuffle an int32 copy of the lengths in place
(the permutation :func:`plan_arrays` draws), group buckets with a counting sort and pack greedily
in chunks of ``CHUNK`` samples, so an epoch of tens of millions of samples costs one or two
copies of the lengths plus per-batch arrays, and equals the index plan's epoch array for array.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..data.histogram import validate_lengths
from ..errors import BucketoptError
from ..solution import batch_sizes_for, check_boundaries
from ..validate import INT64_MAX, check_int, check_pad, check_token_budget, shown
from .epoch import Epoch

STRATEGIES = ("sorted", "shuffle", "bucketed", "best-fit")
# Old strategy names -> their names now; each still works, with a DeprecationWarning.
RENAMED = {"packed": "best-fit"}
PACKINGS = ("fixed", "greedy")
CHUNK = 1 << 20  # samples per call of the streaming greedy kernel


def epoch_rng(seed, epoch) -> np.random.Generator:
    """The generator of one epoch, ``np.random.default_rng((seed, epoch))``; ``seed`` and
    ``epoch`` are int64 >= 0 (:func:`bucketopt.validate.check_int`)."""
    return np.random.default_rng((check_int(seed, "seed", low=0, high=INT64_MAX),
                                  check_int(epoch, "epoch", low=0, high=INT64_MAX)))


def _check_plan(lengths, strategy, token_budget, seed, epoch, packing, own_sizes=False):
    """Validate the plan's arguments: (token_budget, the epoch's generator). ``own_sizes``:
    the batch sizes are given (bucketed, fixed), so the budget is optional."""
    token_budget = check_token_budget(token_budget)
    if own_sizes and (strategy != "bucketed" or packing != "fixed"):
        raise BucketoptError('`batch_sizes` applies to strategy="bucketed" with '
                             'packing="fixed".', param="batch_sizes")
    if token_budget is None and not own_sizes:
        raise BucketoptError("`token_budget` is required: batches are built under it.",
                             param="token_budget")
    longest = int(lengths.max())
    if token_budget is not None and longest > token_budget:
        raise BucketoptError(
            f"token_budget={token_budget} is smaller than the longest sample ({longest}).",
            param="token_budget"
        )
    rng = epoch_rng(seed, epoch)
    if packing not in PACKINGS:
        raise BucketoptError(f"`packing` must be one of {', '.join(PACKINGS)}"
                             f"; got {shown(packing)}.", param="packing")
    if strategy == "best-fit" or strategy == "packed":
        raise BucketoptError(f'strategy="{strategy}" builds rows, not batches: use simulate().',
                             param="strategy")
    if strategy not in STRATEGIES:
        raise BucketoptError(
            f"`strategy` must be one of {', '.join(STRATEGIES)}; got {shown(strategy)}.",
            param="strategy"
        )
    return token_budget, rng


def plan_arrays(lengths, strategy, *, token_budget, boundaries=None, seed=0, epoch=0,
               packing="fixed"):
    """The batches of one epoch as (order, starts, buckets): sample indices in training order,
    the offset in ``order`` where each batch starts, and each batch's bucket (or None).

    Not for ``"packed"`` (rows, not batches of whole samples: see :func:`simulate`). Memory:
    the lengths, ``order`` and one more index array of the same size (counting sorts and
    chunked greedy packing; no sort, gather or take of the whole dataset).
    """
    lengths = validate_lengths(lengths)
    token_budget, rng = _check_plan(lengths, strategy, token_budget, seed, epoch, packing)
    from ..data.histogram import Histogram
    from ._sim_kernels import place_batches

    n = lengths.size
    buckets = None
    if strategy == "sorted":  # a stable sort by length: a counting sort over the histogram
        hist = Histogram.from_lengths(lengths)
        order = _grouped(np.arange(n, dtype=np.int64), lengths, hist.values)[0]
        sizes = sorted_batches(hist, token_budget)[0]
    elif strategy == "shuffle":
        order = np.arange(n, dtype=np.int64)
        rng.shuffle(order)  # in place: rng.permutation(n)
        sizes = _greedy_sizes(lengths, order, [n], token_budget)[0]
    elif strategy == "bucketed":
        if boundaries is None:
            raise BucketoptError('strategy="bucketed" needs `boundaries`.', param="boundaries")
        edges = check_boundaries(boundaries, Histogram.from_lengths(lengths))
        per_batch = batch_sizes_for(edges, token_budget)
        order = np.arange(n, dtype=np.int64)
        rng.shuffle(order)  # in place: rng.permutation(n)
        # random order inside each bucket (a stable grouping of the shuffled samples)
        order, counts = _grouped(order, lengths, np.asarray(edges, dtype=np.int64))
        filled = np.flatnonzero(counts)
        if packing == "greedy":
            sizes, per_bucket = _greedy_sizes(lengths, order, counts[filled], token_budget)
        else:
            sizes = np.concatenate([np.diff(np.r_[np.arange(0, counts[k], per_batch[k]),
                                                  counts[k]]) for k in filled])
            per_bucket = [-(-counts[k] // per_batch[k]) for k in filled]
        buckets = np.repeat(filled, per_bucket).astype(np.int64)
    else:
        raise AssertionError(strategy)  # _check_plan() admits only the three above
    starts = (np.cumsum(sizes) - sizes).astype(np.int64)
    # Training order of the batches: random every epoch (for "sorted" too, as in the story).
    batch_order = rng.permutation(starts.size)
    sizes_b = sizes[batch_order].astype(np.int64)
    new_starts = (np.cumsum(sizes_b) - sizes_b).astype(np.int64)
    order = place_batches(order, starts, sizes.astype(np.int64), batch_order)
    if buckets is not None:
        buckets = buckets[batch_order]
    return order, new_starts, buckets


LUT_MAX = 1 << 24  # longest length for which group lookups use a table (4 bytes a length)


def _grouped(idx, lengths, edges):
    """``group_indices`` with a lookup table of every length's group when lengths are short
    enough (a binary search per sample costs a branch miss per step)."""
    from ._sim_kernels import group_indices

    top = int(lengths.max())
    lut = np.zeros(0, dtype=np.int32)
    if top <= LUT_MAX:
        lut = np.searchsorted(edges, np.arange(top + 1), side="left").astype(np.int32)
    return group_indices(idx, lengths, edges, lut)


def _greedy_sizes(lengths, order, groups, token_budget):
    """Sizes of the greedy batches over ``lengths[order]``, a chunk at a time, a new batch at
    every group (consecutive runs of ``groups`` samples, each >= 1), and batches per group."""
    from ._sim_kernels import greedy_batches

    budget = np.int64(token_budget)
    parts, per_group, lo = [], [], 0
    for size in groups:
        state, made = (np.int64(0),) * 3, 1
        for a in range(lo, lo + size, CHUNK):
            done, _, _, *state = greedy_batches(lengths[order[a:min(a + CHUNK, lo + size)]],
                                                budget, *state)
            parts.append(done)
            made += done.size
        parts.append(np.array([state[0]], dtype=np.int64))  # the batch still open
        per_group.append(made)
        lo += size
    return np.concatenate(parts), per_group


def simulate(lengths, strategy, *, token_budget=None, boundaries=None, seed=0, epoch=0,
             packing="fixed", pad="batch", row_length=None, batch_sizes=None) -> Epoch:
    """One epoch of a batching strategy, batch by batch.

    Parameters
    ----------
    lengths : array-like of int
        One length per sample.
    strategy : {"sorted", "shuffle", "bucketed", "best-fit"}
        ``"packed"``, the old name of ``"best-fit"``, still works (a ``DeprecationWarning``).
    token_budget : int
        Most padded tokens per micro-batch (rows x padded length).
    boundaries : sequence of int, optional
        Inclusive upper bucket edges (``"bucketed"`` only).
    seed, epoch : int
        Randomness comes from ``np.random.default_rng((seed, epoch))``: the same pair gives the
        same epoch, another epoch gives another shuffle.
    packing : {"fixed", "greedy"}
        ``"bucketed"``: batches of B_k = floor(T / b_k) or greedy packing inside each bucket.
    pad : {"batch", "edge"}
        ``"bucketed"``: pad each batch to its longest member or to the bucket's edge.
    row_length : int, optional
        ``"best-fit"``: tokens per packed row (default ``token_budget``).
    batch_sizes : sequence of int, optional
        ``"bucketed"`` with ``packing="fixed"``: one batch size per bucket (e.g. a memory
        plan's ``Solution.batch_sizes``) instead of floor(T / b_k); ``token_budget`` is then
        optional.

    Returns
    -------
    Epoch

    Examples
    --------
    >>> from bucketopt import simulate
    >>> e = simulate([5, 1, 4, 2], "sorted", token_budget=8)
    >>> e.padded_tokens, sorted(e.sizes.tolist())  # batches [1, 2], [4], [5]
    (1, [1, 1, 2])
    """
    if strategy == "packed":
        warnings.warn('simulate(..., "packed") is deprecated: the strategy is now named '
                      '"best-fit" (compare\'s "packed" row is greedy packing of a shuffle).',
                      DeprecationWarning, stacklevel=2)
        strategy = RENAMED["packed"]
    if strategy == "best-fit":
        return _best_fit(lengths, token_budget, row_length, seed, epoch)
    check_pad(pad)
    lengths = validate_lengths(lengths)
    token_budget, rng = _check_plan(lengths, strategy, token_budget, seed, epoch, packing,
                                    batch_sizes is not None)
    buckets = None
    if strategy == "sorted":
        from ..data.histogram import Histogram

        return _sorted_epoch(Histogram.from_lengths(lengths), token_budget, rng)
    elif strategy == "shuffle":
        x = compact_lengths(lengths)
        rng.shuffle(x)  # in place: the permutation plan_arrays() draws, applied to the lengths
        sizes, tops, real = greedy_stream(x, token_budget)
        del x
    else:  # bucketed
        sizes, tops, real, buckets = _bucketed(lengths, boundaries, token_budget, rng, packing,
                                               batch_sizes)
    # Training order of the batches: random every epoch (for "sorted" too, as in the story).
    batch_order = rng.permutation(sizes.size)
    sizes, tops, real = sizes[batch_order], tops[batch_order], real[batch_order]
    if buckets is not None:
        buckets = buckets[batch_order]
    if pad == "edge" and strategy == "bucketed":
        tops = np.asarray(boundaries, dtype=np.int64)[buckets]
    return Epoch(strategy, sizes, tops, real, buckets)


# --- the lean path: lengths in training order, never sample indices --------------------------


def compact_lengths(lengths) -> np.ndarray:
    """A fresh contiguous copy of ``lengths``: int32 where they fit (half the memory), else
    int64. Shuffled in place, it gives the same sequence as ``lengths[rng.permutation(n)]``."""
    fits = int(lengths.max()) <= np.iinfo(np.int32).max
    return np.array(lengths, dtype=np.int32 if fits else np.int64)


def sorted_epoch(hist, token_budget, *, seed=0, epoch=0) -> Epoch:
    """``simulate(lengths, "sorted", ...)`` from the histogram of ``lengths`` alone (the same
    Epoch, array for array), in O(m + batches) time and memory."""
    token_budget = check_token_budget(token_budget, hist)
    if token_budget is None:
        raise BucketoptError("`token_budget` is required: batches are built under it.",
                             param="token_budget")
    rng = epoch_rng(seed, epoch)
    return _sorted_epoch(hist, token_budget, rng)


def _sorted_epoch(hist, token_budget, rng) -> Epoch:
    sizes, tops, real = sorted_batches(hist, token_budget)
    batch_order = rng.permutation(sizes.size)  # the batch order of every strategy
    return Epoch("sorted", sizes[batch_order], tops[batch_order], real[batch_order], None)


def sorted_batches(hist, token_budget):
    """The greedy batches of the length-sorted samples, exactly, from the histogram alone:
    ``(sizes, longest, real)`` per batch in build order (shortest batches first), the very
    batches :func:`plan_arrays` builds for ``"sorted"``, in O(m + batches)."""
    from ._sim_kernels import sorted_greedy

    sizes, tops, real, mult = sorted_greedy(hist.values, hist.counts, np.int64(token_budget))
    return np.repeat(sizes, mult), np.repeat(tops, mult), np.repeat(real, mult)


def greedy_stream(x, token_budget, chunk=CHUNK):
    """Greedy batches over ``x`` (lengths in training order), fed in chunks of ``chunk``
    samples: ``(sizes, longest, real)`` per batch, int64."""
    from ._sim_kernels import greedy_batches

    parts = []
    count = longest = real = np.int64(0)
    budget = np.int64(token_budget)
    for lo in range(0, x.size, chunk):
        *done, count, longest, real = greedy_batches(x[lo:lo + chunk], budget, count, longest,
                                                     real)
        parts.append(done)
    if count > 0:
        parts.append([np.array([v], dtype=np.int64) for v in (count, longest, real)])
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))


def _bucketed(lengths, boundaries, token_budget, rng, packing, batch_sizes=None):
    """Batches of a bucketed epoch (build order: bucket by bucket) and each batch's bucket."""
    from ..data.histogram import Histogram
    from ._sim_kernels import bucket_partition

    if boundaries is None:
        raise BucketoptError('strategy="bucketed" needs `boundaries`.', param="boundaries")
    edges = check_boundaries(boundaries, Histogram.from_lengths(lengths))
    if batch_sizes is not None:
        from .sampler import _check_batch_sizes

        per_batch = _check_batch_sizes(batch_sizes, edges, token_budget)
    else:
        per_batch = batch_sizes_for(edges, token_budget)
    x = compact_lengths(lengths)
    rng.shuffle(x)  # the permutation plan_arrays() draws
    grouped, counts = bucket_partition(x, np.asarray(edges, dtype=np.int64))
    del x
    offsets = np.r_[0, np.cumsum(counts)]
    filled = np.flatnonzero(counts)
    if packing == "greedy":
        parts = [greedy_stream(grouped[offsets[k]:offsets[k + 1]], token_budget)
                 for k in filled]
        sizes, tops, real = (np.concatenate([p[i] for p in parts]) for i in range(3))
        buckets = np.repeat(filled, [p[0].size for p in parts]).astype(np.int64)
    else:
        starts = np.concatenate([np.arange(offsets[k], offsets[k + 1], per_batch[k],
                                           dtype=np.int64) for k in filled])
        sizes = np.diff(np.r_[starts, grouped.size]).astype(np.int64)
        tops = np.maximum.reduceat(grouped, starts).astype(np.int64)
        real = np.add.reduceat(grouped, starts, dtype=np.int64)
        buckets = (np.searchsorted(offsets, starts, side="right") - 1).astype(np.int64)
    return sizes, tops, real, buckets


def _best_fit(lengths, token_budget, row_length, seed, epoch) -> Epoch:
    from ._sim_kernels import best_fit_decreasing

    lengths = validate_lengths(lengths)
    token_budget = check_token_budget(token_budget)
    if token_budget is None:
        raise BucketoptError("`token_budget` is required: rows are packed under it.",
                             param="token_budget")
    row_length = token_budget if row_length is None else check_int(row_length, "row_length", low=1,
                                                                    high=INT64_MAX)
    if row_length > token_budget:
        raise BucketoptError(
            f"row_length={row_length} exceeds token_budget={token_budget}.",
            param="row_length",
        )
    longest = int(lengths.max())
    if longest > row_length:
        raise BucketoptError(
            f"row_length={row_length} is smaller than the longest sample ({longest}).",
            param="row_length"
        )
    rng = epoch_rng(seed, epoch)
    desc = np.sort(lengths)[::-1].copy()
    row_of = best_fit_decreasing(desc, row_length)
    n_rows = int(row_of.max()) + 1
    row_real = np.bincount(row_of, weights=desc, minlength=n_rows).astype(np.int64)
    row_real = row_real[rng.permutation(n_rows)]
    per_batch = token_budget // row_length
    starts = np.arange(0, n_rows, per_batch)
    sizes = np.diff(np.r_[starts, n_rows]).astype(np.int64)
    real = np.add.reduceat(row_real, starts).astype(np.int64)
    padded_lens = np.full(starts.size, row_length, dtype=np.int64)
    return Epoch("best-fit", sizes, padded_lens, real, None)
