"""Packed (padding-free) epochs timed: the packed cost against loops, every strategy's rows,
the level DP against brute force, the analytic estimate against simulated epochs, and the
compare rows (balanced waits less; with gamma = 0 packing is at least as fast as bucketing)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bucketopt import BucketoptError
from bucketopt.cost.costmodel import CostModel, load_profile, step_times, time_epoch
from bucketopt.datasets import seed_like
from bucketopt.objectives.packed import expected_max_normal
from bucketopt.training.compare import compare
from bucketopt.training.epoch import epoch_from_batches, packed_epoch
from bucketopt.training.packed import (
    STRATEGIES,
    analytic_packed_seconds,
    packed_batches,
    packing_levels,
    simulate_packed,
)
from bucketopt.training.packed_rows import fastest_diverse, packed_rows

from . import naive
from .strategies import coefficient

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
STORY = load_profile("rtx-pro-6000-blackwell")


@pytest.fixture(scope="module")
def story_sample():
    return seed_like()[::25]  # 36,084 documents of the embedded example


# --- the cost of a packed row --------------------------------------------------------------------


@SETTINGS
@given(st.lists(st.lists(st.integers(1, 300), min_size=1, max_size=6), min_size=1, max_size=20),
       st.integers(1, 5))
def test_packed_rows_cost_tokens_and_sum_of_squares(rows, world):
    lengths = np.concatenate([np.asarray(r) for r in rows])
    bounds = np.cumsum([0, *map(len, rows)])
    batches = [np.arange(bounds[i], bounds[i + 1]) for i in range(len(rows))]
    epoch = epoch_from_batches(lengths, batches, strategy="packed", pad="varlen")
    assert epoch.padding_fraction == 0.0 and epoch.packed
    model = CostModel(alpha=0.5, beta=1e-3, gamma=1e-5, world_size=world)
    times = [0.5 + 1e-3 * sum(r) + 1e-5 * sum(x * x for x in r) for r in rows]
    steps = [max(times[i:i + world]) for i in range(0, len(times), world)]
    assert step_times(epoch, model) == pytest.approx(steps, rel=1e-12)
    timing = time_epoch(epoch, model)
    assert timing.seconds == pytest.approx(sum(steps), rel=1e-12)
    assert timing.wait_fraction == pytest.approx(1 - sum(times) / (sum(steps) * world), abs=1e-12)
    # the intervals time packed rows the same way (one coefficient set: the point itself)
    from bucketopt.cost.intervals import epochs_intervals

    with_sets = CostModel(alpha=0.5, beta=1e-3, gamma=1e-5, world_size=world, uncertainty={
        "coefficient_sets": [[0.5, 1e-3, 1e-5]], "coverage": 1.0})
    low, high = epochs_intervals([epoch], with_sets)["ktok_per_s_interval"]
    assert low == pytest.approx(timing.ktok_per_s, rel=1e-12)
    assert high == pytest.approx(timing.ktok_per_s, rel=1e-12)
    # a padded batch of the same rows keeps gamma * s * L^2
    padded = epoch_from_batches(lengths, batches, strategy="x", pad="batch")
    s, top = padded.sizes, padded.padded_lens
    assert np.allclose(model.batch_times(padded), 0.5 + 1e-3 * s * top + 1e-5 * s * top ** 2)


def test_packed_epoch_rejects_bad_rows():
    with pytest.raises(BucketoptError, match="attention >= tokens"):
        packed_epoch("packed", [4], [3.0])
    with pytest.raises(BucketoptError, match="one tokens and one attention"):
        packed_epoch("packed", [4, 5], [16.0])


# --- the strategies' rows ------------------------------------------------------------------------


@st.composite
def packing_case(draw):
    lengths = draw(st.lists(st.integers(1, 200), min_size=1, max_size=150))
    budget = draw(st.integers(max(lengths), 4 * max(lengths) + 50))
    inner = draw(st.lists(st.integers(1, max(lengths)), max_size=3, unique=True))
    return lengths, budget, [*sorted(set(inner) - {max(lengths)}), max(lengths)]


@SETTINGS
@given(packing_case(), st.integers(1, 5), st.sampled_from(STRATEGIES), st.integers(0, 3))
def test_every_strategy_packs_every_document_once(case, world, strategy, epoch):
    lengths, budget, levels = case
    arr = np.asarray(lengths)
    kw = dict(token_budget=budget, world_size=world, boundaries=levels, seed=1, epoch=epoch,
              window=7)
    rows = packed_batches(lengths, strategy, **kw)
    assert sorted(np.concatenate(rows).tolist()) == list(range(len(lengths)))
    assert max(arr[r].sum() for r in rows) <= budget
    e = simulate_packed(lengths, strategy, **kw)
    assert e.real_tokens.tolist() == [int(arr[r].sum()) for r in rows]
    assert e.attention.tolist() == [float((arr[r] ** 2).sum()) for r in rows]
    if strategy == "packed":  # greedy rows of one shuffle, in its order
        perm = np.concatenate(rows)
        assert [r.tolist() for r in rows] == [perm[g].tolist() for g in
                                              naive.greedy_rows(arr[perm].tolist(), budget)]
    if strategy == "packed-bucketed":  # every row inside one level; steps of one level
        edges = np.asarray(levels)
        level_of = [set(np.searchsorted(edges, arr[r]).tolist()) for r in rows]
        assert all(len(s) == 1 for s in level_of)
        assert e.buckets.tolist() == [s.pop() for s in level_of]
        full = [e.buckets[i:i + world] for i in range(0, e.n_batches, world)]
        mixed = [i for i, s in enumerate(full) if len(set(s.tolist())) > 1]
        # only the leftovers (under G rows of a level, placed last) share a step: at most one
        # step per level, all at the end
        assert all(i >= len(full) - len(levels) for i in mixed)


def test_seeds_and_epochs(story_sample):
    a = packed_batches(story_sample, "packed", token_budget=65_536, seed=3, epoch=1)
    b = packed_batches(story_sample, "packed", token_budget=65_536, seed=3, epoch=1)
    c = packed_batches(story_sample, "packed", token_budget=65_536, seed=3, epoch=2)
    assert all(np.array_equal(x, y) for x, y in zip(a, b)) and len(a) == len(b)
    assert not all(np.array_equal(x, y) for x, y in zip(a, c))


@pytest.mark.parametrize("call, words", [
    (lambda: simulate_packed([5, 9], "packed", token_budget=8), "smaller than the longest"),
    (lambda: simulate_packed([5], "packed", token_budget=None), "`token_budget` is required"),
    (lambda: simulate_packed([5], "packed-bucketed", token_budget=8), "needs `boundaries`"),
    (lambda: simulate_packed([5], "stacked", token_budget=8), "`strategy` must be one of"),
    (lambda: simulate_packed([5], "packed", token_budget=8, world_size=0), "`world_size`"),
    (lambda: packing_levels([5, 6], 0, token_budget=8, cost_model=STORY.cost_model()), "`k`"),
])
def test_bad_input_is_one_clear_error(call, words):
    with pytest.raises(BucketoptError, match=words):
        call()


# --- the level DP --------------------------------------------------------------------------------


@SETTINGS
@given(st.lists(st.integers(1, 60), min_size=1, max_size=40), st.integers(1, 4),
       st.integers(1, 8), coefficient(2.0), coefficient(0.2),
       st.sampled_from([(0.0, 1.0), (0.1, 0.8), (0.25, 1.0)]))
def test_level_dp_is_exact_for_its_cost(lengths, k, world, alpha, gamma, shares):
    budget = 4 * max(lengths)
    model = CostModel(alpha=alpha, beta=1.0, gamma=gamma, world_size=world)
    want = naive.brute_force_packing_levels(lengths, k, budget, alpha, 1.0, gamma, world,
                                            min_share=shares[0], max_share=shares[1])
    if want is None:
        with pytest.raises(BucketoptError, match="infeasible"):
            packing_levels(lengths, k, token_budget=budget, cost_model=model,
                           min_share=shares[0], max_share=shares[1])
        return
    got = packing_levels(lengths, k, token_budget=budget, cost_model=model,
                         min_share=shares[0], max_share=shares[1])
    assert len(got) <= k and got[-1] == max(lengths)
    assert naive.shares_ok(lengths, got, *shares)
    value = analytic_packed_seconds(lengths, got, budget, model)
    assert value == pytest.approx(want[0], rel=1e-9, abs=1e-12)
    assert value == pytest.approx(
        sum(naive.packed_level_seconds(xs, budget, alpha, 1.0, gamma, world)
            for xs in naive._bucket_members(lengths, got)), rel=1e-9, abs=1e-12)


def test_expected_max_normal():
    assert expected_max_normal(1) == 0.0
    assert expected_max_normal(2) == pytest.approx(1 / np.sqrt(np.pi), rel=1e-6)
    assert expected_max_normal(8) == pytest.approx(1.42360, abs=1e-4)


# --- analytic against simulated ------------------------------------------------------------------


@pytest.mark.parametrize("levels", [None, "dp"])
def test_analytic_agrees_with_simulated_epochs(story_sample, levels):
    budget = 65_536
    model = STORY.cost_model(world_size=8)
    edges = None if levels is None else packing_levels(story_sample, 4, token_budget=budget,
                                                       cost_model=model)
    strategy = "packed" if levels is None else "packed-bucketed"
    simulated = np.mean([time_epoch(simulate_packed(
        story_sample, strategy, token_budget=budget, world_size=8, boundaries=edges, seed=0,
        epoch=e), model).seconds for e in range(6)])
    analytic = analytic_packed_seconds(story_sample, edges, budget, model)
    assert analytic == pytest.approx(simulated, rel=0.015)
    # the wait is what the estimate models beyond the busy time: it must be of the right size
    d = story_sample.astype(float)
    busy = (model.beta * d.sum() + model.gamma * (d * d).sum()) / 8
    assert (analytic - busy) == pytest.approx(simulated - busy, rel=0.2)


# --- compare: the done-when figures on a smaller input -------------------------------------------


def test_compare_rows_balanced_waits_less(story_sample):
    c = compare(story_sample[::2], 4, profile=STORY, world_size=8, token_budget=65_536,
                rules=(), align=64)
    rows = c.strategies
    for name in ("packed", "packed-balanced", "packed-bucketed"):
        row = rows[name]
        assert row["kind"] == "packed" and row["packing"] == name
        for key in ("ktok_per_s", "eta_days", "wait_fraction"):
            assert isinstance(row[key], float) and row[key] >= 0, (name, key)
        low, high = row["ktok_per_s_interval"]
        assert low <= row["ktok_per_s"] <= high
        assert row["padding_fraction"] == 0.0
        assert 0.0 <= row["step_mix_gap"] <= 1.0
    assert rows["packed-balanced"]["wait_fraction"] < rows["packed"]["wait_fraction"]
    assert rows["packed-balanced"]["ktok_per_s"] > rows["packed"]["ktok_per_s"]
    # balancing re-deals inside a step: the step mix is the greedy one
    assert rows["packed-balanced"]["step_mix_gap"] == pytest.approx(
        rows["packed"]["step_mix_gap"], rel=1e-12)
    best = fastest_diverse(rows)
    assert rows[best]["step_mix_gap"] <= rows["shuffle"]["step_mix_gap"]
    limit = rows["shuffle"]["step_mix_gap"]
    assert rows[best]["ktok_per_s"] == max(
        r["ktok_per_s"] for r in rows.values()
        if r.get("step_mix_gap") is not None and r["step_mix_gap"] <= limit)


def test_without_attention_packing_is_at_least_as_fast_as_bucketing(story_sample):
    story_sample = story_sample[::2]
    profile = {"name": "no-attention", "alpha": STORY.alpha, "beta": STORY.beta, "gamma": 0.0,
               "world_size": 8, "token_budget": 65_536}
    c = compare(story_sample, 4, profile=profile, rules=(), diversity=False, align=64,
                pad="batch")
    rows = c.strategies
    # bucketopt's padded plans: solve's prediction (synced ranks) and their simulated epochs
    padded = max(rows[name][key] for name in ("bucketed", "bucketed-padding")
                 for key in ("ktok_per_s", "ktok_per_s_simulated"))
    for name in ("packed", "packed-balanced", "packed-bucketed"):
        assert rows[name]["ktok_per_s"] >= padded, name


def test_fastest_diverse_needs_the_figures():
    assert fastest_diverse({"packed": {"ktok_per_s": 3.0, "step_mix_gap": 0.1}}) is None
    rows = {"shuffle": {"ktok_per_s": 1.0, "step_mix_gap": 0.2},
            "sorted": {"ktok_per_s": 9.0, "step_mix_gap": 0.9},
            "packed": {"ktok_per_s": 3.0, "step_mix_gap": 0.1},
            "packed-bucketed": {"ktok_per_s": 4.0, "step_mix_gap": 0.7}}
    assert fastest_diverse(rows) == "packed"


def test_level_dp_refuses_too_many_pairs_and_compare_aligns(monkeypatch):
    import bucketopt.training.packed as packed

    lengths = np.arange(1, 101)
    model = CostModel(alpha=0.1, beta=1e-4, gamma=1e-8, world_size=2)
    monkeypatch.setattr(packed, "MAX_LEVEL_PAIRS", 1000)
    with pytest.raises(BucketoptError, match="align="):
        packing_levels(lengths, 3, token_budget=400, cost_model=model)
    assert packed.level_align(lengths) == 4  # 25 candidate edges: 325 pairs
    levels = packing_levels(lengths, 3, token_budget=400, cost_model=model, align=4)
    assert all(b % 4 == 0 for b in levels[:-1]) and levels[-1] == 100
    rows, _ = packed_rows(lengths, 3, token_budget=400, cost_model=model, diversity=False)
    assert rows["packed-bucketed"]["levels_align"] == 4
    assert tuple(rows["packed-bucketed"]["boundaries"]) == levels


def test_cli_names_the_fastest_diverse_strategy(tmp_path, capsys):
    import json

    from bucketopt.cli import main

    path = tmp_path / "lens.npy"
    np.save(path, seed_like()[::50])
    argv = ["compare", "--lens", str(path), "-k", "3", "--profile", "rtx-pro-6000-blackwell",
            "--gpus", "8", "--token-budget", "65536", "--align", "64"]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = out["strategies"]
    for name in ("packed", "packed-balanced", "packed-bucketed"):
        assert isinstance(rows[name]["ktok_per_s"], float)
        assert isinstance(rows[name]["wait_fraction"], float)
    best = out["fastest_diverse"]
    assert best == fastest_diverse(rows) and best is not None
    assert main(argv) == 0
    table = capsys.readouterr().out.rstrip().splitlines()
    assert out["recommended"] == best  # with a profile the recommendation is this rule
    assert table[-1].startswith(f"recommended: {best}, the fastest with a step mix at least as "
                                "diverse as the full shuffle (")
    header = next(line for line in table if line.startswith("strategy"))
    assert "wait" in header.split()
    # without a profile: no timing, no line, no key
    assert main(["compare", "--lens", str(path), "-k", "3", "--token-budget", "65536",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "fastest_diverse" not in out
    assert set(n for n in out["strategies"] if n.startswith("packed")) == {"packed"}
