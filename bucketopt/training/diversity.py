"""Gradient diversity of a batching strategy: how each optimizer step's length mix matches the
dataset's, and how much the batches change from one epoch to the next.

- step mix gap: mean over optimizer steps of the total-variation distance between the step's
  distribution of samples over the dataset's length deciles and the dataset's own distribution
  (0 = every step looks like the dataset; 1 = no overlap).
- epoch churn: share of the batches of epoch e+1 that are identical (same set of samples) to a
  batch of epoch e (sorted static batches: 100%).

:func:`compare_diversity` measures both for the three strategies of the story: "sorted" (length-
sorted greedy batches, built once, batch order shuffled each epoch), "shuffle" (full random
shuffle, then greedy packing) and "bucketed" (:class:`bucketopt.BucketBatchSampler`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ..data.histogram import validate_lengths
from ..errors import BucketoptError
from ..validate import shown

STRATEGIES = ("sorted", "shuffle", "bucketed")


@dataclass(frozen=True)
class Diversity:
    """Diversity figures of one strategy (``world_size`` ranks, ``grad_accum`` micro-steps)."""

    strategy: str
    step_mix_gap: float
    epoch_churn: float
    n_batches: int
    n_steps: int

    def to_dict(self) -> dict:
        return asdict(self)


def decile_bins(lengths) -> np.ndarray:
    """Decile bin (0-9) of every sample: cuts at the dataset's 10th..90th percentiles, a sample
    equal to a cut goes above it. Ties may make bins unequal; the metric compares with the
    dataset's real share per bin, so that is harmless."""
    lengths = validate_lengths(lengths)
    cuts = np.percentile(lengths, np.arange(10, 100, 10))
    return np.searchsorted(cuts, lengths, side="right").astype(np.int64)


def step_mix_gap(lengths, steps) -> float:
    """Mean total-variation distance between each step's length-decile mix and the dataset's.

    Parameters
    ----------
    lengths : array-like of int
        Length of every sample of the dataset.
    steps : sequence of sequences of int
        The dataset indices each optimizer step trains on (all ranks, all micro-steps).

    Examples
    --------
    >>> step_mix_gap([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], [[0, 9], [1, 2, 3, 4, 5, 6, 7, 8]]) < 0.8
    True
    """
    bins = decile_bins(lengths)
    steps = [np.asarray(s, dtype=np.int64).ravel() for s in steps]
    if not steps or any(s.size == 0 for s in steps):
        raise BucketoptError("steps must be a non-empty list of non-empty index lists.",
                             param="steps")
    flat = np.concatenate(steps)
    if flat.min() < 0 or flat.max() >= bins.size:
        raise BucketoptError(f"step indices must be in [0, {bins.size}); got "
                             f"{int(flat.min() if flat.min() < 0 else flat.max())}.")
    step_of = np.repeat(np.arange(len(steps)), [s.size for s in steps])
    return _mix_gap(bins, flat, step_of, len(steps))


def _mix_gap(bins, flat, step_of, n_steps) -> float:
    dataset = np.bincount(bins, minlength=10) / bins.size
    counts = np.bincount(step_of * 10 + bins[flat], minlength=n_steps * 10).reshape(n_steps, 10)
    shares = counts / counts.sum(axis=1, keepdims=True)
    return float(0.5 * np.abs(shares - dataset).sum(axis=1).mean())


def epoch_churn(batches_e, batches_e1) -> float:
    """Share of the batches of epoch e+1 identical (as sets of samples) to a batch of epoch e.

    Examples
    --------
    >>> epoch_churn([[0, 1], [2, 3]], [[3, 2], [0, 2]])
    0.5
    """
    later = list(batches_e1)
    if not later:
        raise BucketoptError("batches_e1 is empty: at least one batch is required.",
                             param="batches_e1")
    earlier = list(batches_e)
    fast = _distinct_flat(earlier), _distinct_flat(later)
    if fast[0] is not None and fast[1] is not None:  # no sample twice in an epoch: signatures
        return plan_churn(*fast[0], *fast[1])
    seen = {frozenset(np.asarray(b).ravel().tolist()) for b in earlier}
    same = sum(frozenset(np.asarray(b).ravel().tolist()) in seen for b in later)
    return same / len(later)


def _distinct_flat(batches):
    """(indices, sizes) of batches of non-negative integer indices, none of them twice in the
    epoch; None otherwise (the caller then compares real sets)."""
    if not batches:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    parts = [np.asarray(b).ravel() for b in batches]
    if any(p.dtype.kind not in "iu" for p in parts):
        return None
    sizes = np.fromiter((p.size for p in parts), dtype=np.int64, count=len(parts))
    flat = np.concatenate(parts).astype(np.int64, copy=False)
    if flat.size == 0 or sizes.min() == 0 or flat.min() < 0:
        return None
    top = int(flat.max())
    if top < 4 * flat.size + 1024:
        distinct = int(np.bincount(flat).max()) <= 1
    else:
        distinct = np.unique(flat).size == flat.size
    return (flat, sizes) if distinct else None


