"""Streamed data: the DKW bound of planning on a sample, reservoir sampling, online batching."""

from __future__ import annotations

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


@st.composite
def streams(draw):
    lengths = np.asarray(draw(st.lists(st.integers(1, 80), min_size=1, max_size=300)))
    top = int(lengths.max())
    inner = draw(st.lists(st.integers(1, max(1, top - 1)), max_size=4))
    edges = sorted({x for x in inner if x < top} | {top})
    budget = edges[-1] * draw(st.integers(1, 6))
    world = draw(st.integers(1, 8))
    sizes = budget // np.asarray(edges)
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
