"""BucketBatchSampler: the length-bucketed shuffle as a drop-in, DDP-aware, resumable batch sampler.

Every epoch is planned whole, for all ranks at once, from ``(seed, epoch)`` alone: samples are
shuffled inside their buckets, cut into batches under the token budget, and the batches are laid
out as global micro-steps of ``world_size`` batches (global batch ``i`` = micro-step
``i // world_size`` on rank ``i % world_size``). Each rank takes its column, so all ranks agree on
the plan without talking to each other, and resuming is an index into the plan (no replay).
See ``docs/sampler.md`` for the semantics and the measured diversity figures.
"""

from __future__ import annotations

import hashlib
import heapq
import json
from dataclasses import dataclass

import numpy as np

from .errors import BucketoptError
from .histogram import Histogram, validate_lengths
from .solution import batch_sizes_for, check_boundaries, check_token_budget

PACKINGS = ("fixed", "greedy")
STATE_VERSION = 1
_STATE_KEYS = ("version", "epoch", "position", "seed", "fingerprint")


@dataclass(frozen=True, eq=False)
class EpochPlan:
    """One epoch's batches for every rank, in training order.

    Global batch ``i`` runs at micro-step ``i // world_size`` on rank ``i % world_size``; optimizer
    step ``j`` is micro-steps ``j * grad_accum`` to ``j * grad_accum + grad_accum - 1``. Batch ``i``
    holds the dataset indices ``order[starts[i]:stops[i]]``.

    Attributes
    ----------
    natural_batches : int
        Batches the packing made before any split or drop.
    split_batches : int
        Batches added by splitting large batches in two (to equalise ranks and optimizer steps).
    dropped, dropped_batches : int
        Samples and batches left out of the epoch (only with ``drop_last=True``).
    mixed_steps : int
        Micro-steps whose ranks hold batches of different buckets (0 in the usual case with
        ``sync_buckets=True``; see docs/sampler.md for when it is not).
    """

    epoch: int
    world_size: int
    grad_accum: int
    order: np.ndarray
    starts: np.ndarray
    stops: np.ndarray
    buckets: np.ndarray
    natural_batches: int
    split_batches: int
    dropped: int
    dropped_batches: int
    mixed_steps: int

    @property
    def n_batches(self) -> int:
        """Batches over all ranks."""
        return int(self.starts.size)

    @property
    def micro_steps(self) -> int:
        """Batches per rank (every rank has the same number)."""
        return self.n_batches // self.world_size

    @property
    def sizes(self) -> np.ndarray:
        return self.stops - self.starts

    def batch(self, i: int) -> np.ndarray:
        """Dataset indices of global batch ``i``."""
        return self.order[self.starts[i]:self.stops[i]]

    def batches(self, rank: int | None = None) -> list[np.ndarray]:
        """Every batch in global order (``rank=None``) or one rank's batches in its order."""
        ids = range(self.n_batches) if rank is None else range(rank, self.n_batches,
                                                                 self.world_size)
        return [self.order[self.starts[i]:self.stops[i]] for i in ids]

    def to_dict(self) -> dict:
        return {
            "epoch": self.epoch,
            "world_size": self.world_size,
            "grad_accum": self.grad_accum,
            "n_batches": self.n_batches,
            "micro_steps": self.micro_steps,
            "natural_batches": self.natural_batches,
            "split_batches": self.split_batches,
            "dropped": self.dropped,
            "dropped_batches": self.dropped_batches,
            "mixed_steps": self.mixed_steps,
        }


