"""bucketopt.training.packing: rows of documents under a capacity, against tests/naive.py, and the
guarantees of rank balancing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bucketopt import BucketoptError
from bucketopt.training.packing import _check_rows, balance_steps, pack_rows, row_stats, rows

from . import naive

SETTINGS = settings(max_examples=80, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def documents(draw):
    lengths = draw(st.lists(st.integers(1, 60), min_size=1, max_size=90))
    capacity = draw(st.integers(max(lengths), 3 * max(lengths) + 20))
    return lengths, capacity


def _check_partition(lengths, order, starts, capacity):
    order = np.asarray(order)
    assert order.dtype == np.int64 and starts.dtype == np.int64
    assert sorted(order.tolist()) == list(range(len(lengths)))  # every document exactly once
    assert starts[0] == 0 and np.all(np.diff(starts) > 0)  # no empty row
    tokens, attention = row_stats(lengths, order, starts)
    assert tokens.max() <= capacity
    for row, tok, att in zip(rows(order, starts), tokens, attention):
        assert tok == sum(lengths[i] for i in row)
        assert att == pytest.approx(sum(lengths[i] ** 2 for i in row), rel=1e-12)


@SETTINGS
@given(documents())
def test_greedy_is_the_reference(data):
    lengths, capacity = data
    order, starts = pack_rows(lengths, capacity)
    _check_partition(lengths, order, starts, capacity)
    assert rows(order, starts) == naive.greedy_rows(lengths, capacity)


@SETTINGS
@given(documents(), st.integers(1, 40))
def test_bfd_windows_is_the_reference(data, window):
    lengths, capacity = data
    order, starts = pack_rows(lengths, capacity, method="bfd", window=window)
    _check_partition(lengths, order, starts, capacity)
    assert rows(order, starts) == naive.bfd_window_rows(lengths, capacity, window)
    whole = rows(*pack_rows(lengths, capacity, method="bfd"))
    assert whole == naive.bfd_window_rows(lengths, capacity, len(lengths))
    # one window: the same row count as the whole-data best-fit decreasing of tests/naive.py
    assert len(whole) == len(naive.best_fit_decreasing(lengths, capacity))


@st.composite
def classes_of_documents(draw):
    """Many documents over few distinct lengths (whole runs of one length fill groups of rows),
    documents of the capacity itself and near it, and capacities up to 2**40."""
    capacity = draw(st.one_of(st.integers(1, 200), st.integers(1, 2**40)))
    values = draw(st.lists(st.one_of(st.integers(1, capacity),
                                     st.integers(max(1, capacity - 3), capacity),
                                     st.integers(1, max(1, capacity // 7))),
                           min_size=1, max_size=6))
    lengths = draw(st.lists(st.sampled_from(values), min_size=1, max_size=400))
    return lengths, capacity


@SETTINGS
@given(classes_of_documents(), st.integers(1, 500))
def test_bfd_by_length_class_is_the_one_at_a_time_reference(data, window):
    lengths, capacity = data
    for w in (window, None):
        order, starts = pack_rows(lengths, capacity, method="bfd", window=w)
        _check_rows(np.asarray(lengths, dtype=np.int64), order, starts, capacity)
        _check_partition(lengths, order, starts, capacity)
        expected = naive.bfd_window_rows(lengths, capacity, w or len(lengths))
        assert rows(order, starts) == expected
    # the whole data: best-fit decreasing's row count, never under ceil(tokens / capacity)
    assert starts.size == len(naive.best_fit_decreasing(lengths, capacity))
    assert starts.size >= -(-sum(lengths) // capacity)


def test_bfd_length_classes_by_sort_match_the_table(monkeypatch):
    from bucketopt.training import packing

    rng = np.random.default_rng(3)
    lengths = rng.integers(1, 5_000, 3_000)
    by_table = pack_rows(lengths, 9_000, method="bfd")
    assert packing.length_classes(lengths)[2].size == np.unique(lengths).size
    monkeypatch.setattr(packing, "CLASS_TABLE_SLOTS", 0)  # 4 n < 5,000: the sort path
    lengths_sorted_path = lengths * 10  # longest near 50,000 > 4 n: sorted, not tabled
    by_sort = pack_rows(lengths_sorted_path, 90_000, method="bfd")
    for got, want in zip(by_sort, by_table):
        assert np.array_equal(got, want)


def test_bfd_capacity_in_the_trillions_allocates_nothing_of_its_size():
    # lengths near 2**40: the classes come from a sort, the rows from the length classes
    lengths = [2**40, 2**39 + 1, 2**39 - 1, 3, 2**39 + 1, 2**38]
    order, starts = pack_rows(lengths, 2**40, method="bfd")
    assert rows(order, starts) == naive.bfd_window_rows(lengths, 2**40, len(lengths))
    assert starts.size == 3  # [2**40], [2**39 + 1, 2**39 - 1], [2**39 + 1, 2**38, 3]


def _step_max(weights, order, starts, g):
    loads = np.add.reduceat(np.asarray(weights, dtype=np.float64)[order], starts)
    bounds = np.r_[starts, len(order)]
    out = []
    for first in range(0, starts.size, g):
        members = set(order[bounds[first]:bounds[min(first + g, starts.size)]].tolist())
        out.append((loads[first:first + g].max(), members))
    return out


@SETTINGS
@given(documents(), st.integers(1, 9), st.booleans())
def test_balance_guarantees(data, world_size, cost_weights):
    lengths, capacity = data
    order, starts = pack_rows(lengths, capacity)
    d = np.asarray(lengths, dtype=np.float64)
    weights = 3.0 * d + 0.5 * d ** 2 if cost_weights else d ** 2
    new_order, new_starts = balance_steps(lengths, order, starts, world_size, capacity,
                                          weights=weights if cost_weights else None)
    _check_partition(lengths, new_order, new_starts, capacity)
    before = _step_max(weights, order, starts, world_size)
    after = _step_max(weights, new_order, new_starts, world_size)
    assert len(before) == len(after)
    for (old, old_docs), (new, new_docs) in zip(before, after):
        assert new_docs == old_docs  # a step keeps its documents
        assert new <= old  # never a heavier rank
    # full steps keep G rows; a last partial step is dealt over G rows or keeps its own
    full = starts.size // world_size * world_size
    assert new_starts.size - full in {0, world_size, starts.size - full}


def test_balance_evens_the_attention_of_a_step():
    # two rows of one long and one short document each: greedy leaves one rank with both longs
    lengths = [8, 8, 1, 1, 1, 1, 1, 1]
    order, starts = pack_rows(lengths, 16)
    assert rows(order, starts) == [[0, 1], [2, 3, 4, 5, 6, 7]]
    order, starts = balance_steps(lengths, order, starts, 2, 16)
    _, attention = row_stats(lengths, order, starts)
    assert attention.tolist() == [67.0, 67.0]


def test_balance_keeps_a_step_when_dealing_does_not_fit():
    # longest first: 7 | 6, then 3 beside 6 (lighter), 2 beside 7, and the last 2 fits nowhere
    lengths = [7, 3, 6, 2, 2]
    out = balance_steps(lengths, np.arange(5), np.array([0, 2]), 2, 10)
    assert rows(*out) == [[0, 1], [2, 3, 4]]
    # with room for it the same step is dealt, and its heaviest rank is lighter
    out = balance_steps(lengths, np.arange(5), np.array([0, 2]), 2, 11)
    assert rows(*out) != [[0, 1], [2, 3, 4]]
    assert row_stats(lengths, *out)[1].max() < 58


def test_seed_like_balance_reaches_the_mean():
    from bucketopt.datasets import seed_like

    lengths = seed_like()[::20]
    lengths = lengths[np.random.default_rng(0).permutation(lengths.size)]
    order, starts = pack_rows(lengths, 65_536)
    new = balance_steps(lengths, order, starts, 8, 65_536)
    full = starts.size // 8 * 8
    _, att = row_stats(lengths, order, starts)
    _, att_new = row_stats(lengths, *new)
    greedy = att[:full].reshape(-1, 8).max(axis=1).sum()
    balanced = att_new[:full].reshape(-1, 8).max(axis=1).sum()
    floor = att[:full].reshape(-1, 8).mean(axis=1).sum()
    assert balanced < greedy
    assert balanced - floor < 0.1 * (greedy - floor)


@pytest.mark.parametrize("call, words", [
    (lambda: pack_rows([3, 9], 8), "exceeds capacity=8"),
    (lambda: pack_rows([3, 0], 8), "`lengths` must be >= 1"),
    (lambda: pack_rows([[3]], 8), "one-dimensional"),
    (lambda: pack_rows([1.5], 8), "integers"),
    (lambda: pack_rows([3], 0), "`capacity`"),
    (lambda: pack_rows([3], 8, method="first"), "`method`"),
    (lambda: pack_rows([3], 8, window=2), "`window`"),
    (lambda: pack_rows([3], 8, method="bfd", window=0), "`window`"),
    (lambda: balance_steps([3, 4], [0, 0], [0], 2, 8), "permutation"),
    (lambda: balance_steps([3, 4], [0, 1], [1], 2, 8), "`starts`"),
    (lambda: balance_steps([3, 6], [0, 1], [0], 2, 8), "over capacity=8"),
    (lambda: balance_steps([3, 4], [0, 1], [0, 1], 0, 8), "`world_size`"),
    (lambda: balance_steps([3, 4], [0, 1], [0, 1], 2, 8, weights=[1.0]), "`weights`"),
])
def test_bad_input_is_one_clear_error(call, words):
    with pytest.raises(BucketoptError, match=words):
        call()


def test_empty_input():
    order, starts = pack_rows([], 8)
    assert order.size == 0 and starts.size == 0
    assert rows(order, starts) == []
    assert pack_rows([], 8, method="bfd")[1].size == 0
