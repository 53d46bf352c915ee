"""Certificates: the relaxation bounds every bucket from below, the certified DP's optimum equals
brute force, and every lower bound sits at or below the brute-force optimum (docs/method.md)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

import bucketopt
from bucketopt.cost.costmodel import CostModel
from bucketopt.data.histogram import as_histogram
from bucketopt.groups import make_groups, share_windows
from bucketopt.objectives import make_objective
from bucketopt.objectives.certified import Lines, MeanLines, Windows, certified_layers

from . import naive
from .strategies import coefficients

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
SHARES = [(0.0, 1.0), (0.2, 1.0), (0.0, 0.7)]


def _fitted(lengths, objective, pad, budget, coeffs=None, world=1, shares=(0.0, 1.0)):
    hist = as_histogram(lengths)
    cost_model = None
    if objective == "time":
        cost_model = CostModel(alpha=coeffs[0], beta=coeffs[1], gamma=coeffs[2],
                               world_size=world)
    obj = make_objective(objective, pad, cost_model=cost_model)
    groups = make_groups(hist, 1)
    win_lo, win_hi = share_windows(groups, *shares)
    return obj.fit(groups, token_budget=budget, win_lo=win_lo, win_hi=win_hi)


@SETTINGS
@given(st.lists(st.integers(1, 12), min_size=1, max_size=8), st.integers(1, 3),
       st.integers(12, 40), coefficients, st.sampled_from([1, 2, 3]),
       st.sampled_from(["batch", "edge"]), st.sampled_from(SHARES))
@example(lengths=[2, 3, 3, 3, 3, 4, 5], k=3, budget=12, coeffs=(0.0, 1.0, 0.0), world=3,
         pad="edge", shares=(0.0, 0.7))  # a tangent below the share window was taken
@example(lengths=[2, 3, 3, 3, 3, 4, 5], k=3, budget=12, coeffs=(0.0, 1.0, 0.0), world=3,
         pad="batch", shares=(0.0, 0.7))
def test_certified_time_dp_equals_brute_force(lengths, k, budget, coeffs, world, pad, shares):
    """The certified DP: its optimum is the brute-force one, proven (exact, gap 0)."""
    oracle = naive.brute_force_synced(lengths, k, budget, *coeffs, world, pad=pad,
                                      min_share=shares[0], max_share=shares[1])
    obj = _fitted(lengths, "time", pad, budget, coeffs, world, shares)
    kmax = min(k, obj.groups.g)
    _, best, certs = certified_layers(obj, kmax, [kmax])
    if oracle is None:
        assert not np.isfinite(best[kmax - 1])
        return
    cert = certs[kmax]
    assert cert.lower_bound <= oracle[0] * (1 + 1e-9) + 1e-12
    assert cert.value >= oracle[0] * (1 - 1e-9) - 1e-12
    if cert.exact:
        assert cert.gap == 0.0
        assert cert.value == pytest.approx(oracle[0], rel=1e-9, abs=1e-12)
        assert best[kmax - 1] == pytest.approx(oracle[0], rel=1e-9, abs=1e-12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.integers(1, 30), st.integers(40, 300), min_size=2, max_size=6),
       st.integers(1, 3), st.integers(1500, 6000), coefficients, st.sampled_from([2, 3]),
       st.sampled_from(SHARES))
def test_certified_time_dp_with_steps_too_large_for_sweeps(counts, k, budget, coeffs, world,
                                                           shares):
    """Steps of more than SWEEP_MAX rows (buckets priced one by one, by walks, each start first
    bounded from a reference start below it), with buckets of many steps and partial ones: the
    certified DP's optimum is the brute-force one (E[M] by the closed formula). Without the
    exact top (TAIL_STEPS = 0), which on inputs this small would price every bucket itself."""
    from unittest import mock

    from bucketopt.objectives.certified import dp as certified

    lengths = [x for x, c in counts.items() for _ in range(c)]
    oracle = naive.brute_force_synced(lengths, k, budget, *coeffs, world, pad="batch",
                                      min_share=shares[0], max_share=shares[1], closed=True)
    obj = _fitted(lengths, "time", "batch", budget, coeffs, world, shares)
    kmax = min(k, obj.groups.g)
    with mock.patch.object(certified, "TAIL_STEPS", 0):
        _, best, certs = certified_layers(obj, kmax, [kmax], exact=True)
    if oracle is None:
        assert not np.isfinite(best[kmax - 1])
        return
    assert certs[kmax].exact
    assert best[kmax - 1] == pytest.approx(oracle[0], rel=1e-9, abs=1e-12)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 12), min_size=1, max_size=8), st.integers(1, 3),
       st.integers(12, 40), coefficients, st.sampled_from([1, 2, 3]),
       st.sampled_from(["batch", "edge"]), st.sampled_from([-1, 0, 3, 30]))
def test_work_limit_certificate_below_brute_force(lengths, k, budget, coeffs, world, pad,
                                                  work_limit):
    """Past the work limit (-1: at once) the layers finished before it are proven and
    backtrack to their optimum; every other k takes the best cover found with a bound, the
    largest of the relaxation's, the every-row-at-its-length floor and the finished layers'
    exact values plus the relaxed rest, at or below the optimum."""
    import bucketopt.objectives.certified.dp as certified
    from bucketopt.groups import backtrack

    obj = _fitted(lengths, "time", pad, budget, coeffs, world)
    kmax = min(k, obj.groups.g)
    limit = certified.WORK_LIMIT
    certified.WORK_LIMIT = work_limit
    try:
        opt, best, certs = certified_layers(obj, kmax, range(1, kmax + 1))
    finally:
        certified.WORK_LIMIT = limit
    for layer in range(1, kmax + 1):
        oracle = naive.brute_force_synced(lengths, layer, budget, *coeffs, world, pad=pad)
        cert = certs[layer]
        assert work_limit >= 0 or not cert.exact
        assert cert.lower_bound <= oracle[0] * (1 + 1e-9) + 1e-12
        assert cert.value >= oracle[0] * (1 - 1e-9) - 1e-12
        ends = backtrack(opt, layer, obj.groups.g)
        assert obj.cost(obj.groups.edges[ends]) == pytest.approx(best[layer - 1], rel=1e-9,
                                                                  abs=1e-12)
        if cert.exact:
            assert cert.value == pytest.approx(oracle[0], rel=1e-9, abs=1e-12)
    floor = certified._mean_floor(obj.rows(np.zeros(1, np.int64)), obj.groups.prefix_count)
    assert floor <= oracle[0] * (1 + 1e-9) + 1e-12


@pytest.mark.parametrize("seed", range(6))
def test_unit_time_under_shares_is_the_padding_optimum_on_hundreds_of_lengths(seed):
    """At a scale brute force cannot reach (240 distinct lengths, thousands of samples, many
    cells of starts, share windows cutting into them), the certified time DP with one token one
    second on one GPU equals the batch-padding DP's own exact optimum (its DP over every pair
    of candidate edges, an independent algorithm) plus the tokens, for min and max shares."""
    rng = np.random.default_rng(seed)
    lengths = np.clip(np.rint(rng.lognormal(rng.uniform(4, 7), rng.uniform(0.5, 1.5),
                                            int(rng.integers(3000, 20000)))), 2, 8000)
    kept = np.unique(lengths)
    kept = kept[np.linspace(0, kept.size - 1, min(kept.size, 240)).astype(int)]
    lengths = kept[np.searchsorted(kept, lengths)].astype(np.int64)
    k = int(rng.integers(3, 12))
    shares = {"min_share": [0.0, 0.3 / k, 0.6 / k][seed % 3],
              "max_share": [1.0, 2.0 / k, 3.0 / k][seed // 2 % 3]}
    budget = int(lengths.max()) * int(rng.choice([2, 8, 32]))
    padding = bucketopt.solve(lengths, k, pad="batch", token_budget=budget, **shares)
    timed = bucketopt.solve(lengths, k, pad="batch", token_budget=budget, world_size=1,
                            profile={"alpha": 0.0, "beta": 1.0, "gamma": 0.0}, **shares)
    assert padding.optimality["exact"] and timed.optimality["exact"]
    assert timed.optimality["lower_bound"] == pytest.approx(
        padding.optimality["lower_bound"] + float(lengths.sum()), rel=1e-9)


@pytest.mark.parametrize("pad", ["batch", "edge"])
def test_stop_at_the_work_limit_is_the_same_on_one_cpu_or_two(pad):
    """Each part of a layer's ends has its own counter with its share of the work left: a stop
    at the limit (and what it returns) does not depend on how many CPUs run the parts. Some
    limit here stops inside the layers, another one does not."""
    from unittest import mock

    import bucketopt.objectives.certified.dp as certified

    lengths = np.clip(np.rint(np.random.default_rng(3).lognormal(6.0, 1.5, 4000)), 4, 20_000)
    obj = _fitted(lengths.astype(np.int64), "time", pad, 20_000, (0.05, 1e-6, 1e-12), 8)
    exact = set()
    for limit in (0, 2_000, 20_000, 200_000, 2_000_000):
        got = []
        for cpus in (1, 2):
            with mock.patch.object(certified, "WORK_LIMIT", limit), \
                    mock.patch.object(certified, "CPUS", cpus):
                opt, best, certs = certified_layers(obj, 6, [6])
            got.append((opt.tolist(), best[5], certs[6]))
        assert got[0] == got[1]
        exact.add(got[0][2].exact)
    assert exact == {True, False}


@pytest.mark.parametrize("pad", ["batch", "edge"])
def test_exact_layers_price_only_the_ends_the_relaxation_leaves(pad):
    """An exact layer prices only the ends the relaxed DP leaves (``_candidate_ends``), whatever
    its own bounds say: told to keep the last group alone at every layer, k = 1 still finds its
    optimum, and k = 4 no cover (only the one-bucket cover passes, above k = 4's upper bound)."""
    from unittest import mock

    import bucketopt.objectives.certified.dp as certified

    lengths = np.clip(np.rint(np.random.default_rng(5).lognormal(6.0, 1.2, 3000)), 4, 8000)
    obj = _fitted(lengths.astype(np.int64), "time", pad, 16_000, (0.05, 1e-6, 1e-12), 2)
    _, free, _ = certified_layers(obj, 4, [1, 4], exact=True)
    assert free[3] < free[0]
    with mock.patch.object(certified, "_candidate_ends",
                           lambda fwd, *args: np.array([fwd.shape[1] - 1])):
        _, kept, _ = certified_layers(obj, 4, [1, 4], exact=True)
    assert kept[0] == free[0]
    assert np.isinf(kept[3])


@pytest.mark.parametrize("limit", [5_000, 20_000])
def test_a_range_past_its_share_halts_the_layer(limit):
    """Once a range of a layer's ends passes its share of the work, the ranges after it (one
    CPU: they run in order) price nothing: the layer is incomplete whatever they find. (Edge
    padding: at these limits it stops in a layer of seven ranges, in its second or fourth.)"""
    from unittest import mock

    import bucketopt.objectives.certified.dp as certified

    lengths = np.clip(np.rint(np.random.default_rng(3).lognormal(6.0, 1.5, 4000)), 4, 20_000)
    obj = _fitted(lengths.astype(np.int64), "time", "edge", 20_000, (0.05, 1e-6, 1e-12), 8)
    layers = []
    run = certified.in_worker

    def spy(*fns):
        run(*fns)
        if all(getattr(f, "func", None) is not None and f.func.__name__ == "layer"
               for f in fns):
            layers.append([f.args[3] for f in fns])  # each range's [spent, share]

    with mock.patch.object(certified, "WORK_LIMIT", limit), \
            mock.patch.object(certified, "CPUS", 1), \
            mock.patch.object(certified, "in_worker", spy):
        certs = certified_layers(obj, 6, [6])[2]
    assert not certs[6].exact
    spent = layers[-1]
    over = [int(w[0]) > int(w[1]) for w in spent]
    first = over.index(True)
    assert first + 1 < len(spent)
    assert all(int(w[0]) == 0 for w in spent[first + 1:])
    assert all(int(w[0]) > 0 for w in spent[:first])


@pytest.mark.parametrize("pad", ["batch", "edge"])
@pytest.mark.parametrize("world", [1, 8])
def test_ranges_of_ends_do_not_change_the_optimum(pad, world):
    """An exact layer's ends split in 1, 2, 3 or 8 ranges (each range builds its hulls and
    prices its first end alone), on one CPU or two, give the same proven optimum and the same
    boundaries (ties to the smallest start): 4,719 distinct lengths, ranges of at least 4
    candidate ends. The same ranges on one CPU or two give the same value to the bit; other
    ranges group other ends into rectangles of sweeps, whose sums round differently (an ulp
    or so)."""
    from unittest import mock

    import bucketopt.objectives.certified.dp as certified
    from bucketopt.groups import backtrack

    rng = np.random.default_rng(7)
    lengths = np.rint(np.exp(rng.uniform(np.log(8), np.log(6000), 30_000))).astype(np.int64)
    obj = _fitted(lengths, "time", pad, 24_000, (0.05, 1e-6, 1e-12), world)
    ranges = []
    split = certified._parts

    def counted(*args):
        out = split(*args)
        ranges.append(len(out))
        return out

    got = []
    for parts, cpus in [(1, 1), (2, 2), (3, 1), (8, 2), (8, 1)]:
        with mock.patch.object(certified, "PARTS", parts), \
                mock.patch.object(certified, "CPUS", cpus), \
                mock.patch.object(certified, "SPLIT_ENDS", 4), \
                mock.patch.object(certified, "_parts", counted):
            opt, best, certs = certified_layers(obj, 6, [6], exact=True)
        assert certs[6].exact
        got.append((best[5], backtrack(opt, 6, obj.groups.g)))
    assert all(b == got[0][1] for _, b in got[1:])
    assert all(v == pytest.approx(got[0][0], rel=1e-12) for v, _ in got[1:])
    assert got[3] == got[4]  # 8 ranges on two CPUs or one
    assert max(ranges) == 8  # (SPLIT_ENDS = 4: every layer of more than 32 ends in 8)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.floats(-1e9, 1e9), st.just(float("inf"))), min_size=1,
                max_size=200), st.data())
