"""Streamed data: boundaries planned on a sample, with a bound; online batching in a bounded buffer.

For an ``IterableDataset`` or a corpus too large to index there is no array of lengths to plan
an epoch on. Two pieces replace it:

- :func:`plan_from_sample` solves the boundaries on a sample of the lengths (e.g.
  :func:`sample_lengths`, a reservoir sample of the stream) and bounds what planning on a
  sample costs, from the Dvoretzky-Kiefer-Wolfowitz inequality: with probability at least
  ``confidence``, the sample's CDF is within ``eps = sqrt(ln(2 / (1 - confidence)) / (2 n))`` of
  the stream's everywhere. For any function ``g`` of the length, ``|E[g] - E_n[g]| <= eps TV(g)``
  (integrate by parts; ``TV`` = total variation over the lengths), which bounds the padded tokens
  per sample under edge padding (``g = edge(x) - x``), the computed tokens (``g = edge(x)``), and
  so the stream's edge-padding fraction; padding each batch to its longest sample never pads
  more, so the upper end bounds that too. The same ``eps`` bounds the share of the stream longer
  than the sample's longest (which the plan cannot place without ``max_length``).
- :class:`StreamBatcher` batches online, as Lhotse's dynamic bucketing does: items fill a buffer
  of at most ``buffer_size``; each is put in its bucket; when the buffer is full, a bucket holding
  a whole micro-step (``world_size`` batches of ``floor(token_budget / b_k)`` samples) is chosen
  at random (weighted by the micro-steps it holds) and released. Every rank reads the same stream
  with the same seed and keeps batch ``rank`` of each micro-step, so every rank gets the same
  number of batches by construction; at the end the leftovers are split (or, without enough
  samples, the last fewer-than-``world_size`` batches dropped and counted) to whole micro-steps.
  ``state_dict()`` / ``load_state_dict()`` resume a pass mid-epoch at any world size: the state
  holds the buffer (item indices and lengths), not the stream (:mod:`.stream_state`), and a
  source with random access or ``iter_from`` is not read again from its start
  (:mod:`.stream_sources`).
"""

from __future__ import annotations

import bisect
import copy
import itertools
import math
import random
from dataclasses import dataclass, field

import numpy as np

from ..data.histogram import Histogram, validate_lengths
from ..errors import BucketoptError
from ..solution import batch_sizes_for, check_boundaries
from ..validate import INT64_MAX, check_int, check_token_budget, shown
from .ranks import RankedSampler, _check_bool
from .stream_sources import check_source
from .stream_state import Pass, StreamStats, check_state, read_held

__all__ = ["SamplePlan", "StreamBatcher", "dkw_epsilon", "plan_from_sample", "sample_lengths"]


