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
from ..validate import (
    check_fields,
    shown,
    state_bool,
    state_fields,
    state_int,
    state_list,
    state_optional,
)
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
            "held": _digest(self.buckets, self.tail),
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
    def resumed(cls, batcher, state, held=None):
        """The pass of ``state``, its buffered items read again from the stream (``held``: read
        by index at load where the source has random access; else on the way from the oldest
        buffered item, or from the start, to the position) and its reader at the position."""
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
        if held is not None:  # read and checked at load (random access)
            items, reader = held, open_at(batcher.stream, p.position)
        else:
            items, reader = _reopen(batcher, [i for _, _, i, _ in entries], p.position)
            for _, _, i, n in entries:
                _check_length(batcher, i, items[i], n)
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


def _digest(buckets, tail) -> list:
    """[items, sum of their indices, sum of their lengths] over the buffer and the tail: saved
    with the state, so that an item edited out of it, or into it, is refused at load."""
    entries = [(e[0], e[-1]) for bucket in buckets for e in bucket]
    if tail is not None:
        entries += [(e[0], e[-1]) for step in tail for batch in step for e in batch]
    return [len(entries), sum(i for i, _ in entries), sum(n for _, n in entries)]


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


def _pair(top: int):
    """[index in the stream, length]: both integers, the length in [1, top]."""
    index, length = state_int(), state_int(1, top)

    def check(value, name):
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            raise BucketoptError(f"state field `{name}` must be [index in the stream, length]; "
                                 f"got {shown(value)}.", param="state")
        return [index(value[0], name + "[0]"), length(value[1], name + "[1]")]
    return check


def _gauss(value, name):
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (float, int, np.floating)) \
            or not np.isfinite(float(value)):
        raise BucketoptError(f"state field `{name}` must be None or a finite number; got "
                             f"{shown(value)}.", param="state")
    return float(value)


def _nonempty(inner):
    def check(value, name):
        value = inner(value, name)
        if not value:
            raise BucketoptError(f"state field `{name}` must not be empty.", param="state")
        return value
    return check


# The Mersenne Twister's state (random.getstate()): 624 words of 32 bits and the index in them.
_MT_WORDS = 624
_STATS = {key: (state_int(), 0) for key in vars(StreamStats())}


def _schema(batcher) -> dict:
    """The fields of a StreamBatcher state (``Pass.state``), each with its checker."""
    top = int(batcher.edges[-1])
    pair = _pair(top)
    word = state_int(0, 2**32 - 1)
    rng = state_list(lambda v, n: v, length=3)
    return {
        "seed": state_int(), "boundaries": state_list(state_int(1), most=batcher.edges.size + 1),
        "token_budget": state_int(1), "epoch": state_int(), "position": state_int(),
        "done": state_bool(),
        "buffer": state_list(state_list(pair), length=len(batcher.edges)),
        "tail": state_optional(state_list(state_list(_nonempty(state_list(pair))))),
        "rng": lambda value, name: _check_rng(rng(value, name), name, word),
        "stats": state_fields({}, optional=_STATS, extra=False),
    }


def _check_rng(value, name, word):
    version = state_int(3, 3)(value[0], name + "[0]")
    internal = state_list(word, length=_MT_WORDS + 1)(value[1], name + "[1]")
    if internal[-1] > _MT_WORDS:
        raise BucketoptError(f"state field `{name}[1][{_MT_WORDS}]` must be an integer in "
                             f"[0, {_MT_WORDS}]; got {internal[-1]}.", param="state")
    gauss = _gauss(value[2], name + "[2]")
    try:
        random.Random().setstate((version, tuple(internal), gauss))
    except (TypeError, ValueError, OverflowError) as err:
        raise BucketoptError(f"state field `{name}` is not a random state: {shown(str(err))}.",
                             param="state") from None
    return [version, internal, gauss]


