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

from .errors import BucketoptError
from .histogram import validate_lengths

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
        raise BucketoptError("steps must be a non-empty list of non-empty index lists.")
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
    seen = {frozenset(np.asarray(b).ravel().tolist()) for b in batches_e}
    later = list(batches_e1)
    if not later:
        raise BucketoptError("batches_e1 is empty: at least one batch is required.")
    same = sum(frozenset(np.asarray(b).ravel().tolist()) in seen for b in later)
    return same / len(later)


def strategy_batches(lengths, strategy, *, token_budget, epoch=0, seed=0, boundaries=None,
                     world_size=1, grad_accum=1, **sampler_options) -> list[np.ndarray]:
    """One epoch of a strategy's batches in global training order (batch ``i`` runs on rank
    ``i % world_size``; ``world_size * grad_accum`` consecutive batches make one optimizer step).

    "sorted" packs the length-sorted samples once (the batches never change) and shuffles their
    order from ``(seed, epoch)``; "shuffle" permutes all samples from ``(seed, epoch)`` and packs
    greedily; "bucketed" is the :class:`~bucketopt.BucketBatchSampler` plan for ``boundaries``.
    """
    if strategy in ("sorted", "shuffle"):
        from .simulate import batch_plan  # the same batches bucketopt.simulate() times

        lengths = validate_lengths(lengths)
        order, starts, _ = batch_plan(lengths, strategy, token_budget=token_budget, seed=seed,
                                      epoch=epoch)
        return np.split(order, starts[1:])
    if strategy == "bucketed":
        if boundaries is None:
            raise BucketoptError('strategy "bucketed" needs boundaries.')
        from .sampler import BucketBatchSampler

        sampler = BucketBatchSampler(lengths, boundaries, token_budget=token_budget, seed=seed,
                                     world_size=world_size, grad_accum=grad_accum,
                                     **sampler_options)
        return sampler.plan(epoch).batches()
    raise BucketoptError(f"strategy must be one of {STRATEGIES}; got {strategy!r}.")


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


def comparison_diversity(lengths, boundaries, *, token_budget, world_size=1, grad_accum=1,
                         seed=0) -> dict[str, dict]:
    """Step mix gap and epoch churn for the rows of :func:`bucketopt.comparison.compare`.

    "sorted", "shuffle" and "bucketed" are measured on the very batches their rows simulate
    (:func:`bucketopt.simulate.batch_plan`, epochs 0 and 1, fixed packing; "bucketed" puts the
    batches of all buckets in random order); "sampler" on :class:`~bucketopt.BucketBatchSampler`
    with ``world_size`` and ``grad_accum``. Returns name -> {"step_mix_gap", "epoch_churn"}.
    """
    from .simulate import batch_plan

    lengths = validate_lengths(lengths)
    out = {}
    for name in ("sorted", "shuffle", "bucketed", "sampler"):
        epochs = []
        for epoch in (0, 1):
            if name == "bucketed":  # simulate()'s bucketed epoch: batches in random order
                order, starts, _ = batch_plan(lengths, name, token_budget=token_budget,
                                              boundaries=boundaries, seed=seed, epoch=epoch)
                epochs.append(np.split(order, starts[1:]))
            else:
                epochs.append(strategy_batches(
                    lengths, "bucketed" if name == "sampler" else name,
                    token_budget=token_budget, epoch=epoch, seed=seed, boundaries=boundaries,
                    world_size=world_size, grad_accum=grad_accum))
        d = measure(lengths, *epochs, world_size=world_size, grad_accum=grad_accum)
        out[name] = {"step_mix_gap": d.step_mix_gap, "epoch_churn": d.epoch_churn}
    return out


def sampler_epochs(lengths, boundaries, *, token_budget, world_size=1, grad_accum=1, seed=0,
                   epochs=1, pad="batch") -> list:
    """The :class:`~bucketopt.BucketBatchSampler`'s real batch order (all ranks, step order) for
    epochs ``0 .. epochs - 1``, as :class:`~bucketopt.epoch.Epoch` objects for the cost model."""
    from .sampler import BucketBatchSampler

    sampler = BucketBatchSampler(lengths, boundaries, token_budget=token_budget, seed=seed,
                                 world_size=world_size, grad_accum=grad_accum)
    return [sampler.epoch_view(e, pad=pad) for e in range(epochs)]