def test_range_min_is_the_least_of_the_range(values, data):
    """_bound_kernels.range_min (the backward pass's bound of an end's small buckets) is the
    least of values[a:b] for any a < b, exactly."""
    from bucketopt.objectives.certified.relaxation import range_min, range_min_table

    values = np.asarray(values, dtype=np.float64)
    table = range_min_table(values)
    a = data.draw(st.integers(0, values.size - 1))
    b = data.draw(st.integers(a + 1, values.size))
    assert range_min(table, a, b) == values[a:b].min()


@settings(max_examples=300, deadline=None)
@given(st.integers(64, 900), st.integers(0, 2**32 - 1), st.data())
def test_small_best_is_the_least_small_bucket(n, seed, data):
    """_bound_kernels.small_best (blocks of starts bounded by their hulls, skipped where the
    bound is above the best found) gives the best and least start that pricing every small
    bucket in turn gives, from any best found before, on starts with infinite values, cells
    of any size, values close enough to tie, and a DP's values, where most blocks are
    skipped."""
    from bucketopt.objectives.certified import make_relaxation
    from bucketopt.objectives.certified.relaxation import (
        SMALL_LEAF,
        Blocks,
        block_hulls,
        cell_of,
        small_best,
    )

    rng = np.random.default_rng(seed)
    P = np.r_[0.0, np.cumsum(rng.integers(1, data.draw(st.sampled_from([3, 50])), size=n))]
    g = n
    shape = data.draw(st.sampled_from(["rough", "noisy", "smooth"]))
    many = data.draw(st.integers(0, 4 if shape == "smooth" else 30))
    cells = np.unique(np.r_[0, rng.integers(0, g, size=many)])
    nc = cells.size
    cell = cell_of(cells, g)
    cell_end = np.r_[cells[1:] - 1, g].astype(np.int64)
    if shape == "rough":  # coarse values: many ties
        icpt = rng.integers(0, 40, size=g).astype(np.float64)
        A2, Af = (rng.integers(-5, 5, size=(nc, g + 1)) * 100.0 for _ in range(2))
        U, Uf = (rng.integers(0, 5, size=(nc, g + 1)) * 1.0 for _ in range(2))
    elif shape == "noisy":
        icpt = rng.normal(0, 1e3, g)
        A2, Af = (rng.normal(0, 100.0, size=(nc, g + 1)) for _ in range(2))
        U, Uf = (np.abs(rng.normal(0, 1.0, size=(nc, g + 1))) for _ in range(2))
    else:  # a DP's values: convex in P, the best start inside the range, bounds close to it
        x = P[:g] / P[g]
        icpt = 1e3 * (x - rng.random()) ** 2 + rng.normal(0, 1e-3, g)
        A2, Af = (rng.normal(0, 1.0, size=(nc, g + 1)) for _ in range(2))
        U, Uf = (np.full((nc, g + 1), rng.normal(0, 1e3) / P[g]) + rng.normal(0, 1e-2 / P[g])
                 for _ in range(2))
    icpt[rng.random(g) < data.draw(st.sampled_from([0.0, 0.3, 0.9]))] = np.inf
    T = np.vstack([rng.normal(0, 50, g + 1), np.abs(rng.normal(0, 5, g + 1)),
                   rng.integers(1, 2000 if shape == "smooth" else 20, g + 1).astype(np.float64),
                   np.full(g + 1, 1.0 / rng.integers(1, 9))])
    if data.draw(st.booleans()):
        T[0] = -np.inf  # no top bound
    T[1:, 0] = 0.0
    levels = 1
    while (SMALL_LEAF << levels) <= g:
        levels += 1
    hulls, counts = block_hulls(P, icpt, g, levels)
    j = g
    stack = np.empty((2 * levels + 2, 2), dtype=np.int64)
    for a, b, best0 in [(0, g - 1, np.inf), (0, g - 1, float(rng.normal(0, 1e3))),
                        (data.draw(st.integers(0, g - 1)), g - 1, np.inf),
                        (int(rng.integers(0, g // 2)), int(rng.integers(g // 2, g)), 0.0)]:
        at0 = -1 if best0 == np.inf else g
        best, at = best0, at0
        for i in range(a, b + 1):
            if icpt[i] < np.inf:
                c = cell[i]
                top = T[0, j] + max(0.0, min((P[j] - P[i]) * T[3, j], T[2, j]) - 1.0) * T[1, j]
                v = max(A2[c, j] - U[c, j] * P[i], Af[c, j] - Uf[c, j] * P[i], top) + icpt[i]
                if v < best or (v == best and i < at):
                    best, at = v, i
        rel = make_relaxation(cells, A2, U, np.zeros(g + 1), A2=A2, split=np.zeros(g + 1), T=T)
        blocks = Blocks(hulls, counts, levels, stack, np.empty(2 * levels + 2))
        got = small_best(blocks, P, icpt, rel, Lines(Af, Uf), cell, cell_end, j, a, b, best0,
                         at0)
        assert got == (best, at)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 60), min_size=0, max_size=12), st.integers(1, 80))
def test_cell_of_is_the_last_cell_at_or_below(marks, g):
    """_bound_kernels.cell_of: start i's cell is the last c with cells[c] <= i (cells
    ascending from 0), as a slice a cell from the first gave it."""
    from bucketopt.objectives.certified.relaxation import cell_of

    cells = np.unique(np.r_[0, np.clip(marks, 0, g - 1)]).astype(np.int64)
    naive_cell = np.zeros(g + 1, np.int64)
    for c in range(1, cells.size):
        naive_cell[cells[c]:] = c
    assert cell_of(cells, g).tolist() == naive_cell.tolist()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 12), min_size=1, max_size=8), st.integers(1, 3),
       st.integers(12, 40), coefficients, st.sampled_from([1, 2, 3]),
       st.sampled_from([-1, 0, 5]))
