"""Planning one epoch of :class:`bucketopt.BucketBatchSampler`: shuffle, pack, lay out over ranks.

Kept apart from ``sampler.py`` (the public class, its state and resume logic). Everything here is
a pure function of the sampler's configuration, the samples to plan and a seeded generator, so
every rank builds the same plan without talking to the others.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from ..errors import BucketoptError


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
    segments : tuple of (world_size, grad_accum, position)
        Empty for a whole epoch. After an elastic resume: the earlier layouts of this epoch and
        how many batches per rank each had consumed; the plan then holds only the rest.
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
    segments: tuple = ()

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
        if rank is not None:
            from ..validate import check_int

            rank = check_int(rank, "rank", low=0, high=self.world_size - 1)
        ids = range(self.n_batches) if rank is None else range(rank, self.n_batches,
                                                                 self.world_size)
        return [self.order[self.starts[i]:self.stops[i]] for i in ids]

    def indices_from(self, first: int) -> np.ndarray:
        """Dataset indices of global batches ``first ..`` (the samples still to come)."""
        from ._sim_kernels import place_batches

        sizes = self.stops - self.starts
        if first >= sizes.size:
            return np.zeros(0, dtype=np.int64)
        return place_batches(self.order, self.starts, sizes,
                             np.arange(first, sizes.size, dtype=np.int64))

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
            "segments": [list(s) for s in self.segments],
        }


def build_plan(sampler, epoch: int, rng, *, world_size: int, grad_accum: int, members=None,
               segments=()) -> EpochPlan:
    """Plan ``members`` (dataset indices; None = every sample) over ``world_size`` ranks."""
    G, A = world_size, grad_accum
    laid = pack_and_lay_out(sampler, rng, G, A, members, segments, _pack)
    if laid is None:
        return empty_plan(epoch, G, A, segments)
    order, starts, stops, buckets, natural, split, n = laid
    kept = int((stops - starts).sum())
    return EpochPlan(epoch=epoch, world_size=G, grad_accum=A, order=order, starts=starts,
                     stops=stops, buckets=buckets, natural_batches=int(natural),
                     split_batches=int(split), dropped=n - kept,
                     dropped_batches=int(natural + split - starts.size),
                     mixed_steps=mixed_steps(buckets, G), segments=tuple(segments))


def pack_and_lay_out(sampler, rng, G, A, members, segments, pack):
    """``members`` grouped by bucket, cut by ``pack`` (batches or rows) and laid out over the
    ranks: (order, starts, stops, buckets, natural count, split count, n), or None when empty."""
    grouped, counts = grouped_members(sampler, members)
    n = int(grouped.size)
    if n == 0:
        return None
    order, starts, stops, buckets = pack(sampler, rng, grouped, counts)
    natural = starts.size
    starts, stops, buckets, split = lay_out(sampler, starts, stops, buckets, G, A, rng, n,
                                            segments)
    return order, starts, stops, buckets, natural, split, n


def grouped_members(sampler, members):
    """``members`` (None = every sample) grouped by bucket, and the count of each bucket."""
    if members is None:
        return sampler._members, sampler._bucket_counts
    members = np.sort(np.asarray(members, dtype=np.int64))
    of = sampler._bucket_of[members]
    return members[np.argsort(of, kind="stable")], np.bincount(of, minlength=sampler.edges.size)


def empty_plan(epoch, G, A, segments) -> EpochPlan:
    empty = np.zeros(0, dtype=np.int64)
    return EpochPlan(epoch, G, A, empty, empty, empty, empty, 0, 0, 0, 0, 0, tuple(segments))


def lay_out(sampler, starts, stops, buckets, G, A, rng, n, segments):
    """The batches (or rows) over the ranks as ``sync_buckets`` asks: (starts, stops, buckets,
    split)."""
    what = "the rest of the epoch" if segments else None
    layout = _plan_synced if sampler.sync_buckets is True else _plan_unsynced
    return layout(starts, stops, buckets, G, A, sampler.drop_last, rng, n, sampler, what)


def mixed_steps(buckets, G) -> int:
    """Steps whose G batches come from more than one bucket."""
    steps = buckets.size // G
    if not steps:
        return 0
    grid = buckets[:steps * G].reshape(steps, G)
    return int(np.count_nonzero(grid.min(axis=1) != grid.max(axis=1)))


CHUNK = 1 << 20  # samples per step of the greedy packing (bounded temporaries)


def _pack(sampler, rng, grouped, counts):
    """Shuffle inside buckets and cut batches: (order, starts, stops, buckets), bucket by bucket.

    One copy of the indices (int32 while they fit, shuffled in place: the same permutation
    ``grouped[lo:hi][rng.permutation(hi - lo)]`` draws) and per-batch arrays; greedy packing
    reads the lengths a chunk at a time."""
    n = grouped.size
    order = np.array(grouped, dtype=np.int32 if n <= np.iinfo(np.int32).max else np.int64)
    offsets = np.r_[0, np.cumsum(counts)]
    filled = np.flatnonzero(counts)
    for k in filled:
        rng.shuffle(order[offsets[k]:offsets[k + 1]])
    if sampler.packing == "fixed":
        parts = [np.arange(offsets[k], offsets[k + 1], sampler.batch_sizes[k], dtype=np.int64)
                 for k in filled]
    else:
        from ._sim_kernels import greedy_batches

        budget = np.int64(sampler.token_budget)
        parts = []
        for k in filled:  # greedy batches never cross a bucket: a fresh stream per bucket
            sizes, state = [], (np.int64(0),) * 3
            for lo in range(offsets[k], offsets[k + 1], CHUNK):
                chunk = sampler.lengths[order[lo:min(lo + CHUNK, offsets[k + 1])]]
                done, _, _, *state = greedy_batches(chunk, budget, *state)
                sizes.append(done)
            sizes.append(np.array([state[0]], dtype=np.int64))  # the open batch (count >= 1)
            sizes = np.concatenate(sizes)
            parts.append(offsets[k] + np.cumsum(sizes) - sizes)
    starts = np.concatenate(parts).astype(np.int64)
    stops = np.r_[starts[1:], n].astype(np.int64)
    buckets = (np.searchsorted(offsets, starts, side="right") - 1).astype(np.int64)
    return order, starts, stops, buckets


def infeasible(sampler, n, batches, G, what=None):
    if what:
        return BucketoptError(
            f"cannot resume at world_size={G}: {what} ({n} samples, up to {batches} batches "
            f"under token_budget={sampler.token_budget}) cannot give each of {G} ranks the same "
            "number of batches with every sample exactly once; resume on fewer ranks, or at the "
            "next epoch, or with drop_last=True.", param=None)
    return BucketoptError(
        f"cannot give each of world_size={G} ranks the same number of batches with every sample "
        f"exactly once: {n} samples make up to {batches} batches under token_budget="
        f"{sampler.token_budget} and splitting cannot reach the next multiple of {G}; pass "
        "drop_last=True or use fewer ranks.", param=None)


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


def _plan_unsynced(starts, stops, buckets, G, A, drop_last, rng, n, sampler, what):
    """Batches of every bucket spread evenly over the epoch; rank r takes every G-th batch
    (``sync_buckets="step"``: sorted by bucket inside each optimizer step)."""
    natural = starts.size
    if not drop_last:
        # whole optimizer steps only where the epoch already fills one: never split an epoch
        # shorter than one optimizer step towards it (that would cut batches to single samples)
        extra = -natural % (G * A) if natural >= G * A else -natural % G
        if extra > _slack(starts, stops):
            extra = -natural % G
            if extra > _slack(starts, stops):
                raise infeasible(sampler, n, natural, G, what)
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


def _plan_synced(starts, stops, buckets, G, A, drop_last, rng, n, sampler, what):
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
                raise infeasible(sampler, n, natural, G, what)
            streams, pool, n_split = [], (starts, stops, buckets), 0
        pool = _split_largest(*pool, extra)
        n_split += extra
        # whole optimizer steps: split G more batches where the slack is largest, but only
        # where the epoch already fills one optimizer step (a shorter epoch stays short)
        steps = (sum(st[0].size for st in streams) + pool[0].size) // G
        for _ in range(-steps % A if steps >= A else 0):
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
