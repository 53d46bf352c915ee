"""objective="time": the exact DP over every candidate edge against brute force, G = 1 and G > 1
(buckets synced across ranks), both paddings; the step model against the real sampler."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import bucketopt
from bucketopt.cost.costmodel import CostModel, time_epoch
from bucketopt.data.histogram import Histogram
from bucketopt.groups import make_groups, share_windows
from bucketopt.objectives import make_objective

from . import naive
from .strategies import coefficients

SETTINGS = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.lists(st.integers(1, 12), min_size=1, max_size=7), st.integers(1, 3),
       st.integers(12, 40), coefficients, st.sampled_from([1, 2, 3]),
       st.sampled_from(["batch", "edge"]),
       st.sampled_from([(0.0, 1.0), (0.2, 1.0), (0.0, 0.7)]))
def test_time_dp_equals_brute_force(lengths, k, budget, coeffs, world, pad, shares):
    min_share, max_share = shares
    profile = dict(alpha=coeffs[0], beta=coeffs[1], gamma=coeffs[2], token_budget=budget)
    oracle = naive.brute_force_synced(lengths, k, budget, *coeffs, world, pad=pad,
                                      min_share=min_share, max_share=max_share)
    kw = dict(objective="time", pad=pad, profile=profile, world_size=world,
              min_share=min_share, max_share=max_share)
    if oracle is None:
        with pytest.raises(bucketopt.BucketoptError, match="infeasible"):
            bucketopt.solve(lengths, k, **kw)
        return
    sol = bucketopt.solve(lengths, k, **kw)
    assert len(sol.boundaries) <= k
    assert naive.shares_ok(lengths, sol.boundaries, min_share, max_share)
    got = naive.synced_time(lengths, sol.boundaries, budget, *coeffs, world, pad)
    assert got == pytest.approx(oracle[0], rel=1e-9, abs=1e-12)
    # the reported epoch time is the objective's own value of those boundaries
    assert sol.extra["epoch_hours"] * 3600 == pytest.approx(got, rel=1e-9, abs=1e-12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 400), st.integers(1, 300), st.integers(1, 9))
def test_step_plan_matches_the_oracle(n, size, world):
    from bucketopt.objectives._time_kernels import MAX_STEP_TYPES, bucket_steps

    size = min(size, n)
    w, rows, mult = (np.zeros(MAX_STEP_TYPES, dtype=np.int64) for _ in range(3))
    scratch = [np.zeros(2 * MAX_STEP_TYPES, dtype=np.int64) for _ in range(4)]
    nt = bucket_steps(n, size, world, w, rows, mult, *scratch)
    got = [(int(w[t]), int(rows[t])) for t in range(nt) for _ in range(mult[t])]
    sizes = naive.synced_step_sizes(n, size, world)
    want = [(s[0], sum(s)) for s in (sizes[i:i + world] for i in range(0, len(sizes), world))]
    assert got == want


def test_objective_cost_equals_the_dp_best():
    rng = np.random.default_rng(3)
    lengths = np.rint(rng.lognormal(5, 1, 3000)).astype(np.int64) + 1
    hist = Histogram.from_lengths(lengths)
    model = CostModel(0.01, 1e-5, 1e-9, world_size=4)
    for pad in ("edge", "batch"):
        obj = make_objective("time", pad, cost_model=model)
        groups = make_groups(hist, 1)
        lo, hi = share_windows(groups, 0.0, 1.0)
        obj.fit(groups, token_budget=8192, win_lo=lo, win_hi=hi)
        opt, best = obj.layers(6)
        from bucketopt.groups import backtrack

        edges = groups.edges[backtrack(opt, 6, groups.g)]
        assert obj.cost(edges) == pytest.approx(best[-1], rel=1e-9)


@pytest.mark.parametrize("world", [1, 3, 8])
def test_analytic_synced_time_matches_the_real_sampler(world):
    # The step model against epochs planned by BucketBatchSampler (sync_buckets=True), each
    # micro-step as long as its slowest batch: within 1% on average over epochs.
    from bucketopt.datasets import seed_like

    lengths = seed_like()[::10]
    profile = dict(alpha=0.05, beta=2e-5, gamma=2e-9, token_budget=65_536)
    sol = bucketopt.solve(lengths, 6, pad="batch", profile=profile, world_size=world)
    model = CostModel(0.05, 2e-5, 2e-9, world_size=world)
    sampler = bucketopt.BucketBatchSampler(lengths, sol.boundaries, token_budget=65_536,
                                           world_size=world)
    seconds = [time_epoch(sampler.epoch_view(e, pad="batch"), model).seconds for e in range(8)]
    assert np.mean(seconds) == pytest.approx(sol.extra["epoch_hours"] * 3600, rel=0.01)


def _textbook_time_dp(arrays, groups, token_budget, model, world, kmax):
    """The O(k g^2) DP with every bucket's cost from its own walks: its expected steps and
    padded-token sums (``bucket_features``) priced by the cost model."""
    from bucketopt.objectives._time_kernels import bucket_features

    g = groups.g
    end = np.r_[0, groups.first_value[1:], groups.hist.m]
    cost = np.full((g + 1, g + 1), np.inf)
    for i in range(g):
        for j in range(i + 1, g + 1):
            steps, f1, f2 = bucket_features(arrays.values, arrays.pcv, arrays.pq1, arrays.pq2,
                                            int(end[i]), int(end[j]), int(groups.edges[j]),
                                            token_budget // int(groups.edges[j]), world,
                                            arrays.pad_code, arrays.lf_hi, arrays.lf_lo)
            cost[i, j] = model.alpha * steps + model.beta * f1 + model.gamma * f2
    best = np.full(g + 1, np.inf)
    best[0] = 0.0
    out = []
    for _ in range(kmax):
        new = best.copy()
        for j in range(1, g + 1):
            new[j] = min(best[i] + cost[i, j] for i in range(j))
        best = np.minimum(best, new)
        out.append(best[g])
    return np.array(out)


def _random_problem(seed, world, align):
    """Lengths (2-30 distinct, up to 400) with counts, a token budget, a cost model and groups of
    ``align`` lengths from ``seed``: (hist, groups, budget, model, win_lo, win_hi, kmax), or None
    when the longest group does not fit the budget."""
    rng = np.random.default_rng(seed)
    values = np.unique(rng.integers(1, 400, size=int(rng.integers(2, 30))))
    hist = Histogram(values, rng.integers(1, 60, size=values.size))
    budget = int(rng.choice([400, 2_000, 20_000]))
    model = CostModel(float(rng.uniform(0, 1)), float(rng.uniform(0, 1e-2)),
                      float(rng.uniform(0, 1e-4)), world_size=world)
    groups = make_groups(hist, align)
    if groups.edges[-1] > budget:
        return None
    lo, hi = share_windows(groups, 0.0, 1.0)
    return hist, groups, budget, model, lo, hi, min(4, groups.g)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10_000), st.sampled_from([1, 3, 8]), st.sampled_from([1, 7]),
       st.sampled_from(["batch", "edge"]))
@example(seed=80, world=1, align=7, pad="batch")  # every start around the predicted one dead
def test_certified_dp_equals_the_textbook_dp(seed, world, align, pad):
    # Batch sizes from 1 to thousands (steps priced by sweeps up to 256 rows, by walks above),
    # groups of several lengths (align): the certified DP against the textbook DP whose every
    # bucket is walked on its own, every layer.
    from bucketopt.objectives.synced import TimeArrays
    from bucketopt.objectives.time import Time

    problem = _random_problem(seed, world, align)
    if problem is None:
        return
    hist, groups, budget, model, lo, hi, kmax = problem
    obj = Time(model, pad=pad).fit(groups, token_budget=budget, win_lo=lo, win_hi=hi)
    _, best = obj.layers(kmax)
    want = _textbook_time_dp(TimeArrays(hist, pad), groups, budget, model, world, kmax)
    np.testing.assert_allclose(best, want, rtol=1e-9)
    assert all(c.exact for c in obj.certificates.values())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10_000), st.sampled_from([1, 3, 8]), st.sampled_from([1, 3]),
       st.sampled_from(["batch", "edge"]))
def test_exact_layers_split_in_halves_equal_the_textbook_dp(seed, world, align, pad):
    # every exact layer split in two ranges of ends (SPLIT_ENDS = 1), the halves at once
    # (CPUS = 2) or one after the other (CPUS = 1): the textbook DP's values, and the same
    # boundaries and values both ways
    from unittest import mock

    from bucketopt.objectives.certified import dp as certified
    from bucketopt.objectives.synced import TimeArrays
    from bucketopt.objectives.time import Time

    problem = _random_problem(seed, world, align)
    if problem is None:
        return
    hist, groups, budget, model, lo, hi, kmax = problem
    want = _textbook_time_dp(TimeArrays(hist, pad), groups, budget, model, world, kmax)
    got = []
    for cpus in (1, 2):
        with mock.patch.object(certified, "SPLIT_ENDS", 1), \
                mock.patch.object(certified, "CPUS", cpus):
            obj = Time(model, pad=pad).fit(groups, token_budget=budget, win_lo=lo, win_hi=hi)
            opt, best = obj.layers(kmax)
        np.testing.assert_allclose(best, want, rtol=1e-9)
        assert all(c.exact for c in obj.certificates.values())
        got.append((opt, best))
    np.testing.assert_array_equal(got[0][0], got[1][0])
    np.testing.assert_array_equal(got[0][1], got[1][1])


def test_in_worker_runs_every_function_and_raises_the_first_failure():
    import functools
    from unittest import mock

    from bucketopt.objectives.certified import dp as certified

    for cpus in (1, 2):
        with mock.patch.object(certified, "CPUS", cpus):
            done = []
            certified.in_worker(*(functools.partial(done.append, q) for q in range(5)))
            assert done == [0, 1, 2, 3, 4] if cpus == 1 else sorted(done) == [0, 1, 2, 3, 4]

            def fail():
                raise bucketopt.BucketoptError("stop")

            with pytest.raises(bucketopt.BucketoptError, match="stop"):
                certified.in_worker(lambda: None, fail)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 12), min_size=2, max_size=7), st.integers(2, 3),
       st.integers(12, 40), coefficients, st.sampled_from([2, 3]),
       st.sampled_from(["batch", "edge"]))
@example(lengths=[1, 1], k=2, budget=12, coeffs=(0.0, 0.0, 1e-30), world=2, pad="batch")
def test_unsynced_time_certificate_bounds_every_boundary_set(lengths, k, budget, coeffs, world,
                                                             pad):
    # ranks holding different buckets: the boundaries are polished, not proven, but the lower
    # bound (the GPU-seconds DP / G) must stay below the epoch time of every boundary set
    import itertools

    profile = dict(alpha=coeffs[0], beta=coeffs[1], gamma=coeffs[2], token_budget=budget)
    kw = dict(token_budget=budget, pad=pad, profile=profile, world_size=world,
              sync_buckets=False)
    sol = bucketopt.solve(lengths, k, objective="time", **kw)
    cert = sol.optimality
    assert not cert["exact"]
    seconds = sol.extra["epoch_hours"] * 3600
    assert cert["lower_bound"] <= seconds * (1 + 1e-9)
    values = sorted(set(lengths))
    for r in range(min(k, len(values))):
        for inner in itertools.combinations(values[:-1], r):
            other = bucketopt.evaluate(lengths, (*inner, values[-1]), **kw)
            assert cert["lower_bound"] <= other.extra["epoch_hours"] * 3600 * (1 + 1e-9)
    if cert["gap"] is not None:  # the gap is measured from the returned boundaries' time
        assert cert["lower_bound"] * (1 + cert["gap"]) == pytest.approx(seconds, rel=1e-9)