def test_a_seed_stopped_at_its_limit_keeps_the_proof(lengths, k, budget, coeffs, world, seed_work):
    """pad="batch": the seed (the edge-padding time DP) may stop at SEED_WORK and hand over the
    best covers it found; the time DP still proves the brute-force optimum."""
    from unittest import mock

    from bucketopt.objectives import time as time_objective

    obj = _fitted(lengths, "time", "batch", budget, coeffs, world)
    kmax = min(k, obj.groups.g)
    with mock.patch.object(time_objective, "SEED_WORK", seed_work):
        seeds = obj.seed_chains(kmax, list(range(1, kmax + 1)))
        _, best, certs = certified_layers(obj, kmax, range(1, kmax + 1), exact=True)
    assert all(ends[-1] == obj.groups.g for ends in seeds.values())
    for layer in range(1, kmax + 1):
        oracle = naive.brute_force_synced(lengths, layer, budget, *coeffs, world, pad="batch")
        assert certs[layer].exact
        assert best[layer - 1] == pytest.approx(oracle[0], rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("j", [1, 255, 256, 700, 3000])
def test_a_scan_charges_the_starts_it_reads(j):
    """An exact layer's scan of an end's starts counts toward the work limit, one unit a
    SCAN_STARTS starts it reads: with no threshold it reads every start below the end (all
    candidates), so the count is theirs. (Uncounted, 100,000 distinct lengths from 1 to 4M
    tokens ran one layer 22 s under the limit.)"""
    from bucketopt.objectives.certified.hulls import hull_add
    from bucketopt.objectives.certified.layers import SCAN_STARTS, Bounds, Hulls, Layer, _scan_end
    from bucketopt.objectives.certified.pricing import step_scratch
    from bucketopt.objectives.certified.relaxation import big_starts, cell_of

    g = 3001
    xs = np.arange(g + 1, dtype=np.float64)
    ys = np.random.default_rng(j).uniform(0.0, 1.0, g + 1)
    cells = np.zeros(1, np.int64)
    cell_end = np.array([g], np.int64)
    stk, stk2 = np.empty(g + 1, np.int64), np.empty(g + 1, np.int64)
    hn, hn2 = np.zeros(1, np.int64), np.zeros(1, np.int64)
    for i in range(j):
        hn2[0] = hull_add(stk2, 0, hn2[0], xs, ys, i)
    big = big_starts(xs, np.full(g + 1, np.inf))  # no bucket is big: the fewest-rows family
    rows = np.zeros((1, g + 1))
    T = np.zeros((4, g + 1))
    T[0] = -np.inf
    work = np.array([0, 2**62], np.int64)
    bounds = Bounds(xs, cells, cell_of(cells, g), cell_end, big, rows, rows, rows, rows,
                    np.zeros(g + 1), np.zeros(g + 1), np.zeros(g + 1), T)
    none = np.full(g + 1, np.inf)
    layer = Layer(1, g, ys, none, none, np.zeros(g + 1, np.int64), np.full(g + 1, -1, np.int64),
                  np.empty(g + 1, np.int64), np.zeros(g + 1, np.int64),
                  np.full(g + 1, g, np.int64), work, step_scratch())
    ncand = _scan_end(j, layer, bounds, Hulls(stk, hn, stk2, hn2), np.inf, 0, 0)
    assert ncand == j
    assert work[0] == j // SCAN_STARTS


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 40), min_size=2, max_size=14), st.integers(40, 200),
       coefficients, st.sampled_from([1, 2, 8]), st.sampled_from(["batch", "edge"]),
       st.integers(0, 14), st.sampled_from(SHARES), st.integers(1, 5))
def test_exact_tail_is_the_backward_optimum(lengths, budget, coeffs, world, pad, first, shares,
                                            block):
    """The exact top of the rest's bound: for every start at or above ``first`` it is the least
    cost of covering the groups after it by at most s buckets (brute force over every bucket's
    exact cost, share windows kept), whatever the blocks of ends its sweeps take; below
    ``first`` it is 0 (no cost is negative)."""
    from bucketopt.objectives.certified.dp import windows
    from bucketopt.objectives.certified.layers import exact_tail

    budget = max(budget, max(lengths))
    obj = _fitted(lengths, "time", pad, budget, coeffs, world, shares)
    g = obj.groups.g
    first = min(first, g)
    kmax = 3
    out = exact_tail(obj.pricing(), first, kmax, windows(obj), block)
    want = np.full((kmax + 1, g + 1), np.inf)
    want[:, g] = 0.0
    for s in range(1, kmax + 1):
        for i in range(g - 1, -1, -1):
            best = want[s - 1, i]
            for j in range(i + 1, g + 1):
                if obj.win_lo[j] <= i <= obj.win_hi[j]:
                    cost = _exact_costs(obj, np.array([i]), np.array([j]))[0]
                    best = min(best, cost + want[s - 1, j])
            want[s, i] = best
    np.testing.assert_allclose(out[:, first:], want[:, first:], rtol=1e-9, atol=1e-12)
    assert np.all(out[:, :first] == 0.0)


@pytest.mark.parametrize("coeffs", [(0.0, 0.0, 1e-30), (1e-30, 1e-30, 1e-30),
                                    (0.3e-28, 0.02e-28, 1e-30)])
@pytest.mark.parametrize("pad", ["edge", "batch"])
@pytest.mark.parametrize("world", [1, 3])
def test_coefficients_at_the_floor_keep_the_proof(coeffs, pad, world):
    """The smallest coefficients a profile accepts (hypothesis once found gamma = 1.6e-276,
    whose products of two costs underflowed: a hull dropped a vertex, a bound passed the
    optimum and the DP found no cover): the DP proves the brute-force optimum."""
    lengths = [1, 3, 4, 5]
    sol = bucketopt.solve(lengths, 3, pad=pad, world_size=world,
                          profile=dict(alpha=coeffs[0], beta=coeffs[1], gamma=coeffs[2],
                                       token_budget=12))
    oracle = naive.brute_force_synced(lengths, 3, 12, *coeffs, world, pad=pad)
    got = naive.synced_time(lengths, sol.boundaries, 12, *coeffs, world, pad)
    assert got == pytest.approx(oracle[0], rel=1e-9, abs=0.0)
    assert sol.optimality["exact"]
    assert sol.optimality["lower_bound"] == pytest.approx(oracle[0], rel=1e-9, abs=0.0)
    assert np.isfinite(sol.ktok_per_s)


