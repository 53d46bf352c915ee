"""The GPU cost model: epoch timing against loops, the analytic fast path against simulated
epochs, objective="time" against brute force, profiles, and the story's published figures."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bucketopt
from bucketopt import BucketoptError
from bucketopt.cost.costmodel import CostModel, available_profiles, load_profile, time_epoch
from bucketopt.cost.intervals import annotate
from bucketopt.data.histogram import Histogram
from bucketopt.training.epoch import Epoch, epoch_from_batches

from . import naive
from .strategies import coefficient, coefficients

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
STORY = "rtx-pro-6000-blackwell"


def bucketed_epoch(lengths, boundaries, token_budget, pad, rng):
    """Shuffle inside each bucket, cut into batches of T // edge, shuffle all batches."""
    edges = np.asarray(boundaries)
    which = np.searchsorted(edges, lengths, side="left")
    batches = []
    for k, edge in enumerate(edges):
        idx = rng.permutation(np.flatnonzero(which == k))
        size = token_budget // int(edge)
        batches += [idx[i:i + size] for i in range(0, idx.size, size)]
    order = rng.permutation(len(batches))
    return epoch_from_batches(lengths, [batches[i] for i in order], strategy="bucketed", pad=pad,
                              edges=edges)


# --- the model and epoch timing --------------------------------------------------------------


@pytest.mark.parametrize("kw", [dict(alpha=-1.0, beta=1.0, gamma=0.0),
                                dict(alpha=0.0, beta=0.0, gamma=0.0),
                                dict(alpha=float("nan"), beta=1.0, gamma=0.0),
                                dict(alpha=1.0, beta=1.0, gamma=0.0, world_size=0),
                                dict(alpha=1.0, beta=1.0, gamma=0.0, epochs=1.5)])
def test_cost_model_rejects_bad_coefficients(kw):
    with pytest.raises(BucketoptError):
        CostModel(**kw)


@SETTINGS
@given(st.lists(st.tuples(st.integers(1, 50), st.integers(1, 4000)), min_size=1, max_size=40),
       st.integers(1, 9),
       st.tuples(coefficient(1), coefficient(1e-3), coefficient(1e-6)).filter(
           lambda c: max(c[0], 1e3 * c[1], 1e6 * c[2]) > 1e-6))