def check_state(batcher, state) -> dict:
    """The state, validated against the batcher (one clear error otherwise), in time linear in
    its size: every field's type and range (:func:`_schema`), then how the fields fit together
    (every buffered item read before the position, in its bucket, held once; the statistics'
    item count at the position; a finished pass holding nothing; a stream with a length at
    least as long as the position). A state that loads iterates to the end."""
    if not isinstance(state, Mapping):
        raise BucketoptError("state must be a dict saved by StreamBatcher.state_dict() "
                             f"(version {STATE_VERSION}); got {shown(state)}.", param="state")
    version = state.get("version")
    if isinstance(version, (bool, np.bool_)) or not isinstance(version, (int, np.integer)) \
            or version != STATE_VERSION:
        raise BucketoptError("state must be a dict saved by StreamBatcher.state_dict() "
                             f"(version {STATE_VERSION}); its version is {shown(version)}.",
                             param="state")
    fields = check_fields(state, _schema(batcher), optional={
        "world_size": (state_optional(state_int(1)), None),
        "buffer_size": (state_optional(state_int(1)), None),
        "held": (state_list(state_int(0, 2**126), length=3), None)})  # older states lack it
    for key, mine in (("boundaries", [int(e) for e in batcher.edges]),
                      ("token_budget", int(batcher.token_budget)), ("seed", int(batcher.seed))):
        if fields[key] != mine:
            raise BucketoptError(f"the state was saved with {key}={shown(fields[key])}; this "
                                 f"batcher has {key}={shown(mine)}: resume with the same {key}.",
                                 param="state")
    position, buffer, tail = fields["position"], fields["buffer"], fields["tail"]
    stats = fields["stats"]
    if stats["items"] != position:
        raise BucketoptError(f"state field `stats.items` ({stats['items']}) must equal "
                             f"`position` ({position}): the items read.", param="state")
    if random_access(batcher.stream) and position > len(batcher.stream):
        raise BucketoptError(f"state field `position` ({position:,}) is past the end of the "
                             f"stream ({len(batcher.stream):,} items): it is not the stream the "
                             "state was saved from.", param="state")
    ended = tail is not None or fields["done"]
    if ended and random_access(batcher.stream) and position != len(batcher.stream):
        raise BucketoptError(f"state fields `tail` and `done` say the stream has ended, but "
                             f"`position` ({position:,}) is not its end ({len(batcher.stream):,} "
                             "items).", param="state")
    if ended and any(buffer):
        raise BucketoptError("state field `buffer` must be empty once the stream has ended "
                             "(`tail` set or `done`).", param="state")
    if fields["done"] and tail != []:
        raise BucketoptError(f"state field `tail` must be [] once the pass is `done`; got "
                             f"{shown(tail)}.", param="state")
    held = [i for bucket in buffer for i, _ in bucket]
    if tail is not None:
        held += [i for step in tail for batch in step for i, _ in batch]
    if len(set(held)) != len(held) or any(not i < position for i in held):
        raise BucketoptError("state field `buffer` must hold one list per bucket of distinct "
                             "items read before its position.", param="state")
    edges = [int(e) for e in batcher.edges]
    if any(bisect.bisect_left(edges, n) != k for k, bucket in enumerate(buffer)
           for _, n in bucket):
        raise BucketoptError("state field `buffer` holds an item outside its bucket.",
                             param="state")
    digest = _digest(buffer, tail)
    if fields["held"] is not None and fields["held"] != digest:
        raise BucketoptError(f"state field `held` ({shown(fields['held'])}: items, sum of "
                             f"their indices and of their lengths) does not match `buffer` and "
                             f"`tail` ({shown(digest)}): the state was edited or corrupted.",
                             param="state")
    fields["held"] = digest
    return {"version": STATE_VERSION, **fields}


def read_held(batcher, state) -> dict | None:
    """index -> item for every item a checked ``state`` holds, read by index and checked
    against its saved length now (at load, not mid-pass) where the stream has random access;
    None for other streams (they are read again when the pass resumes)."""
    if not random_access(batcher.stream):
        return None
    entries = [e for bucket in state["buffer"] for e in bucket]
    if state["tail"] is not None:
        entries += [e for step in state["tail"] for batch in step for e in batch]
    items = {}
    for i, n in entries:
        items[i] = batcher.stream[i]
        _check_length(batcher, i, items[i], n)
    return items


def _check_length(batcher, index, item, saved):
    got = batcher.length(item)
    if got != saved:
        raise BucketoptError(
            f"stream item {index} has length {shown(got)}, but the state saved length {saved}: "
            "it is not the stream the state was saved from (or not in the same order).",
            param="state")
