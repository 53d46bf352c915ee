"""What every bucketopt sampler holds: the seed, this rank among ``world_size``, the epoch, and
a state to resume from (as lhotse's ``CutSampler`` holds them for its samplers).

:class:`RankedSampler` is the base of :class:`~bucketopt.training.sampler.BucketBatchSampler`
(a plan of a known dataset) and :class:`~bucketopt.training.streaming.StreamBatcher` (a
stream): both check their rank and seed here, select the epoch with :meth:`set_epoch`, and save
and load their own position with ``state_dict()`` / ``load_state_dict()``.
"""

from __future__ import annotations

import numpy as np

from ..errors import BucketoptError
from ..validate import INT64_MAX, check_int, check_world_size, shown


def _param(name: str):
    # the parameter an error is about, when the name is one (not "state epoch")
    return name if name.isidentifier() else None


def _check_bool(name, value):
    if not isinstance(value, (bool, np.bool_)):
        raise BucketoptError(f"{name} must be True or False; got {shown(value)}.",
                             param=_param(name))
    return bool(value)


class RankedSampler:
    """The seed, rank, world size and epoch of a sampler; subclasses add their batches and
    their state (``state_dict()``, ``load_state_dict()``) and react to a new epoch in
    :meth:`_new_epoch`.

    Examples
    --------
    >>> s = RankedSampler()
    >>> s._init_ranks(seed=0, rank=1, world_size=2)
    >>> s.set_epoch(3)
    >>> (s.rank, s.world_size, s.epoch)
    (1, 2, 3)
    """

    _epoch = 0

    def _init_ranks(self, *, seed, rank, world_size) -> None:
        self.seed = check_int(seed, "seed", low=0, high=INT64_MAX)
        self.world_size = check_world_size(world_size)
        self.rank = check_int(rank, "rank", low=0, high=INT64_MAX)
        if self.rank >= self.world_size:
            raise BucketoptError(
                f"rank must be in [0, world_size) = [0, {self.world_size}); got {self.rank}.",
                param="world_size")
        self._epoch = 0

    @property
    def epoch(self) -> int:
        """The epoch the next iteration plans (``set_epoch``)."""
        return self._epoch

    def set_epoch(self, epoch) -> None:
        """Select the epoch to iterate (every rank the same, as with DistributedSampler)."""
        epoch = check_int(epoch, "epoch", low=0, high=INT64_MAX)
        if epoch != self._epoch:
            self._epoch = epoch
            self._new_epoch()

    def _new_epoch(self) -> None:
        """What a sampler forgets when another epoch is selected (by default nothing)."""
