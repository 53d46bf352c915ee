"""The exact solver against brute force and the textbook DP, and its structural properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bucketopt
from bucketopt import BucketoptError
from bucketopt.data.histogram import Histogram
from bucketopt.objectives._edge_kernels import edge_layers
from bucketopt.solver import make_groups, share_windows

from . import naive

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
shares = st.sampled_from([0.0, 0.05, 0.1, 0.2, 0.25, 1 / 3, 0.4, 0.5, 0.6, 0.75, 1.0])


def solve_or_none(lengths, k, **kw):
    try:
        return bucketopt.solve(lengths, k, **kw)
    except BucketoptError as exc:
        assert "infeasible" in str(exc)
        return None


def check_convention(sol, lengths, k, align=1):
    b = sol.boundaries
    assert 1 <= len(b) <= k
    assert all(x < y for x, y in zip(b, b[1:]))
    assert b[-1] >= max(lengths)
    assert all(e % align == 0 for e in b)
    if align > 1:
        assert b[-1] == naive.candidate_last_edge(lengths, align)
    assert list(sol.counts) == naive.bucket_counts(lengths, b)
    assert sol.padded_tokens == naive.edge_padding(lengths, b)
    assert sol.real_tokens == sum(lengths)


def check_optimum(expected_padding, lengths, k, lo, hi, align):
    """solve() is infeasible exactly when the oracle is, and otherwise reaches its optimum."""
    sol = solve_or_none(lengths, k, min_share=lo, max_share=hi, align=align)
    if expected_padding is None:
        assert sol is None
        return
    assert sol is not None
    check_convention(sol, lengths, k, align)
    assert naive.shares_ok(lengths, sol.boundaries, lo, hi)
    assert sol.padded_tokens == expected_padding


@SETTINGS
@given(
    lengths=st.lists(st.integers(1, 12), min_size=1, max_size=10),
    k=st.integers(1, 4),
    lo=shares,
    hi=shares,
    align=st.integers(1, 4),
)
def test_equals_brute_force(lengths, k, lo, hi, align):
    lo, hi = min(lo, hi), max(lo, hi)
    expected = naive.brute_force_edge(lengths, k, min_share=lo, max_share=hi, align=align)
    check_optimum(None if expected is None else expected[0], lengths, k, lo, hi, align)


@SETTINGS
@given(
    lengths=st.lists(st.integers(1, 300), min_size=1, max_size=60),
    k=st.integers(1, 9),
    lo=shares,
    hi=shares,
    align=st.sampled_from([1, 1, 2, 8, 64]),
)
def test_equals_textbook_dp(lengths, k, lo, hi, align):
    lo, hi = min(lo, hi), max(lo, hi)
    expected = naive.textbook_dp_edge(lengths, k, min_share=lo, max_share=hi, align=align)
    check_optimum(expected, lengths, k, lo, hi, align)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 12), lo=shares, hi=shares,
       align=st.sampled_from([1, 4, 32]))
def test_divide_and_conquer_equals_quadratic_kernel(seed, k, lo, hi, align):
    """The shipped O(k m log m) kernel against the textbook O(k m^2) DP on larger histograms."""
    lo, hi = min(lo, hi), max(lo, hi)
    rng = np.random.default_rng(seed)
    lengths = np.rint(rng.lognormal(6, 0.8, size=rng.integers(50, 3000))).astype(np.int64) + 1
    groups = make_groups(Histogram.from_lengths(lengths), align)
    win_lo, win_hi = share_windows(groups, lo, hi)
    args = (groups.edges, groups.prefix_count, groups.prefix_tokens, win_lo, win_hi, k)
    _, best_fast = edge_layers(*args)
    _, best_slow = naive.edge_layers_quadratic(*args)
    np.testing.assert_array_equal(best_fast, best_slow)
    # both take the smallest optimal start, so the reachable backtracking states agree
    reachable = best_slow < 2**61
    assert np.array_equal(reachable, best_fast < 2**61)


@settings(max_examples=60, deadline=None)
@given(lengths=st.lists(st.integers(1, 500), min_size=2, max_size=80), k=st.integers(1, 10))
def test_padding_never_rises_with_k(lengths, k):
    a = bucketopt.solve(lengths, k).padded_tokens
    b = bucketopt.solve(lengths, k + 1).padded_tokens
    assert b <= a


@settings(max_examples=60, deadline=None)
@given(lengths=st.lists(st.integers(1, 500), min_size=2, max_size=80), k=st.integers(1, 8),
       seed=st.integers(0, 1000))
def test_shuffle_and_duplicate_invariance(lengths, k, seed):
    base = bucketopt.solve(lengths, k)
    shuffled = list(np.random.default_rng(seed).permutation(lengths))
    assert bucketopt.solve(shuffled, k) == base
    doubled = bucketopt.solve(lengths + lengths, k)
    assert doubled.boundaries == base.boundaries
    assert doubled.padded_tokens == 2 * base.padded_tokens


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.integers(1, 400), min_size=1, max_size=60),
       ks=st.lists(st.integers(1, 10), min_size=1, max_size=5))
def test_sweep_equals_individual_solves(lengths, ks):
    s = bucketopt.sweep(lengths, ks)
    assert list(s.ks) == sorted(set(ks))
    for k, sol in zip(s.ks, s.solutions):
        assert sol == bucketopt.solve(lengths, k)
    assert s.recommended_k in s.ks


def test_histogram_input_equals_raw_lengths():
    rng = np.random.default_rng(1)
    lengths = rng.integers(1, 1000, size=5000)
    hist = Histogram.from_lengths(lengths)
    assert bucketopt.solve(hist, 5) == bucketopt.solve(lengths, 5)


def test_token_budget_gives_batch_sizes_and_checks_edges():
    sol = bucketopt.solve([10, 20, 30, 40, 100], 3, token_budget=1000)
    assert sol.batch_sizes == tuple(1000 // b for b in sol.boundaries)
    with pytest.raises(BucketoptError, match="smaller than the longest sample"):
        bucketopt.solve([10, 20, 30, 40, 100], 3, token_budget=99)
    with pytest.raises(BucketoptError,
                       match=r"bucket edge 128 exceeds token_budget=100 \(align=64 rounds"):
        bucketopt.solve([10, 100], 2, token_budget=100, align=64)


def test_align_rounds_every_edge():
    sol = bucketopt.solve([3, 9, 17, 33, 65, 100], 4, align=8)
    assert all(b % 8 == 0 for b in sol.boundaries)
    assert sol.boundaries[-1] == 104


def test_infeasible_names_the_constraint():
    with pytest.raises(BucketoptError, match="max_share=0.1 needs at least 10 buckets but k=6"):
        bucketopt.solve(list(range(1, 101)), 6, max_share=0.1)
    with pytest.raises(BucketoptError, match="infeasible"):
        bucketopt.solve([5] * 10, 3, max_share=0.5)  # one length cannot be split


def test_evaluate_matches_naive_and_validates():
    lengths = [3, 4, 10, 11, 12, 50]
    ev = bucketopt.evaluate(lengths, [4, 12, 64])
    assert ev.padded_tokens == naive.edge_padding(lengths, [4, 12, 64])
    assert ev.counts == (2, 3, 1)
    with pytest.raises(BucketoptError, match="strictly increasing"):
        bucketopt.evaluate(lengths, [12, 4, 64])
    with pytest.raises(BucketoptError, match="below the longest sample"):
        bucketopt.evaluate(lengths, [4, 12])


def test_solution_to_dict_is_json_ready():
    import json

    sol = bucketopt.solve([3, 4, 10, 11, 12], 2, token_budget=48)
    d = json.loads(json.dumps(sol.to_dict()))
    for key in ("boundaries", "counts", "padded_tokens", "real_tokens", "padding_fraction",
                "batch_sizes"):
        assert key in d
    assert d["boundaries"] == [4, 12]
    assert d["batch_sizes"] == [12, 4]
