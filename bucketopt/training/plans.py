"""batch_plan(): the batches (dataset indices, training order) a strategy trains on.

This is the plan :func:`bucketopt.simulate` and :func:`bucketopt.compare` time, made public, so a
training loop can run on exactly the batches that were predicted: iterate a :class:`BatchPlan`
(it yields lists of ``int``) or pass it to ``DataLoader(batch_sampler=plan)``.
:meth:`bucketopt.Comparison.batches` returns the plan behind any row of a comparison.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import BucketoptError
from ..validate import shown

PLANNED = ("sorted", "shuffle", "bucketed")


@dataclass(frozen=True, eq=False)
class BatchPlan:
    """One epoch of batches: batch ``i`` is ``order[starts[i]:starts[i + 1]]``.

    Attributes
    ----------
    strategy : str
    epoch, seed : int
        The plan is a function of ``(seed, epoch)`` alone.
    order : int64 array
        Dataset indices in training order.
    starts : int64 array
        Where each batch starts in ``order``.
    buckets : int64 array or None
        Each batch's bucket (bucketed strategies).
    """

    strategy: str
    epoch: int
    seed: int
    order: np.ndarray
    starts: np.ndarray
    buckets: np.ndarray | None = None

    @property
    def sizes(self) -> np.ndarray:
        return np.diff(np.r_[self.starts, self.order.size])

    def batches(self) -> list[np.ndarray]:
        """Every batch in training order."""
        return np.split(self.order, self.starts[1:])

    def __len__(self) -> int:
        return int(self.starts.size)

    def __iter__(self):
        for batch in self.batches():
            yield batch.tolist()

    def __repr__(self):
        return (f"BatchPlan(strategy={shown(self.strategy)}, epoch={self.epoch}, seed={self.seed}, "
                f"batches={len(self)}, samples={self.order.size})")


def batch_plan(lengths, strategy="bucketed", *, token_budget, boundaries=None, seed=0, epoch=0,
               packing="fixed") -> BatchPlan:
    """The batches of one epoch of ``strategy``, exactly as :func:`bucketopt.simulate` times them.

    Parameters
    ----------
    lengths : array-like of int
        One length per sample, in dataset order.
    strategy : {"sorted", "shuffle", "bucketed"}
    token_budget : int
        Most padded tokens per batch.
    boundaries : sequence of int, optional
        Inclusive upper bucket edges (``"bucketed"``).
    seed, epoch : int
    packing : {"fixed", "greedy"}
        ``"bucketed"``: batches of ``floor(T / b_k)`` (what compare times) or greedy.

    Examples
    --------
    >>> plan = batch_plan([5, 1, 4, 2], "sorted", token_budget=8)
    >>> sorted(sorted(b) for b in plan)  # lengths [1, 2], [4], [5]
    [[0], [1, 3], [2]]
    """
    from .simulate import plan_arrays as _plan

    if strategy not in PLANNED:
        raise BucketoptError(f"strategy must be one of {', '.join(PLANNED)}; got {shown(strategy)} "
                             '("best-fit" builds rows of many samples: use simulate()).',
                             param="strategy")
    order, starts, buckets = _plan(lengths, strategy, token_budget=token_budget,
                                   boundaries=boundaries, seed=seed, epoch=epoch,
                                   packing=packing)
    return BatchPlan(strategy, int(epoch), int(seed), np.asarray(order, dtype=np.int64),
                     np.asarray(starts, dtype=np.int64), buckets)


def comparison_batches(comparison, name, epoch=0) -> list[np.ndarray]:
    """The batches behind row ``name`` of a :class:`~bucketopt.Comparison`, epoch ``epoch``:
    the same batches compare simulated (epochs ``0 .. simulations - 1``) and timed."""
    lengths = getattr(comparison, "lengths", None)
    if lengths is None:
        raise BucketoptError("this Comparison does not hold one length per sample: build it "
                             "with bucketopt.compare() from the lengths (not a Histogram).")
    rows = comparison.strategies
    if name not in rows:
        raise BucketoptError(f"name must be one of {', '.join(rows)}; got {shown(name)}.",
                             param="name")
    row = rows[name]
    kind = row["kind"]
    if kind == "packed":
        raise BucketoptError(f'the "{name}" row packs many documents into each row: it has no '
                             "batches of whole samples.")
    if kind == "bucketed:sampler":
        from .sampler import BucketBatchSampler

        sampler = BucketBatchSampler(lengths, row["boundaries"],
                                     token_budget=comparison.token_budget, seed=comparison.seed,
                                     world_size=row["world_size"], grad_accum=row["grad_accum"])
        return sampler.plan(epoch).batches()
    strategy = "bucketed" if kind.startswith("bucketed") else kind
    return batch_plan(lengths, strategy, token_budget=comparison.token_budget,
                      boundaries=row["boundaries"], seed=comparison.seed, epoch=epoch).batches()