@pytest.mark.parametrize("gamma", [1.5750309354894306e-276, 5e-324, 9.9e-31])
def test_coefficients_below_the_floor_are_refused(gamma, tmp_path):
    """Below 1e-30 s no coefficient is a measurement, and the predictions overflow (Ktok/s was
    infinite and `--json` ended in a traceback): one line, exit 2."""
    with pytest.raises(bucketopt.BucketoptError, match=r"`gamma`.*at least 1e-30"):
        bucketopt.solve([1, 3, 4, 5], 2, profile=dict(alpha=0.0, beta=0.0, gamma=gamma,
                                                       token_budget=12))
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(dict(alpha=0.0, beta=0.0, gamma=gamma, token_budget=65536)))
    done = subprocess.run([sys.executable, "-m", "bucketopt", "solve", "-k", "4", "--profile",
                           str(path), "--gpus", "3", "--pad", "batch", "--json"],
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "gamma" in done.stderr


@SETTINGS
@given(st.lists(st.integers(1, 12), min_size=1, max_size=8), st.integers(1, 3),
       st.integers(12, 40), coefficients, st.sampled_from([1, 3]),
       st.sampled_from(["batch", "edge"]))
def test_solve_reports_a_true_certificate(lengths, k, budget, coeffs, world, pad):
    """solve(): the optimality it reports holds against brute force."""
    oracle = naive.brute_force_synced(lengths, k, budget, *coeffs, world, pad=pad)
    profile = dict(alpha=coeffs[0], beta=coeffs[1], gamma=coeffs[2], token_budget=budget)
    sol = bucketopt.solve(lengths, k, pad=pad, profile=profile, world_size=world)
    got = naive.synced_time(lengths, sol.boundaries, budget, *coeffs, world, pad)
    assert got == pytest.approx(oracle[0], rel=1e-9, abs=1e-12)
    cert = sol.optimality
    assert set(cert) == {"exact", "lower_bound", "gap"}
    assert cert["lower_bound"] <= oracle[0] * (1 + 1e-9) + 1e-12
    if cert["exact"]:
        assert cert["gap"] == 0.0
        assert cert["lower_bound"] == pytest.approx(oracle[0], rel=1e-9, abs=1e-12)


@SETTINGS
@given(st.lists(st.integers(1, 40), min_size=1, max_size=9), st.integers(1, 3),
       st.integers(40, 200), st.sampled_from(SHARES))
def test_batch_padding_certificate_below_brute_force(lengths, k, budget, shares):
    best = naive.brute_force_batch(lengths, k, budget, min_share=shares[0], max_share=shares[1])
    if best is None:
        return
    sol = bucketopt.solve(lengths, k, token_budget=budget, pad="batch", min_share=shares[0],
                          max_share=shares[1])
    cert = sol.optimality
    assert cert["lower_bound"] <= float(best[0]) * (1 + 1e-9) + 1e-9
    if cert["exact"]:
        assert cert["lower_bound"] == pytest.approx(float(best[0]), rel=1e-9, abs=1e-9)
    # the relaxation of the same objective, on its own, bounds it too
    obj = _fitted(lengths, "padding", "batch", budget, shares=shares)
    from bucketopt.objectives.certified import relaxed_bounds

    chains = {min(k, obj.groups.g): [obj.groups.g]}
    certs = relaxed_bounds(obj, min(k, obj.groups.g), chains, {min(k, obj.groups.g): 1e300})
    assert certs[min(k, obj.groups.g)].lower_bound <= float(best[0]) * (1 + 1e-9) + 1e-9


@SETTINGS
@given(st.lists(st.integers(1, 40), min_size=1, max_size=9), st.integers(1, 3),
       st.integers(40, 200), st.sampled_from([0.0, 0.5, 0.8]), st.data())
def test_padding_certificate_of_any_cover_is_true(lengths, k, budget, min_fill, data):
    """BatchPadding.certify (the default's certificate above EXACT_CANDIDATES groups) of any
    cover that meets min_fill (as the grid search's do): its bound is at or below the
    brute-force optimum under min_fill, it is exact only for an optimal cover, and without
    min_fill every optimal cover is proven exact."""
    best = naive.brute_force_batch(lengths, k, budget, min_fill=min_fill)
    assume(best is not None)
    obj = make_objective("padding", "batch", min_fill=min_fill)
    groups = make_groups(as_histogram(lengths), 1)
    win_lo, win_hi = share_windows(groups, 0.0, 1.0)
    obj.fit(groups, token_budget=budget, win_lo=win_lo, win_hi=win_hi)
    g = groups.g
    kk = min(k, g)
    inner = data.draw(st.lists(st.integers(1, max(g - 1, 1)), max_size=kk - 1, unique=True))
    ends = [*sorted(e for e in inner if e < g), g]
    assume(naive.batch_fills(lengths, groups.edges[ends], budget, min_fill))
    value = obj.cost(groups.edges[ends])
    cert = obj.certify(kk, {kk: ends}, {kk: value})[kk]
    optimum = float(best[0])
    assert cert.value == value
    assert cert.lower_bound <= optimum * (1 + 1e-9) + 1e-9
    optimal = value <= optimum * (1 + 1e-9) + 1e-9
    if cert.exact:
        assert optimal
    if min_fill == 0.0:
        assert cert.exact == optimal


def _exact_costs(obj, i, j):
    """The exact cost of every bucket (i[p], j[p]] of the fitted objective, one by one."""
    if obj.name == "time":
        return np.array([obj.cost(obj.groups.edges[[e]]) if s == 0 else
                         obj.cost(obj.groups.edges[[s, e]]) - obj.cost(obj.groups.edges[[s]])
                         for s, e in zip(i, j)])
    return obj.pair_costs(i, j)


def _top(T, j, n):
    """bucketopt.objectives.certified.relaxation.top_at, vectorised: the top bound of buckets of n
    samples ending at j."""
    from bucketopt.objectives.certified.relaxation import top_at

    want = np.array([top_at(T, jj, nn) for jj, nn in zip(j, n)])
    np.testing.assert_allclose(
        want, T[0, j] + np.maximum(0.0, np.minimum(n * T[3, j], T[2, j]) - 1.0) * T[1, j])
    return want


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 60), min_size=2, max_size=40), st.integers(20, 300),
       coefficients, st.sampled_from([1, 2, 8]),
       st.sampled_from([("time", "batch"), ("time", "edge"), ("padding", "batch")]),
       st.lists(st.integers(0, 30), max_size=4))
def test_relaxation_bounds_every_bucket(lengths, budget, coeffs, world, kind, cell_marks):
    """Every lower bound the certified DP uses is at or below the exact cost of its bucket:
    max(A[c, j] - U[c, j] P[i], top(j, n)) + R[i] for every start i in cell c (big buckets; A2
    for the others), and, for the time objective, the top bound alone (at n samples and at one
    row) and the Rows bounds (full steps, fewest rows, mean, top)."""
    budget = max(budget, max(lengths))
    obj = _fitted(lengths, kind[0], kind[1], budget, coeffs, world)
    g = obj.groups.g
    cells = np.unique(np.r_[0, np.clip(cell_marks, 0, g - 1)]).astype(np.int64)
    rel = obj.relaxation(cells)
    P = obj.groups.prefix_count.astype(np.float64)
    i, j = np.triu_indices(g + 1, 1)
    exact = _exact_costs(obj, i, j)
    slack = 1e-9 * np.maximum(np.abs(exact), 1.0)
    cell = np.searchsorted(rel.cells, i, side="right") - 1
    big = P[j] - P[i] >= rel.split[j]
    base = np.where(big, rel.A[cell, j], rel.A2[cell, j])
    n = P[j] - P[i]
    bound = np.maximum(base - rel.U[cell, j] * P[i], _top(rel.T, j, n)) + rel.R[i]
    assert np.all(bound <= exact + slack)
    if kind[0] != "time":
        return
    assert np.all(_top(rel.T, j, n) <= exact + slack)  # the top bound alone (R = 0 for time)
    assert np.all(rel.T[0, j] <= exact + slack)  # at one row, whatever the bucket
    rows = obj.rows(rel.cells)
    assert np.all(_top(rows.T, j, n) <= exact + slack)
    assert np.all(rows.A2[cell, j] - rows.U2[cell, j] * P[i] <= exact + slack)
    assert np.all(rows.Mm[j] - rows.Um[j] * P[i] + rows.R[i] <= exact + slack)
    big = P[j] - P[i] >= rows.split[j]
    full = rows.A[cell, j] - rows.U[cell, j] * P[i]
    assert np.all(np.where(big, full, -np.inf) <= exact + slack)


def _line_bounds(obj, cells):
    """(exact, bound, scaled) over every bucket (i, j] of the fitted time objective
    ``obj`` with cells of starts ``cells``: its exact cost, the relaxation's line bound
    (A for buckets of at least split samples, A2 for the others) and whether its cell's row
    took the scaled-draws line at j (_time_kernels.cell_rows: a slope below the plain one)."""
    rel = obj.relaxation(cells)
    P = obj.groups.prefix_count.astype(np.float64)
    i, j = np.triu_indices(obj.groups.g + 1, 1)
    cell = np.searchsorted(rel.cells, i, side="right") - 1
    big = P[j] - P[i] >= rel.split[j]
    bound = np.where(big, rel.A[cell, j], rel.A2[cell, j]) - rel.U[cell, j] * P[i]
    plain = np.r_[0.0, obj.cost_model.alpha / (obj.world * obj.sizes[1:])]
    moments = obj.__dict__["_moments"]  # cell start -> (phi, phi2, phi at SCALE times)
    phi = np.array([moments[int(rel.cells[c])][0][e] for c, e in zip(cell, j)])
    scaled = rel.U[cell, j] < plain[j] + phi / obj.world
    return _exact_costs(obj, i, j), bound, scaled


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.integers(1, 300), st.integers(1, 60), min_size=3, max_size=24),
       st.integers(300, 2400), coefficients, st.sampled_from([1, 2, 3, 8]),
       st.lists(st.integers(0, 23), max_size=6))
def test_scaled_draws_line_bounds_every_bucket(counts, budget, coeffs, world, cell_marks):
    """The time objective's line bounds where a cell's row takes the chord of its moments
    between the full steps' draws and SCALE times as many (_time_kernels.cell_rows, "Scaled
    draws" in docs/method.md: a bucket of the N longest of a cell's n samples has an E[max]
    of d draws at least the cell's of d n / N) are at or below every bucket's exact cost,
    with many samples a length, so that cells hold several full steps' draws."""
    lengths = [x for x, c in counts.items() for _ in range(c)]
    obj = _fitted(lengths, "time", "batch", max(budget, max(lengths)), coeffs, world)
    g = obj.groups.g
    cells = np.unique(np.r_[0, np.clip(cell_marks, 0, g - 1)]).astype(np.int64)
    exact, bound, _ = _line_bounds(obj, cells)
    assert np.all(bound <= exact + 1e-9 * np.maximum(np.abs(exact), 1.0))


def test_scaled_draws_line_is_taken_and_tighter_on_a_heavy_tail():
    """On a heavy tail whose long samples dominate the step time (gamma), a cell up to an
    eighth of the samples below a bucket's start bounds it from diluted moments: the
    scaled-draws line is taken there for a fifth or more of the buckets and stays below the
    exact cost."""
    rng = np.random.default_rng(3)
    lengths = np.clip(rng.lognormal(4.0, 1.2, 3000), 1, 3000).astype(np.int64)
    obj = _fitted(lengths, "time", "batch", 4096, (0.1, 1e-4, 1e-7), 3)
    P = obj.groups.prefix_count
    cells = np.unique(np.searchsorted(P, np.arange(8) * P[-1] / 8, side="right") - 1)
    cells = np.maximum(cells, 0).astype(np.int64)
    exact, bound, scaled = _line_bounds(obj, cells)
    assert scaled.sum() > 0.2 * scaled.size
    assert np.all(bound <= exact + 1e-9 * np.maximum(np.abs(exact), 1.0))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 400), min_size=2, max_size=300), st.lists(st.integers(0, 299),
       max_size=6), st.sampled_from([None, 2, 5]))