def test_epoch_time_matches_the_step_loop(batches, world_size, coeffs):
    sizes = np.array([b[0] for b in batches], dtype=np.int64)
    lens = np.array([b[1] for b in batches], dtype=np.int64)
    real = np.maximum(1, sizes * lens // 2)
    model = CostModel(*coeffs, world_size=world_size, epochs=3)
    timing = time_epoch(Epoch("x", sizes, lens, real), model)
    expected = naive.epoch_seconds(sizes.tolist(), lens.tolist(), world_size, *coeffs)
    assert timing.seconds == pytest.approx(expected, rel=1e-12)
    assert timing.steps == -(-len(batches) // world_size)
    assert timing.ktok_per_s == pytest.approx(real.sum() / expected / 1e3, rel=1e-12)
    assert timing.eta_days == pytest.approx(3 * expected / 86400, rel=1e-12)
    assert -1e-12 <= timing.wait_fraction < 1


def test_slowest_rank_sets_the_step():
    # Two ranks: a long batch next to a short one costs the long one; reordering so that
    # equal batches share steps removes the wait.
    model = CostModel(0.0, 1.0, 0.0, world_size=2)
    sizes = np.array([1, 1, 1, 1])
    mixed = Epoch("m", sizes, np.array([10, 1, 10, 1]), np.array([10, 1, 10, 1]))
    paired = Epoch("p", sizes, np.array([10, 10, 1, 1]), np.array([10, 10, 1, 1]))
    assert time_epoch(mixed, model).seconds == 20
    assert time_epoch(paired, model).seconds == 11
    assert time_epoch(paired, model).wait_fraction == 0


# --- analytic fast path ----------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 3])
def test_analytic_edge_single_gpu_is_exact(k):
    rng = np.random.default_rng(k)
    lengths = rng.integers(1, 300, size=500)
    model = CostModel(0.01, 1e-4, 1e-7, world_size=1, epochs=2)
    sol = bucketopt.solve(lengths, k, token_budget=1024)
    out = annotate(sol, Histogram.from_lengths(lengths), model)
    seconds = naive.edge_time(lengths.tolist(), sol.boundaries, 1024, 0.01, 1e-4, 1e-7)
    assert out.ktok_per_s == pytest.approx(lengths.sum() / seconds / 1e3, rel=1e-9)
    assert out.eta_days == pytest.approx(2 * seconds / 86400, rel=1e-9)
    assert out.boundaries == sol.boundaries


@SETTINGS
@given(st.lists(st.integers(1, 12), min_size=1, max_size=8), st.integers(12, 40),
       coefficients)
def test_analytic_single_gpu_equals_enumeration(lengths, budget, coeffs):
    # With one GPU the fast path is the exact expectation: compare with the enumeration of
    # every batch composition (dynamic padding) and the per-batch loop (edge padding).
    model = CostModel(*coeffs)
    hist = Histogram.from_lengths(lengths)
    boundaries = sorted({min(lengths), max(lengths)})
    for pad, oracle in (("batch", naive.batch_time), ("edge", naive.edge_time)):
        sol = bucketopt.evaluate(lengths, boundaries, token_budget=budget, pad=pad)
        seconds = sol.real_tokens / annotate(sol, hist, model).ktok_per_s / 1e3
        assert seconds == pytest.approx(oracle(lengths, boundaries, budget, *coeffs), rel=1e-9)


@pytest.mark.parametrize("pad", ["edge", "batch"])
@pytest.mark.parametrize("world_size", [1, 8])
def test_analytic_within_two_percent_of_simulated(pad, world_size):
    from bucketopt.datasets import seed_like

    lengths = seed_like()[:200_000]
    hist = Histogram.from_lengths(lengths)
    model = load_profile(STORY).cost_model(world_size=world_size)
    budget = load_profile(STORY).token_budget
    boundaries = (1013, 1628, 2340, 3170, 4632, 8191)
    sol = bucketopt.evaluate(hist, boundaries, token_budget=budget, pad=pad)
    predicted = annotate(sol, hist, model).ktok_per_s
    rng = np.random.default_rng(7)
    simulated = [time_epoch(bucketed_epoch(lengths, boundaries, budget, pad, rng), model)
                 for _ in range(2)]
    rate = np.mean([t.ktok_per_s for t in simulated])
    assert predicted == pytest.approx(rate, rel=0.02)
    if world_size > 1:  # the slowest-rank wait is modelled, not ignored
        assert simulated[0].wait_fraction > 0.02


# --- objective="time" ------------------------------------------------------------------------

small_lengths = st.lists(st.integers(1, 14), min_size=1, max_size=9)


@SETTINGS
@given(small_lengths, st.integers(1, 3), st.integers(14, 60),
       coefficients,
       st.sampled_from([(0.0, 1.0), (0.2, 1.0), (0.0, 0.6), (0.25, 0.75)]))
def test_time_objective_edge_equals_brute_force(lengths, k, budget, coeffs, shares):
    min_share, max_share = shares
    profile = dict(alpha=coeffs[0], beta=coeffs[1], gamma=coeffs[2], world_size=1,
                   token_budget=budget)
    oracle = naive.brute_force_time(lengths, k, budget, *coeffs, min_share=min_share,
                                    max_share=max_share)
    kw = dict(objective="time", profile=profile, min_share=min_share, max_share=max_share)
    if oracle is None:
        with pytest.raises(BucketoptError, match="infeasible"):
            bucketopt.solve(lengths, k, **kw)
        return
    sol = bucketopt.solve(lengths, k, **kw)
    assert len(sol.boundaries) <= k and sol.boundaries[-1] == max(lengths)
    assert naive.shares_ok(lengths, sol.boundaries, min_share, max_share)
    got = naive.edge_time(lengths, sol.boundaries, budget, *coeffs)
    assert got == pytest.approx(oracle[0], rel=1e-9, abs=1e-12)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 12), min_size=1, max_size=8), st.integers(1, 3),
       st.integers(12, 40),
       coefficients)
