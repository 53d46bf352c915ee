"""pad="batch": the exact expected dynamic padding and the DP over it, against tests/naive.py."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import bucketopt
from bucketopt import BucketoptError
from bucketopt.data.histogram import Histogram
from bucketopt.datasets import seed_like
from bucketopt.groups import backtrack, make_groups, share_windows
from bucketopt.heuristics import RULES, rule_of_thumb
from bucketopt.objectives.batch import EXACT_CANDIDATES, batch_layers, candidate_grid
from bucketopt.objectives.batchpad import expected_batch_padding, expected_padding_per_bucket

from . import naive

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
small_lengths = st.lists(st.integers(1, 40), min_size=1, max_size=9)


def rel(a, b) -> float:
    return abs(float(a) - float(b)) / max(abs(float(b)), 1e-300)


def _prefix_sums(hist):
    pc = np.r_[0, np.cumsum(hist.counts)].astype(np.int64)
    pt = np.r_[0, np.cumsum(hist.values * hist.counts)].astype(np.int64)
    return pc, pt


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
    exact = naive.bucket_padding_of_histogram(hist.values, hist.counts, size)
    fast = expected_padding_per_bucket(hist, [hist.max_length], [size])[0]
    assert rel(fast, exact) < 1e-9


@SETTINGS
@given(small_lengths, st.integers(1, 3), st.integers(40, 200),
       st.sampled_from([(0.0, 1.0), (0.2, 1.0), (0.0, 0.6), (0.25, 0.75)]), st.booleans())
def test_dp_equals_brute_force(lengths, k, budget, shares, exact):
    # exact=True: the certified DP (the time objective's engine, one token one second)
    min_share, max_share = shares
    best = naive.brute_force_batch(lengths, k, budget, min_share=min_share, max_share=max_share)
    try:
        sol = bucketopt.solve(lengths, k, token_budget=budget, pad="batch", min_share=min_share,
                              max_share=max_share, exact=exact)
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
    cert = sol.optimality
    assert cert["exact"] and cert["gap"] == 0.0
    assert cert["lower_bound"] <= float(best[0]) * (1 + 1e-9) + 1e-9


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


def _generated(kind):
    """Lengths with 600-5,300 distinct values (above EXACT_CANDIDATES) and a token budget."""
    rng = np.random.default_rng(7 if kind == 0 else 100 + kind)
    if kind == 0:
        xs = np.r_[rng.lognormal(5.6, 0.5, 30_000), rng.uniform(20, 700, 5_000)]
        return np.clip(np.rint(xs), 1, 700).astype(np.int64), 6_000
    if kind == 1:
        xs = np.r_[rng.normal(300, 60, 20_000), rng.normal(700, 100, 10_000)]
        return np.clip(np.rint(xs), 1, 900).astype(np.int64), 6_000
    if kind == 2:
        xs = rng.pareto(2.0, 40_000) * 100 + 20
        return np.clip(np.rint(xs), 1, 900).astype(np.int64), 20_000
    if kind == 4:
        # 60,000 of the embedded example's lengths (5,220 distinct): at k = 5 the optimum lies in
        # another basin than the grid optimum's, 0.02% cheaper (every edge moves by 9-35%)
        return np.random.default_rng(1006).choice(seed_like(), 60_000), 65_536
    # source-code-like: a heavy tail to 30,000 tokens, 3,143 distinct lengths; its k = 4 optimum
    # lies two refinement radii of 3 grid steps away from the grid's
    rng = np.random.default_rng(1001)
    xs = rng.pareto(1.2, 30_000) * 200 + 10
    return np.clip(np.rint(xs), 1, 30_000).astype(np.int64), 65_536


@pytest.mark.parametrize("kind", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("shares", [(0.0, 1.0), (0.05, 0.4)])
def test_default_equals_every_length_optimum(kind, shares):
    # Above EXACT_CANDIDATES "auto" runs the grid, then the window and band refinements; "all"
    # is the exact DP over every distinct length. They must agree for k = 1..8.
    xs, budget = _generated(kind)
    hist = Histogram.from_lengths(xs)
    assert hist.m > 2 * EXACT_CANDIDATES
    groups = make_groups(hist, 1)
    assert candidate_grid(groups, budget).size < groups.g / 3  # the grid really is coarser
    lo, hi = share_windows(groups, *shares)
    kmax = 8
    _, best_all = batch_layers(groups, kmax, token_budget=budget, win_lo=lo, win_hi=hi,
                               candidates="all")
    opt, best_auto = batch_layers(groups, kmax, token_budget=budget, win_lo=lo, win_hi=hi)
    _, best_grid = batch_layers(groups, kmax, token_budget=budget, win_lo=lo, win_hi=hi,
                                candidates="grid")
    assert np.array_equal(np.isfinite(best_all), np.isfinite(best_auto))
    for k in range(1, kmax + 1):
        if not np.isfinite(best_all[k - 1]):
            continue
        assert rel(best_auto[k - 1], best_all[k - 1]) < 1e-12, k
        assert best_auto[k - 1] <= best_grid[k - 1] * (1 + 1e-12)
        # the reported chain costs what best says
        edges = groups.edges[backtrack(opt, k, groups.g)]
        sol = bucketopt.evaluate(hist, edges, token_budget=budget, pad="batch")
        assert rel(sol.padded_tokens, best_auto[k - 1]) < 1e-9
        assert all(shares[0] - 1e-9 <= x <= shares[1] + 1e-9 for x in sol.shares)
        # solve()'s path: a DP up to k that reads layer k alone (its grid DP is bounded by the
        # cost of a cheap chain) reaches the same optimum
        opt_k, best_k = batch_layers(groups, k, token_budget=budget, win_lo=lo, win_hi=hi,
                                     refine_ks={k})
        assert rel(best_k[k - 1], best_all[k - 1]) < 1e-12, k
        edges = groups.edges[backtrack(opt_k, k, groups.g)]
        sol = bucketopt.solve(xs, k, token_budget=budget, pad="batch", min_share=shares[0],
                              max_share=shares[1])
        assert sol.boundaries == tuple(int(e) for e in edges)
        assert rel(sol.padded_tokens, best_all[k - 1]) < 1e-9


def _grid_of(kind, shares):
    """(groups, the DP's arrays, the default candidate grid) of generated input ``kind``."""
    from bucketopt.objectives.batch import _Data

    xs, budget = _generated(kind)
    groups = make_groups(Histogram.from_lengths(xs), 1)
    lo, hi = share_windows(groups, *shares)
    data = _Data(groups, budget, lo, hi)
    cand = candidate_grid(groups, budget)
    return groups, data, cand


@pytest.mark.parametrize("kind", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("shares", [(0.0, 1.0), (0.05, 0.4)])
def test_bounded_chain_dp_returns_the_same_chain(kind, shares):
    # The window DP of the refinement, bounded by the cost of a chain through its windows (the
    # grid optimum, as refine_chain passes it), returns the chain and cost of the unbounded DP.
    groups, data, cand = _grid_of(kind, shares)
    g = groups.g
    for k in range(2, 9):
        opt, best = data.layers(cand, k)
        if not np.isfinite(best[-1]):
            continue
        ends = backtrack(opt, k, g)
        for band in (3, 12):
            windows = [np.array([0])] + [np.arange(max(1, b - band), min(g - 1, b + band) + 1)
                                         for b in ends[:-1]] + [np.array([g])]
            plain = data.chain(windows)
            assert plain[1] <= best[-1] * (1 + 1e-12)
            for bound in (best[-1], plain[1]):
                chain, cost = data.chain(windows, bound)
                assert cost == plain[1] and np.array_equal(chain, plain[0]), (k, band)


@pytest.mark.parametrize("kind", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("shares", [(0.0, 1.0), (0.05, 0.4)])
def test_bounded_grid_dp_keeps_the_last_layer(kind, shares):
    # A bound (the cost of some feasible chain of at most kmax buckets on the grid) and keeping
    # only the states a chain of kmax buckets passes (last_only) only prune: layer kmax of the
    # grid DP is the same chain at the same cost, with the optimum itself as the bound (the
    # tightest), with one just above, and with one 1% above (a cheap chain's).
    groups, data, cand = _grid_of(kind, shares)
    for k in range(2, 9):
        opt, best = data.layers(cand, k)
        if not np.isfinite(best[-1]):
            continue
        chain = backtrack(opt, k, groups.g)
        for bound in (np.inf, best[-1], best[-1] * (1 + 1e-6), best[-1] * 1.01):
            for last_only in (False, True):
                opt_b, best_b = data.layers(cand, k, bound, last_only)
                assert best_b[-1] == best[-1], (k, bound, last_only)
                assert backtrack(opt_b, k, groups.g) == chain


def test_sweep_rows_are_solves_and_a_long_sweep_reads_the_grid():
    from bucketopt.objectives.batch import SWEEP_REFINED_ROWS

    xs, budget = _generated(0)
    sweep = bucketopt.sweep(xs, range(1, 13), token_budget=budget, pad="batch")
    for k, row in zip(sweep.ks, sweep.solutions):  # at most 16 k: every row is solve()'s
        exact = bucketopt.solve(xs, k, token_budget=budget, pad="batch")
        assert row.boundaries == exact.boundaries, k
        assert row.padded_tokens == pytest.approx(exact.padded_tokens, rel=1e-12)
    longer = bucketopt.sweep(xs, range(1, SWEEP_REFINED_ROWS + 2), token_budget=budget,
                             pad="batch")
    for k, row in zip(longer.ks, longer.solutions):
        exact = bucketopt.solve(xs, k, token_budget=budget, pad="batch")
        # every grid row is a feasible chain (never below the optimum), within 1% of it up to
        # k = 12 and 2% above (1.4% at k = 17 here)
        assert row.padded_tokens >= exact.padded_tokens * (1 - 1e-12)
        assert row.padded_tokens <= exact.padded_tokens * (1.01 if k <= 12 else 1.02), k
        again = bucketopt.evaluate(xs, row.boundaries, token_budget=budget, pad="batch")
        assert rel(again.padded_tokens, row.padded_tokens) < 1e-9
        if k == longer.recommended_k:
            assert row.boundaries == exact.boundaries


@pytest.fixture(scope="module")
def mp():
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    return mpmath


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 40_000_000), st.integers(0, 70_000), st.floats(0.0, 1.0),
       st.integers(0, 60))
def test_log_binom_ratio_against_high_precision(mp, n, s, where, near):
    from bucketopt.orderstats import LOG_ZERO, log_binom_ratio

    s = min(s, n)
    a = n - near if where < 0.5 else s + int((n - s) * where)
    a = min(max(a, s), n)
    exact = float(mp.log(mp.binomial(a, s)) - mp.log(mp.binomial(n, s)))
    got = log_binom_ratio(a, n, s)
    if exact < LOG_ZERO:
        assert got <= LOG_ZERO + 1e-9 * abs(exact) or abs(got - exact) <= 1e-12 * abs(exact)
        return
    assert abs(got - exact) <= 1e-14 * (abs(exact) + 4 * s) + 1e-300


@pytest.mark.parametrize("size", [2, 7, 64, 301])
def test_expected_padding_above_the_table_to_1e9(size):
    # 3,000,000 samples (above WALK_TABLE_MAX): the walks use Stirling differences, no table.
    from bucketopt.orderstats import WALK_TABLE_MAX, walk_tables

    rng = np.random.default_rng(size)
    values = np.unique(rng.integers(50, 4000, 120))
    counts = rng.integers(1, 50_000, values.size)
    counts[-1] += 3_000_000 - counts.sum() if counts.sum() < 3_000_000 else 0
    hist = Histogram(values.astype(np.int64), counts.astype(np.int64))
    assert hist.n > WALK_TABLE_MAX and walk_tables(hist.n)[0].size == 1
    exact = naive.bucket_padding_of_histogram(hist.values, hist.counts, size)
    fast = expected_padding_per_bucket(hist, [hist.max_length], [size])[0]
    assert rel(fast, exact) < 1e-9


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 3000), min_size=2, max_size=300), st.integers(2, 400),
       st.integers(1, 5000))
