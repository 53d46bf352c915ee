"""2-D bins on pairs of lengths (input, output): exact plans against brute force over every
hierarchical bin set (tests/naive.py), NeMo's strict selection, evaluate's unassigned samples."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bucketopt
from bucketopt.errors import BucketoptError
from bucketopt.pairs import assign_bins

from . import naive

# small inputs: every hierarchical bin set can be listed
small_pairs = st.lists(st.tuples(st.integers(1, 4), st.integers(1, 4)), min_size=1, max_size=7)
grids = st.tuples(st.integers(1, 3), st.integers(1, 3))
coefs = st.tuples(st.floats(0, 1), st.floats(0, 1), st.floats(0, 1), st.floats(0, 0.1),
                  st.floats(0, 0.1), st.floats(0, 0.1)).filter(lambda c: c[0] > 0 or any(c))


def _check_plan(pairs, sol, *, k=None, grid=None):
    bins = [tuple(b) for b in sol.bins]
    assert bins == sorted(set(bins))  # NeMo's order, no duplicate
    members, lost = naive.pair_bin_members(pairs, bins)
    assert lost == 0 and sol.unassigned == 0  # every sample has a bin
    assert list(sol.counts) == [len(m) for m in members]
    assert sum(sol.counts) == len(pairs)
    if grid is None:
        assert len(bins) <= k
    else:
        dim0 = [e0 for e0, _ in bins]
        assert len(set(dim0)) <= grid[0]
        assert max(dim0.count(e) for e in set(dim0)) <= grid[1]
    assert sol.optimality["exact"] is True
    assert sol.optimality["lower_bound"] == pytest.approx(
        sol.extra.get("predicted_seconds_per_epoch", sol.padded_tokens), rel=1e-9)


@settings(max_examples=60, deadline=None)
@given(small_pairs, st.integers(1, 5))
def test_edge_free_k_equals_brute_force(pairs, k):
    sol = bucketopt.solve(np.array(pairs), k)
    best, _ = naive.brute_force_pairs(pairs, "edge", k=k)
    assert sol.padded_tokens == best
    assert naive.pair_plan_cost(pairs, sol.bins, "edge") == best
    _check_plan(pairs, sol, k=k)


@settings(max_examples=60, deadline=None)
@given(small_pairs, grids)
def test_edge_grid_equals_brute_force(pairs, grid):
    sol = bucketopt.solve(np.array(pairs), None, grid=grid)
    best, _ = naive.brute_force_pairs(pairs, "edge", grid=grid)
    assert sol.padded_tokens == best
    _check_plan(pairs, sol, grid=grid)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=9).filter(any), st.integers(1, 40),
       st.data())
def test_marginal_max_is_the_exact_expected_maximum(counts, scale, data):
    """A bin's marginal (zero counts inside and at either end, as a range's inputs leave them)
    gives E[max of s draws without replacement] of its samples (exact fractions)."""
    from bucketopt.orderstats import log_factorials
    from bucketopt.pairs.bin_costs import marginal_max

    values = np.cumsum(np.arange(1, len(counts) + 1) * scale).astype(np.int64)
    xs = [int(v) for v, c in zip(values, counts) for _ in range(c)]
    s = data.draw(st.integers(1, len(xs)))
    hi, lo = log_factorials(len(xs))
    got = marginal_max(values, np.array(counts, dtype=np.int64), 0, len(counts) - 1, s, hi, lo,
                       np.empty((2, len(counts) + 1), dtype=np.int64))
    assert got == pytest.approx(float(naive.expected_max_exact(xs, s)), rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(small_pairs, st.integers(1, 4), st.integers(0, 12), st.booleans(), grids)
def test_dynamic_padding_equals_brute_force(pairs, k, extra, on_grid, grid):
    budget = max(a + b for a, b in pairs) + extra
    best, _ = naive.brute_force_pairs(pairs, "batch", token_budget=budget,
                                      k=None if on_grid else k, grid=grid if on_grid else None)
    kw = {"grid": grid} if on_grid else {"k": k}
    if best is None:  # every plan holds a bin wider than the budget
        with pytest.raises(BucketoptError, match="token budget"):
            bucketopt.solve(np.array(pairs), kw.pop("k", None), pad="batch",
                            token_budget=budget, **kw)
        return
    sol = bucketopt.solve(np.array(pairs), kw.pop("k", None), pad="batch", token_budget=budget,
                          **kw)
    assert sol.padded_tokens == pytest.approx(float(best), rel=1e-9, abs=1e-9)
    assert float(naive.pair_plan_cost(pairs, sol.bins, "batch", token_budget=budget)) == \
        pytest.approx(sol.padded_tokens, rel=1e-9, abs=1e-9)
    _check_plan(pairs, sol, k=k, grid=grid if on_grid else None)


@settings(max_examples=40, deadline=None)
@given(small_pairs, st.integers(1, 4), st.integers(0, 12), coefs, st.integers(1, 3),
       st.booleans(), grids)
def test_time_equals_brute_force(pairs, k, extra, coef, world, on_grid, grid):
    budget = max(a + b for a, b in pairs) + extra
    profile = dict(zip(("alpha", "beta_in", "beta_out", "gamma_in", "gamma_out",
                        "gamma_cross"), coef))
    best, _ = naive.brute_force_pairs(pairs, "time", token_budget=budget, coef=coef,
                                      world=world, k=None if on_grid else k,
                                      grid=grid if on_grid else None)
    kw = dict(token_budget=budget, profile=profile, world_size=world,
              grid=grid if on_grid else None)
    if best is None:  # every plan holds a bin wider than the budget
        with pytest.raises(BucketoptError, match="token budget"):
            bucketopt.solve(np.array(pairs), None if on_grid else k, **kw)
        return
    sol = bucketopt.solve(np.array(pairs), None if on_grid else k, **kw)
    assert sol.objective == "time"
    got = sol.extra["predicted_seconds_per_epoch"]
    assert got == pytest.approx(best, rel=1e-9, abs=1e-12)
    _check_plan(pairs, sol, k=k, grid=grid if on_grid else None)


@settings(max_examples=60, deadline=None)
@given(small_pairs, st.lists(st.tuples(st.integers(1, 5), st.integers(1, 5)), min_size=1,
                             max_size=5, unique=True))
def test_evaluate_counts_unassigned(pairs, bins):
    bins = sorted(bins)
    sol = bucketopt.evaluate(np.array(pairs), bins)
    members, lost = naive.pair_bin_members(pairs, bins)
    assert sol.unassigned == lost
    assert list(sol.counts) == [len(m) for m in members]
    arr = np.array(pairs)
    idx = assign_bins(arr[:, 0], arr[:, 1], np.array(bins))
    assert int(np.sum(idx < 0)) == lost
    assigned = [p for m in members for p in m]
    assert sol.padded_tokens == (naive.pair_plan_cost(assigned, bins, "edge") if assigned
                                 else 0)
    assert sol.real_tokens == sum(a + b for a, b in assigned)
    assert bool(sol.warnings) == bool(lost)


def test_solution_json_and_dims():
    pairs = np.array([[5, 40], [6, 10], [30, 12], [31, 50], [7, 9]])
    sol = bucketopt.solve(pairs, 3)
    data = json.loads(json.dumps(sol.to_dict()))
    assert data["bins"] == [list(b) for b in sol.bins]
    assert data["unassigned"] == 0
    by_dim = data["padded_tokens_by_dim"]
    assert sum(by_dim) == sol.padded_tokens
    members, _ = naive.pair_bin_members(pairs.tolist(), sol.bins)
    pad_in = sum(e0 - a for (e0, _), xs in zip(sol.bins, members) for a, _ in xs)
    assert by_dim[0] == pad_in
    assert sol.boundaries == tuple(sorted({e0 for e0, _ in sol.bins}))
    assert "bins" not in bucketopt.solve([3, 4, 10], 2).to_dict()  # 1-D JSON unchanged


def test_more_bins_never_hurt():
    rng = np.random.default_rng(3)
    a = rng.integers(1, 60, 400)
    pairs = np.stack([a, a // 2 + rng.integers(1, 20, 400)], axis=1)
    values = [bucketopt.solve(pairs, k).padded_tokens for k in (1, 2, 4, 8, 16)]
    assert values == sorted(values, reverse=True)
    assert bucketopt.solve(pairs, None, grid=(4, 2)).padded_tokens >= \
        bucketopt.solve(pairs, 8).padded_tokens  # a 4x2 grid is one of the 8-bin plans


@pytest.mark.parametrize("call, param", [
    (lambda: bucketopt.solve(np.array([[1, 2, 3]]), 2), "lengths"),
    (lambda: bucketopt.solve(np.array([[1, 0]]), 2), "lengths"),
    (lambda: bucketopt.solve(np.array([[1, 2]]), None, grid=(0, 2)), "grid"),
    (lambda: bucketopt.solve(np.array([[1, 2]]), None, grid="6by2"), "grid"),
    (lambda: bucketopt.solve(np.array([[1, 2]]), 2, min_share=0.2), "min_share"),
    (lambda: bucketopt.solve(np.array([[1, 2]]), 2, pad="batch"), "token_budget"),
    (lambda: bucketopt.solve(np.array([[5, 6]]), 2, token_budget=10), "token_budget"),
    (lambda: bucketopt.evaluate(np.array([[1, 2]]), [(4, 4), (3, 9)]), "bins"),
])
def test_bad_input_is_one_clear_error(call, param):
    with pytest.raises(BucketoptError) as err:
        call()
    assert err.value.param == param
    assert "\n" not in str(err.value)


def test_grid_string():
    pairs = np.array([[1, 2], [3, 4], [5, 6], [7, 1]])
    assert bucketopt.solve(pairs, None, grid="2x2").bins == \
        bucketopt.solve(pairs, None, grid=(2, 2)).bins
    assert math.isclose(bucketopt.solve(pairs, 4).padding_fraction,
                        bucketopt.solve(pairs, 4).padded_tokens /
                        (bucketopt.solve(pairs, 4).padded_tokens + 24))


@settings(max_examples=40, deadline=None)
@given(small_pairs, st.integers(1, 4), st.integers(0, 12), coefs, st.integers(1, 3),
       st.booleans(), grids)
def test_relaxed_time_certificate_bounds_brute_force(pairs, k, extra, coef, world, on_grid,
                                                     grid):
    """Beyond the exact DP's work limit (forced here) time is solved on its linear relaxation:
    the certificate's lower bound is at most the brute-force optimum, which is at most the
    plan's time, and the gap is at most alpha per bin."""
    from bucketopt.pairs import plans

    budget = max(a + b for a, b in pairs) + extra
    best, _ = naive.brute_force_pairs(pairs, "time", token_budget=budget, coef=coef,
                                      world=world, k=None if on_grid else k,
                                      grid=grid if on_grid else None)
    profile = dict(zip(("alpha", "beta_in", "beta_out", "gamma_in", "gamma_out",
                        "gamma_cross"), coef))
    kw = dict(token_budget=budget, profile=profile, world_size=world,
              grid=grid if on_grid else None)
    limit = plans.TIME_WORK_LIMIT
    plans.TIME_WORK_LIMIT = -1
    try:
        if best is None:
            with pytest.raises(BucketoptError, match="token budget"):
                bucketopt.solve(np.array(pairs), None if on_grid else k, **kw)
            return
        sol = bucketopt.solve(np.array(pairs), None if on_grid else k, **kw)
        proven = bucketopt.solve(np.array(pairs), None if on_grid else k, exact=True, **kw)
    finally:
        plans.TIME_WORK_LIMIT = limit
    assert proven.optimality["exact"]  # exact=True: the exact DP whatever it costs
    assert proven.extra["predicted_seconds_per_epoch"] == pytest.approx(best, rel=1e-9,
                                                                        abs=1e-12)
    value = sol.extra["predicted_seconds_per_epoch"]
    assert value == pytest.approx(naive.pair_plan_cost(pairs, sol.bins, "time",
                                                       token_budget=budget, coef=coef,
                                                       world=world), rel=1e-9, abs=1e-12)
    low = sol.optimality["lower_bound"]
    assert low <= best * (1 + 1e-9) + 1e-12
    assert best <= value * (1 + 1e-9) + 1e-12
    assert value - low <= coef[0] * len(sol.bins) / world * (1 + 1e-9) + 1e-12
    assert naive.pair_bin_members(pairs, sol.bins)[1] == 0