def strategy_batches(lengths, strategy, *, token_budget, epoch=0, seed=0, boundaries=None,
                     world_size=1, grad_accum=1, **sampler_options) -> list[np.ndarray]:
    """One epoch of a strategy's batches in global training order (batch ``i`` runs on rank
    ``i % world_size``; ``world_size * grad_accum`` consecutive batches make one optimizer step).

    "sorted" packs the length-sorted samples once (the batches never change) and shuffles their
    order from ``(seed, epoch)``; "shuffle" permutes all samples from ``(seed, epoch)`` and packs
    greedily; "bucketed" is the :class:`~bucketopt.BucketBatchSampler` plan for ``boundaries``.
    """
    if strategy in ("sorted", "shuffle"):
        from .simulate import plan_arrays  # the same batches bucketopt.simulate() times

        lengths = validate_lengths(lengths)
        order, starts, _ = plan_arrays(lengths, strategy, token_budget=token_budget, seed=seed,
                                      epoch=epoch)
        return np.split(order, starts[1:])
    if strategy == "bucketed":
        if boundaries is None:
            raise BucketoptError('strategy "bucketed" needs boundaries.', param="boundaries")
        from .sampler import BucketBatchSampler

        sampler = BucketBatchSampler(lengths, boundaries, token_budget=token_budget, seed=seed,
                                     world_size=world_size, grad_accum=grad_accum,
                                     **sampler_options)
        return sampler.plan(epoch).batches()
    raise BucketoptError(f"strategy must be one of {STRATEGIES}; got {shown(strategy)}.",
                         param="strategy")