def test_table_and_stirling_walks_agree(xs, size, scale):
    # The same bucket costed through the log-factorial table and through Stirling differences.
    from bucketopt.objectives._batch_kernels import batch_bucket_cost
    from bucketopt.orderstats import expected_max, walk_tables

    hist = Histogram.from_lengths(xs)
    hist = Histogram(hist.values, hist.counts * scale)
    pc, pt = _prefix_sums(hist)
    hi, lo = walk_tables(hist.n)
    none = np.zeros(1)
    m = hist.m
    with_table = batch_bucket_cost(hist.values, pc, pt, hi, lo, 0, m, size, np.inf)
    stirling = batch_bucket_cost(hist.values, pc, pt, none, none, 0, m, size, np.inf)
    assert abs(with_table - stirling) <= 1e-11 * max(abs(stirling), 1.0)
    s = min(size, hist.n)
    assert rel(expected_max(hist.values, pc, hi, lo, 0, m, s),
               expected_max(hist.values, pc, none, none, 0, m, s)) < 1e-12


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 3000), min_size=2, max_size=200), st.integers(1, 50), st.data())
def test_expected_max_is_the_uncapped_walk_bit_for_bit(xs, scale, data):
    # expected_max runs walk_max_capped's walk with no cap in a loop of its own: the same value,
    # to the last bit, on any range of a bucket, through either log-factorial table or Stirling.
    from bucketopt.orderstats import expected_max, log_factorials, walk_max_capped, walk_tables

    hist = Histogram.from_lengths(xs)
    hist = Histogram(hist.values, hist.counts * scale)
    pc, _ = _prefix_sums(hist)
    lo = data.draw(st.integers(0, hist.m - 1))
    hi = data.draw(st.integers(lo + 1, hist.m))
    n = int(pc[hi] - pc[lo])
    assume(n >= 2)
    s = data.draw(st.integers(1, n - 1))
    top = float(hist.values[hi - 1])
    none = np.zeros(1)
    for lf_hi, lf_lo in (walk_tables(hist.n), log_factorials(hist.n), (none, none)):
        acc, exact = walk_max_capped(hist.values, pc, lf_hi, lf_lo, lo, hi, s, 1.0, 0.0, np.inf,
                                     1e-16 * top, np.inf)
        assert exact
        assert expected_max(hist.values, pc, lf_hi, lf_lo, lo, hi, s) == top - acc