def test_top_cells_are_geometric_from_the_top(counts, marks, per_group):
    """certified._top_cells keeps the cells it is given and adds, for every count of samples
    from TOP_FIRST up to a quarter of them, a cell with at least that many samples above it
    and at most TOP_RATIO times as many plus one group's (the group holding the sample at that
    count); with room for few cells (CELL_ENTRIES) it thins the top cells and never drops the
    cells given."""
    from bucketopt.objectives.certified import dp as certified

    P = np.r_[0, np.cumsum(counts)].astype(np.float64)
    g = P.size - 1
    given = np.unique(np.r_[0, np.clip(marks, 0, g - 1)]).astype(np.int64)
    entries = certified.CELL_ENTRIES if per_group is None else (given.size + per_group) * (g + 1)
    old = certified.CELL_ENTRIES
    certified.CELL_ENTRIES = entries
    try:
        cells = certified._top_cells(P, given, g)
    finally:
        certified.CELL_ENTRIES = old
    assert cells.dtype == np.int64 and np.all(np.diff(cells) > 0)
    assert cells[0] == 0 and cells[-1] <= g - 1 and set(given) <= set(cells.tolist())
    top = np.setdiff1d(cells, given)
    if per_group is not None:
        assert top.size <= per_group
        return
    n = P[-1]
    above = certified.TOP_FIRST
    while above < n / 4:
        c = int(np.searchsorted(P, n - above, side="right") - 1)  # the naive position
        assert c in cells.tolist()
        assert n - P[c] >= above and n - P[c] - counts[c] < above  # its group holds that sample
        above *= certified.TOP_RATIO


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 400), st.data())
def test_last_batch_deficit_is_the_most_any_last_batch_loses(B, data):
    """_time_kernels.last_batch_deficit is at least r (phi_B - phi_r) for every r = 0..B and
    every concave phi through its three points (the chords between them are the least such
    phi), and is reached by one r (it is no looser than it must be)."""
    from bucketopt.objectives._time_kernels import last_batch_deficit

    d = data.draw(st.integers(1, B))
    v1 = data.draw(st.floats(0.0, 100.0))
    vd = v1 + data.draw(st.floats(0.0, 100.0))
    vB = vd + data.draw(st.floats(0.0, 100.0)) * (B - d) / max(d - 1, 1)  # concave: slopes fall
    r = np.arange(0, B + 1, dtype=np.float64)
    if 1 < d < B:
        lb = np.where(r <= d, v1 + (r - 1) * (vd - v1) / (d - 1),
                      vd + (r - d) * (vB - vd) / (B - d))
    elif B > 1:
        lb = v1 + (r - 1) * (vB - v1) / (B - 1)
    else:
        lb = np.full(r.size, vB)
    worst = float(np.max(r * (vB - lb)))  # r = 0 loses nothing
    got = last_batch_deficit(float(B), float(d), v1, vd, vB)
    assert got >= worst - 1e-9 * max(1.0, abs(worst))
    assert got <= worst + 1e-9 * max(1.0, abs(worst)) + 0.25 * float(np.max(np.abs(np.diff(
        r * (vB - lb)))))  # (the vertex may fall between two integers)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.integers(1, 120), st.integers(1, 80), min_size=2, max_size=10),
       st.integers(4, 60), coefficients, st.lists(st.integers(0, 9), max_size=3))
def test_one_gpu_line_bounds_buckets_of_several_large_batches(counts, rows, coeffs, marks):
    """On one GPU the full-steps line prices a bucket's last batch by the chords of its cell's
    moments at 1, B / MID_SHARE and B draws (_time_kernels.last_batch_deficit): with batches of
    4-60 rows and buckets of up to some 800 samples (every remainder r = N mod B), it stays at
    or below every bucket's exact cost, for time and for the padding DP's certificate."""
    lengths = [x for x, c in counts.items() for _ in range(c)]
    budget = rows * max(lengths)
    for obj in (_fitted(lengths, "time", "batch", budget, coeffs, 1),
                _fitted(lengths, "padding", "batch", budget)):
        if obj.name == "padding":
            obj = obj.unit()[0]  # the certificate's DP: one rank, a second a padded token
        g = obj.groups.g
        cells = np.unique(np.r_[0, np.clip(marks, 0, g - 1)]).astype(np.int64)
        exact, bound, _ = _line_bounds(obj, cells)
        assert np.all(bound <= exact + 1e-9 * np.maximum(np.abs(exact), 1.0))


def test_one_gpu_line_is_tight_where_a_bucket_holds_a_few_large_batches():
    """A bucket of 4.6 batches of 500 rows from a wide distribution: the line that prices the
    last batch by the chords of its cell's moments (1, B / 8 and B draws) bounds it within 2%
    of its cost (0.987 of it), where the line before, a whole batch of rows at the cell's
    mean, gave 0.81 of it (and 0.20 with batches of 2,000 rows, where this one gives 0.96)."""
    rng = np.random.default_rng(5)
    lengths = np.clip(rng.lognormal(6.0, 1.0, 2300), 1, 20_000).astype(np.int64)
    obj = _fitted(lengths, "time", "batch", 500 * int(lengths.max()), (0.0, 1.0, 0.0), 1)
    g = obj.groups.g
    exact, bound, _ = _line_bounds(obj, np.zeros(1, dtype=np.int64))
    i, j = np.triu_indices(g + 1, 1)
    whole = np.flatnonzero((i == 0) & (j == g))[0]  # the bucket of every sample
    assert obj.sizes[g] == 500
    assert 0.98 * exact[whole] <= bound[whole] <= exact[whole]


def _drawn_bucket(counts, budget, coeffs, world, data):
    """The pad="batch" time objective fitted to ``counts`` (length -> samples) and a bucket
    (i, j] of its groups drawn from ``data``: (obj, i, j)."""
    lengths = [x for x, c in counts.items() for _ in range(c)]
    obj = _fitted(lengths, "time", "batch", max(budget, max(lengths)), coeffs, world)
    j = data.draw(st.integers(1, obj.groups.g))
    return obj, data.draw(st.integers(0, j - 1)), j


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.integers(1, 60), st.integers(1, 200), min_size=2, max_size=12),
       st.integers(60, 4000), coefficients, st.sampled_from([1, 2, 3, 8]), st.data())
def test_reference_bound_is_below_every_bucket(counts, budget, coeffs, world, data):
    """The bound a start of the exact layers gets from a reference start at or below it
    (_pricing.tilde with _certified_kernels._ref_moments, lower bounds of the moments of the
    reference's larger bucket: the step types exact, the full steps' and the other steps'
    E[max] at least those, and a step
    between those draw counts on their chords, E[max] being concave in the draws) is at or
    below the bucket's exact cost: with the reference at the start itself too, where it is
    tightest. So is the quick bound checked before it (_certified_kernels._quick: the exact
    step count, the whole full steps at the reference's moments, the other rows on the chord
    from the mean), and it is below tilde."""
    from bucketopt.objectives.certified.layers import _quick, _ref_moments
    from bucketopt.objectives.certified.pricing import diluted, step_scratch, tilde
    from bucketopt.orderstats import walk_moments

    obj, i, j = _drawn_bucket(counts, budget, coeffs, world, data)
    ref = data.draw(st.sampled_from([i, data.draw(st.integers(0, i))]))
    exact = _exact_costs(obj, [i], [j])[0]
    pr = obj.pricing()
    values, pcv, group_end, sizes, world_ = pr.values, pr.pcv, pr.group_end, pr.sizes, pr.world
    lf_hi, lf_lo = pr.lf_hi, pr.lf_lo
    m1, m2, f1, f2 = _ref_moments(pr, ref, j, step_scratch())
    bound = tilde(pr, i, j, m1, m2, f1, f2, step_scratch())
    assert bound <= exact + 1e-9 * max(abs(exact), 1.0)
    # the full steps' moments diluted (_pricing.diluted, as the exact layers' rectangles take
    # them): the same bound, higher
    P = obj.groups.prefix_count.astype(np.float64)
    full, n, n_ref = world_ * sizes[j], P[j] - P[i], P[j] - P[ref]
    if full < n:
        u1, u2 = walk_moments(values, pcv, group_end[ref], group_end[j], full + 1, lf_hi, lf_lo)
        d1, d2 = diluted(m1, u1, full, n_ref, n), diluted(m2, u2, full, n_ref, n)
        raised = tilde(pr, i, j, d1, d2, f1, f2, step_scratch())
        assert bound - 1e-9 * abs(bound) <= raised <= exact + 1e-9 * max(abs(exact), 1.0)
        quick = _quick(pr, P, i, j, d1, d2)
        assert quick <= exact + 1e-9 * max(abs(exact), 1.0)
    quick = _quick(pr, P, i, j, m1, m2)
    assert quick <= exact + 1e-9 * max(abs(exact), 1.0)
    # and below tilde itself, whose terms it sums up (the same step count and whole steps, each
    # other step's largest batch and its chords at least what quick takes)
    assert quick <= bound + 1e-9 * max(abs(bound), 1.0)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=14),
       st.lists(st.integers(0, 40), min_size=1, max_size=10), st.integers(1, 12))
