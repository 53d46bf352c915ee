"""Batch sizes from a memory model (or any non-increasing batch-size rule): the rule itself, and
every DP (edge, batch, time; G = 1 and synced G > 1; with shares) against brute force."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bucketopt
from bucketopt.cost.memory import MemoryModel, batch_sizes, load_memory

from . import naive
from .strategies import coefficients

SETTINGS = settings(max_examples=120, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
LENGTHS = st.lists(st.integers(1, 12), min_size=1, max_size=7)
SHARES = st.sampled_from([(0.0, 1.0), (0.2, 1.0), (0.0, 0.7)])


@st.composite
def tables(draw, top=12):
    """A random non-increasing batch-size table sizes[edge], edge 0..top, every entry >= 1."""
    steps = draw(st.lists(st.integers(0, 3), min_size=top + 1, max_size=top + 1))
    last = draw(st.integers(1, 3))
    sizes = np.cumsum(steps[::-1])[::-1] + last
    return naive.TableRule(sizes.tolist())


@st.composite
def memory_models(draw, top=12):
    """A memory model under which one sample of length ``top`` fits (batch sizes 1..hundreds)."""
    m0 = draw(st.floats(0, 100))
    m1 = draw(st.floats(0, 10))
    m2 = draw(st.floats(0, 2))
    if m1 == 0 and m2 == 0:
        m1 = 1.0
    rows = draw(st.floats(1, 6))
    headroom = draw(st.sampled_from([0.9, 1.0, 0.75]))
    capacity = (m0 + rows * (m1 * top + m2 * top * top) + 1e-9) / headroom
    return dict(m0=m0, m1=m1, m2=m2, capacity=capacity, headroom=headroom)


def _oracle_rule(mem, token_budget=None):
    usable = mem["headroom"] * mem["capacity"]

    def rule(edge):
        s = naive.memory_batch_size(mem["m0"], mem["m1"], mem["m2"], usable, edge)
        # the rule never lets s x b pass 2**60 (int64 token arithmetic)
        s = min(s, 2**60 // edge)
        return s if token_budget is None else min(s, token_budget // edge)
    return rule


# --- the rule ------------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(memory_models(top=64), st.lists(st.integers(1, 64), min_size=1, max_size=20),
       st.one_of(st.none(), st.integers(64, 2000)))
def test_memory_rule_is_the_largest_batch_that_fits(mem, edges, budget):
    model = MemoryModel(**mem)
    got = model.batch_size(edges, budget)
    rule = _oracle_rule(mem, budget)
    assert got.tolist() == [rule(e) for e in edges]
    order = np.sort(np.asarray(edges))
    assert np.all(np.diff(model.batch_size(order, budget)) <= 0)  # non-increasing
    usable = mem["headroom"] * mem["capacity"]
    assert np.all(model.peak_bytes(got, edges) <= usable)
    assert model.longest_edge() >= 64


def test_without_memory_the_rule_is_floor_of_budget_over_edge():
    edges = np.array([1, 7, 100, 4096])
    assert batch_sizes(edges, 4096).tolist() == (4096 // edges).tolist()
    assert batch_sizes(edges) is None


# --- every DP equals brute force under any non-increasing rule --------------------------------
@SETTINGS
@given(LENGTHS, st.integers(1, 3), tables(), SHARES, st.sampled_from([0.0, 0.5]))
def test_edge_dp_with_any_rule(lengths, k, rule, shares, min_fill):
    lo, hi = shares
    budget = 40
    kw = dict(pad="edge", memory=rule, min_share=lo, max_share=hi)
    if min_fill:
        kw.update(token_budget=budget, min_fill=min_fill)

    def cost(edges):
        if min_fill:
            for edge, n in zip(edges, naive.bucket_counts(lengths, edges)):
                size = min(naive.batch_size(rule.sizes, edge), budget // edge)
                if n and min(size, n) * edge < min_fill * budget:
                    return None
        return naive.edge_padding(lengths, edges)

    oracle = _brute(cost, lengths, k, lo, hi)
    if oracle is None:
        with pytest.raises(bucketopt.BucketoptError):
            bucketopt.solve(lengths, k, **kw)
        return
    sol = bucketopt.solve(lengths, k, **kw)
    assert sol.padded_tokens == oracle
    assert naive.shares_ok(lengths, sol.boundaries, lo, hi)
    want = [naive.batch_size(rule.sizes, b) for b in sol.boundaries]
    if min_fill:
        want = [min(s, budget // b) for s, b in zip(want, sol.boundaries)]
    assert list(sol.batch_sizes) == want


def _brute(cost, lengths, k, lo, hi):
    """Minimum of ``cost`` (None: not allowed) over every edge set among the distinct lengths."""
    best = None
    last = max(lengths)
    inner = sorted(set(lengths) - {last})
    for size in range(k):
        for combo in __import__("itertools").combinations(inner, size):
            edges = (*combo, last)
            if not naive.shares_ok(lengths, edges, lo, hi):
                continue
            value = cost(edges)
            if value is not None and (best is None or value < best):
                best = value
    return best


@SETTINGS
@given(LENGTHS, st.integers(1, 3), st.one_of(tables(), memory_models()), SHARES)
def test_batch_dp_with_any_rule(lengths, k, rule, shares):
    lo, hi = shares
    sizes = rule.sizes if isinstance(rule, naive.TableRule) else _oracle_rule(rule)
    oracle = naive.brute_force(lambda e: naive.batch_padding_exact(lengths, e, sizes),
                               sorted(set(lengths) - {max(lengths)}), max(lengths), k, lengths,
                               lo, hi)
    kw = dict(pad="batch", memory=rule, min_share=lo, max_share=hi)
    if oracle is None:
        with pytest.raises(bucketopt.BucketoptError, match="infeasible"):
            bucketopt.solve(lengths, k, **kw)
        return
    sol = bucketopt.solve(lengths, k, **kw)
    assert sol.padded_tokens == pytest.approx(float(oracle[0]), rel=1e-9, abs=1e-9)
    assert naive.shares_ok(lengths, sol.boundaries, lo, hi)
    assert sol.optimality["exact"]


@SETTINGS
@given(LENGTHS, st.integers(1, 3), st.one_of(tables(), memory_models()), coefficients,
       st.sampled_from([1, 2, 3]), st.sampled_from(["batch", "edge"]), SHARES)
def test_time_dp_with_any_rule(lengths, k, rule, coeffs, world, pad, shares):
    lo, hi = shares
    sizes = rule.sizes if isinstance(rule, naive.TableRule) else _oracle_rule(rule)
    oracle = naive.brute_force_synced(lengths, k, sizes, *coeffs, world, pad=pad,
                                      min_share=lo, max_share=hi)
    profile = dict(alpha=coeffs[0], beta=coeffs[1], gamma=coeffs[2])
    kw = dict(objective="time", pad=pad, profile=profile, world_size=world, memory=rule,
              min_share=lo, max_share=hi)
    if oracle is None:
        with pytest.raises(bucketopt.BucketoptError, match="infeasible"):
            bucketopt.solve(lengths, k, **kw)
        return
    sol = bucketopt.solve(lengths, k, **kw)
    got = naive.synced_time(lengths, sol.boundaries, sizes, *coeffs, world, pad)
    assert got == pytest.approx(oracle[0], rel=1e-9, abs=1e-12)
    assert sol.extra["epoch_hours"] * 3600 == pytest.approx(got, rel=1e-9, abs=1e-12)
    assert sol.optimality["exact"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(LENGTHS, st.integers(1, 3), memory_models(), st.integers(12, 40))
def test_memory_and_budget_together(lengths, k, mem, budget):
    """With both, B(b) = min(memory's B, T // b): the time DP still equals brute force."""
    rule = _oracle_rule(mem, budget)
    coeffs = (0.3, 0.5, 0.05)
    oracle = naive.brute_force_synced(lengths, k, rule, *coeffs, 2, pad="batch")
    sol = bucketopt.solve(lengths, k, objective="time", pad="batch", token_budget=budget,
                          memory=mem, profile=dict(alpha=0.3, beta=0.5, gamma=0.05),
                          world_size=2)
    got = naive.synced_time(lengths, sol.boundaries, rule, *coeffs, 2, "batch")
    assert got == pytest.approx(oracle[0], rel=1e-9, abs=1e-12)
    assert list(sol.batch_sizes) == [rule(b) for b in sol.boundaries]


# --- the sampler keeps every batch within the predicted capacity ----------------------------
HAND_MODEL = dict(m0=2.0e9, m1=3.0e5, m2=40.0, capacity=8.0e9)  # a small card, given by hand


@pytest.mark.parametrize("world", [1, 3])
def test_sampler_epochs_stay_within_capacity(world):
    """CPU memory is not measured (probe measures peaks on CUDA only): the rule is tested with a
    model given by hand. Every batch of every rank, padded to its bucket's edge (the worst
    case), has a predicted peak within headroom x capacity, and every sample comes once."""
    rng = np.random.default_rng(7)
    lengths = rng.integers(16, 2048, size=3000)
    sol = bucketopt.solve(lengths, 4, memory=HAND_MODEL)
    model = MemoryModel(**HAND_MODEL)
    assert sol.peak_memory_bytes == tuple(model.peak_bytes(sol.batch_sizes, sol.boundaries))
    assert max(sol.peak_memory_bytes) <= model.usable
    edges = np.asarray(sol.boundaries)
    for epoch in (0, 1):
        seen = []
        for rank in range(world):
            sampler = bucketopt.BucketBatchSampler(lengths, sol.boundaries, memory=HAND_MODEL,
                                                   world_size=world, rank=rank)
            same = bucketopt.BucketBatchSampler(lengths, sol.boundaries,
                                                batch_sizes=sol.batch_sizes,
                                                world_size=world, rank=rank)
            sampler.set_epoch(epoch)
            same.set_epoch(epoch)
            batches = list(sampler)
            assert batches == list(same)
            for batch in batches:
                edge = edges[np.searchsorted(edges, lengths[batch].max())]
                assert model.peak_bytes(len(batch), edge) <= model.usable
                seen.extend(batch)
        assert sorted(seen) == list(range(lengths.size))


def test_simulate_and_evaluate_follow_the_batch_sizes():
    rng = np.random.default_rng(3)
    lengths = rng.integers(16, 2048, size=2000)
    sol = bucketopt.solve(lengths, 3, memory=HAND_MODEL, pad="batch")
    again = bucketopt.evaluate(lengths, sol.boundaries, memory=HAND_MODEL, pad="batch")
    assert again.batch_sizes == sol.batch_sizes
    assert again.padded_tokens == pytest.approx(sol.padded_tokens)
    epoch = bucketopt.simulate(lengths, "bucketed", boundaries=sol.boundaries,
                               batch_sizes=sol.batch_sizes)
    assert int(epoch.sizes.max()) == max(sol.batch_sizes)
    assert epoch.n_batches == sum(-(-c // b) for c, b in zip(sol.counts, sol.batch_sizes))


def test_memory_from_a_profile_and_a_json_file(tmp_path):
    probe_like = {"alpha": 0.01, "beta": 1e-6, "gamma": 0.0, "provenance": {"probe": {"memory": {
        "total_bytes": 8e9, "fit_bytes": {"m0": 2e9, "m1_per_token": 3e5,
                                          "m2_per_token_x_length": 40.0}}}}}
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(probe_like))
    flat = tmp_path / "memory.json"
    flat.write_text(json.dumps(HAND_MODEL))
    want = MemoryModel(**HAND_MODEL)
    for source in (path, str(flat), HAND_MODEL, {"memory": HAND_MODEL}):
        assert load_memory(source) == want
    bigger = load_memory(flat, gpu_memory=16, headroom=0.5)
    assert bigger.capacity == 16 * 2**30 and bigger.headroom == 0.5


# --- bad input: one clear error -----------------------------------------------------------
@pytest.mark.parametrize("memory, match", [
    (dict(HAND_MODEL, m1=-1.0), "m1"),
    (dict(HAND_MODEL, m2=float("nan")), "m2"),
    (dict(HAND_MODEL, m0=1e30), "the largest card"),
    (dict(HAND_MODEL, capacity=1e9), "does not fit"),
    (dict(HAND_MODEL, m1=0, m2=0), "both 0"),
    (dict(HAND_MODEL, capacity="lots"), "capacity"),
    ({"m0": 1.0, "m1": 1.0}, "m2"),
    (dict(HAND_MODEL, m2=1e4), "one sample of that length"),
    ([1, 2, 3], "must be a dict"),
])
def test_bad_memory_models_are_one_clear_error(memory, match):
    lengths = [100, 2000, 8000]
    with pytest.raises(bucketopt.BucketoptError, match=match):
        bucketopt.solve(lengths, 2, memory=memory)


@pytest.mark.parametrize("extra", [["--gpu-memory", "-3"], ["--memory-headroom", "0"],
                                   ["--gpu-memory", "nan"], ["--gpu-memory", "0.001"]])
def test_cli_bad_memory_exits_2(tmp_path, capsys, extra):
    from bucketopt.cli import main

    lens = tmp_path / "lens.txt"
    lens.write_text("\n".join(["100", "2000", "3000"]))
    mem = tmp_path / "m.json"
    mem.write_text(json.dumps(HAND_MODEL))
    assert main(["solve", "--lens", str(lens), "-k", "2", "--memory", str(mem), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0]


def test_cli_solve_json_has_batch_sizes_and_peaks(tmp_path, capsys):
    from bucketopt.cli import main

    lens = tmp_path / "lens.txt"
    lens.write_text("\n".join(str(x) for x in range(100, 2100, 7)))
    mem = tmp_path / "m.json"
    mem.write_text(json.dumps(HAND_MODEL))
    assert main(["solve", "--lens", str(lens), "-k", "3", "--memory", str(mem), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    model = MemoryModel(**HAND_MODEL)
    assert out["batch_sizes"] == model.batch_size(out["boundaries"]).tolist()
    assert out["peak_memory_bytes"] == pytest.approx(
        model.peak_bytes(out["batch_sizes"], out["boundaries"]).tolist())
    assert max(out["peak_memory_bytes"]) <= model.usable
    assert math.isclose(out["memory"]["capacity"], HAND_MODEL["capacity"])


def test_sampler_config_of_a_memory_plan_round_trips():
    from bucketopt.show.export import sampler_kwargs, to_sampler_json

    rng = np.random.default_rng(5)
    lengths = rng.integers(16, 2048, size=500)
    sol = bucketopt.solve(lengths, 3, memory=HAND_MODEL)
    kwargs = sampler_kwargs(to_sampler_json(sol))
    assert kwargs == {"boundaries": sol.boundaries, "batch_sizes": sol.batch_sizes}
    sampler = bucketopt.BucketBatchSampler(lengths, **kwargs)
    assert sampler.batch_sizes.tolist() == list(sol.batch_sizes)


def test_compare_puts_the_memory_plan_beside_the_best_fitting_budget():
    from bucketopt.training.compare import compare

    rng = np.random.default_rng(11)
    lengths = rng.integers(16, 2048, size=3000)
    profile = dict(alpha=0.05, beta=2e-5, gamma=1e-9, world_size=2)
    c = compare(lengths, 3, memory=HAND_MODEL, profile=profile, diversity=False, rules=())
    model = MemoryModel(**HAND_MODEL)
    mem, fit = c.strategies["bucketed-memory"], c.strategies["bucketed-budget-fit"]
    assert mem["batch_sizes"] == model.batch_size(mem["boundaries"]).tolist()
    budget = c.memory["budget_fit_token_budget"]
    assert fit["batch_sizes"] == [budget // b for b in fit["boundaries"]]
    for row in (mem, fit):  # both plans fit the card
        assert max(model.peak_bytes(row["batch_sizes"], row["boundaries"])) <= model.usable
    # the fitting plan is the fastest of the budgets tried that fit, and compare ran under it
    tried = [t for t in c.memory["budgets_searched"] if t["fits"]]
    assert c.memory["ktok_per_s_budget_fit"] == max(t["ktok_per_s"] for t in tried)
    assert c.token_budget == budget
    assert c.memory["ratio"] == pytest.approx(
        c.memory["ktok_per_s_memory"] / c.memory["ktok_per_s_budget_fit"])
    assert json.dumps(c.to_dict())  # JSON-ready


def test_sweep_rows_follow_the_memory_model():
    rng = np.random.default_rng(9)
    lengths = 8 * rng.integers(2, 256, size=1000)  # at most 256 candidates: every row exact
    model = MemoryModel(**HAND_MODEL)
    result = bucketopt.sweep(lengths, [1, 2, 3], memory=HAND_MODEL, pad="batch")
    for sol in result.solutions:
        assert list(sol.batch_sizes) == model.batch_size(sol.boundaries).tolist()
        alone = bucketopt.solve(lengths, sol.k, memory=HAND_MODEL, pad="batch")
        assert sol.padded_tokens == pytest.approx(alone.padded_tokens)


def test_compares_memory_row_is_solves_plan_for_the_same_flags():
    """With a memory model and a token budget both, solve sizes each bucket by the memory model
    and the budget (s b <= T too): compare's bucketed-memory row is that plan; without a budget,
    the memory model's sizes alone."""
    import bucketopt

    rng = np.random.default_rng(12)
    lengths = rng.integers(16, 2048, size=3000)
    profile = dict(alpha=0.05, beta=2e-5, gamma=1e-9, world_size=2)
    model = MemoryModel(**HAND_MODEL)
    for budget in (4096, None):
        sol = bucketopt.solve(lengths, 3, token_budget=budget, memory=HAND_MODEL,
                              profile=profile, world_size=None)
        row = bucketopt.compare(lengths, 3, token_budget=budget, memory=HAND_MODEL,
                                profile=profile, world_size=None, diversity=False,
                                rules=()).strategies["bucketed-memory"]
        assert (row["boundaries"], row["batch_sizes"]) == (list(sol.boundaries),
                                                           list(sol.batch_sizes))
        by_memory = model.batch_size(sol.boundaries)
        if budget is None:
            assert list(sol.batch_sizes) == by_memory.tolist()
        else:  # the budget binds on some bucket here: a row that ignored it would differ
            capped = np.minimum(by_memory, budget // np.asarray(sol.boundaries))
            assert list(sol.batch_sizes) == capped.tolist() != by_memory.tolist()