def test_time_objective_batch_equals_brute_force(lengths, k, budget, coeffs):
    profile = dict(alpha=coeffs[0], beta=coeffs[1], gamma=coeffs[2], token_budget=budget)
    oracle = naive.brute_force_time(lengths, k, budget, *coeffs, pad="batch")
    sol = bucketopt.solve(lengths, k, objective="time", pad="batch", profile=profile)
    got = naive.batch_time(lengths, sol.boundaries, budget, *coeffs)
    assert got == pytest.approx(oracle[0], rel=1e-9, abs=1e-12)


def test_time_objective_beats_padding_optimum_on_time_and_never_rises_with_k():
    from bucketopt.datasets import seed_like

    lengths = seed_like()[::50]
    prof = load_profile(STORY)
    coeffs = (prof.alpha, prof.beta, prof.gamma)
    budget = prof.token_budget
    by_time = bucketopt.sweep(lengths, [1, 2, 4, 6], objective="time", profile=STORY,
                              world_size=1)
    seconds = [naive.edge_time(lengths.tolist(), s.boundaries, budget, *coeffs)
               for s in by_time.solutions]
    assert all(b <= a * (1 + 1e-12) for a, b in zip(seconds, seconds[1:]))
    by_padding = bucketopt.solve(lengths, 6, token_budget=budget)
    assert seconds[-1] <= naive.edge_time(lengths.tolist(), by_padding.boundaries, budget,
                                          *coeffs) * (1 + 1e-12)


@pytest.mark.parametrize("kw", [dict(), dict(min_share=0.1), dict(align=16, max_share=0.3),
                                dict(pad="batch", align=64)])
def test_time_objective_with_gpus_refines_on_the_full_objective(kw):
    # With G > 1 the DP's boundaries are polished on the analytic time (slowest rank included):
    # never slower than the DP's own, constraints kept.
    from bucketopt.datasets import seed_like

    lengths = seed_like()[::20]
    dp = bucketopt.solve(lengths, 5, objective="time", profile=STORY, world_size=1, **kw)
    refined = bucketopt.solve(lengths, 5, objective="time", profile=STORY, world_size=8, **kw)
    pad = kw.get("pad", "edge")
    unrefined = bucketopt.evaluate(lengths, dp.boundaries, pad=pad, profile=STORY, world_size=8)
    assert refined.ktok_per_s >= unrefined.ktok_per_s * (1 - 1e-12)
    assert len(refined.boundaries) == len(dp.boundaries)
    assert refined.boundaries[-1] == dp.boundaries[-1]
    align = kw.get("align", 1)
    assert all(b % align == 0 for b in refined.boundaries)
    lo, hi = kw.get("min_share", 0.0), kw.get("max_share", 1.0)
    assert all(lo - 1e-9 <= share <= hi + 1e-9 for share in refined.shares)


def test_time_objective_needs_a_profile():
    with pytest.raises(BucketoptError, match="profile"):
        bucketopt.solve([1, 2, 3], 2, objective="time")


@pytest.mark.parametrize("pad, n", [("batch", 60_000), ("edge", 60_000)])
def test_time_objective_on_huge_inputs_is_proven_or_certified_with_a_warning(pad, n):
    """60,000 distinct lengths: the certified DP proves the optimum, or stops at its work limit
    and returns its best cover with the gap the bounds prove and a warning that says so (and
    how to prove it)."""
    lengths = np.arange(1, n + 1)
    kw = dict(objective="time", pad=pad, profile=STORY, token_budget=n)
    sol = bucketopt.solve(lengths, 6, **kw)
    cert = sol.optimality
    assert cert["lower_bound"] <= sol.extra["epoch_hours"] * 3600 * (1 + 1e-9)
    if not cert["exact"]:
        assert any(f"{cert['gap']:.2e}" in w and "exact=True" in w for w in sol.warnings)


# --- profiles --------------------------------------------------------------------------------


def test_shipped_profile_is_complete():
    assert STORY in available_profiles()
    prof = load_profile(STORY)
    assert prof.world_size == 8 and prof.token_budget >= 8191
    assert min(prof.alpha, prof.beta, prof.gamma) >= 0
    assert prof.description and prof.provenance.get("published")