def test_diluted_reference_moments_are_below_the_buckets(bucket, shorter, full):
    """_pricing.diluted: from a reference bucket with the same samples and some shorter ones
    (its E[M] and E[M^2] of ``full`` and ``full + 1`` draws, exact fractions from
    tests/naive.py), a lower bound of the bucket's own E[M] and E[M^2] of ``full`` draws, at
    least the reference's."""
    from bucketopt.objectives.certified.pricing import diluted

    low = min(bucket)
    extra = [min(x, low) for x in shorter]  # every added sample at most the bucket's shortest
    ref = bucket + extra
    assume(full < len(bucket))
    n, n_ref = len(bucket), len(ref)
    for power in (1, 2):
        own = float(naive.expected_max_exact([x ** power for x in bucket], full))
        m = float(naive.expected_max_exact([x ** power for x in ref], full))
        up = float(naive.expected_max_exact([x ** power for x in ref], full + 1))
        bound = diluted(m, up, float(full), float(n_ref), float(n))
        assert m <= bound <= own * (1 + 1e-12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.integers(1, 300), st.integers(1, 30), min_size=2, max_size=40),
       st.integers(2, 60), st.sampled_from([1e-6, 1e-3, 0.1, 0.5]), st.data())
def test_walks_that_bound_stop_early_below_the_moments(counts, draws, rel, data):
    """A walk stopped at ``rel`` of the top (orderstats.walk_moments_capped, the references'
    and the cells' moments, BOUND_REL) gives lower bounds of E[M] and E[M^2] (tests/naive.py,
    exact fractions), walks no more lengths than the exact walk, and is the exact walk at
    NEGLIGIBLE. prefix_moments stopped so stays below the exact one at every end, its steps
    after each walk included."""
    from bucketopt.objectives.certified.relaxation import prefix_moments
    from bucketopt.orderstats import NEGLIGIBLE, log_factorial_table, walk_moments_capped

    values = np.array(sorted(counts), dtype=np.int64)
    pcv = np.r_[0, np.cumsum([counts[v] for v in values])].astype(np.int64)
    xs = [int(v) for v in values for _ in range(counts[int(v)])]
    assume(draws < len(xs))
    lf_hi, lf_lo = log_factorial_table(len(xs))
    args = (values, pcv, 0, values.size, draws, lf_hi, lf_lo, 0.0, 0.0, np.inf)
    m1, m2, exact, walked = walk_moments_capped(*args, rel)
    e1, e2, exact0, walked0 = walk_moments_capped(*args, NEGLIGIBLE)
    assert exact0 and walked <= walked0
    t1 = float(naive.expected_max_exact(xs, draws))
    t2 = float(naive.expected_max_exact([x * x for x in xs], draws))
    assert e1 == pytest.approx(t1, rel=1e-12) and e2 == pytest.approx(t2, rel=1e-12)
    assert m1 <= t1 * (1 + 1e-12) and m2 <= t2 * (1 + 1e-12)
    top = float(values[-1])
    assert m1 >= t1 - 2 * rel * top - 1e-9 * top
    if exact:
        assert (m1, m2) == (e1, e2)
    # prefix_moments from a drawn first group, each end its own draw count
    first = data.draw(st.integers(0, values.size - 2))
    group_end = np.arange(values.size + 1, dtype=np.int64)
    d = np.r_[0, data.draw(st.lists(st.integers(1, draws), min_size=values.size,
                                    max_size=values.size))].astype(np.int64)
    q1 = np.r_[0, np.cumsum([v * counts[int(v)] for v in values])].astype(np.float64)
    q2 = np.r_[0, np.cumsum([v * v * counts[int(v)] for v in values])].astype(np.float64)
    low = prefix_moments(values, pcv, q1, q2, group_end, d, lf_hi, lf_lo, first, rel)
    full = prefix_moments(values, pcv, q1, q2, group_end, d, lf_hi, lf_lo, first)
    for lo_m, ex_m in zip(low, full):
        assert np.all(lo_m <= ex_m * (1 + 1e-12) + 1e-12)


def _exact_ref_moments(pr, i, j):
    """(E[M], E[M^2]) of the full steps' rows and of the fewest rows' draws from (i, j], walked
    to NEGLIGIBLE (-inf where _ref_moments gives none)."""
    from bucketopt.objectives._time_kernels import fewest_rows
    from bucketopt.orderstats import walk_moments

    values, pcv, group_end, sizes, world = pr.values, pr.pcv, pr.group_end, pr.sizes, pr.world
    lf_hi, lf_lo = pr.lf_hi, pr.lf_lo
    lo, hi = group_end[i], group_end[j]
    n = pcv[hi] - pcv[lo]
    full = world * min(int(sizes[j]), n)
    fewest = fewest_rows(world, int(sizes[j]))
    m = walk_moments(values, pcv, lo, hi, full, lf_hi, lf_lo)
    f = walk_moments(values, pcv, lo, hi, fewest, lf_hi, lf_lo) if 1 < fewest < n else (
        -np.inf, -np.inf)
    return (*m, *f)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.integers(1, 60), st.integers(1, 120), min_size=2, max_size=14),
       st.integers(60, 2000), coefficients, st.sampled_from([1, 2, 3, 8]), st.data())
def test_rectangle_sweeps_equal_walks(counts, budget, coeffs, world, data):
    """_pricing.rect_costs, a rectangle of buckets priced by sweeps, equals each bucket priced by
    walks (_pricing.pair_cost), and its moments (the full steps' and the fewest rows') equal
    those walked (to NEGLIGIBLE)."""
    from hypothesis import assume

    from bucketopt.objectives.certified.pricing import (
        FEW1,
        FEW2,
        MAIN1,
        MAIN2,
        SWEEP_MAX,
        SWEEP_TERMS,
        UP1,
        UP2,
        pair_cost,
        rect_costs,
        step_scratch,
    )
    from bucketopt.orderstats import walk_moments

    lengths = [x for x, c in counts.items() for _ in range(c)]
    budget = max(budget, max(lengths))
    obj = _fitted(lengths, "time", "batch", budget, coeffs, world)
    g = obj.groups.g
    pr = obj.pricing()
    values, pcv, group_end, sizes, world_ = pr.values, pr.pcv, pr.group_end, pr.sizes, pr.world
    lf_hi, lf_lo = pr.lf_hi, pr.lf_lo
    first = data.draw(st.integers(1, g))
    ends = np.arange(first, data.draw(st.integers(first, g)) + 1, dtype=np.int64)
    s = int(world_ * sizes[ends].max())
    assume(s <= SWEEP_MAX)
    starts = np.array(sorted(data.draw(st.sets(st.integers(0, first - 1), min_size=1)),
                             reverse=True), dtype=np.int64)
    shape = (ends.size, starts.size)
    out = np.full(shape, np.nan)
    moments = np.full((6, *shape), np.nan)
    work = rect_costs(pr, starts, ends, s, np.full(starts.size, ends.size - 1), out, moments)
    m1, m2, f1, f2 = moments[MAIN1], moments[MAIN2], moments[FEW1], moments[FEW2]
    u1, u2 = moments[UP1], moments[UP2]
    # its work: a unit a bucket, and one a SWEEP_TERMS terms (each length taken in once a start
    # for s + 2 draw counts: 0 to s + 1, one beyond the steps' rows)
    taken = group_end[ends[-1]] - group_end[starts[-1]] - 1
    assert ends.size * starts.size <= work <= ends.size * starts.size + (
        starts.size * taken * (s + 2)) // SWEEP_TERMS
    for a, j in enumerate(ends):
        for q, i in enumerate(starts):
            cost, ok = pair_cost(pr, i, j, np.inf, step_scratch())
            assert ok
            assert out[a, q] == pytest.approx(cost, rel=1e-9, abs=1e-12)
            walked = _exact_ref_moments(obj.pricing(), i, j)
            assert m1[a, q] == pytest.approx(walked[0], rel=1e-9, abs=1e-12)
            assert m2[a, q] == pytest.approx(walked[1], rel=1e-9, abs=1e-12)
            n = pcv[group_end[j]] - pcv[group_end[i]]
            full = world_ * min(int(sizes[j]), n)
            up = (float(values[group_end[j] - 1]),) * 2  # one draw more than the bucket holds
            if full < n:
                up = walk_moments(values, pcv, group_end[i], group_end[j], full + 1, lf_hi,
                                  lf_lo)
            else:
                up = (up[0], up[0] ** 2)
            assert u1[a, q] == pytest.approx(up[0], rel=1e-9, abs=1e-12)
            assert u2[a, q] == pytest.approx(up[1], rel=1e-9, abs=1e-12)
            if world_ * min(int(sizes[j]), n) < n:  # more than one step: the fewest rows' too
                assert f1[a, q] == pytest.approx(walked[2], rel=1e-9, abs=1e-12)
                assert f2[a, q] == pytest.approx(walked[3], rel=1e-9, abs=1e-12)


def _relaxed_inputs(lengths, pad, budget, coeffs, world, shares, cell_marks):
    """The fitted time objective, its relaxation and rows over cells at ``cell_marks``, and P."""
    obj = _fitted(lengths, "time", pad, budget, coeffs, world, shares)
    g = obj.groups.g
    cells = np.unique(np.r_[0, np.clip(cell_marks, 0, g - 1)]).astype(np.int64)
    rel = obj.relaxation(cells)
    return obj, rel, obj.rows(rel.cells), obj.groups.prefix_count.astype(np.float64)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 400), min_size=3, max_size=60, unique=True),
       st.tuples(st.floats(1e-3, 1.0), st.floats(1e-4, 1.0), st.sampled_from([0.0, 1e-6, 1e-3])))