def measure(lengths, batches_e, batches_e1, *, world_size, grad_accum, strategy="") -> Diversity:
    """Both metrics for two consecutive epochs of batches in global training order (the step mix
    gap is measured on the first epoch; a last, shorter optimizer step counts as a step)."""
    bins = decile_bins(lengths)
    per_step = min(world_size * grad_accum, max(len(batches_e), 1))  # one step holds them all
    sizes = np.fromiter((len(b) for b in batches_e), dtype=np.int64, count=len(batches_e))
    flat = np.concatenate([np.asarray(b, dtype=np.int64) for b in batches_e])
    step_of = np.repeat(np.arange(sizes.size) // per_step, sizes)
    n_steps = -(-sizes.size // per_step)
    return Diversity(strategy=strategy, step_mix_gap=_mix_gap(bins, flat, step_of, n_steps),
                     epoch_churn=epoch_churn(batches_e, batches_e1),
                     n_batches=int(sizes.size), n_steps=int(n_steps))


def compare_diversity(lengths, boundaries, *, token_budget, world_size=8, grad_accum=4, seed=0,
                      strategies=STRATEGIES, **sampler_options) -> dict[str, Diversity]:
    """Step mix gap and epoch churn (epochs 0 and 1) of each strategy, keyed by name.

    Examples
    --------
    >>> import numpy as np
    >>> lengths = np.random.default_rng(0).integers(1, 100, 500)
    >>> out = compare_diversity(lengths, [30, 60, 99], token_budget=400, world_size=2,
    ...                         grad_accum=2)
    >>> out["sorted"].epoch_churn
    1.0
    """
    lengths = validate_lengths(lengths)
    out = {}
    for name in strategies:
        epochs = [strategy_batches(lengths, name, token_budget=token_budget, epoch=e, seed=seed,
                                   boundaries=boundaries, world_size=world_size,
                                   grad_accum=grad_accum, **sampler_options) for e in (0, 1)]
        out[name] = measure(lengths, *epochs, world_size=world_size, grad_accum=grad_accum,
                            strategy=name)
    return out


def row_diversity(lengths, boundaries, *, token_budget, world_size=1, grad_accum=1,
                         seed=0, dataset=None, synced=None) -> dict[str, dict]:
    """Step mix gap and epoch churn for the rows of :func:`bucketopt.training.compare.compare`.

    "sorted", "shuffle" and "bucketed" are measured on the very batches their rows simulate
    (:func:`bucketopt.training.simulate.plan_arrays`, epochs 0 and 1, fixed packing; "bucketed" puts
    the batches of all buckets in random order); "sampler" on :class:`~bucketopt.BucketBatchSampler`
    with ``world_size`` and ``grad_accum``. Returns name -> {"step_mix_gap", "epoch_churn"}.

    Everything runs on arrays (no list of batches): "sorted" comes from the histogram alone
    (its batches never change, so its churn is 1), the others from the plans' index arrays.
    ``dataset``: the :class:`~bucketopt.Histogram` of the whole dataset when ``lengths`` is a
    uniform subsample of it; the decile cuts, the dataset's mix and "sorted" then come from the
    whole dataset, "shuffle", "bucketed" and "sampler" from the subsample.

    ``synced``: name -> boundaries of more rows measured as "sampler" is, on the
    :class:`~bucketopt.BucketBatchSampler`'s order with its defaults (every rank the same bucket
    at each micro-step): the order a plan of bucketopt's trains in.
    """
    from ..data.histogram import Histogram
    from .simulate import plan_arrays

    lengths = validate_lengths(lengths)
    hist = Histogram.from_lengths(lengths) if dataset is None else dataset
    cuts = decile_cuts(hist)
    shares = _dataset_shares(hist, cuts)
    unit = world_size * grad_accum
    out = {"sorted": {"step_mix_gap": _sorted_gap(hist, cuts, shares, token_budget, seed, unit),
                      "epoch_churn": 1.0}}
    synced = {"sampler": boundaries, **(synced or {})}
    for name in ("shuffle", "bucketed", *synced):
        epochs = []
        if name in synced:
            sampler = _sampler(lengths, synced[name], token_budget, seed, world_size, grad_accum)
        for epoch in (0, 1):
            if name in synced:
                plan = sampler.plan(epoch)
                order, sizes = plan.indices_from(0), plan.sizes
            else:
                order, starts, _ = plan_arrays(lengths, name, token_budget=token_budget,
                                              boundaries=boundaries, seed=seed, epoch=epoch)
                sizes = np.diff(np.r_[starts, order.size])
            epochs.append((order, sizes))
        (order, sizes), later = epochs
        per_step = min(unit, max(sizes.size, 1))
        gap = _gap(_bins_of(lengths[order], cuts), sizes, per_step, shares)
        out[name] = {"step_mix_gap": gap, "epoch_churn": plan_churn(*epochs[0], *later)}
    return out


def _sampler(lengths, boundaries, token_budget, seed, world_size, grad_accum):
    from .sampler import BucketBatchSampler

    return BucketBatchSampler(lengths, boundaries, token_budget=token_budget, seed=seed,
                              world_size=world_size, grad_accum=grad_accum)


# --- array kernels: the figures without lists of batches -------------------------------------

_PERCENTS = np.arange(10, 100, 10)


def decile_cuts(hist) -> np.ndarray:
    """The cuts of :func:`decile_bins` (``np.percentile(lengths, [10, .., 90])``, linear
    interpolation) from the histogram alone, with numpy's own arithmetic, so they are equal."""
    n = hist.n
    q = np.true_divide(_PERCENTS, 100)
    virtual = (n - 1) * q
    previous = np.floor(virtual)
    following = previous + 1
    top = virtual >= n - 1
    previous[top] = following[top] = -1
    previous, following = previous.astype(np.intp), following.astype(np.intp)
    ends = np.cumsum(hist.counts)

    def order_stat(i):  # the i-th smallest length (i = -1: the largest)
        i = np.where(i < 0, n + i, i)
        return hist.values[np.searchsorted(ends, i, side="right")]

    a, b = order_stat(previous), order_stat(following)
    gamma = virtual - previous
    diff = b - a
    cut = np.add(a, diff * gamma)
    np.subtract(b, diff * (1 - gamma), out=cut, where=gamma >= 0.5, casting="unsafe")
    return cut


def _bins_of(x, cuts) -> np.ndarray:
    return np.searchsorted(cuts, x, side="right").astype(np.int64)


def _dataset_shares(hist, cuts) -> np.ndarray:
    counts = np.bincount(_bins_of(hist.values, cuts), weights=hist.counts, minlength=10)
    return counts / hist.n


def _gap(seq_bins, sizes, per_step, shares) -> float:
    """Step mix gap of batches of ``sizes`` whose samples, in training order, fall in the
    decile bins ``seq_bins``; ``per_step`` consecutive batches make one optimizer step."""
    n_steps = -(-sizes.size // per_step)
    step_of = np.repeat(np.arange(sizes.size) // per_step, sizes)
    counts = np.bincount(step_of * 10 + seq_bins, minlength=n_steps * 10).reshape(n_steps, 10)
    return _tv(counts, shares)


def _tv(counts, shares) -> float:
    return float(0.5 * _row_tv(counts, shares).mean())


def _row_tv(counts, shares, rows=1 << 16) -> np.ndarray:
    """Sum over bins of |step mix - dataset mix| for every step (row of ``counts``), a block
    of rows at a time (each row's sum is the same whatever the blocks)."""
    out = np.empty(counts.shape[0])
    for lo in range(0, counts.shape[0], rows):
        block = counts[lo:lo + rows]
        mix = block / block.sum(axis=1, keepdims=True)
        mix -= shares
        np.abs(mix, out=mix)
        out[lo:lo + rows] = mix.sum(axis=1)
    return out


def _sorted_gap(hist, cuts, shares, token_budget, seed, unit) -> float:
    """Step mix gap of the length-sorted greedy batches of epoch 0, from the histogram: a
    batch is a range of the sorted samples and a decile bin is one too, so a batch's count in
    a bin is the overlap of the two ranges."""
    from .simulate import sorted_batches

    sizes = sorted_batches(hist, token_budget)[0]
    batch_order = np.random.default_rng((seed, 0)).permutation(sizes.size)  # as plan_arrays
    ends = np.cumsum(sizes)
    starts = ends - sizes
    bin_ends = np.r_[0, np.cumsum(np.bincount(_bins_of(hist.values, cuts), weights=hist.counts,
                                              minlength=10))].astype(np.int64)
    per_step = min(unit, max(sizes.size, 1))
    n_steps = -(-sizes.size // per_step)
    block = max(1, (1 << 16) // per_step) * per_step  # batches per block: whole steps
    row_tv = np.empty(n_steps)
    for lo in range(0, sizes.size, block):
        mine = batch_order[lo:lo + block]  # training order
        first = np.arange(0, mine.size, per_step)
        s, e = starts[mine], ends[mine]
        counts = np.empty((first.size, 10), dtype=np.int64)
        for j in range(10):
            overlap = np.minimum(e, bin_ends[j + 1]) - np.maximum(s, bin_ends[j])
            counts[:, j] = np.add.reduceat(np.maximum(overlap, 0), first)
        row_tv[lo // per_step:lo // per_step + first.size] = _row_tv(counts, shares)
    return float(0.5 * row_tv.mean())


def _mixed(x):
    """splitmix64 of every element (uint64, wrapping): a well-spread key per sample index."""
    x = x.astype(np.uint64)
    x += np.uint64(0x9E3779B97F4A7C15)
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


def batch_signatures(order, sizes) -> np.ndarray:
    """One 24-byte signature per batch: its size and two independent 64-bit sums of keyed
    sample indices. Equal sets of samples give equal signatures (the sums ignore the order);
    two different sets share one with a chance near 2**-128."""
    sizes = np.asarray(sizes, dtype=np.int64)
    if sizes.size == 0:
        return np.zeros(0, dtype=np.dtype((np.void, 24)))
    ends = np.cumsum(sizes)
    starts = ends - sizes

    def sums(keys):  # per batch, through prefix sums (wrapping): empty batches sum to 0
        prefix = np.zeros(keys.size + 1, dtype=np.uint64)
        np.cumsum(keys, out=prefix[1:])
        return prefix[ends] - prefix[starts]

    with np.errstate(over="ignore"):
        one = sums(_mixed(order))
        two = sums(_mixed(np.asarray(order, dtype=np.uint64) ^ np.uint64(0x5851F42D4C957F2D)))
    table = np.stack([np.asarray(sizes, dtype=np.uint64), one, two], axis=1)
    return np.ascontiguousarray(table).view(np.dtype((np.void, 24))).ravel()


def plan_churn(order_e, sizes_e, order_e1, sizes_e1) -> float:
    """:func:`epoch_churn` of two epochs given as index arrays in training order and batch
    sizes (batches hold distinct samples, as every plan's do)."""
    later = batch_signatures(order_e1, sizes_e1)
    if later.size == 0:
        raise BucketoptError("batches_e1 is empty: at least one batch is required.")
    return float(np.count_nonzero(np.isin(later, batch_signatures(order_e, sizes_e)))
                 / later.size)


def sampler_epochs(lengths, boundaries, *, token_budget, world_size=1, grad_accum=1, seed=0,
                   epochs=1, pad="batch") -> list:
    """The :class:`~bucketopt.BucketBatchSampler`'s real batch order (all ranks, step order) for
    epochs ``0 .. epochs - 1``, as :class:`~bucketopt.training.epoch.Epoch` objects for the cost
    model."""
    from .sampler import BucketBatchSampler

    sampler = BucketBatchSampler(lengths, boundaries, token_budget=token_budget, seed=seed,
                                 world_size=world_size, grad_accum=grad_accum)
    return [sampler.epoch_view(e, pad=pad) for e in range(epochs)]