def test_more_samples_than_the_old_table_allowed():
    # 70 million samples over 40 lengths: no table, memory does not grow with n.
    from fractions import Fraction

    values = np.linspace(100, 5000, 40).astype(np.int64)
    counts = np.full(40, 1_750_000, dtype=np.int64)
    hist = Histogram(values, counts)
    sol = bucketopt.solve(hist, 3, token_budget=65_536, pad="batch")
    total = Fraction(0)
    lo_v = 0
    for edge in sol.boundaries:
        inside = (values > lo_v) & (values <= edge)
        total += naive.bucket_padding_of_histogram(values[inside], counts[inside],
                                                   65_536 // edge)
        lo_v = edge
    assert rel(sol.padded_tokens, total) < 1e-9


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


def _histogram_of(pairs):
    """(histogram, prefix counts, prefix tokens) of (length, count) pairs."""
    hist = Histogram.from_lengths(np.repeat([v for v, _ in pairs], [c for _, c in pairs]))
    return (hist, *_prefix_sums(hist))


def _assert_exact(got, hist, lo, hi, size):
    """``got`` is the expected dynamic padding of the bucket of groups lo..hi-1 (Fraction)."""
    exact = naive.bucket_padding_of_histogram(hist.values[lo:hi], hist.counts[lo:hi], size)
    assert abs(got - float(exact)) <= 1e-12 * max(float(exact), 1.0), (lo, hi)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(1, 400), st.integers(1, 30)), min_size=1, max_size=40),
       st.integers(2, 60), st.data())