def test_mean_envelope_prices_one_row_batches_exactly(lengths, coeffs):
    """On one GPU with batches of one row at the top edge (T = the longest sample), the last
    bucket (i, g] costs exactly alpha N + the sum of its rows' own seconds, the mean bound: the
    backward pass's bwd[1, i] equals that cost for every start i, though its only cell starts
    at 0 (whose line prices the rows from the mean of every sample, shorter ones included,
    and alone stays below it for some start above 0)."""
    from bucketopt.objectives.certified.relaxation import relaxed_layers

    obj, rel, rows, P = _relaxed_inputs(lengths, "batch", max(lengths), coeffs, 1, (0.0, 1.0),
                                        [])
    g = obj.groups.g
    assert obj.sizes[g] == 1 and rel.cells.tolist() == [0]
    exact = _exact_costs(obj, np.arange(g), np.full(g, g))
    tail = np.zeros((2, g + 1))
    win = Windows(obj.win_lo, obj.win_hi)
    bwd = relaxed_layers(rel, rows.fewest, rows.mean, P, win, 1, False, True, tail)[2]
    np.testing.assert_allclose(bwd[1, :g], exact, rtol=1e-9)
    none = MeanLines(np.full(g + 1, -np.inf), np.zeros(g + 1), np.zeros(g + 1))
    lines = relaxed_layers(rel, rows.fewest, none, P, win, 1, False, True, tail)[2]
    assert np.all(lines[1, :g] <= exact * (1 + 1e-9))
    assert np.any(lines[1, 1:g] < exact[1:] * (1 - 1e-6))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 60), min_size=2, max_size=40), st.integers(60, 200), coefficients,
       st.sampled_from([1, 3, 8]), st.sampled_from(["batch", "edge"]),
       st.lists(st.integers(0, 60), max_size=6), st.sampled_from([1, 2]),
       st.sampled_from(SHARES))
def test_backward_pass_by_halves_of_cells_equals_the_serial_pass(lengths, budget, coeffs, world,
                                                                pad, cell_marks, cpus, shares):
    """The backward pass layer by layer with each layer's cells in two halves (at once with two
    CPUs) gives the serial pass's values exactly."""
    from unittest import mock

    from bucketopt.objectives.certified import dp as certified
    from bucketopt.objectives.certified.relaxation import relaxed_layers

    obj, rel, rows, P = _relaxed_inputs(lengths, pad, budget, coeffs, world, shares, cell_marks)
    g = obj.groups.g
    kmax = min(4, g)
    tail = np.zeros((kmax + 1, g + 1))
    tail[1:, :g] = np.linspace(0, 1e-3, g)  # a bound of its own, carried down
    windows = Windows(obj.win_lo, obj.win_hi)
    want = relaxed_layers(rel, rows.fewest, rows.mean, P, windows, kmax, False, True, tail)[2]
    with mock.patch.object(certified, "CPUS", cpus):
        got = certified.backward_pass(rel, rows, P, windows, kmax, tail)
    np.testing.assert_array_equal(got, want)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.integers(1, 400), st.integers(1, 12), min_size=2, max_size=48),
       st.integers(400, 3000), coefficients, st.sampled_from([1, 3, 8]),
       st.sampled_from(["batch", "edge"]), st.lists(st.integers(0, 47), max_size=4),
       st.sampled_from(SHARES))
def test_backward_pass_skips_only_small_blocks_that_cannot_win(counts, budget, coeffs, world,
                                                               pad, cell_marks, shares):
    """The backward pass skips a block of a start's small buckets where the block's bound
    (_bound_kernels._small_blocks: its rows' least intercepts and largest slopes) is at or above
    the best found: the same values as the pass that prices every small bucket (its Python
    form with every block bounded at -inf), with many small buckets an end (large batches)."""
    from unittest import mock

    from bucketopt.objectives.certified import relaxation as kernels

    lengths = [x for x, c in counts.items() for _ in range(c)]
    obj, rel, rows, P = _relaxed_inputs(lengths, pad, max(budget, max(lengths)), coeffs, world,
                                        shares, cell_marks)
    g = obj.groups.g
    kmax = min(4, g)
    from_big = kernels.ends_of_big(kernels.big_starts(P, rel.split), g)
    first = kernels.window_firsts(kernels.window_tops(obj.win_hi), g)
    order = np.arange(rel.cells.size - 1, -1, -1)

    def run(layer):
        bwd = np.full((kmax + 1, g + 1), np.inf)
        bwd[:, g] = 0.0
        for k in range(1, kmax + 1):
            layer(k, order, rel, rows.fewest, P, from_big, first,
                  Windows(obj.win_lo, obj.win_hi), bwd, np.zeros((kmax + 1, g + 1)))
        return bwd

    def unbounded(k, c, r0, nb, *rest):
        out = np.zeros((5, nb))
        out[0] = out[2] = out[4] = -np.inf
        return out

    want = run(kernels.backward_layer)
    # (in Python, the column of no end, -inf + inf, warns where the compiled code does not)
    with mock.patch.object(kernels, "_small_blocks", unbounded), np.errstate(invalid="ignore"):
        got = run(kernels.backward_layer.py_func)
    np.testing.assert_allclose(want, got, rtol=1e-12)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 60), min_size=2, max_size=30), st.integers(60, 200), coefficients,
       st.sampled_from([1, 3, 8]), st.sampled_from(["batch", "edge"]),
       st.lists(st.integers(0, 30), max_size=4),
       st.sampled_from([*SHARES, (0.1, 0.5), (0.25, 0.45)]))
def test_relaxed_passes_bound_every_cover_within_the_shares(lengths, budget, coeffs, world, pad,
                                                            cell_marks, shares):
    """The relaxed DP's forward and backward values are at or below the exact DP's over every
    prefix and suffix of the groups (every bucket priced exactly, within the share windows),
    for every k: min and max shares, several cells; and the forward pass's best starts lie in
    the windows (its chain is a cover that keeps the shares: an upper bound)."""
    from bucketopt.objectives.certified.relaxation import relaxed_layers

    obj, rel, rows, P = _relaxed_inputs(lengths, pad, budget, coeffs, world, shares, cell_marks)
    g = obj.groups.g
    kmax = min(4, g)
    fwd, arg, bwd = relaxed_layers(rel, rows.fewest, rows.mean, P,
                                   Windows(obj.win_lo, obj.win_hi), kmax, True, True,
                                   np.zeros((kmax + 1, g + 1)))
    i, j = np.triu_indices(g + 1, 1)
    cost = np.full((g + 1, g + 1), np.inf)
    allowed = (obj.win_lo[j] <= i) & (i <= obj.win_hi[j])
    cost[i[allowed], j[allowed]] = _exact_costs(obj, i[allowed], j[allowed])
    ahead = np.full((kmax + 1, g + 1), np.inf)  # covers of 1..j by at most k buckets
    behind = np.full((kmax + 1, g + 1), np.inf)  # covers of i+1..g
    ahead[:, 0] = 0.0
    behind[:, g] = 0.0
    for k in range(1, kmax + 1):
        ahead[k] = np.minimum(ahead[k - 1], np.min(ahead[k - 1][:, None] + cost, axis=0))
        behind[k] = np.minimum(behind[k - 1], np.min(cost + behind[k - 1][None, :], axis=1))
    slack = 1e-9 * np.maximum(np.abs(np.where(np.isfinite(ahead), ahead, 0)), 1.0)
    assert np.all(fwd <= ahead + slack)
    slack = 1e-9 * np.maximum(np.abs(np.where(np.isfinite(behind), behind, 0)), 1.0)
    assert np.all(bwd <= behind + slack)
    kk, jj = np.nonzero(np.isfinite(fwd[1:, 1:]))
    start = arg[kk + 1, jj + 1]
    assert np.all((obj.win_lo[jj + 1] <= start) & (start <= obj.win_hi[jj + 1]))


@SETTINGS
@given(st.lists(st.integers(1, 12), min_size=2, max_size=8), st.integers(1, 3),
       st.integers(12, 40), coefficients, st.sampled_from([1, 2, 3]),
       st.sampled_from(["batch", "edge"]), st.sampled_from(SHARES), st.randoms())
def test_polish_never_raises_the_cost_nor_passes_the_optimum(lengths, k, budget, coeffs, world,
                                                             pad, shares, rnd):
    """polish() (the cover returned past the work limit, moved to the best one near it): a
    cover with its ends increasing and g last, at most as costly as the one given and at
    least the brute-force optimum."""
    from bucketopt.objectives.certified import dp as certified

    obj = _fitted(lengths, "time", pad, budget, coeffs, world, shares)
    g = obj.groups.g
    kk = min(k, g)
    oracle = naive.brute_force_synced(lengths, kk, budget, *coeffs, world, pad=pad,
                                      min_share=shares[0], max_share=shares[1])
    if oracle is None:  # no cover within the shares
        return
    ends = [*sorted(rnd.sample(range(1, g), kk - 1)), g]
    lo, hi = np.asarray(obj.win_lo, np.int64), np.asarray(obj.win_hi, np.int64)
    given_cost = obj.cost(obj.groups.edges[ends])
    got = certified.polish(obj.pricing(), ends, Windows(lo, hi))
    assert got[-1] == g and all(a < b for a, b in zip(got, got[1:])) and len(got) <= kk
    given_fits = all(lo[e] <= i <= hi[e] for i, e in zip([0, *ends[:-1]], ends))
    if not given_fits and got == ends:
        return  # (the DP gives only covers within the shares) none near: the cover comes back
    assert all(lo[e] <= i <= hi[e] for i, e in zip([0, *got[:-1]], got))  # the shares hold
    cost = obj.cost(obj.groups.edges[got])
    assert cost >= oracle[0] * (1 - 1e-9) - 1e-12
    if given_fits:
        assert cost <= given_cost * (1 + 1e-9) + 1e-12



