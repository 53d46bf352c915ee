"""The state of a :class:`~bucketopt.training.streaming.StreamBatcher` pass, and how a pass
resumes from it.

A state (``StreamBatcher.state_dict()``, JSON-ready) holds the epoch, the stream position (items
read), each buffered item as ``[index in the stream, length]``, the leftover micro-steps once the
stream has ended, the random state and the pass's statistics: its size grows with the buffer,
never with the stream. Resuming reads the buffered items again from the stream
(:mod:`bucketopt.training.stream_sources`: by index, by seeking to the oldest, or by reading from
the start) and checks each length against the state.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..errors import BucketoptError
from ..validate import INT64_MAX, check_int, shown
from .stream_sources import open_at, random_access, seekable

_END = object()


@dataclass
class StreamStats:
    """What one pass of a :class:`StreamBatcher` did (all ranks' batches; the same on every
    rank)."""

    items: int = 0
    batches: int = 0
    split_batches: int = 0
    dropped: int = 0
    max_buffered: int = 0
    real_tokens: int = 0
    padded_tokens: int = 0  # each batch padded to its longest sample

    @property
    def padding_fraction(self) -> float:
        total = self.real_tokens + self.padded_tokens
        return self.padded_tokens / total if total else 0.0


STATE_VERSION = 1


@dataclass
class Pass:
    """One pass over the stream: what :meth:`StreamBatcher.state_dict` saves, with the items."""

    epoch: int
    rng: random.Random
    buckets: list  # per bucket: (index in the stream, item, length)
    stats: StreamStats
    position: int = 0  # items read from the stream
    tail: list | None = None  # once the stream ended: the micro-steps still to release
    done: bool = False
    reader: object = None  # (index, item) from `position` on

    def state(self, batcher) -> dict:
        """The JSON-ready state of this pass (:meth:`StreamBatcher.state_dict`)."""
        version, internal, gauss = self.rng.getstate()
        return {
            "version": STATE_VERSION, "epoch": self.epoch, "seed": batcher.seed,
            "boundaries": [int(e) for e in batcher.edges],
            "token_budget": int(batcher.token_budget), "world_size": batcher.world_size,
            "buffer_size": batcher.buffer_size, "position": self.position, "done": self.done,
            "buffer": [[[i, n] for i, _, n in bucket] for bucket in self.buckets],
            "tail": None if self.tail is None
            else [[[[i, n] for i, _, n in batch] for batch in step] for step in self.tail],
            "rng": [version, list(internal), gauss],
            "stats": dict(vars(self.stats)),
        }

    @classmethod
    def fresh(cls, batcher, reader=False):
        state = np.random.SeedSequence([batcher.seed, batcher.epoch]).generate_state(1)[0]
        p = cls(batcher.epoch, random.Random(int(state)), [[] for _ in batcher.edges],
                StreamStats())
        if reader:
            p.reader = enumerate(open_at(batcher.stream, 0))
        return p

    @classmethod
    def resumed(cls, batcher, state):
        """The pass of ``state``, its buffered items read again from the stream (by index where
        the source has random access; else on the way from the oldest buffered item, or from
        the start, to the position) and its reader at the position."""
        rng = random.Random()
        version, internal, gauss = state["rng"]
        rng.setstate((version, tuple(internal), gauss))
        p = cls(state["epoch"], rng, [[] for _ in batcher.edges], StreamStats(**state["stats"]),
                state["position"], None, state["done"])
        entries = [(k, None, i, n) for k, bucket in enumerate(state["buffer"]) for i, n in bucket]
        if state["tail"] is not None:
            entries += [(-1, (s, b), i, n) for s, step in enumerate(state["tail"])
                        for b, batch in enumerate(step) for i, n in batch]
        batcher.stats = p.stats
        items, reader = _reopen(batcher, [i for _, _, i, _ in entries], p.position)
        for _, _, i, n in entries:
            got = batcher.length(items[i])
            if got != n:
                raise BucketoptError(
                    f"stream item {i} has length {shown(got)}, but the state saved length {n}: it "
                    "is not the stream the state was saved from (or not in the same order).",
                    param="state")
        tail = None
        if state["tail"] is not None:
            tail = [[[] for _ in step] for step in state["tail"]]
        for k, where, i, n in entries:
            if where is None:
                p.buckets[k].append((i, items[i], n))
            else:
                tail[where[0]][where[1]].append((i, items[i], n))
        if tail is not None and any(len(step) != batcher.world_size for step in tail):
            # another world size: the leftovers go back to their buckets and are dealt again
            for batch in (b for step in tail for b in step):
                for entry in batch:
                    p.buckets[bisect.bisect_left(batcher.edges.tolist(), entry[2])].append(entry)
            tail = batcher._tail(p.buckets, batcher.batch_sizes, rng)
        p.tail = tail
        if p.tail is None and not p.done:
            p.reader = enumerate(reader, start=p.position)
        return p


def _reopen(batcher, indices, position):
    """(index -> item for the buffered ``indices``, all below ``position``; an iterator over
    the stream's items from ``position`` on). Random access reads the items by index; a
    seekable source is read from the oldest buffered item, anything else from the start."""
    stream = batcher.stream
    if not indices or random_access(stream):
        return {i: stream[i] for i in indices}, open_at(stream, position)
    wanted = set(indices)
    start = min(wanted) if seekable(stream) else 0
    reader = open_at(stream, start)
    items = {}
    for index in range(start, position):
        item = next(reader, _END)
        if item is _END:
            raise BucketoptError(f"the stream ended after {index} items, before the state's "
                                 f"position {position}: it is not the stream the state was "
                                 "saved from.", param="state")
        if index in wanted:
            items[index] = item
    return items, reader


def check_state(batcher, state) -> dict:
    """The state, validated against the batcher (one clear error otherwise)."""
    if not isinstance(state, Mapping) or state.get("version") != STATE_VERSION:
        raise BucketoptError("state must be a dict saved by StreamBatcher.state_dict() "
                             f"(version {STATE_VERSION}).", param="state")
    for key, mine in (("boundaries", [int(e) for e in batcher.edges]),
                      ("token_budget", int(batcher.token_budget)), ("seed", batcher.seed)):
        if state.get(key) != mine:
            raise BucketoptError(f"the state was saved with {key}={shown(state.get(key))}; this "
                                 f"batcher has {key}={shown(mine)}: resume with the same {key}.",
                                 param="state")
    try:
        epoch = check_int(state["epoch"], "epoch", low=0, high=INT64_MAX)
        position = check_int(state["position"], "position", low=0, high=INT64_MAX)
        buffer = [[[int(i), int(n)] for i, n in bucket] for bucket in state["buffer"]]
        tail = None if state["tail"] is None else [
            [[[int(i), int(n)] for i, n in batch] for batch in step] for step in state["tail"]]
        version, internal, gauss = state["rng"]
        random.Random().setstate((version, tuple(internal), gauss))
        stats = StreamStats(**state["stats"])
        done = bool(state["done"])
    except BucketoptError:
        raise
    except (KeyError, TypeError, ValueError) as err:
        raise BucketoptError(f"state is not a StreamBatcher state: {shown(err)}.",
                             param="state") from None
    held = [i for bucket in buffer for i, _ in bucket]
    if tail is not None:
        held += [i for step in tail for batch in step for i, _ in batch]
    if len(buffer) != len(batcher.edges) or len(set(held)) != len(held) \
            or any(not 0 <= i < position for i in held):
        raise BucketoptError("state's buffer must hold one list per bucket of distinct items "
                             "read before its position.", param="state")
    edges = [int(e) for e in batcher.edges]
    if any(bisect.bisect_left(edges, n) != k or n < 1 for k, bucket in enumerate(buffer)
           for _, n in bucket):
        raise BucketoptError("state's buffer holds an item outside its bucket.", param="state")
    return {"epoch": epoch, "position": position, "buffer": buffer, "tail": tail,
            "rng": [version, list(internal), gauss], "stats": vars(stats).copy(), "done": done,
            **{k: state[k] for k in ("version", "seed", "boundaries", "token_budget")},
            "world_size": state.get("world_size"), "buffer_size": state.get("buffer_size")}