def test_sweep_prices_every_start_exactly(pairs, size, data):
    # One sweep prices the buckets from several starts to one end; each cost is the exact
    # expected dynamic padding (Fraction), whatever the starts (repeated, far apart, adjacent).
    from bucketopt.objectives._batch_sweep import pascal_table, sweep_costs

    hist, pc, pt = _histogram_of(pairs)
    hi = data.draw(st.integers(1, hist.m), label="end")
    starts = sorted(data.draw(st.lists(st.integers(0, hi - 1), min_size=1, max_size=12),
                              label="starts"), reverse=True)
    out = np.empty(len(starts))
    sweep_costs(hist.values, pc, pt, hi, size, np.asarray(starts, dtype=np.int64), out,
                pascal_table())
    for lo, got in zip(starts, out):
        _assert_exact(got, hist, lo, hi, size)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(1, 300), st.integers(1, 20)), min_size=2, max_size=40),
       st.integers(2, 40), st.data())
def test_window_costs_price_every_pair_exactly(pairs, size, data):
    # A window of ends over a window of starts (one sweep, then each end grows the sums): every
    # pair's cost is the exact expected dynamic padding (Fraction).
    from bucketopt.objectives._batch_sweep import pascal_table, window_costs

    hist, pc, pt = _histogram_of(pairs)
    assume(hist.m >= 2)
    cut = data.draw(st.integers(1, hist.m - 1), label="cut")
    ends = sorted(set(data.draw(st.lists(st.integers(cut + 1, hist.m), min_size=1, max_size=6),
                                label="ends")))
    starts = sorted(data.draw(st.lists(st.integers(0, cut - 1), min_size=1, max_size=8),
                              label="starts"), reverse=True)
    out = np.empty((len(ends), len(starts)))
    window_costs(hist.values, pc, pt, np.asarray(ends, dtype=np.int64), size,
                 np.asarray(starts, dtype=np.int64), out, pascal_table())
    for a, hi in enumerate(ends):
        for q, lo in enumerate(starts):
            _assert_exact(out[a, q], hist, lo, hi, size)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 20_000), min_size=50, max_size=400, unique=True),
       st.integers(2, 256), st.integers(1, 200_000))