class BucketBatchSampler:
    """Shuffle inside length buckets every epoch and yield batches of dataset indices.

    Iterating yields lists of ``int`` indices, so it drops into
    ``torch.utils.data.DataLoader(dataset, batch_sampler=sampler)`` (torch is never imported).

    Parameters
    ----------
    lengths : array-like of int
        Length of every sample of the dataset, in dataset order.
    boundaries : array-like of int
        Inclusive upper bucket edges (e.g. ``bucketopt.solve(...).boundaries``).
    token_budget : int
        Most padded tokens in one micro-batch on one GPU. ``packing="fixed"`` gives bucket ``k``
        batches of ``floor(token_budget / b_k)`` samples; ``"greedy"`` fills each batch inside
        a bucket while ``(count + 1) * max_len <= token_budget``.
    seed : int
        The shuffle of epoch ``e`` depends only on ``(seed, e)``.
    rank, world_size : int
        This process's data-parallel rank and the number of ranks.
    grad_accum : int
        Micro-steps per optimizer step.
    packing : {"fixed", "greedy"}
    sync_buckets : bool or "step"
        ``True``: at every micro-step all ranks take a batch of the same bucket (equal shapes, no
        stragglers), and micro-steps of each bucket are spread over the epoch in proportion to
        its batches. ``False``: batches (not micro-steps) are spread that way, so every optimizer
        step holds close to the dataset's mix, but ranks hold different buckets. ``"step"``: as
        ``False``, then the batches of each optimizer step are ordered by bucket, so the ranks
        of a micro-step hold the same or neighbouring buckets (see docs/sampler.md).
    drop_last : bool
        ``False`` (default) keeps every sample: when the batches do not divide evenly over the
        ranks, the largest batches are split in two. ``True`` drops whole batches instead and
        :attr:`dropped` says how many samples.

    Examples
    --------
    >>> lengths = [5, 3, 9, 4, 8, 2]
    >>> ranks = [BucketBatchSampler(lengths, [4, 9], token_budget=18, world_size=2, rank=r)
    ...          for r in (0, 1)]
    >>> [len(sampler) for sampler in ranks]  # every rank the same number of batches
    [2, 2]
    >>> sorted(i for sampler in ranks for batch in sampler for i in batch)  # each index once
    [0, 1, 2, 3, 4, 5]
    """

    def __init__(self, lengths, boundaries, *, token_budget, seed=0, rank=0, world_size=1,
                 grad_accum=1, packing="fixed", sync_buckets=True, drop_last=False):
        if isinstance(lengths, Histogram):
            raise BucketoptError("lengths must hold one length per sample in dataset order; got "
                                 "a Histogram, which has no sample order.")
        lengths = validate_lengths(lengths)
        hist = Histogram.from_lengths(lengths)
        if token_budget is None:
            raise BucketoptError("token_budget is required: the most padded tokens per "
                                 "micro-batch; got None.")
        self.token_budget = check_token_budget(token_budget, hist)
        self.edges = check_boundaries(boundaries, hist)
        self.batch_sizes = batch_sizes_for(self.edges, self.token_budget)
        self.seed = _check_int("seed", seed, 0)
        self.world_size = _check_int("world_size", world_size, 1)
        self.rank = _check_int("rank", rank, 0)
        if self.rank >= self.world_size:
            raise BucketoptError(
                f"rank must be in [0, world_size) = [0, {self.world_size}); got {self.rank}.")
        self.grad_accum = _check_int("grad_accum", grad_accum, 1)
        if packing not in PACKINGS:
            raise BucketoptError(f"packing must be one of {PACKINGS}; got {packing!r}.")
        self.packing = packing
        if isinstance(sync_buckets, str) and sync_buckets == "step":
            self.sync_buckets = "step"
        elif isinstance(sync_buckets, (bool, np.bool_)):
            self.sync_buckets = bool(sync_buckets)
        else:
            raise BucketoptError(f'sync_buckets must be True, False or "step"; got '
                                 f"{sync_buckets!r}.")
        self.drop_last = _check_bool("drop_last", drop_last)
        self.lengths = lengths
        bucket_of = np.searchsorted(self.edges, lengths, side="left")
        self._members = np.argsort(bucket_of, kind="stable")  # dataset indices grouped by bucket
        self._bucket_counts = np.bincount(bucket_of, minlength=self.edges.size)
        self._fingerprint = _fingerprint(
            lengths, self.edges, token_budget=self.token_budget, world_size=self.world_size,
            grad_accum=self.grad_accum, packing=packing, sync_buckets=self.sync_buckets,
            drop_last=self.drop_last)
        if not self.drop_last:
            # greedy never makes more batches than fixed packing, so when the fixed count can be
            # split up to a multiple of world_size every epoch can: refuse now, not mid-training
            most = int(np.sum(-(-self._bucket_counts // self.batch_sizes)))
            if -(-most // self.world_size) * self.world_size > lengths.size:
                raise _infeasible(self, lengths.size, most, self.world_size)
        self._epoch = 0
        self._position = 0  # batches of this rank handed out in the current epoch
        self._resume = 0  # where the next iteration starts (set by load_state_dict)
        self._cache: EpochPlan | None = None
        self.plan(0)  # fail at construction when the configuration cannot be planned

    # ----------------------------------------------------------------------------- the torch API
    @property
    def epoch(self) -> int:
        return self._epoch

    def set_epoch(self, epoch) -> None:
        """Select the epoch to iterate. Re-selecting a checkpoint's epoch keeps its resume point."""
        epoch = _check_int("epoch", epoch, 0)
        if epoch != self._epoch:
            self._epoch = epoch
            self._resume = 0
            self._position = 0

    def __len__(self) -> int:
        """Batches the next iteration yields on this rank (the epoch, less a resume point)."""
        return self.plan().micro_steps - self._resume

    def __iter__(self):
        plan = self.plan()
        start, self._resume = self._resume, 0
        self._position = start
        order, starts, stops = plan.order, plan.starts, plan.stops
        for i in range(start * self.world_size + self.rank, plan.n_batches, self.world_size):
            self._position += 1
            yield order[starts[i]:stops[i]].tolist()

    def state_dict(self, *, position=None) -> dict:
        """The resume point: epoch, batches consumed this epoch, seed and configuration hash.

        ``position`` overrides the count of batches handed out, for loaders that prefetch ahead
        of the training step (pass the number of batches the loop has consumed). Every rank is at
        the same position, so rank 0's state resumes all ranks.
        """
        position = self._position if position is None else _check_int("position", position, 0)
        return {"version": STATE_VERSION, "epoch": self._epoch, "position": int(position),
                "seed": self.seed, "fingerprint": self._fingerprint}

    def load_state_dict(self, state) -> None:
        """Resume at the state's epoch and position: the next iteration yields exactly the
        batches that were still to come."""
        if not isinstance(state, dict):
            raise BucketoptError(f"state must be a dict from state_dict(); got "
                                 f"{type(state).__name__}.")
        missing = [key for key in _STATE_KEYS if key not in state]
        if missing:
            raise BucketoptError(f"state is missing {', '.join(missing)}: pass a dict returned "
                                 "by BucketBatchSampler.state_dict().")
        if state["version"] != STATE_VERSION:
            raise BucketoptError(f"state version must be {STATE_VERSION}; got "
                                 f"{state['version']!r}.")
        if state["fingerprint"] != self._fingerprint:
            raise BucketoptError(
                "state was saved by a sampler with other lengths, boundaries, token_budget, "
                "world_size, grad_accum, packing, sync_buckets or drop_last (fingerprint "
                f"{state['fingerprint']!r}, this sampler {self._fingerprint!r}).")
        if state["seed"] != self.seed:
            raise BucketoptError(f"state seed={state['seed']!r} does not match this sampler's "
                                 f"seed={self.seed}.")
        epoch = _check_int("state epoch", state["epoch"], 0)
        position = _check_int("state position", state["position"], 0)
        steps = self.plan(epoch).micro_steps
        if position > steps:
            raise BucketoptError(f"state position must be <= {steps} (batches per rank in epoch "
                                 f"{epoch}); got {position}.")
        self._epoch = epoch
        self._resume = position
        self._position = position

    # ---------------------------------------------------------------------------- introspection
    @property
    def dropped(self) -> int:
        """Samples the current epoch leaves out (0 unless ``drop_last=True``)."""
        return self.plan().dropped

    def plan(self, epoch=None) -> EpochPlan:
        """The whole epoch for every rank (built from ``(seed, epoch)``, cached per epoch)."""
        epoch = self._epoch if epoch is None else _check_int("epoch", epoch, 0)
        if self._cache is None or self._cache.epoch != epoch:
            self._cache = _build_plan(self, epoch)
        return self._cache

    def epoch_view(self, epoch=None, *, pad="batch"):
        """The epoch as an :class:`bucketopt.epoch.Epoch` over all ranks in step order (global
        batches ``i*G .. i*G + G - 1`` form micro-step ``i``), for the cost model.

        ``pad="batch"`` pads each batch to its longest sample; ``"edge"`` to its bucket edge.
        """
        from .epoch import epoch_from_batches

        plan = self.plan(epoch)
        name = {True: "bucketed", False: "bucketed-unsynced", "step": "bucketed-step"}[
            self.sync_buckets]
        return epoch_from_batches(self.lengths, plan.batches(), strategy=name, pad=pad,
                                  edges=self.edges, buckets=plan.buckets)

    def __repr__(self):
        return (f"BucketBatchSampler(n={self.lengths.size:,}, buckets={self.edges.size}, "
                f"token_budget={self.token_budget}, rank={self.rank}, "
                f"world_size={self.world_size}, grad_accum={self.grad_accum}, "
                f"packing={self.packing!r}, sync_buckets={self.sync_buckets}, "
                f"drop_last={self.drop_last}, epoch={self._epoch})")


# ------------------------------------------------------------------------------ planning an epoch
def _build_plan(sampler: BucketBatchSampler, epoch: int) -> EpochPlan:
    rng = np.random.default_rng([sampler.seed, epoch])
    order, starts, stops, buckets = _pack(sampler, rng)
    n, natural = sampler.lengths.size, starts.size
    G, A = sampler.world_size, sampler.grad_accum
    if sampler.sync_buckets is True:
        starts, stops, buckets, split = _plan_synced(starts, stops, buckets, G, A,
                                                     sampler.drop_last, rng, n, sampler)
    else:
        starts, stops, buckets, split = _plan_unsynced(starts, stops, buckets, G, A,
                                                       sampler.drop_last, rng, n, sampler)
    steps = starts.size // G
    if steps:
        grid = buckets.reshape(steps, G)
        mixed = int(np.count_nonzero(grid.min(axis=1) != grid.max(axis=1)))
    else:
        mixed = 0
    kept = int((stops - starts).sum())
    return EpochPlan(epoch=epoch, world_size=G, grad_accum=A, order=order, starts=starts,
                     stops=stops, buckets=buckets, natural_batches=int(natural),
                     split_batches=int(split), dropped=n - kept,
                     dropped_batches=int(natural + split - starts.size), mixed_steps=mixed)


def _pack(sampler: BucketBatchSampler, rng):
    """Shuffle inside buckets and cut batches: (order, starts, stops, buckets), bucket by bucket."""
    order = np.empty_like(sampler._members)
    counts = sampler._bucket_counts
    offsets = np.r_[0, np.cumsum(counts)]
    for k in np.flatnonzero(counts):
        lo, hi = offsets[k], offsets[k + 1]
        order[lo:hi] = sampler._members[lo:hi][rng.permutation(hi - lo)]
    if sampler.packing == "fixed":
        parts = [np.arange(offsets[k], offsets[k + 1], sampler.batch_sizes[k], dtype=np.int64)
                 for k in np.flatnonzero(counts)]
        starts = np.concatenate(parts)
    else:
        from ._packing import greedy_starts

        segment = np.zeros(order.size, dtype=np.bool_)
        segment[offsets[:-1][counts > 0]] = True
        starts = greedy_starts(sampler.lengths[order], segment, np.int64(sampler.token_budget))
    stops = np.r_[starts[1:], order.size].astype(np.int64)
    buckets = (np.searchsorted(offsets, starts, side="right") - 1).astype(np.int64)
    return order, starts.astype(np.int64), stops, buckets


def _infeasible(sampler, n, batches, G):
    return BucketoptError(
        f"cannot give each of world_size={G} ranks the same number of batches with every sample "
        f"exactly once: {n} samples make up to {batches} batches under token_budget="
        f"{sampler.token_budget} and splitting cannot reach the next multiple of {G}; pass "
        "drop_last=True or use fewer ranks.")


def _split_largest(starts, stops, buckets, extra):
    """Split the largest batch in two, ``extra`` times (sizes ceil/floor of the half).

    A split batch stays in its bucket and under the budget (fewer samples, no longer one).
    Needs ``sum(size - 1) >= extra``.
    """
    if extra <= 0:
        return starts, stops, buckets
    sizes = stops - starts
    top = np.argsort(-sizes, kind="stable")[:extra]  # only these (and their pieces) get split
    heap = [(-int(sizes[i]), int(starts[i]), int(stops[i]), int(buckets[i])) for i in top]
    heapq.heapify(heap)
    for _ in range(extra):
        _, a, b, k = heapq.heappop(heap)
        mid = a + (b - a + 1) // 2
        heapq.heappush(heap, (-(mid - a), a, mid, k))
        heapq.heappush(heap, (-(b - mid), mid, b, k))
    keep = np.ones(sizes.size, dtype=bool)
    keep[top] = False
    pieces = np.array([item[1:] for item in sorted(heap, key=lambda t: t[1])], dtype=np.int64)
    return (np.r_[starts[keep], pieces[:, 0]], np.r_[stops[keep], pieces[:, 1]],
            np.r_[buckets[keep], pieces[:, 2]])


def _slack(starts, stops) -> int:
    """How many splits a set of batches allows (every batch can go down to one sample)."""
    return int((stops - starts).sum() - starts.size)


def _by_size(starts, stops, buckets, *, by_bucket=False):
    """Sort batches largest first (by bucket first when asked); ties keep their order."""
    keys = (-(stops - starts),) if not by_bucket else (-(stops - starts), buckets)
    idx = np.lexsort(keys)
    return starts[idx], stops[idx], buckets[idx]


def _plan_unsynced(starts, stops, buckets, G, A, drop_last, rng, n, sampler):
    """Batches of every bucket spread evenly over the epoch; rank r takes every G-th batch
    (``sync_buckets="step"``: sorted by bucket inside each optimizer step)."""
    natural = starts.size
    if not drop_last:
        extra = -natural % (G * A)
        if extra > _slack(starts, stops):
            extra = -natural % G
            if extra > _slack(starts, stops):
                raise _infeasible(sampler, n, natural, G)
        starts, stops, buckets = _split_largest(starts, stops, buckets, extra)
    k_ids = np.unique(buckets)
    # systematic sampling: bucket k's c_k batches sit at (i + u_k) / c_k, i = 0..c_k-1
    keys, rows = [], []
    for k in k_ids:
        mine = np.flatnonzero(buckets == k)
        mine = mine[rng.permutation(mine.size)]
        keys.append((np.arange(mine.size) + rng.random()) / mine.size)
        rows.append(mine)
    rows = np.concatenate(rows)[np.argsort(np.concatenate(keys), kind="stable")]
    if drop_last:
        unit = G * A if rows.size >= G * A else G
        rows = rows[:rows.size - rows.size % unit]
    if sampler.sync_buckets == "step":
        # inside each optimizer step: by bucket, then largest first, so neighbours share shapes
        step_of = np.arange(rows.size) // (G * A)
        rows = rows[np.lexsort((starts[rows] - stops[rows], buckets[rows], step_of))]
        # deal every other micro-step to the ranks in reverse, so no rank always gets the
        # longest bucket of the step (ranks meet at the optimizer step under no_sync())
        grid = rows.reshape(-1, G)
        odd = np.arange(grid.shape[0]) % A % 2 == 1
        grid[odd] = grid[odd, ::-1]
        rows = grid.ravel()
    return starts[rows], stops[rows], buckets[rows], starts.size - natural


def _plan_synced(starts, stops, buckets, G, A, drop_last, rng, n, sampler):
    """Micro-steps of G batches from one bucket, buckets spread evenly over the epoch."""
    natural = starts.size
    n_split = 0
    streams = []  # one per bucket: (starts, stops, buckets), a multiple of G batches
    pool = []  # leftovers of buckets that cannot be rounded to a multiple of G
    for k in np.unique(buckets):
        sel = buckets == k
        s, e, b = starts[sel], stops[sel], buckets[sel]
        extra = -s.size % G
        if not drop_last and extra <= _slack(s, e):
            streams.append(_split_largest(s, e, b, extra))
            n_split += extra
            continue
        s, e, b = _by_size(s, e, b)
        whole = s.size - s.size % G
        if whole:
            streams.append((s[:whole], e[:whole], b[:whole]))
        pool.append((s[whole:], e[whole:], b[whole:]))
    pool = _concat(pool)
    if drop_last:
        s, e, b = _by_size(*pool)
        keep = s.size - s.size % G
        pool = (s[:keep], e[:keep], b[:keep])
    else:
        extra = -pool[0].size % G
        # too few samples in the pool to split: pull whole buckets in, most slack first
        streams.sort(key=lambda st: _slack(st[0], st[1]))
        while extra > _slack(pool[0], pool[1]) and streams:
            pool = _concat([pool, streams.pop()])
            extra = -pool[0].size % G
        if extra > _slack(pool[0], pool[1]):
            # the per-bucket rounding spent the slack: plan all natural batches as one pool
            extra = -natural % G
            if extra > n - natural:
                raise _infeasible(sampler, n, natural, G)
            streams, pool, n_split = [], (starts, stops, buckets), 0
        pool = _split_largest(*pool, extra)
        n_split += extra
        # whole optimizer steps: split G more batches where the slack is largest
        steps = (sum(st[0].size for st in streams) + pool[0].size) // G
        for _ in range(-steps % A):
            candidates = [*streams, pool]
            slacks = [_slack(c[0], c[1]) for c in candidates]
            best = int(np.argmax(slacks))
            if slacks[best] < G:
                break  # too little data to fill the last optimizer step: it stays short
            grown = _split_largest(*candidates[best], G)
            n_split += G
            if best == len(streams):
                pool = grown
            else:
                streams[best] = grown
    # inside a stream, micro-steps group batches of similar size (largest first); the pool is
    # grouped by bucket first, so a mixed micro-step spans as few buckets as possible
    table = [_by_size(*st) for st in streams]
    if pool[0].size:
        table.append(_by_size(*pool, by_bucket=True))
    if not table:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty, n_split
    firsts, keys, offset = [], [], 0
    for s, _, _ in table:
        count = s.size // G
        firsts.append(offset + G * rng.permutation(count))  # the stream's steps, shuffled
        keys.append((np.arange(count) + rng.random()) / count)  # systematic sampling
        offset += s.size
    all_s, all_e, all_b = _concat(table)
    firsts = np.concatenate(firsts)[np.argsort(np.concatenate(keys), kind="stable")]
    if drop_last and firsts.size >= A:
        firsts = firsts[:firsts.size - firsts.size % A]
    rows = (firsts[:, None] + np.arange(G)).ravel()
    return all_s[rows], all_e[rows], all_b[rows], n_split


def _concat(parts):
    parts = [p for p in parts if p[0].size] or [tuple(np.zeros(0, np.int64) for _ in range(3))]
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))


# ---------------------------------------------------------------------------------- validation
def _check_int(name, value, low):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise BucketoptError(f"{name} must be an integer >= {low}; got {value!r}.")
    value = int(value)
    if value < low:
        raise BucketoptError(f"{name} must be an integer >= {low}; got {value}.")
    return value


def _check_bool(name, value):
    if not isinstance(value, (bool, np.bool_)):
        raise BucketoptError(f"{name} must be True or False; got {value!r}.")
    return bool(value)


def _fingerprint(lengths, edges, **config) -> str:
    digest = hashlib.sha256()
    digest.update(np.ascontiguousarray(lengths, dtype=np.int64).tobytes())
    digest.update(np.ascontiguousarray(edges, dtype=np.int64).tobytes())
    digest.update(json.dumps(config, sort_keys=True).encode())
    return digest.hexdigest()[:16]
