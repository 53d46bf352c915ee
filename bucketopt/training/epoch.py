"""Epoch: one epoch of batches as the GPU sees them, the common currency of simulate(), the
sampler and the cost model.

Every batching strategy (simulate(), BucketBatchSampler) produces an :class:`Epoch`; the cost model
turns an Epoch into time. Batches are in training order; with data parallelism over G ranks the
batches ``i*G .. i*G + G - 1`` form step ``i`` (the order a DistributedSampler-style split yields).

A padded batch of ``s`` rows padded to ``L`` computes ``s * L`` tokens and pays attention on
``s * L**2``. A padding-free (packed) batch is one flattened row of documents with
document-masked attention: it computes its real tokens only and pays attention on the sum of
``d**2`` over its documents, which :attr:`Epoch.attention` records (``None`` for padded epochs).
:meth:`Epoch.features` gives both kinds to the cost model as ``[1, tokens, attention]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import BucketoptError
from ..validate import shown


@dataclass(frozen=True, eq=False)
class Epoch:
    """One epoch of batches.

    Attributes
    ----------
    strategy : str
        Name of the strategy that built it ("sorted", "shuffle", "bucketed", "best-fit",
        "packed", ...).
    sizes : int64 array (n_batches,)
        Samples (rows) in each batch, in training order.
    padded_lens : int64 array (n_batches,)
        Length every row of the batch is padded to (the batch's longest sample for dynamic
        padding, the bucket edge for static shapes, the row capacity for packing).
    real_tokens : int64 array (n_batches,)
        Sum of the true lengths in each batch.
    buckets : int64 array (n_batches,) or None
        Bucket of each batch where the strategy has buckets.
    attention : float64 array (n_batches,) or None
        Padding-free batches only: the sum over the batch's documents of d**2 (document-masked
        attention). Such a batch is one row (``sizes`` 1) of ``padded_lens == real_tokens``
        tokens. None for padded batches, whose attention is ``sizes * padded_lens**2``.
    """

    strategy: str
    sizes: np.ndarray
    padded_lens: np.ndarray
    real_tokens: np.ndarray
    buckets: np.ndarray | None = None
    attention: np.ndarray | None = None

    @property
    def n_batches(self) -> int:
        return int(self.sizes.size)

    @property
    def computed_tokens(self) -> np.ndarray:
        """Padded tokens computed per batch (rows x padded length)."""
        return self.sizes * self.padded_lens

    @property
    def attention_terms(self) -> np.ndarray:
        """Attention term per batch (float64): ``sizes * padded_lens**2`` for padded batches,
        the recorded sum of d**2 for padding-free ones."""
        if self.attention is not None:
            return np.asarray(self.attention, dtype=np.float64)
        length = self.padded_lens.astype(np.float64)
        return self.sizes.astype(np.float64) * length * length

    @property
    def packed(self) -> bool:
        """True for padding-free batches (``attention`` recorded)."""
        return self.attention is not None

    def features(self) -> np.ndarray:
        """(n_batches, 3) float64: ``[1, computed tokens, attention term]`` per batch, so a
        batch's time is ``features @ [alpha, beta, gamma]``."""
        computed = self.computed_tokens.astype(np.float64)
        return np.stack([np.ones_like(computed), computed, self.attention_terms], axis=1)

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
            **({} if self.attention is None
               else {"attention": float(np.asarray(self.attention, dtype=np.float64).sum())}),
        }


def packed_epoch(strategy: str, tokens, attention, buckets=None) -> Epoch:
    """An :class:`Epoch` of padding-free rows: ``tokens`` and ``attention`` (sum of d**2) per
    row in training order, one row per micro-batch.

    Examples
    --------
    >>> e = packed_epoch("packed", [7, 2], [25, 4])
    >>> e.padding_fraction, e.attention_terms.tolist()
    (0.0, [25.0, 4.0])
    """
    tokens = np.asarray(tokens, dtype=np.int64)
    attention = np.asarray(attention, dtype=np.float64)
    if tokens.ndim != 1 or tokens.size == 0 or attention.shape != tokens.shape:
        raise BucketoptError("a packed epoch needs one tokens and one attention figure per row, "
                             "at least one row.")
    if tokens.min() < 1 or not np.all(attention >= tokens):  # d**2 >= d for every d >= 1
        raise BucketoptError("every packed row needs tokens >= 1 and attention >= tokens.")
    return Epoch(strategy, np.ones(tokens.size, dtype=np.int64), tokens, tokens.copy(),
                 None if buckets is None else np.asarray(buckets, dtype=np.int64), attention)


def epoch_from_batches(lengths, batches, *, strategy: str, pad: str = "batch", edges=None,
                       buckets=None) -> Epoch:
    """Build an :class:`Epoch` from lists of sample indices (e.g. a batch sampler's output).

    ``pad="batch"`` pads each batch to its longest member; ``pad="edge"`` pads to the edge of the
    bucket of the batch's longest member (needs ``edges``); ``pad="varlen"``: each batch is one
    padding-free row of documents (:func:`packed_epoch`: real tokens, sum of d**2).
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    sizes = np.fromiter((len(b) for b in batches), dtype=np.int64, count=len(batches))
    if sizes.size == 0:
        raise BucketoptError("no batches: the epoch is empty.", param="batches")
    if sizes.min() < 1:
        raise BucketoptError("every batch must hold at least one sample.")
    flat = np.concatenate([np.asarray(b, dtype=np.int64) for b in batches])
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    batch_lengths = lengths[flat]
    longest = np.maximum.reduceat(batch_lengths, starts)
    real = np.add.reduceat(batch_lengths, starts)
    if pad == "varlen":
        return packed_epoch(strategy, real,
                            np.add.reduceat(batch_lengths.astype(np.float64) ** 2, starts),
                            buckets)
    if pad == "batch":
        padded_lens = longest
    elif pad == "edge":
        if edges is None:
            raise BucketoptError('pad="edge" needs the bucket edges.', param="pad")
        edges = np.asarray(edges, dtype=np.int64)
        padded_lens = edges[np.searchsorted(edges, longest, side="left")]
    else:
        raise BucketoptError(f"`pad` must be 'edge', 'batch' or 'varlen'; got {shown(pad)}.",
                             param="pad")
    return Epoch(strategy, sizes, padded_lens.astype(np.int64), real.astype(np.int64),
                 None if buckets is None else np.asarray(buckets, dtype=np.int64))