def test_sweep_equals_the_walks_on_large_buckets(xs, size, scale):
    # Tens of millions of samples and batch sizes up to a window DP's largest swept one: the sums
    # are kept scaled (no overflow), and the costs agree with the walks' (table or Stirling).
    from bucketopt.objectives._batch_kernels import batch_bucket_cost
    from bucketopt.objectives._batch_sweep import pascal_table, sweep_costs
    from bucketopt.orderstats import walk_tables

    rng = np.random.default_rng(len(xs))
    hist = Histogram.from_lengths(xs)
    hist = Histogram(hist.values, rng.integers(1, 2 * scale, hist.m))
    pc, pt = _prefix_sums(hist)
    lf_hi, lf_lo = walk_tables(hist.n)
    hi = hist.m
    starts = np.arange(hi - 1, -1, -max(1, hi // 17), dtype=np.int64)
    out = np.empty(starts.size)
    sweep_costs(hist.values, pc, pt, hi, size, starts, out, pascal_table())
    walks = [batch_bucket_cost(hist.values, pc, pt, lf_hi, lf_lo, int(lo), hi, size, np.inf)
             for lo in starts]
    assert np.all(np.isfinite(out))
    for got, walk in zip(out, walks):
        assert abs(got - walk) <= 1e-11 * max(abs(walk), 1.0)


def test_the_dp_prices_by_sweeps_and_by_walks_alike(monkeypatch):
    # The same DP with every end priced by walks (the sweep switched off, the kernel run as
    # Python) finds the same chains at the same costs to 1e-12, on the embedded example's grid.
    from bucketopt.objectives import _batch_kernels
    from bucketopt.objectives.batch import _Data

    hist = Histogram.from_lengths(seed_like())
    groups = make_groups(hist, 1)
    lo, hi = share_windows(groups, 0.0, 1.0)
    data = _Data(groups, 65_536, lo, hi)
    cand = candidate_grid(groups, 65_536)
    opt, best = data.layers(cand, 6)
    assert _batch_kernels.sweep_suits(8, 100)  # the tail's ends are swept
    monkeypatch.setattr(_batch_kernels, "sweep_suits", lambda size, starts: False)
    opt_w, best_w = _batch_kernels.batch_layers_kernel.py_func(
        hist.values, data.pc, data.pt, data.lf_hi, data.lf_lo, cand, data.group_end[cand],
        data.sizes[cand], data.win_lo, data.win_hi, groups.g, 6, 0.0, np.inf, False,
        np.empty((0, 0)))
    for k in range(1, 7):
        assert rel(best[k - 1], best_w[k - 1]) < 1e-12
        assert backtrack(opt, k, groups.g) == backtrack(opt_w, k, groups.g)


def test_a_walk_cut_at_its_cap_returns_a_bound_above_it():
    # Stopped at ``cap``, batch_bucket_cost returns a lower bound strictly above the cap (the DPs
    # rely on it), else the cost. Near 0 the bound, summed once for the test and once for the
    # result, used to round back to the cap or below (-1.9e-9 for a bucket of 8.4M padded
    # tokens): 40 gamma-shaped buckets of 50 to 30,000 samples, caps 0 and 1e-9 among others.
    from bucketopt.objectives._batch_kernels import batch_bucket_cost
    from bucketopt.orderstats import walk_tables

    rng = np.random.default_rng(0)
    for _ in range(40):
        n, size = int(rng.integers(50, 30_000)), int(rng.integers(2, 6))
        xs = rng.gamma(rng.uniform(1, 4), rng.uniform(50, 900), n)
        hist = Histogram.from_lengths(np.clip(np.rint(xs), 1, 6000).astype(np.int64))
        pc, pt = _prefix_sums(hist)
        lf_hi, lf_lo = walk_tables(hist.n)
        exact = batch_bucket_cost(hist.values, pc, pt, lf_hi, lf_lo, 0, hist.m, size, np.inf)
        for cap in (0.0, 1e-9, 0.5 * exact, exact * (1 - 1e-9)):
            got = batch_bucket_cost(hist.values, pc, pt, lf_hi, lf_lo, 0, hist.m, size, cap)
            assert got == exact or cap < got <= exact * (1 + 1e-12), (cap, got, exact)


@pytest.mark.parametrize("seed", [4, 5, 6])
def test_buckets_of_batch_size_one_cost_nothing_and_the_default_finds_them(seed):
    # T = the longest length: every bucket whose edge is above T / 2 holds one sample per batch
    # and costs nothing, so 0 padding is reachable for every k >= 1 (one bucket). The default's
    # refinements are then bounded by 0; a walk cut at a cap near 0 used to return a bound that
    # rounded below it, and these inputs came out at 3.4M-7.3M padded tokens for k = 2.
    rng = np.random.default_rng(seed)
    shape, scale = rng.uniform(0.5, 5), rng.uniform(50, 500)
    n, top = int(rng.integers(5000, 30000)), int(rng.integers(2000, 8000))
    xs = np.clip(np.rint(rng.gamma(shape, scale, n)), 1, top).astype(np.int64)
    budget = int(xs.max())
    assert Histogram.from_lengths(xs).m > EXACT_CANDIDATES
    for k in (1, 2, 3, 4):
        sol = bucketopt.solve(xs, k, token_budget=budget, pad="batch")
        assert sol.padded_tokens == 0.0, (k, sol.boundaries)
        again = bucketopt.evaluate(xs, sol.boundaries, token_budget=budget, pad="batch")
        assert again.padded_tokens == 0.0


@pytest.mark.parametrize("kind", [0, 2])
def test_exact_equals_the_dp_over_every_pair(kind):
    # exact=True runs the certified DP; "all" is the DP over every pair of candidate edges
    xs, budget = _generated(kind)
    hist = Histogram.from_lengths(xs)
    groups = make_groups(hist, 1)
    lo, hi = share_windows(groups, 0.0, 1.0)
    _, best_all = batch_layers(groups, 4, token_budget=budget, win_lo=lo, win_hi=hi,
                               candidates="all")
    for k in (1, 2, 4):
        sol = bucketopt.solve(hist, k, token_budget=budget, pad="batch", exact=True)
        assert sol.optimality["exact"]
        assert rel(sol.padded_tokens, best_all[k - 1]) < 1e-9, k


def test_default_certificate_covers_its_distance_to_the_exact_optimum():
    # a source-code-like tail above EXACT_CANDIDATES distinct lengths: the grid search's
    # certified gap covers its distance to the every-length optimum (exact=True)
    rng = np.random.default_rng(7)
    xs = np.clip(np.rint(rng.lognormal(6.0, 1.6, 20_000)), 5, 4096).astype(np.int64)
    assert np.unique(xs).size > 2 * EXACT_CANDIDATES
    for k in (3, 6):
        fast = bucketopt.solve(xs, k, token_budget=32_768, pad="batch")
        proof = bucketopt.solve(xs, k, token_budget=32_768, pad="batch", exact=True)
        cert = fast.optimality
        assert proof.optimality["exact"]
        assert cert["lower_bound"] <= proof.padded_tokens * (1 + 1e-9)
        assert proof.padded_tokens <= fast.padded_tokens * (1 + 1e-9)
        if not cert["exact"]:
            assert fast.padded_tokens <= cert["lower_bound"] * (1 + cert["gap"]) * (1 + 1e-9)
        # the certified DP, seeded with the grid's cover, proves it where it is optimal
        assert cert["exact"] == (fast.padded_tokens <= proof.padded_tokens * (1 + 1e-9)), k


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 40), min_size=1, max_size=9), st.integers(1, 3),
       st.integers(40, 200), st.sampled_from([0.5, 0.8, 0.95]))
