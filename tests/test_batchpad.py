"""pad="batch": the exact expected dynamic padding and the DP over it, against tests/naive.py."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bucketopt
from bucketopt import BucketoptError
from bucketopt.batchpad import expected_batch_padding, expected_padding_per_bucket
from bucketopt.datasets import seed_like
from bucketopt.groups import backtrack, make_groups, share_windows
from bucketopt.heuristics import RULES, rule_of_thumb
from bucketopt.histogram import Histogram
from bucketopt.objectives.batch import EXACT_CANDIDATES, batch_layers, candidate_grid

from . import naive

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
small_lengths = st.lists(st.integers(1, 40), min_size=1, max_size=9)


def rel(a, b) -> float:
    return abs(float(a) - float(b)) / max(abs(float(b)), 1e-300)


@SETTINGS
@given(st.lists(st.integers(1, 12), min_size=1, max_size=6), st.integers(1, 7))
def test_formula_equals_every_permutation(xs, size):
    # The model (each batch a uniform random subset, last one partial) against brute force.
    exact = naive.expected_bucket_padding_exact(xs, size)
    assert exact == naive.expected_bucket_padding_enumerated(xs, size)
    assert rel(expected_batch_padding(xs, size), exact) < 1e-12 or exact == 0


@SETTINGS
@given(st.lists(st.integers(1, 3000), min_size=1, max_size=400), st.integers(1, 500))
def test_expected_padding_matches_exact_fractions(xs, size):
    exact = naive.expected_bucket_padding_exact(xs, size)
    fast = expected_batch_padding(xs, size)
    assert abs(fast - float(exact)) <= 1e-9 * max(float(exact), 1.0)


@pytest.mark.parametrize("size", [1, 2, 3, 8, 15, 64, 301])
def test_expected_padding_large_bucket_to_1e9(size):
    # 30,000 samples with heavy duplication: the log-binomial table must stay accurate.
    rng = np.random.default_rng(size)
    xs = np.rint(rng.lognormal(6.5, 0.6, size=30_000)).astype(np.int64) + 1
    hist = Histogram.from_lengths(xs)
    from fractions import Fraction
    from math import comb

    n = hist.n
    q, r = divmod(n, size)
    cum = np.cumsum(hist.counts).tolist()

    def e_max(m):
        total, prev = 0, 0
        for v, c in zip(hist.values.tolist(), cum):
            total += v * (comb(c, m) - comb(prev, m))
            prev = c
        return Fraction(total, comb(n, m))

    exact = q * size * e_max(size) + (r * e_max(r) if r else 0) - hist.real_tokens
    fast = expected_padding_per_bucket(hist, [hist.max_length], [size])[0]
    assert rel(fast, exact) < 1e-9


@SETTINGS
@given(small_lengths, st.integers(1, 3), st.integers(40, 200),
       st.sampled_from([(0.0, 1.0), (0.2, 1.0), (0.0, 0.6), (0.25, 0.75)]))
def test_dp_equals_brute_force(lengths, k, budget, shares):
    min_share, max_share = shares
    best = naive.brute_force_batch(lengths, k, budget, min_share=min_share, max_share=max_share)
    try:
        sol = bucketopt.solve(lengths, k, token_budget=budget, pad="batch", min_share=min_share,
                              max_share=max_share)
    except BucketoptError as exc:
        assert "infeasible" in str(exc)
        assert best is None
        return
    assert best is not None
    assert abs(sol.padded_tokens - float(best[0])) <= 1e-9 * max(float(best[0]), 1.0)
    exact = naive.batch_padding_exact(lengths, sol.boundaries, budget)
    assert abs(sol.padded_tokens - float(exact)) <= 1e-9 * max(float(exact), 1.0)
    assert naive.shares_ok(lengths, sol.boundaries, min_share, max_share)
    assert list(sol.counts) == naive.bucket_counts(lengths, sol.boundaries)
    assert sol.batch_sizes == tuple(budget // b for b in sol.boundaries)


@SETTINGS
@given(st.lists(st.integers(1, 300), min_size=2, max_size=60), st.integers(1, 5),
       st.integers(1, 4))
def test_align_groups_and_evaluate_agree(lengths, k, align_pow):
    align = 2 ** align_pow
    budget = 4 * 320
    sol = bucketopt.solve(lengths, k, token_budget=budget, pad="batch", align=align)
    assert all(b % align == 0 for b in sol.boundaries)
    again = bucketopt.evaluate(lengths, sol.boundaries, token_budget=budget, pad="batch")
    assert rel(sol.padded_tokens, again.padded_tokens) < 1e-12 or again.padded_tokens == 0
    exact = naive.batch_padding_exact(lengths, sol.boundaries, budget)
    assert abs(sol.padded_tokens - float(exact)) <= 1e-9 * max(float(exact), 1.0)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 200), min_size=3, max_size=80), st.integers(0, 10**6))
def test_cost_never_rises_with_k_and_input_order_is_irrelevant(lengths, seed):
    sweep = bucketopt.sweep(lengths, [1, 2, 3, 4], token_budget=400, pad="batch")
    costs = [s.padded_tokens for s in sweep.solutions]
    assert all(b <= a + 1e-9 * max(a, 1.0) for a, b in zip(costs, costs[1:]))
    shuffled = np.random.default_rng(seed).permutation(lengths)
    again = bucketopt.solve(shuffled, 4, token_budget=400, pad="batch")
    assert again.boundaries == sweep.solutions[-1].boundaries


@pytest.mark.parametrize("shares", [(0.0, 1.0), (0.1, 0.3)])
def test_default_grid_within_a_tenth_of_a_percent_of_every_length(shares):
    # ~700 distinct lengths: above EXACT_CANDIDATES, so "auto" uses the grid + refinement;
    # "all" is the exact optimum over every distinct length.
    rng = np.random.default_rng(7)
    xs = np.r_[rng.lognormal(5.6, 0.5, 30_000), rng.uniform(20, 700, 5_000)]
    hist = Histogram.from_lengths(np.clip(np.rint(xs), 1, 700).astype(np.int64))
    assert hist.m > 2 * EXACT_CANDIDATES
    groups = make_groups(hist, 1)
    assert candidate_grid(groups, 6_000).size < groups.g / 2  # the grid really is coarser
    lo, hi = share_windows(groups, *shares)
    kmax = 6
    _, best_all = batch_layers(groups, kmax, token_budget=6_000, win_lo=lo, win_hi=hi,
                               candidates="all")
    opt, best_auto = batch_layers(groups, kmax, token_budget=6_000, win_lo=lo, win_hi=hi)
    _, best_grid = batch_layers(groups, kmax, token_budget=6_000, win_lo=lo, win_hi=hi,
                                candidates="grid")
    assert np.array_equal(np.isfinite(best_all), np.isfinite(best_auto))
    for k in range(1, kmax + 1):
        if not np.isfinite(best_all[k - 1]):
            continue
        assert best_all[k - 1] <= best_auto[k - 1] * (1 + 1e-12)
        assert best_auto[k - 1] <= best_grid[k - 1] * (1 + 1e-12)
        assert best_auto[k - 1] <= best_all[k - 1] * 1.001
        # the reported chain costs what best says
        edges = groups.edges[backtrack(opt, k, groups.g)]
        sol = bucketopt.evaluate(hist, edges, token_budget=6_000, pad="batch")
        assert rel(sol.padded_tokens, best_auto[k - 1]) < 1e-9
        assert all(shares[0] - 1e-9 <= x <= shares[1] + 1e-9 for x in sol.shares)


@pytest.fixture(scope="module")
def seed_hist():
    return Histogram.from_lengths(seed_like())


@pytest.mark.parametrize("k", [4, 6, 8, 12])
def test_embedded_example_batch_optimum_beats_rules_and_edge_optimum(seed_hist, k):
    budget = 65_536
    best = bucketopt.solve(seed_hist, k, token_budget=budget, pad="batch")
    edge_opt = bucketopt.solve(seed_hist, k, token_budget=budget, pad="edge")
    as_batch = bucketopt.evaluate(seed_hist, edge_opt.boundaries, token_budget=budget,
                                  pad="batch")
    assert best.padded_tokens < as_batch.padded_tokens
    for name in RULES:
        edges = rule_of_thumb(name, seed_hist, k, token_budget=budget)
        rule = bucketopt.evaluate(seed_hist, edges, token_budget=budget, pad="batch")
        assert best.padded_tokens < rule.padded_tokens, name


def test_errors_are_one_clear_line():
    with pytest.raises(BucketoptError, match="token_budget"):
        bucketopt.solve([1, 2, 3], 2, pad="batch")
    with pytest.raises(BucketoptError, match="token_budget"):
        bucketopt.evaluate([1, 2, 3], [3], pad="batch")
    with pytest.raises(BucketoptError, match="batch_size"):
        expected_batch_padding([1, 2, 3], 0)
    groups = make_groups(Histogram.from_lengths([1, 2, 3]), 1)
    lo, hi = share_windows(groups, 0.0, 1.0)
    with pytest.raises(BucketoptError, match="candidates"):
        batch_layers(groups, 2, token_budget=10, win_lo=lo, win_hi=hi, candidates="fine")
