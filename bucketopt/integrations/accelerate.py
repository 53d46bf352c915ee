"""Accelerate: one line to use a :class:`~bucketopt.BucketBatchSampler` loader.

>>> loader = bucketopt.integrations.accelerate.prepare(accelerator, loader)  # doctest: +SKIP

``accelerator.prepare(loader)`` alone would shard the batches across processes a second time
(the sampler is rank-aware already) and prefetch a batch ahead of the loop. :func:`prepare`
makes Accelerate's sharding a pass-through and tracks the loader, so ``sampler.state_dict()``
is what the training loop received.

Packed rows (``packing="varlen"``) train the same way: collate with
:class:`~bucketopt.integrations.collate.VarlenCollator`, and make each optimizer step's loss the
mean over all its tokens with :class:`~bucketopt.integrations.tokens.TokenMean` (docs/trainer.md
has the loop; ``tests/test_accelerate.py`` runs it).
"""

from __future__ import annotations

from ..errors import BucketoptError

__all__ = ["passthrough", "prepare"]


def _sampler_of(loader):
    from ..training.sampler import BucketBatchSampler

    inner = getattr(loader, "batch_sampler", None)
    for candidate in (inner, getattr(inner, "batch_sampler", None)):
        if isinstance(candidate, BucketBatchSampler):
            return candidate
    return None


def passthrough(loader, sampler) -> None:
    """Make a ``BatchSamplerShard`` wrapped around ``sampler`` yield every batch (1 process)."""
    shard = getattr(loader, "batch_sampler", None)
    if shard is not sampler and getattr(shard, "batch_sampler", None) is sampler:
        shard.num_processes, shard.process_index = 1, 0


def prepare(accelerator, loader):
    """``accelerator.prepare(loader)`` for a DataLoader on a BucketBatchSampler, tracked."""
    sampler = _sampler_of(loader)
    if sampler is None:
        raise BucketoptError("loader must be a DataLoader built with "
                             "batch_sampler=BucketBatchSampler(...).", param="loader")
    prepared = accelerator.prepare(loader)
    passthrough(prepared, sampler)
    return sampler.track(prepared)