def dkw_epsilon(n, confidence=0.95) -> float:
    """The DKW band half-width: ``P(sup |F_n - F| > eps) <= 1 - confidence`` for ``n`` draws."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise BucketoptError(f"n must be an integer >= 1; got {shown(n)}.", param="n")
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) \
            or not 0 < confidence < 1:
        raise BucketoptError(f"confidence must be a number in (0, 1); got {shown(confidence)}.",
                             param="confidence")
    return math.sqrt(math.log(2.0 / (1.0 - confidence)) / (2.0 * int(n)))


@dataclass(frozen=True)
class SamplePlan:
    """Boundaries solved on a sample, and what planning on a sample may cost.

    Attributes
    ----------
    boundaries : tuple of int
    sample_size : int
    confidence, epsilon : float
        The DKW band: with probability >= ``confidence`` every CDF value is within ``epsilon``.
    padding_fraction_sample : float
        Edge-padding fraction of ``boundaries`` on the sample.
    padding_fraction_bound : (float, float)
        The stream's edge-padding fraction lies in this interval (with ``confidence``); with
        dynamic padding (each batch to its longest) the stream pads at most the upper end.
    padded_per_sample_bound : float
        ``|E[pad] - E_n[pad]|``: padded tokens per sample, stream against sample, at most this.
    regret_per_sample_bound : float or None
        Padded tokens per sample that the sample's optimum may lose against the stream's
        optimum over the same ``k``: ``2 epsilon`` x the largest total variation. Edge padding
        only (``pad="edge"``; None otherwise).
    overflow_share_bound : float
        Share of the stream that may be longer than ``boundaries[-1]`` (0 when ``max_length``
        set the last edge).
    solution : bucketopt.Solution
        The solve on the sample.
    """

    boundaries: tuple
    sample_size: int
    confidence: float
    epsilon: float
    padding_fraction_sample: float
    padding_fraction_bound: tuple
    padded_per_sample_bound: float
    regret_per_sample_bound: float
    overflow_share_bound: float
    solution: object = field(repr=False, compare=False)

    def to_dict(self) -> dict:
        return {"boundaries": list(self.boundaries), "sample_size": self.sample_size,
                "confidence": self.confidence, "epsilon": self.epsilon,
                "padding_fraction_sample": self.padding_fraction_sample,
                "padding_fraction_bound": list(self.padding_fraction_bound),
                "padded_per_sample_bound": self.padded_per_sample_bound,
                "regret_per_sample_bound": self.regret_per_sample_bound,
                "overflow_share_bound": self.overflow_share_bound}


def edge_padding_bound(sample, boundaries, *, epsilon):
    """(sample fraction, (low, high), padded-per-sample bound) for fixed ``boundaries``."""
    sample = validate_lengths(sample)
    edges = np.asarray(boundaries, dtype=np.int64)
    top = int(edges[-1])
    grid = np.arange(1, top + 1)
    edge_of = edges[np.searchsorted(edges, grid, side="left")]
    pad = edge_of - grid  # g(x) = edge(x) - x on the integers 1..top
    tv_pad = float(np.abs(np.diff(pad)).sum())
    tv_edge = float(np.abs(np.diff(edge_of)).sum())
    per = edges[np.searchsorted(edges, sample, side="left")]
    mean_pad = float((per - sample).mean())
    mean_edge = float(per.mean())
    dp, de = epsilon * tv_pad, epsilon * tv_edge
    low = max(0.0, mean_pad - dp) / (mean_edge + de)
    high = min(1.0, (mean_pad + dp) / max(mean_edge - de, 1e-300))
    return mean_pad / mean_edge, (float(low), float(min(high, 1.0))), dp, top


def plan_from_sample(sample, k, *, token_budget, confidence=0.95, max_length=None, pad="batch",
                     **solve_kwargs) -> SamplePlan:
    """Solve boundaries on a sample of a stream's lengths and bound the cost of the sample.

    Parameters
    ----------
    sample : array-like of int
        Lengths drawn uniformly from the stream (:func:`sample_lengths`).
    k : int
        Most buckets.
    token_budget : int
    confidence : float
        Of the DKW band (default 0.95).
    max_length : int, optional
        The longest length the stream may hold (e.g. the truncation length): the last edge
        becomes ``max_length``, so nothing overflows. Default: the sample's longest.
    pad : {"batch", "edge"}
        Objective of the solve (the bounds are on edge padding, which bounds batch padding).
    solve_kwargs
        Passed to :func:`bucketopt.solve`.

    Examples
    --------
    >>> import numpy as np
    >>> stream = np.random.default_rng(0).integers(10, 500, 100_000)
    >>> plan = plan_from_sample(stream[:5_000], 4, token_budget=4_000)
    >>> low, high = plan.padding_fraction_bound
    >>> low <= plan.padding_fraction_sample <= high
    True
    """
    from ..solver import solve

    sample = validate_lengths(sample, name="sample", param="sample")
    eps = dkw_epsilon(sample.size, confidence)
    solve_lengths = sample
    if max_length is not None:
        if isinstance(max_length, bool) or not isinstance(max_length, (int, np.integer)) \
                or max_length < int(sample.max()):
            raise BucketoptError(f"max_length must be an integer >= the sample's longest length "
                                 f"({int(sample.max())}); got {shown(max_length)}.",
                                 param="max_length")
        max_length = int(max_length)
    solution = solve(solve_lengths, k, token_budget=token_budget, pad=pad, **solve_kwargs)
    edges = list(solution.boundaries)
    if max_length is not None and edges[-1] < max_length:
        edges[-1] = max_length  # room for the stream's longest, unseen in the sample
        batch_sizes_for(np.asarray(edges), check_token_budget(token_budget))  # still fits?
    frac, bound, per_sample, top = edge_padding_bound(sample, edges, epsilon=eps)
    # any boundaries with last edge `top`: TV(edge(x) - x) <= 2 (top - 1); the sample's optimum
    # is the edge-padding optimum on the sample only when solved for edge padding
    regret = 2.0 * eps * 2.0 * (top - 1) if pad == "edge" else None
    overflow = 0.0 if max_length is not None else min(1.0, eps)
    return SamplePlan(tuple(int(e) for e in edges), int(sample.size), float(confidence),
                      float(eps), float(frac), bound, float(per_sample), regret,
                      float(overflow), solution)


def sample_lengths(stream, size, *, length=len, seed=0) -> np.ndarray:
    """A uniform sample (without replacement) of ``size`` lengths from an iterable of items of
    unknown count: reservoir sampling (Li's algorithm L), one pass, memory ``size``.

    ``length(item)`` gives an item's length (default ``len``; pass ``length=int`` for a stream of
    lengths).
    """
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
        raise BucketoptError(f"size must be an integer >= 1; got {shown(size)}.", param="size")
    size = int(size)
    rng = random.Random(int(np.random.SeedSequence([int(seed), 7]).generate_state(1)[0]))
    it = iter(stream)
    reservoir = [int(length(item)) for item in itertools.islice(it, size)]
    if not reservoir:
        raise BucketoptError("stream is empty: there is nothing to sample.", param="stream")
    if len(reservoir) == size:
        w = math.exp(math.log(rng.random()) / size)
        while True:
            skip = math.floor(math.log(rng.random()) / math.log(1.0 - w))
            item = next(itertools.islice(it, skip, None), _END)
            if item is _END:
                break
            reservoir[rng.randrange(size)] = int(length(item))
            w *= math.exp(math.log(rng.random()) / size)
    return validate_lengths(reservoir, name="sample")


_END = object()


def _pick(ready, rng):
    """A bucket holding whole micro-steps, at random, weighted by how many it holds."""
    keys = sorted(ready)
    return rng.choices(keys, weights=[ready[k] for k in keys])[0]


class StreamBatcher(RankedSampler):
    """Batches of a stream, online, under the token budget, for one data-parallel rank.

    Parameters
    ----------
    stream : iterable
        Re-iterable (a list, a ``datasets.IterableDataset``, a generator factory wrapped by an
        object with ``__iter__``): every epoch iterates it once, on every rank, and yields the
        same items in the same order every time.
    boundaries : sequence of int
        Inclusive upper edges (e.g. :func:`plan_from_sample` ``.boundaries``). A longer item is an
        error (set ``max_length`` when planning).
    token_budget : int
        Bucket ``k`` batches hold ``floor(token_budget / b_k)`` items, so a batch never holds more
        than ``token_budget`` padded tokens.
    length : callable
        ``length(item)`` -> int (default ``len``).
    buffer_size : int, optional
        Most items held at once (default: ``max(10_000, 2 x the minimum)``); at least the minimum
        that guarantees progress, ``sum_k (world_size * B_k - 1) + 1``.
    seed, rank, world_size : int
    drop_last : bool
        Drop the leftover batches that do not fill a micro-step instead of splitting batches.
    batch_sizes : list of int, optional
        One batch size per bucket instead of ``floor(token_budget / b_k)`` (e.g. a plan's, from
        a memory model); each must fit the token budget.

    Iterating yields lists of items (this rank's batches); :attr:`stats` describes the pass.
    :meth:`state_dict` / :meth:`load_state_dict` resume a pass mid-epoch, at any world size
    (:mod:`bucketopt.training.stream_sources` says how each kind of source is resumed).

    Examples
    --------
    >>> items = list(range(40))
    >>> size = dict(length=lambda i: 1 + i % 4, token_budget=8, buffer_size=10)
    >>> one = StreamBatcher(items, [4], **size)
    >>> batches = iter(one)
    >>> seen = [i for _ in range(3) for i in next(batches)]
    >>> state = one.state_dict()          # JSON-ready; it grows with the buffer, not the stream
    >>> two = StreamBatcher(items, [4], world_size=2, **size)
    >>> two.load_state_dict(state)        # killed after 3 batches, resumed on 2 ranks
    >>> seen += [i for step in two.micro_steps() for batch in step for i in batch]
    >>> sorted(seen) == items
    True
    """

    def __init__(self, stream, boundaries, *, token_budget, length=len, buffer_size=None,
                 seed=0, rank=0, world_size=1, drop_last=False, batch_sizes=None):
        self.token_budget = check_token_budget(token_budget)
        if self.token_budget is None:
            raise BucketoptError("token_budget is required: batches are built under it.",
                                 param="token_budget")
        edges = validate_lengths(boundaries, name="boundaries", param="boundaries")
        self.edges = check_boundaries(edges, Histogram.from_lengths(edges[-1:]))
        if batch_sizes is None:
            self.batch_sizes = batch_sizes_for(self.edges, self.token_budget)
        else:
            from .sampler import _check_batch_sizes

            batch_sizes_for(self.edges, self.token_budget)  # every edge within the budget
            self.batch_sizes = _check_batch_sizes(batch_sizes, self.edges, self.token_budget)
        self._init_ranks(seed=seed, rank=rank, world_size=world_size)
        self.drop_last = _check_bool("drop_last", drop_last)
        if not callable(length):
            raise BucketoptError(f"length must be a callable item -> int; got {shown(length)}.",
                                 param="length")
        self.length = length
        self.minimum_buffer = int((self.world_size * self.batch_sizes - 1).sum() + 1)
        if buffer_size is None:
            buffer_size = max(10_000, 2 * self.minimum_buffer)
        self.buffer_size = check_int(buffer_size, "buffer_size", low=1, high=INT64_MAX)
        if self.buffer_size < self.minimum_buffer:
            raise BucketoptError(
                f"buffer_size must be at least {self.minimum_buffer} (sum over buckets of "
                f"world_size x batch size - 1, plus 1) so that a full buffer always holds a whole "
                f"micro-step of one bucket; got {self.buffer_size}.", param="buffer_size")
        self.stream = check_source(stream)
        self.stats = StreamStats()
        self._pass = None  # the pass under way (or the last one): what state_dict() saves
        self._resume = None  # a loaded state, for the next pass of its epoch
        self._held = None  # its held items, when read at load (random access)

    @classmethod
    def from_plan(cls, plan, stream, *, length=len, lengths=None, rank=0, world_size=None,
                  seed=0, allow_other_lengths=False, **overrides) -> StreamBatcher:
        """The batcher a plan describes (:mod:`bucketopt.plan`): its boundaries, batch sizes
        and token budget (a plan whose batch sizes came from a memory model alone runs under
        the largest batch's tokens, ``max(B_k x b_k)``); ``world_size`` defaults to the plan's.

        What is checked: a stream holds its lengths only as it runs, so the plan's fingerprint
        is checked before the pass only when ``lengths`` (every length of the stream, in any
        order) is given, as :meth:`BucketBatchSampler.from_plan` does; otherwise an item longer
        than the plan's last boundary stops the pass with an error, as always. The batcher
        releases one bucket per micro-step (the plan's ``sync_buckets`` does not apply) and
        applies no ``max_length`` policy: truncate the stream as the plan says. A plan with
        packed rows (``packing`` other than "fixed" or "greedy") is refused. ``overrides``:
        ``buffer_size``, ``drop_last``, or a plan setting to replace.

        Examples
        --------
        >>> import bucketopt
        >>> lengths = [1 + i % 4 for i in range(40)]
        >>> plan = bucketopt.solve(lengths, 2, token_budget=8).to_plan()
        >>> batcher = StreamBatcher.from_plan(plan, list(range(40)), length=lambda i: 1 + i % 4,
        ...                                   lengths=lengths, buffer_size=10)
        >>> sorted(i for batch in batcher for i in batch) == list(range(40))
        True
        """
        from ..plan import check_lengths, load_plan

        plan = load_plan(plan)
        if plan["kind"] == "2d":  # bins of pairs: length(item) gives (input, output)
            from ..pairs.sampling import stream_bins

            if lengths is not None:
                check_lengths(plan, lengths, allow_other_lengths=allow_other_lengths)
            length, edges, sizes, budget = stream_bins(plan, length)
            kwargs = dict(token_budget=budget, batch_sizes=sizes)
            kwargs.update(overrides)
            return cls(stream, edges, length=length, seed=seed, rank=rank,
                       world_size=plan["world_size"] if world_size is None else world_size,
                       **kwargs)
        if plan["packing"] not in ("fixed", "greedy"):
            raise BucketoptError(f"StreamBatcher batches padded micro-batches; the plan packs "
                                 f"rows (packing={shown(plan['packing'])}): use "
                                 "BucketBatchSampler.from_plan.", param="plan")
        if lengths is not None:
            check_lengths(plan, lengths, allow_other_lengths=allow_other_lengths)
        budget = plan["token_budget"]
        if budget is None:  # batch sizes from a memory model alone
            budget = max(b * e for b, e in zip(plan["batch_sizes"], plan["boundaries"]))
        kwargs = dict(token_budget=budget, batch_sizes=plan["batch_sizes"])
        kwargs.update(overrides)
        if "token_budget" in overrides and "batch_sizes" not in overrides:
            kwargs["batch_sizes"] = None  # the budget given sets them
        return cls(stream, kwargs.pop("boundaries", plan["boundaries"]), length=length,
                   seed=seed, rank=rank,
                   world_size=plan["world_size"] if world_size is None else world_size,
                   **kwargs)

    def __iter__(self):
        for step in self.micro_steps():
            yield step[self.rank]

    def micro_steps(self):
        """Every micro-step of the pass: ``world_size`` batches (lists of items), rank ``r``'s
        at index ``r``. After a :meth:`load_state_dict`, the pass of that epoch goes on where
        the state was saved."""
        G, sizes, edges = self.world_size, self.batch_sizes, self.edges
        p = self._pass = self._start()
        stats = self.stats = p.stats
        need = [G * int(b) for b in sizes]
        buckets = p.buckets
        ready = {k: len(b) // need[k] for k, b in enumerate(buckets) if len(b) >= need[k]}
        buffered = sum(len(b) for b in buckets)
        top = int(edges[-1])
        edge_list = [int(e) for e in edges]
        if p.tail is None:
            for index, item in p.reader:
                n = self.length(item)
                if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
                    raise BucketoptError(f"length(item) must be an integer >= 1"
                                         f"; got {shown(n)} for "
                                         f"item {index}.")
                if n > top:
                    raise BucketoptError(
                        f"stream item {index} has length {n}, above the last boundary {top}: "
                        "plan with max_length= (plan_from_sample) or truncate the stream.",
                        param="max_length")
                k = bisect.bisect_left(edge_list, n)
                bucket = buckets[k]
                bucket.append((index, item, int(n)))
                p.position = stats.items = index + 1
                buffered += 1
                if len(bucket) % need[k] == 0:
                    ready[k] = len(bucket) // need[k]
                stats.max_buffered = max(stats.max_buffered, buffered)
                while buffered >= self.buffer_size:  # full: a bucket holds a whole micro-step
                    k = _pick(ready, p.rng)
                    buffered -= need[k]
                    yield self._release(k, buckets, ready, need, sizes, p.rng)
            while ready:  # the stream ended: release the whole micro-steps left
                k = _pick(ready, p.rng)
                yield self._release(k, buckets, ready, need, sizes, p.rng)
            p.tail = self._tail(buckets, sizes, p.rng)
        while p.tail:
            yield [self._count(batch) for batch in p.tail.pop(0)]
        p.done = True

    # ------------------------------------------------------------------------- resuming
    def state_dict(self) -> dict:
        """The state of the pass under way, JSON-ready, for :meth:`load_state_dict`.

        It holds the epoch, the stream position (items read), every buffered item as
        ``[index in the stream, length]`` (so its size grows with the buffer, not the stream),
        the leftover batches once the stream has ended, the random state, and the pass's
        statistics. Saved on any rank after the same number of batches, it is the same state
        (the rank is not part of it). Items in flight elsewhere (a DataLoader's prefetch) are
        not known to the batcher: save the state of the batches you trained on.
        """
        if self._resume is not None and self._resume["epoch"] == self.epoch:
            return copy.deepcopy(self._resume)
        p = self._pass
        if p is None or p.epoch != self.epoch:
            p = Pass.fresh(self)
        return p.state(self)

    def load_state_dict(self, state) -> None:
        """Resume from :meth:`state_dict`: the next pass (of the state's epoch, which becomes
        :attr:`epoch`) goes on where it was saved, on any rank and at any world size.

        The boundaries, token budget and seed must be the state's (the message names the one
        that differs); ``world_size``, ``rank``, ``buffer_size`` and ``drop_last`` may change.
        At the same world size and buffer size the pass goes on exactly as it would have; at
        another, the buffered items are released in micro-steps of the new size. Either way
        every item of the epoch is batched exactly once over the saved and the resumed part
        (as in one pass: except leftovers too few to split into a whole micro-step, counted in
        ``stats.dropped``).
        """
        self._resume = check_state(self, state)
        self._held = read_held(self, self._resume)
        self._epoch = self._resume["epoch"]

    def _start(self):
        state, self._resume = self._resume, None
        held, self._held = self._held, None
        if state is None or state["epoch"] != self.epoch:
            return Pass.fresh(self, reader=True)
        return Pass.resumed(self, state, held)

    # ------------------------------------------------------------------------------- helpers
    def _release(self, k, buckets, ready, need, sizes, rng):
        bucket = buckets[k]
        chosen = []
        for _ in range(need[k]):  # a random whole micro-step out of the bucket
            i = rng.randrange(len(bucket))
            bucket[i], bucket[-1] = bucket[-1], bucket[i]
            chosen.append(bucket.pop())
        ready[k] -= 1
        if not ready[k]:
            del ready[k]
        B = int(sizes[k])
        step = [chosen[r * B:(r + 1) * B] for r in range(self.world_size)]
        return [self._count(batch) for batch in step]

    def _count(self, batch):
        stats = self.stats
        lens = [n for _, _, n in batch]
        stats.batches += 1
        stats.real_tokens += sum(lens)
        stats.padded_tokens += len(lens) * max(lens) - sum(lens)
        return [item for _, item, _ in batch]

    def _tail(self, buckets, sizes, rng) -> list:
        """The leftovers (less than a micro-step per bucket, at the world size that ran when
        the stream ended) as whole micro-steps, still to release; the buckets are emptied."""
        G = self.world_size
        batches = []
        for k, bucket in enumerate(buckets):
            rng.shuffle(bucket)
            B = int(sizes[k])
            batches += [bucket[i:i + B] for i in range(0, len(bucket), B)]
            bucket.clear()
        extra = -len(batches) % G
        slack = sum(len(b) - 1 for b in batches)
        if extra and not self.drop_last and extra <= slack:
            for _ in range(extra):  # split the largest in two: same bucket, under the budget
                batches.sort(key=len)
                big = batches.pop()
                half = (len(big) + 1) // 2
                batches += [big[:half], big[half:]]
            self.stats.split_batches += extra
        # micro-steps of neighbouring buckets, largest batches first; drop what cannot fill one
        batches.sort(key=lambda b: (-max(n for _, _, n in b), -len(b)))
        whole = len(batches) - len(batches) % G
        self.stats.dropped += sum(len(b) for b in batches[whole:])
        return [batches[first:first + G] for first in range(0, whole, G)]
