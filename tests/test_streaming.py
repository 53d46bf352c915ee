"""Streamed data: the DKW bound of planning on a sample, reservoir sampling, online batching."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bucketopt import BucketoptError, evaluate
from bucketopt.datasets import seed_like
from bucketopt.training.streaming import (
    StreamBatcher,
    dkw_epsilon,
    plan_from_sample,
    sample_lengths,
)

SETTINGS = settings(max_examples=80, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def draw_plan(draw, longest, most, buckets, factor):
    """(lengths, boundaries, token budget, batch sizes) of a drawn stream and its plan."""
    lengths = np.asarray(draw(st.lists(st.integers(1, longest), min_size=1, max_size=most)))
    top = int(lengths.max())
    inner = draw(st.lists(st.integers(1, max(1, top - 1)), max_size=buckets - 1))
    edges = sorted({x for x in inner if x < top} | {top})
    budget = edges[-1] * draw(st.integers(1, factor))
    return lengths, edges, budget, budget // np.asarray(edges)


@st.composite
def streams(draw):
    lengths, edges, budget, sizes = draw_plan(draw, 80, 300, 5, 6)
    world = draw(st.integers(1, 8))
    minimum = int((world * sizes - 1).sum() + 1)
    return dict(lengths=lengths, boundaries=edges, token_budget=budget, world_size=world,
                buffer_size=minimum + draw(st.integers(0, 60)), drop_last=draw(st.booleans()),
                seed=draw(st.integers(0, 2**31)))


def run_ranks(cfg, epoch=0):
    lengths = cfg["lengths"]
    items = list(range(lengths.size))
    out, stats = [], None
    for rank in range(cfg["world_size"]):
        b = StreamBatcher(items, cfg["boundaries"], token_budget=cfg["token_budget"],
                          length=lambda i: int(lengths[i]), buffer_size=cfg["buffer_size"],
                          seed=cfg["seed"], rank=rank, world_size=cfg["world_size"],
                          drop_last=cfg["drop_last"])
        b.set_epoch(epoch)
        out.append(list(b))
        if stats is not None:
            assert b.stats == stats  # every rank made the same global plan
        stats = b.stats
    return out, stats


@SETTINGS
@given(streams())
def test_online_batches_equal_per_rank_within_budget_exactly_once(cfg):
    ranks, stats = run_ranks(cfg)
    lengths, edges, T = cfg["lengths"], np.asarray(cfg["boundaries"]), cfg["token_budget"]
    G = cfg["world_size"]
    assert len({len(r) for r in ranks}) == 1  # the same number of batches on every rank
    assert stats.max_buffered <= cfg["buffer_size"]  # memory bounded by the buffer
    seen = [i for r in ranks for b in r for i in b]
    assert len(seen) == len(set(seen))  # never twice
    assert stats.dropped == lengths.size - len(seen)
    biggest = int((T // edges).max())
    if not cfg["drop_last"]:
        # only where the leftovers cannot be split to whole micro-steps: fewer than G batches
        assert stats.dropped <= (G - 1) * biggest
        if stats.dropped:
            assert stats.split_batches == 0
    for r in ranks:
        for b in r:
            k = np.searchsorted(edges, lengths[b], side="left")
            assert np.unique(k).size == 1  # one bucket per batch
            assert len(b) <= T // edges[k[0]] and len(b) * lengths[b].max() <= T
    padded = sum(len(b) * int(lengths[b].max()) - int(lengths[b].sum()) for r in ranks for b in r)
    assert padded == stats.padded_tokens


def test_streamed_epochs_are_seeded():
    lengths = np.random.default_rng(0).integers(1, 200, 3000)
    cfg = dict(lengths=lengths, boundaries=[50, 100, 200], token_budget=800, world_size=4,
               buffer_size=300, drop_last=False, seed=5)
    a, _ = run_ranks(cfg, epoch=1)
    b, _ = run_ranks(cfg, epoch=1)
    c, _ = run_ranks(cfg, epoch=2)
    assert a == b and a != c
    flat = sorted(i for r in a for x in r for i in x)
    assert flat == list(range(lengths.size))


def test_stream_errors_name_the_parameter():
    with pytest.raises(BucketoptError, match=r"^buffer_size must be at least 29 "):
        StreamBatcher([5], [10, 20], token_budget=100, buffer_size=10, world_size=2)
    with pytest.raises(BucketoptError, match="token_budget is required"):
        StreamBatcher([5], [10], token_budget=None)
    with pytest.raises(BucketoptError, match="rank must be in"):
        StreamBatcher([5], [10], token_budget=100, rank=2, world_size=2)
    with pytest.raises(BucketoptError, match="stream must be iterable"):
        StreamBatcher(5, [10], token_budget=100)
    over = StreamBatcher([[1] * 5, [1] * 30], [10, 20], token_budget=100)
    with pytest.raises(BucketoptError, match="stream item 1 has length 30, above the last"):
        list(over)
    with pytest.raises(BucketoptError, match="length\\(item\\) must be an integer"):
        list(StreamBatcher([[]], [10], token_budget=100))


def test_dkw_epsilon_and_its_checks():
    assert dkw_epsilon(10_000, 0.95) == pytest.approx(math.sqrt(math.log(40) / 20_000))
    assert dkw_epsilon(40_000) == pytest.approx(dkw_epsilon(10_000) / 2)
    with pytest.raises(BucketoptError, match="confidence must be"):
        dkw_epsilon(10, 1.0)
    with pytest.raises(BucketoptError, match="n must be"):
        dkw_epsilon(0)


def naive_total_variation(edges):
    """sum |g(x + 1) - g(x)| for g(x) = edge(x) - x, by an explicit loop over the lengths."""
    def g(x):
        return next(e for e in edges if e >= x) - x

    return sum(abs(g(x + 1) - g(x)) for x in range(1, edges[-1]))


def test_planning_on_a_sample_bounds_the_stream():
    lengths = seed_like()
    for size, seed, pad in [(2_000, 0, "edge"), (10_000, 1, "batch"), (50_000, 2, "edge")]:
        sample = sample_lengths(lengths.tolist(), size, length=int, seed=seed)
        plan = plan_from_sample(sample, 6, token_budget=65536, max_length=8192, pad=pad)
        low, high = plan.padding_fraction_bound
        population = evaluate(lengths, plan.boundaries, pad="edge").padding_fraction
        assert low <= population <= high  # the stream's padding lies in the bound
        assert low <= plan.padding_fraction_sample <= high
        assert plan.boundaries[-1] == 8192 and plan.overflow_share_bound == 0
        assert plan.padded_per_sample_bound == pytest.approx(
            plan.epsilon * naive_total_variation(list(plan.boundaries)))
        assert (plan.regret_per_sample_bound is None) == (pad != "edge")
        padded = evaluate(lengths, plan.boundaries, pad="edge").padded_tokens / lengths.size
        on_sample = evaluate(sample, plan.boundaries, pad="edge").padded_tokens / sample.size
        assert abs(padded - on_sample) <= plan.padded_per_sample_bound
    widths = [plan_from_sample(sample_lengths(lengths.tolist(), n, length=int), 6,
                               token_budget=65536, pad="edge").epsilon for n in (1_000, 4_000)]
    assert widths[1] == pytest.approx(widths[0] / 2)  # the band narrows as 1 / sqrt(n)


def test_reservoir_sample_is_uniform_and_one_pass():
    population = range(100_000)
    consumed = []

    def stream():
        for i in population:
            consumed.append(i)
            yield i

    sample = sample_lengths(stream(), 2_000, length=lambda i: i + 1, seed=3)
    assert len(consumed) == 100_000 and np.unique(sample).size == 2_000  # no repeats
    # a uniform sample: its mean within 5 standard errors of the population's
    assert abs(sample.mean() - 50_000.5) < 5 * 28_867 / math.sqrt(2_000)
    assert (sample_lengths(range(10), 50, length=lambda i: i + 1) == np.arange(1, 11)).all()
    again = sample_lengths(range(100_000), 2_000, length=lambda i: i + 1, seed=3)
    assert (again == sample).all()


def test_released_micro_steps_hold_one_bucket():
    lengths = np.random.default_rng(4).integers(1, 300, 5000)
    edges = [40, 90, 160, 300]
    batcher = StreamBatcher(list(range(lengths.size)), edges, token_budget=1200,
                            length=lambda i: int(lengths[i]), world_size=4, buffer_size=500)
    steps = list(batcher.micro_steps())
    buckets = [np.searchsorted(edges, lengths[[i for b in s for i in b]], side="left")
               for s in steps]
    mixed = [k for k in buckets if np.unique(k).size > 1]
    assert len(mixed) < len(edges)  # only where the leftovers of neighbouring buckets meet
    assert len(steps) * 4 == batcher.stats.batches


# --- resuming mid-epoch: StreamBatcher.state_dict / load_state_dict ----------------------------
class Plain:
    """A re-iterable stream with neither random access nor seek: counts the items it yields."""

    def __init__(self, items):
        self.items, self.read = items, 0

    def __iter__(self):
        for item in self.items:
            self.read += 1
            yield item


class Seekable(Plain):
    """A stream that can start at an index (``iter_from``), like a Parquet reader by row group."""

    def __iter__(self):
        raise AssertionError("a seekable stream is resumed by iter_from, never from the start")

    def iter_from(self, start):
        self.starts = [*getattr(self, "starts", []), start]
        for item in self.items[start:]:
            self.read += 1
            yield item


class Indexed:
    """Random access (``len`` and ``[i]``): counts the items read by index."""

    def __init__(self, items):
        self.items, self.read = items, 0

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        self.read += 1
        return self.items[i]


SOURCES = {"plain": Plain, "seekable": Seekable, "indexed": Indexed}


@st.composite
def resumed_streams(draw):
    lengths, edges, budget, sizes = draw_plan(draw, 60, 250, 4, 5)
    before, after = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    minimum = max(int((g * sizes - 1).sum() + 1) for g in (before, after))
    return dict(lengths=lengths, boundaries=edges, token_budget=budget, before=before,
                after=after, buffer_size=minimum + draw(st.integers(0, 40)),
                drop_last=draw(st.booleans()), seed=draw(st.integers(0, 2**31)),
                source=draw(st.sampled_from(sorted(SOURCES))))


def make_batcher(cfg, stream, world_size, rank=0):
    lengths = cfg["lengths"]
    return StreamBatcher(stream, cfg["boundaries"], token_budget=cfg["token_budget"],
                         length=lambda i: int(lengths[i]), buffer_size=cfg["buffer_size"],
                         seed=cfg["seed"], world_size=world_size, rank=rank,
                         drop_last=cfg["drop_last"])


@SETTINGS
@given(resumed_streams(), st.data())
def test_a_stream_killed_anywhere_resumes_every_item_exactly_once(cfg, data):
    n = cfg["lengths"].size
    items = list(range(n))
    whole = make_batcher(cfg, items, cfg["before"])
    reference = list(whole.micro_steps())
    kill = data.draw(st.integers(0, len(reference)), label="kill after this many micro-steps")
    first = make_batcher(cfg, items, cfg["before"])
    steps = first.micro_steps()
    done = [next(steps) for _ in range(kill)]
    state = json.loads(json.dumps(first.state_dict()))  # JSON-ready
    held = sum(len(b) for b in state["buffer"]) + sum(
        len(batch) for step in state["tail"] or [] for batch in step)
    assert held <= cfg["buffer_size"]  # the state holds the buffer, not the stream
    source = SOURCES[cfg["source"]](items)
    again = make_batcher(cfg, source, cfg["after"], rank=cfg["after"] - 1)
    again.load_state_dict(state)
    rest = list(again.micro_steps())
    seen = [i for step in done + rest for batch in step for i in batch]
    assert len(seen) == len(set(seen))  # never twice
    assert len(seen) + again.stats.dropped == n  # every item once, but the counted drops
    assert again.stats.items == n
    lengths, edges, T = cfg["lengths"], np.asarray(cfg["boundaries"]), cfg["token_budget"]
    for step in rest:
        assert len(step) == cfg["after"]
        for batch in step:
            k = np.searchsorted(edges, lengths[batch], side="left")
            assert np.unique(k).size == 1 and len(batch) * lengths[batch].max() <= T
    if cfg["after"] == cfg["before"]:  # the same world size: the pass goes on as it would have
        assert done + rest == reference and again.stats == whole.stats
    # nothing read twice where the source can seek: the buffer by index, or its span
    buffered = [i for b in state["buffer"] for i, _ in b] + [
        i for step in state["tail"] or [] for batch in step for i, _ in batch]
    position, oldest = state["position"], min(buffered, default=state["position"])
    ended = state["tail"] is not None or state["done"]  # nothing left to read after them
    idle = ended and not buffered  # nothing to read at all
    if cfg["source"] == "indexed":  # the buffered items by index, then on from the position
        assert source.read == len(buffered) + n - position
    elif cfg["source"] == "seekable":  # from the oldest buffered item (or the position) on
        assert getattr(source, "starts", []) == ([] if idle else [oldest])
        assert source.read == (position if ended else n) - oldest
    else:  # read again from the start, but once
        assert source.read == (0 if idle else n)


def test_every_rank_saves_the_same_state():
    lengths = np.random.default_rng(6).integers(1, 200, 2_000)
    cfg = dict(lengths=lengths, boundaries=[50, 100, 200], token_budget=800, buffer_size=300,
               drop_last=False, seed=2)
    states = []
    for rank in range(3):
        b = make_batcher(cfg, list(range(lengths.size)), 3, rank)
        batches = iter(b)
        for _ in range(40):
            next(batches)
        states.append(b.state_dict())
    assert states[0] == states[1] == states[2]
    again = make_batcher(cfg, list(range(lengths.size)), 3)
    again.load_state_dict(states[1])
    assert again.state_dict() == states[1]  # a loaded state saves as itself before it runs


def test_state_grows_with_the_buffer_not_the_stream():
    sizes = []
    for n in (5_000, 50_000):
        lengths = np.random.default_rng(n).integers(1, 200, n)
        cfg = dict(lengths=lengths, boundaries=[50, 100, 200], token_budget=800,
                   buffer_size=300, drop_last=False, seed=0)
        b = make_batcher(cfg, list(range(n)), 2)
        steps = b.micro_steps()
        for _ in range(n // 20):  # about half of the stream
            next(steps)
        state = b.state_dict()
        assert state["position"] > n // 3
        sizes.append(len(json.dumps(state)))
    assert max(sizes) < 12_000 + 30 * 300  # the random state and one [index, length] per item
    assert sizes[1] < 1.5 * sizes[0]


def test_resume_then_next_epoch_and_a_finished_pass():
    lengths = np.random.default_rng(1).integers(1, 200, 1_000)
    cfg = dict(lengths=lengths, boundaries=[100, 200], token_budget=800, buffer_size=200,
               drop_last=False, seed=4)
    items = list(range(lengths.size))
    b = make_batcher(cfg, items, 2)
    b.set_epoch(3)
    steps = list(b.micro_steps())
    finished = b.state_dict()
    assert finished["done"] and finished["epoch"] == 3
    again = make_batcher(cfg, items, 2)
    again.load_state_dict(finished)
    assert again.epoch == 3 and list(again.micro_steps()) == []  # epoch 3 is over
    again.set_epoch(4)
    fresh = make_batcher(cfg, items, 2)
    fresh.set_epoch(4)
    assert list(again.micro_steps()) == list(fresh.micro_steps()) != steps


def test_bad_states_are_one_clear_error():
    lengths = np.random.default_rng(2).integers(1, 100, 500)
    cfg = dict(lengths=lengths, boundaries=[50, 100], token_budget=400, buffer_size=100,
               drop_last=False, seed=1)
    b = make_batcher(cfg, list(range(500)), 2)
    steps = b.micro_steps()
    for _ in range(10):
        next(steps)
    state = b.state_dict()
    other = StreamBatcher(list(range(500)), [50, 100], token_budget=200,
                          length=lambda i: int(lengths[i]), buffer_size=100)
    with pytest.raises(BucketoptError, match="token_budget=400; this batcher has token_budget"):
        other.load_state_dict(state)
    for broken, words in [({**state, "seed": 9}, "seed=9"), ({}, "version"),
                          ({**state, "position": -1}, "`position` must be"),
                          ({**state, "buffer": [[[0, 60]], []]}, "outside its bucket"),
                          ({**state, "buffer": [[[999, 10]], []]}, "before its position"),
                          ({**state, "rng": [3, [1, 2], None]}, r"`rng\[1\]` must be a list")]:
        with pytest.raises(BucketoptError, match=words):
            make_batcher(cfg, list(range(500)), 2).load_state_dict(broken)
    changed = make_batcher(cfg, Plain(list(range(1, 501))), 2)  # another stream
    changed.load_state_dict(state)
    with pytest.raises(BucketoptError, match="not the stream the state was saved from"):
        list(changed.micro_steps())
    short = make_batcher(cfg, Plain(list(range(5))), 2)
    short.load_state_dict(state)
    with pytest.raises(BucketoptError, match="the stream ended after 5 items"):
        list(short.micro_steps())


def test_parquet_and_hugging_face_sources_resume_where_they_stopped(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bucketopt.training.stream_sources import ArrowRows

    lengths = np.random.default_rng(8).integers(1, 300, 3_000)
    pq.write_table(pa.table({"id": np.arange(lengths.size), "seq_len": lengths}),
                   tmp_path / "train.parquet", row_group_size=500)
    sources = [ArrowRows(tmp_path / "train.parquet")]
    datasets = pytest.importorskip("datasets")
    table = datasets.Dataset.from_dict({"id": np.arange(lengths.size), "seq_len": lengths})
    sources += [table, table.to_iterable_dataset(num_shards=3)]
    for source in sources:
        def make(world, source=source):
            return StreamBatcher(source, [100, 200, 300], token_budget=1200,
                                 length=lambda item: int(item["seq_len"]), buffer_size=400,
                                 world_size=world, seed=3)

        first = make(3)
        steps = first.micro_steps()
        seen = [row["id"] for _ in range(150) for batch in next(steps) for row in batch]
        again = make(2)
        again.load_state_dict(json.loads(json.dumps(first.state_dict())))
        seen += [row["id"] for step in again.micro_steps() for batch in step for row in batch]
        assert len(seen) == len(set(seen)) and len(seen) + again.stats.dropped == lengths.size
    with pytest.raises(BucketoptError, match="wrap it in"):
        StreamBatcher(pa.table({"x": [1]}), [10], token_budget=10)