def test_profile_defaults_budget_and_world_size():
    lengths = np.arange(100, 2000)
    prof = load_profile(STORY)
    py = bucketopt.solve(lengths, 3, profile=STORY)  # Python default: world_size=1
    assert py.token_budget == prof.token_budget and py.extra["world_size"] == 1
    full = bucketopt.solve(lengths, 3, profile=STORY, world_size=None)
    assert full.extra["world_size"] == prof.world_size
    assert full.ktok_per_s > py.ktok_per_s  # more GPUs, more tokens per second


def test_profile_file_round_trip(tmp_path):
    prof = load_profile(STORY)
    path = prof.save(tmp_path / "p.json")
    again = load_profile(str(path))
    assert (again.alpha, again.beta, again.gamma, again.token_budget) == (
        prof.alpha, prof.beta, prof.gamma, prof.token_budget)
    lengths = np.arange(100, 3000)
    a = bucketopt.solve(lengths, 4, profile=STORY)
    b = bucketopt.solve(lengths, 4, profile=str(path))
    assert a.ktok_per_s == b.ktok_per_s


@pytest.mark.parametrize("content, match", [
    ("not json", "JSON"),
    ("[1, 2]", "object"),
    (json.dumps({"alpha": 1.0, "beta": 1.0}), "gamma"),
    (json.dumps({"alpha": -1.0, "beta": 1.0, "gamma": 0.0}), "alpha"),
    (json.dumps({"alpha": 0, "beta": 0, "gamma": 0}), "all 0"),
    (json.dumps({"alpha": 1, "beta": 0, "gamma": 0, "world_size": 0}), "world_size"),
    (json.dumps({"alpha": 1, "beta": 0, "gamma": 0, "token_budget": 10**30}), "at most"),
    ("[" * 100_000 + "]" * 100_000, "JSON"),
])
def test_bad_profile_files(tmp_path, content, match):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(BucketoptError, match=match):
        bucketopt.solve([1, 2, 3], 2, profile=str(path), token_budget=64)


def test_huge_epochs_and_world_size_are_refused():
    for kw in (dict(epochs=10**300), dict(world_size=10**25)):
        with pytest.raises(BucketoptError, match="at most (2|65536)"):
            bucketopt.solve([1, 2, 3], 2, profile="rtx-pro-6000-blackwell", **kw)


def test_unknown_profile_names_the_shipped_ones():
    with pytest.raises(BucketoptError, match=STORY):
        bucketopt.solve([1, 2, 3], 2, profile="no-such-gpu")


def test_profile_budget_below_longest_sample():
    with pytest.raises(BucketoptError, match="token_budget"):
        bucketopt.solve([10, 1_000_000], 2, profile=STORY)


# --- the story: 8x RTX PRO 6000 Blackwell, 6 epochs ------------------------------------------


@pytest.mark.parametrize("reconstruction", ["seed_like", "piecewise_linear_like"])
def test_story_figures_within_five_percent(reconstruction):
    from bucketopt import datasets
    from bucketopt.training.simulate import simulate

    lengths = getattr(datasets, reconstruction)()
    prof = load_profile(STORY)
    model = prof.cost_model(epochs=6)
    budget = prof.token_budget
    boundaries = bucketopt.solve(lengths, 6, token_budget=budget).boundaries
    timing = {name: time_epoch(simulate(lengths, name, token_budget=budget,
                                        boundaries=boundaries if name == "bucketed" else None),
                               model)
              for name in ("sorted", "shuffle", "bucketed")}
    assert timing["sorted"].ktok_per_s == pytest.approx(32.0, rel=0.05)
    assert timing["shuffle"].ktok_per_s == pytest.approx(12.0, rel=0.05)
    assert timing["bucketed"].ktok_per_s == pytest.approx(25.1, rel=0.05)
    assert timing["bucketed"].eta_days == pytest.approx(5.1, rel=0.05)
    # The analytic fast path agrees with the simulated bucketed epoch (the story's batches ran
    # in random order: sync_buckets=False).
    fast = bucketopt.evaluate(lengths, boundaries, pad="batch", profile=STORY, world_size=None,
                              epochs=6, sync_buckets=False)
    assert fast.ktok_per_s == pytest.approx(timing["bucketed"].ktok_per_s, rel=0.02)
    assert fast.eta_days == pytest.approx(timing["bucketed"].eta_days, rel=0.02)


