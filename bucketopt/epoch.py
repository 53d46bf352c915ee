"""Epoch: one epoch of batches as the GPU sees them, the common currency of simulate(), the
sampler and the cost model.

Every batching strategy (simulate(), BucketBatchSampler) produces an :class:`Epoch`; the cost model
turns an Epoch into time. Batches are in training order; with data parallelism over G ranks the
batches ``i*G .. i*G + G - 1`` form step ``i`` (the order a DistributedSampler-style split yields).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import BucketoptError


@dataclass(frozen=True, eq=False)
class Epoch:
    """One epoch of batches.

    Attributes
    ----------
    strategy : str
        Name of the strategy that built it ("sorted", "shuffle", "bucketed", "packed", ...).
    sizes : int64 array (n_batches,)
        Samples (rows) in each batch, in training order.
    padded_lens : int64 array (n_batches,)
        Length every row of the batch is padded to (the batch's longest sample for dynamic
        padding, the bucket edge for static shapes, the row capacity for packing).
    real_tokens : int64 array (n_batches,)
        Sum of the true lengths in each batch.
    buckets : int64 array (n_batches,) or None
        Bucket of each batch where the strategy has buckets.
    """

    strategy: str
    sizes: np.ndarray
    padded_lens: np.ndarray
    real_tokens: np.ndarray
    buckets: np.ndarray | None = None

    @property
    def n_batches(self) -> int:
        return int(self.sizes.size)

    @property
    def computed_tokens(self) -> np.ndarray:
        """Padded tokens computed per batch (rows x padded length)."""
        return self.sizes * self.padded_lens

    @property
    def padded_tokens(self) -> int:
        return int(self.computed_tokens.sum() - self.real_tokens.sum())

    @property
    def total_real_tokens(self) -> int:
        return int(self.real_tokens.sum())

    @property
    def padding_fraction(self) -> float:
        computed = int(self.computed_tokens.sum())
        return (computed - self.total_real_tokens) / computed if computed else 0.0

    def to_dict(self) -> dict:
        return {
            "strategy": self.strategy,
            "n_batches": self.n_batches,
            "real_tokens": self.total_real_tokens,
            "padded_tokens": self.padded_tokens,
            "padding_fraction": self.padding_fraction,
        }


def epoch_from_batches(lengths, batches, *, strategy: str, pad: str = "batch", edges=None,
                       buckets=None) -> Epoch:
    """Build an :class:`Epoch` from lists of sample indices (e.g. a batch sampler's output).

    ``pad="batch"`` pads each batch to its longest member; ``pad="edge"`` pads to the edge of the
    bucket of the batch's longest member (needs ``edges``).
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    sizes = np.fromiter((len(b) for b in batches), dtype=np.int64, count=len(batches))
    if sizes.size == 0:
        raise BucketoptError("no batches: the epoch is empty.")
    if sizes.min() < 1:
        raise BucketoptError("every batch must hold at least one sample.")
    flat = np.concatenate([np.asarray(b, dtype=np.int64) for b in batches])
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    batch_lengths = lengths[flat]
    longest = np.maximum.reduceat(batch_lengths, starts)
    real = np.add.reduceat(batch_lengths, starts)
    if pad == "batch":
        padded_lens = longest
    elif pad == "edge":
        if edges is None:
            raise BucketoptError('pad="edge" needs the bucket edges.')
        edges = np.asarray(edges, dtype=np.int64)
        padded_lens = edges[np.searchsorted(edges, longest, side="left")]
    else:
        raise BucketoptError(f"`pad` must be 'edge' or 'batch'; got {pad!r}.")
    return Epoch(strategy, sizes, padded_lens.astype(np.int64), real.astype(np.int64),
                 None if buckets is None else np.asarray(buckets, dtype=np.int64))
