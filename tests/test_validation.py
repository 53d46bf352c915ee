"""Bad input: a BucketoptError (a ValueError) with one clear line; never a traceback or a hang."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import bucketopt
from bucketopt import BucketoptError
from bucketopt.data.histogram import Histogram, validate_lengths


@pytest.mark.parametrize(
    ("lengths", "message"),
    [
        ([], "empty"),
        ([3, float("nan")], "finite"),
        ([3, float("inf")], "finite"),
        ([3, 0], "positive"),
        ([3, -5], "positive"),
        ([3, 2.5], "integers"),
        ([[1, 2, 3], [4, 5, 6]], "1-D"),  # (n, 2) is pairs (2-D bins: tests/test_pairs.py)
        (["a", "b"], "integers"),
        ([True, False], "booleans"),
        (np.array([1, None], dtype=object), "numeric"),
        ("123", "string"),
        ([2**70], "int64"),
    ],
)
def test_bad_lengths(lengths, message):
    with pytest.raises(BucketoptError, match=message) as info:
        bucketopt.solve(lengths, 2)
    assert isinstance(info.value, ValueError)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"k": 0}, "`k` must be an integer >= 1; got 0"),
        ({"k": 2.5}, "`k` must be an integer"),
        ({"k": True}, "`k` must be an integer"),
        ({"k": 2, "align": 0}, "`align` must be an integer >= 1"),
        ({"k": 2, "align": 10**21}, "`align` must be at most 2\\*\\*60"),
        ({"k": 2, "min_share": -0.1}, "`min_share` must be a number in"),
        ({"k": 2, "max_share": 1.5}, "`max_share` must be a number in"),
        ({"k": 2, "min_share": 0.6, "max_share": 0.5}, "must not exceed"),
        ({"k": 2, "min_share": "x"}, "`min_share` must be a number"),
        ({"k": 2, "token_budget": 0}, "`token_budget` must be an integer >= 1"),
        ({"k": 2, "token_budget": 2**70}, "`token_budget` must be at most 2"),
        ({"k": 2, "align": 1e30}, "`align` must be at most 2"),
        ({"k": 2, "token_budget": 5}, "token_budget=5 is smaller than the longest sample"),
        ({"k": 2, "pad": "nope"}, "`pad` must be one of"),
        ({"k": 2, "objective": "nope"}, "`objective` must be one of"),
    ],
)
def test_bad_options(kwargs, message):
    k = kwargs.pop("k")
    with pytest.raises(BucketoptError, match=message):
        bucketopt.solve([3, 7, 9, 20], k, **kwargs)


def test_huge_length_is_solved_without_a_dense_array():
    lengths = [5, 17, 10**12]
    sol = bucketopt.solve(lengths, 2)
    assert sol.boundaries == (17, 10**12)
    assert Histogram.from_lengths(lengths).m == 3


def test_token_overflow_is_refused_cleanly():
    with pytest.raises(BucketoptError, match="2\\*\\*60"):
        bucketopt.solve(np.full(3000, 10**15), 2)
    with pytest.raises(BucketoptError, match="2\\*\\*60"):
        Histogram(np.array([1, 10**12]), np.array([1, 10**7]))


def test_huge_k_is_capped_not_allocated():
    sol = bucketopt.solve([1, 2, 3], 10**12)
    assert sol.boundaries == (1, 2, 3)


def test_validate_lengths_accepts_integral_floats_and_unsigned():
    assert validate_lengths(np.array([3.0, 4.0])).dtype == np.int64
    assert validate_lengths(np.array([3, 4], dtype=np.uint16)).tolist() == [3, 4]
    assert validate_lengths(range(1, 4)).tolist() == [1, 2, 3]


def test_histogram_merge_and_validation():
    a = Histogram.from_lengths([1, 2, 2, 5])
    b = Histogram.from_lengths([2, 7])
    merged = a.merge(b)
    assert merged == Histogram.from_lengths([1, 2, 2, 5, 2, 7])
    assert (a + b) == merged
    with pytest.raises(BucketoptError, match="same size"):
        Histogram(np.array([1, 2]), np.array([1]))
    with pytest.raises(BucketoptError, match="positive"):
        Histogram(np.array([0, 2]), np.array([1, 1]))
    with pytest.raises(BucketoptError, match=">= 0"):
        Histogram(np.array([1, 2]), np.array([1, -1]))
    unsorted = Histogram(np.array([5, 2, 5]), np.array([1, 2, 3]))
    assert unsorted.values.tolist() == [2, 5] and unsorted.counts.tolist() == [2, 4]


def test_histogram_percentile_matches_numpy():
    rng = np.random.default_rng(3)
    lengths = rng.integers(1, 300, size=1001)
    hist = Histogram.from_lengths(lengths)
    q = [0, 10, 25, 50, 75, 90, 99, 100]
    np.testing.assert_allclose(hist.percentile(q), np.percentile(lengths, q))


def test_pickled_npy_is_never_loaded(tmp_path):
    path = tmp_path / "evil.npy"
    np.save(path, np.array([1, {"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(BucketoptError, match="never unpickles"):
        bucketopt.load_lengths(path)
    raw = tmp_path / "raw.pkl"
    raw.write_bytes(pickle.dumps([1, 2, 3]))
    with pytest.raises(BucketoptError):
        bucketopt.load_lengths(raw)


def test_sweep_refuses_a_huge_range_of_k():
    with pytest.raises(BucketoptError, match="more than 4,097"):
        bucketopt.sweep([3, 7, 9, 20], range(1, 10**9))


def test_histogram_percentile_out_of_range_is_a_clear_error():
    h = Histogram([1, 2, 3], [1, 1, 1])
    for q in (101, -1, float("nan"), "x", [50, 200]):
        with pytest.raises(BucketoptError, match="percentiles must be numbers in"):
            h.percentile(q)


def test_huge_histogram_is_not_expanded_by_simulate_or_compare():
    h = Histogram([1, 2], [2**40, 2**40])
    with pytest.raises(BucketoptError, match="too large to expand"):
        bucketopt.simulate(h, "shuffle", token_budget=4)
    with pytest.raises(BucketoptError, match="too large to expand"):
        bucketopt.compare(h, 2, token_budget=4)