@SETTINGS
@given(st.lists(st.integers(1, 30), min_size=3, max_size=40), st.integers(2, 4),
       st.integers(30, 200), coefficients, st.sampled_from([1, 2, 3, 8]),
       st.sampled_from(["batch", "edge"]), st.sampled_from(SHARES), st.randoms())
def test_window_chain_is_the_cheapest_cover_through_its_windows(lengths, k, budget, coeffs,
                                                                world, pad, shares, rnd):
    """_certified_kernels.window_chain (polish()'s step: rectangles of sweeps where its steps
    are small enough, walks elsewhere, windows that overlap too): the cheapest cover whose t-th
    bucket ends in window t, every bucket within its share window, as enumerating every such
    cover finds it (costs equal to rounding)."""
    import itertools

    from bucketopt.objectives.certified.layers import window_chain

    obj = _fitted(lengths, "time", pad, budget, coeffs, world, shares)
    g = obj.groups.g
    kk = min(k, g)
    lo, hi = np.asarray(obj.win_lo, np.int64), np.asarray(obj.win_hi, np.int64)
    inner = [sorted(rnd.sample(range(1, g), min(g - 1, rnd.randint(1, 4))))
             for _ in range(kk - 1)]
    windows = [[0], *inner, [g]]
    flat = np.concatenate([np.asarray(w, np.int64) for w in windows])
    offsets = np.r_[0, np.cumsum([len(w) for w in windows])].astype(np.int64)
    ends, cost = window_chain(obj.pricing(), Windows(lo, hi), flat, offsets)
    best = np.inf
    for chain in itertools.product(*windows[1:]):
        starts = [0, *chain[:-1]]
        if all(i < e and lo[e] <= i <= hi[e] for i, e in zip(starts, chain)):
            best = min(best, obj.cost(obj.groups.edges[list(chain)]))
    if not np.isfinite(best):
        assert not np.isfinite(cost)
        return
    assert all(e in w for e, w in zip(ends, windows[1:]))
    assert abs(cost - best) <= 1e-9 * best + 1e-12
    assert abs(obj.cost(obj.groups.edges[list(ends)]) - best) <= 1e-9 * best + 1e-12

def test_certificate_is_exact_and_fast_path_on_the_embedded_example():
    """The story's setting: pad="edge" time DP on 8 GPUs is proven exact by the certified DP."""
    from bucketopt import datasets

    lengths = datasets.seed_like()
    sol = bucketopt.solve(lengths, 6, profile="rtx-pro-6000-blackwell", world_size=8)
    assert sol.optimality["exact"] and sol.optimality["gap"] == 0.0
    again = bucketopt.evaluate(lengths, sol.boundaries, profile="rtx-pro-6000-blackwell",
                               world_size=8)
    assert again.optimality is None
    assert sol.ktok_per_s == pytest.approx(again.ktok_per_s, rel=1e-12)


@pytest.mark.parametrize("delay, cold", [(1.0, False), (4.0, False), (2.5, True)])
def test_ctrl_c_during_a_profiled_compare_exits_130(delay, cold, tmp_path):
    """SIGINT at 1 s and 4 s into compare with a profile: one line, exit 130, no traceback;
    also while numba compiles from an empty cache (a fresh install), where a KeyboardInterrupt
    raised inside its ctypes callbacks would be printed and ignored."""
    import os
    import signal
    import subprocess
    import sys
    import time

    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path)) if cold else None
    proc = subprocess.Popen([sys.executable, "-m", "bucketopt", "compare", "-k", "6",
                             "--profile", "rtx-pro-6000-blackwell", "--gpus", "8"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    time.sleep(delay)
    if proc.poll() is not None:
        pytest.skip("compare finished before the signal")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130
    assert "Traceback" not in err and "SystemError" not in err
    assert err.strip().splitlines()[-1] == "bucketopt: interrupted"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 12), min_size=2, max_size=8), st.integers(12, 40), coefficients,
       st.sampled_from([1, 3]), st.sampled_from(["batch", "edge"]))
def test_time_sweep_rows_are_certified_against_brute_force(lengths, budget, coeffs, world, pad):
    """sweep() with a profile: every k's row is the time optimum (brute force) or states a gap
    whose lower bound is at or below it."""
    profile = dict(alpha=coeffs[0], beta=coeffs[1], gamma=coeffs[2], token_budget=budget)
    sweep = bucketopt.sweep(lengths, [1, 2, 3], pad=pad, profile=profile, world_size=world)
    for k, sol in zip(sweep.ks, sweep.solutions):
        oracle = naive.brute_force_synced(lengths, k, budget, *coeffs, world, pad=pad)
        got = naive.synced_time(lengths, sol.boundaries, budget, *coeffs, world, pad)
        cert = sol.optimality
        assert cert["lower_bound"] <= oracle[0] * (1 + 1e-9) + 1e-12
        if cert["exact"]:
            assert got == pytest.approx(oracle[0], rel=1e-9, abs=1e-12)
        assert got >= oracle[0] * (1 - 1e-9) - 1e-12


class _Stream:
    def __init__(self, tty):
        self.tty = tty
        self.text = ""

    def isatty(self):
        return self.tty

    def write(self, text):
        self.text += text

    def flush(self):
        pass


@pytest.mark.parametrize("tty", [True, False])
def test_stage_line_for_a_long_step(tty):
    """A step over the delay draws its line (redrawn on a terminal, plain lines elsewhere); a
    short one, or a disabled one (-q), draws nothing."""
    import time

    from bucketopt.progress import Stage

    out = _Stream(tty)
    with Stage("solving k=6", enabled=True, delay=0.05, every=0.1, stream=out):
        time.sleep(0.5)
    assert "solving k=6:" in out.text
    lines = out.text.replace("\r", "\n").strip().splitlines()
    assert len(lines) >= 2 and all(line.startswith("solving k=6: ") for line in lines)
    assert out.text.endswith("\n")
    for enabled, pause in ((True, 0.0), (False, 0.3)):
        quiet = _Stream(tty)
        with Stage("x", enabled=enabled, delay=0.2, stream=quiet):
            time.sleep(pause)
        assert quiet.text == ""


@pytest.mark.parametrize("argv, flag", [
    (["export", "-f", "lhotse", "--boundaries", "1000,8191", "--token-budget", "32768",
      "--exact"], "--boundaries"),
    (["compare", "-k", "3", "--token-budget", "32768", "--exact"], "compare"),
    (["solve", "-k", "3", "--token-budget", "32768", "--pad", "batch", "--exact", "--max-share",
      "2"], "--max-share"),
])
def test_exact_where_it_does_not_apply_is_one_clear_line(argv, flag, capsys):
    from bucketopt.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("bucketopt: error: ") and flag in err[-1]
    assert not any("Traceback" in line for line in err)


def test_exact_must_be_a_bool():
    with pytest.raises(bucketopt.BucketoptError, match="`exact` must be True or False"):
        bucketopt.solve([3, 4, 10], 2, exact="yes")


_CALLBACK_SIGINT = """
import ctypes, os, signal, sys
{install}
libc = ctypes.CDLL(None)
CMP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
def compare(a, b):
    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while C code runs a Python callback
    for _ in range(10000):
        pass
    return 0
items = (ctypes.c_int * 4)(4, 3, 2, 1)
libc.qsort(items, 4, ctypes.sizeof(ctypes.c_int), CMP(compare))
print("carried on")
"""


@pytest.mark.parametrize("install", [False, True])
def test_ctrl_c_inside_a_ctypes_callback_is_not_swallowed(install):
    """numba compiles through ctypes callbacks, where a KeyboardInterrupt is printed and ignored
    (the control, without the CLI's handler, carries on); the CLI's SIGINT handler exits 130
    with one line."""
    import subprocess
    import sys

    # the control sets Python's own handler: a process started with SIGINT ignored (a background
    # job of a non-interactive shell) would otherwise keep it ignored, and nothing is raised
    code = _CALLBACK_SIGINT.format(install=(
        "from bucketopt.cli import _interrupted\nsignal.signal(signal.SIGINT, _interrupted)"
        if install else "signal.signal(signal.SIGINT, signal.default_int_handler)"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    if install:
        assert out.returncode == 130 and out.stdout == ""
        assert out.stderr.strip() == "bucketopt: interrupted"
    else:
        assert "carried on" in out.stdout and "KeyboardInterrupt" in out.stderr


def test_padding_certificate_without_the_dps_cover_proves_nothing(monkeypatch):
    """Where the certified DP reports no cover for a k (its relaxation found none), the
    certificate of the search's cover claims no bound at all (not a traceback, not exact)."""
    import bucketopt.objectives.certified as certified

    lengths = [3, 5, 5, 9, 12, 12, 20]
    obj = _fitted(lengths, "padding", "batch", 60)
    g = obj.groups.g
    ends = [g // 2, g]
    value = obj.cost(obj.groups.edges[ends])
    monkeypatch.setattr(certified, "certified_layers", lambda *a, **k: (None, None, {}))
    cert = obj.certify(2, {2: ends}, {2: value})[2]
    assert not cert.exact and cert.to_dict()["gap"] is None and cert.value == value