def test_exact_padding_dp_keeps_min_fill(lengths, k, budget, min_fill):
    """exact=True under min_fill: the brute-force optimum over the covers whose buckets all
    fill enough (the certified DP knows no min_fill: where its optimum breaks it, the DP over
    every pair of candidate edges gives the proof)."""
    best = naive.brute_force_batch(lengths, k, budget, min_fill=min_fill)
    assume(best is not None)
    sol = bucketopt.solve(lengths, k, token_budget=budget, pad="batch", min_fill=min_fill,
                          exact=True)
    assert sol.optimality["exact"]
    assert sol.padded_tokens == pytest.approx(float(best[0]), rel=1e-9, abs=1e-9)
    assert naive.batch_fills(lengths, sol.boundaries, budget, min_fill)


def test_exact_padding_dp_keeps_min_fill_above_the_grid_size():
    """The same on a few hundred distinct lengths, where a bucket of the unconstrained optimum
    fills too little: exact=True keeps min_fill and equals the DP over every pair."""
    rng = np.random.default_rng(5)
    xs = np.clip(np.rint(rng.lognormal(4.5, 0.9, 3_000)), 1, 600).astype(np.int64)
    budget, k, min_fill = 1_200, 4, 0.7
    free = bucketopt.solve(xs, k, token_budget=budget, pad="batch", exact=True)
    assert min(free.fill) < min_fill  # the case: the unit DP's optimum breaks min_fill
    sol = bucketopt.solve(xs, k, token_budget=budget, pad="batch", min_fill=min_fill,
                          exact=True)
    groups = make_groups(Histogram.from_lengths(xs), 1)
    lo, hi = share_windows(groups, 0.0, 1.0)
    _, best_all = batch_layers(groups, k, token_budget=budget, win_lo=lo, win_hi=hi,
                               candidates="all", min_fill=min_fill)
    assert sol.optimality["exact"]
    assert min(sol.fill) >= min_fill * (1 - 1e-9)
    assert sol.padded_tokens == pytest.approx(best_all[k - 1], rel=1e-9)


@pytest.mark.parametrize("exact", [False, True])
def test_min_fill_without_a_token_budget_is_one_clear_error(exact):
    """min_fill is a share of the token budget: with batch sizes from a memory model alone it
    is one clear error, from the default and from exact=True (which once ignored min_fill)."""
    memory = dict(m0=2.0e9, m1=3.0e5, m2=40.0, capacity=8.0e9)
    with pytest.raises(BucketoptError, match="min_fill needs a token_budget"):
        bucketopt.solve([100, 200, 300, 400, 500], 2, pad="batch", memory=memory, min_fill=0.5,
                        exact=exact)