@pytest.mark.parametrize("reconstruction", ["seed_like", "piecewise_linear_like"])
def test_cli_compare_story(tmp_path, capsys, reconstruction):
    from bucketopt import datasets
    from bucketopt.cli import main

    path = tmp_path / "lens.npy"
    np.save(path, getattr(datasets, reconstruction)())
    # the story's run: dynamic padding, the padding optimum, batches in random order (the
    # bucketed row's simulated figures; its Ktok/s and ETA are solve's, for the synced sampler)
    assert main(["compare", "--lens", str(path), "-k", "6", "--profile", STORY, "--gpus", "8",
                 "--epochs", "6", "--pad", "batch", "--objective", "padding", "--json",
                 "-q"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["token_budget"] == load_profile(STORY).token_budget and out["world_size"] == 8
    rows = out["strategies"]
    for name, published, run in (("sorted", 32.0, ""), ("shuffle", 12.0, ""),
                                 ("bucketed", 25.1, "_simulated")):
        assert rows[name]["ktok_per_s" + run] == pytest.approx(published, rel=0.05), name
    assert rows["bucketed"]["eta_days_simulated"] == pytest.approx(5.1, rel=0.05)
    assert rows["bucketed"]["ktok_per_s_analytic"] == pytest.approx(
        rows["bucketed"]["ktok_per_s_simulated"], rel=0.02)
    solved = bucketopt.solve(np.load(path), 6, token_budget=out["token_budget"], pad="batch",
                             objective="padding", profile=STORY, world_size=8, epochs=6)
    assert rows["bucketed"]["ktok_per_s"] == pytest.approx(solved.ktok_per_s, rel=1e-12)
    # ETA = epochs x real tokens / throughput, for every timed strategy (predicted or simulated).
    for row in rows.values():
        for run in ("", "_simulated"):
            if row.get("ktok_per_s" + run) is not None:
                days = 6 * row["real_tokens"] / (row["ktok_per_s" + run] * 1e3) / 86400
                assert row["eta_days" + run] == pytest.approx(days, rel=1e-9)


def test_cli_solve_with_profile_uses_its_world_size(tmp_path, capsys):
    from bucketopt.cli import main

    path = tmp_path / "lens.txt"
    path.write_text("\n".join(str(x) for x in range(50, 5000, 3)) + "\n")
    args = ["solve", "--lens", str(path), "-k", "4", "--profile", STORY, "--epochs", "6", "-q"]
    assert main([*args, "--json"]) == 0
    default = json.loads(capsys.readouterr().out)
    assert default["world_size"] == 8 and default["eta_days"] > 0
    assert main([*args, "--json", "--gpus", "1"]) == 0
    single = json.loads(capsys.readouterr().out)
    assert single["world_size"] == 1 and single["eta_days"] > default["eta_days"]
    assert main([*args, "--objective", "time"]) == 0
    assert "Ktok/s" in capsys.readouterr().out
    assert main(["solve", "--lens", str(path), "-k", "4", "--objective", "time"]) == 2
    assert "profile" in capsys.readouterr().err


def test_coefficient_sets_below_the_floor_count_as_zero():
    """A resampled fit puts a term the data barely show at 0 or just above it: below the
    profile's floor (1e-30 s) it is taken as 0, and a set with nothing above it is refused."""
    from bucketopt.cost.costmodel import parse_uncertainty

    out = parse_uncertainty({"coefficient_sets": [[0.1, 1e-40, 5e-324], [0.2, 1e-8, 1e-30]]},
                            "profile.json")
    assert out["coefficient_sets"] == [[0.1, 0.0, 0.0], [0.2, 1e-8, 1e-30]]
    with pytest.raises(BucketoptError, match=r"coefficient_sets\[0\].*not all 0"):
        parse_uncertainty({"coefficient_sets": [[1e-31, 0.0, 5e-324]]}, "profile.json")
