"""simulate(): invariants of every strategy, the packing rules against tests/naive.py, and the
analytic expectation of pad="batch" against the mean of simulated epochs."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bucketopt
from bucketopt import BucketoptError, simulate
from bucketopt.datasets import seed_like
from bucketopt.training.epoch import epoch_from_batches
from bucketopt.training.simulate import plan_arrays

from . import naive

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def dataset(draw):
    lengths = draw(st.lists(st.integers(1, 300), min_size=1, max_size=120))
    budget = draw(st.integers(max(lengths), 4 * max(lengths) + 50))
    inner = draw(st.lists(st.integers(1, max(lengths)), max_size=4, unique=True))
    boundaries = [*sorted(set(inner) - {max(lengths)}), max(lengths)]
    return lengths, budget, boundaries


def split(order, starts):
    return np.split(order, starts[1:])


@SETTINGS
@given(dataset(), st.sampled_from(["sorted", "shuffle", "bucketed"]),
       st.sampled_from(["fixed", "greedy"]), st.integers(0, 5))
def test_every_sample_once_and_budget_kept(data, strategy, packing, epoch):
    lengths, budget, boundaries = data
    lengths = np.asarray(lengths)
    order, starts, buckets = plan_arrays(lengths, strategy, token_budget=budget,
                                        boundaries=boundaries, epoch=epoch, packing=packing)
    assert np.array_equal(np.sort(order), np.arange(lengths.size))
    batches = split(order, starts)
    e = simulate(lengths, strategy, token_budget=budget, boundaries=boundaries, epoch=epoch,
                 packing=packing)
    ref = epoch_from_batches(lengths, batches, strategy=strategy, buckets=buckets)
    assert np.array_equal(e.sizes, ref.sizes)
    assert np.array_equal(e.padded_lens, ref.padded_lens)
    assert np.array_equal(e.real_tokens, ref.real_tokens)
    assert e.total_real_tokens == int(lengths.sum())
    assert np.all(e.sizes * e.padded_lens <= budget)
    if strategy == "bucketed":
        edges = np.asarray(boundaries)
        for b, k in zip(batches, buckets):
            assert np.all(np.searchsorted(edges, lengths[b], side="left") == k)
        if packing == "fixed":
            # every batch of bucket k holds B_k samples except at most one
            for k in np.unique(buckets):
                sizes = e.sizes[buckets == k]
                full = budget // edges[k]
                assert np.all(sizes <= full) and np.sum(sizes < full) <= 1


@SETTINGS
@given(dataset(), st.integers(0, 3))
def test_greedy_rule_matches_the_naive_packer(data, seed):
    lengths, budget, _ = data
    lengths = np.asarray(lengths)
    for strategy in ("sorted", "shuffle"):
        order, starts, _ = plan_arrays(lengths, strategy, token_budget=budget, seed=seed)
        got = sorted(tuple(sorted(lengths[b].tolist())) for b in split(order, starts))
        if strategy == "sorted":
            # the batches (before their order is shuffled) are naive greedy packing of the sort
            ordered = np.sort(lengths)
            want = sorted(tuple(ordered[b].tolist())
                          for b in naive.greedy_pack(ordered.tolist(), budget))
            assert got == want
        for b in split(order, starts):
            # each batch is exactly one greedy batch of its own members in that order
            assert naive.greedy_pack(lengths[b].tolist(), budget) == [list(range(b.size))]


@SETTINGS
@given(st.lists(st.integers(1, 200), min_size=1, max_size=150), st.integers(0, 300))
def test_packed_is_best_fit_decreasing(lengths, extra):
    budget = max(lengths) + extra
    e = simulate(lengths, "best-fit", token_budget=budget)
    rows = naive.best_fit_decreasing(lengths, budget)
    assert e.n_batches == len(rows)
    assert sorted(e.real_tokens.tolist()) == sorted(sum(r) for r in rows)
    assert np.all(e.padded_lens == budget) and np.all(e.real_tokens <= budget)
    assert e.total_real_tokens == sum(lengths)


def test_packed_rows_per_batch():
    lengths = np.random.default_rng(1).integers(1, 100, size=500)
    e = simulate(lengths, "best-fit", token_budget=400, row_length=100)
    assert np.all(e.sizes <= 4) and np.all(e.padded_lens == 100)
    assert np.all(e.real_tokens <= e.sizes * 100)
    assert e.total_real_tokens == lengths.sum()


def test_packed_is_the_old_name_of_best_fit():
    # compare's "packed" row is greedy packing of a shuffle; simulate's strategy is best-fit
    # decreasing: one name, one meaning. The old name still works and says the new one.
    lengths = np.random.default_rng(2).integers(1, 100, size=300)
    new = simulate(lengths, "best-fit", token_budget=400, seed=3)
    with pytest.warns(DeprecationWarning, match='"best-fit"'):
        old = simulate(lengths, "packed", token_budget=400, seed=3)
    assert old.strategy == new.strategy == "best-fit"
    assert np.array_equal(old.real_tokens, new.real_tokens)
    assert np.array_equal(old.sizes, new.sizes)


def test_seeds_and_epochs():
    lengths = np.random.default_rng(0).integers(1, 500, size=3_000)
    kw = dict(token_budget=2_000, boundaries=[100, 250, 499])
    for strategy in ("shuffle", "bucketed"):
        a = plan_arrays(lengths, strategy, seed=3, epoch=1, **kw)[0]
        assert np.array_equal(a, plan_arrays(lengths, strategy, seed=3, epoch=1, **kw)[0])
        assert not np.array_equal(a, plan_arrays(lengths, strategy, seed=3, epoch=2, **kw)[0])
        assert not np.array_equal(a, plan_arrays(lengths, strategy, seed=4, epoch=1, **kw)[0])
    # sorted: the same batches every epoch, in another order
    s1 = plan_arrays(lengths, "sorted", epoch=1, token_budget=2_000)
    s2 = plan_arrays(lengths, "sorted", epoch=2, token_budget=2_000)
    as_sets = [sorted(map(tuple, (np.sort(b) for b in split(o, st_)))) for o, st_, _ in (s1, s2)]
    assert as_sets[0] == as_sets[1]


def test_edge_padding_pads_to_the_bucket_edge():
    lengths = np.random.default_rng(2).integers(1, 300, size=2_000)
    edges = [50, 120, 299]
    e = simulate(lengths, "bucketed", token_budget=1_200, boundaries=edges, pad="edge")
    assert np.array_equal(e.padded_lens, np.asarray(edges)[e.buckets])
    exact = bucketopt.evaluate(lengths, edges, token_budget=1_200, pad="edge")
    assert e.padded_tokens == exact.padded_tokens


def check_analytic(lengths, boundaries, budget, epochs=20):
    sol = bucketopt.evaluate(lengths, boundaries, token_budget=budget, pad="batch")
    sims = np.array([simulate(lengths, "bucketed", token_budget=budget, boundaries=boundaries,
                              epoch=e).padded_tokens for e in range(epochs)], dtype=float)
    mean = sims.mean()
    if sol.padded_tokens == 0:  # one length per bucket: nothing to pad, in every epoch
        assert np.all(sims == 0)
        return 0.0
    gap = abs(mean - sol.padded_tokens) / sol.padded_tokens
    # unbiased: within 5 standard errors (plus 1e-6 for events too rare for 20 epochs to
    # meet), and within the 0.5% the issue asks for
    assert abs(mean - sol.padded_tokens) <= (5 * sims.std(ddof=1) / np.sqrt(epochs)
                                             + 1e-6 * sol.padded_tokens)
    assert gap < 0.005
    return gap


GENERATED = {
    "lognormal": lambda rng: np.rint(rng.lognormal(6.5, 0.7, 60_000)) + 1,
    "uniform": lambda rng: rng.integers(1, 4_000, 60_000),
    "bimodal": lambda rng: np.r_[rng.normal(300, 40, 40_000), rng.normal(3_000, 300, 20_000)],
    "heavy_tail": lambda rng: np.minimum(rng.pareto(1.5, 60_000) * 100 + 20, 8_000),
    "few_distinct": lambda rng: rng.choice([64, 128, 200, 512, 1_000], 60_000),
}


@pytest.mark.parametrize("name", sorted(GENERATED))
@pytest.mark.parametrize("k", [3, 6])
def test_analytic_matches_simulation_on_generated_data(name, k):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    lengths = np.clip(np.rint(GENERATED[name](rng)), 1, 8_000).astype(np.int64)
    budget = 16_384
    for boundaries in (bucketopt.solve(lengths, k, token_budget=budget, pad="batch").boundaries,
                       bucketopt.solve(lengths, k, token_budget=budget).boundaries):
        check_analytic(lengths, boundaries, budget)


def test_analytic_matches_simulation_on_the_embedded_example():
    lengths = seed_like()
    best = bucketopt.solve(lengths, 6, token_budget=65_536, pad="batch")
    assert check_analytic(lengths, best.boundaries, 65_536) < 0.005


@pytest.mark.parametrize("call, match", [
    (lambda: simulate([1, 2], "zigzag", token_budget=4), "strategy"),
    (lambda: simulate([1, 2], "bucketed", token_budget=4), "boundaries"),
    (lambda: simulate([1, 9], "shuffle", token_budget=4), "token_budget"),
    (lambda: simulate([1, 2], "shuffle", token_budget=None), "token_budget"),
    (lambda: simulate([1, 2], "bucketed", token_budget=4, boundaries=[1, 2], packing="x"),
     "packing"),
    (lambda: simulate([1, 2], "bucketed", token_budget=4, boundaries=[1, 2], pad="x"), "pad"),
    (lambda: simulate([1, 2], "best-fit", token_budget=4, row_length=8), "row_length"),
    (lambda: simulate([1, 5], "best-fit", token_budget=8, row_length=4), "row_length"),
    (lambda: simulate([1, 2], "shuffle", token_budget=4, seed=-1), "seed"),
    (lambda: simulate([0, 2], "shuffle", token_budget=4), "positive"),
])
def test_bad_input_is_one_clear_error(call, match):
    with pytest.raises(BucketoptError, match=match):
        call()
