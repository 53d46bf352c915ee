"""min_fill, the per-bucket fill and its note, max_length with every overflow policy, and the
time objective as the default with a profile."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bucketopt
from bucketopt import BucketoptError
from bucketopt.cli import main
from bucketopt.data.histogram import Histogram
from bucketopt.data.overflow import apply_overflow

from . import naive

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def heavy_tail(n=20_000, seed=0):
    rng = np.random.default_rng(seed)
    return np.clip(np.rint(rng.lognormal(6.5, 1.2, n)), 1, 32_768).astype(np.int64)


def _fill_of(xs, edge, budget, pad):
    """Expected padded tokens of a bucket's largest batch over the budget (enumeration)."""
    rows = min(budget // edge, len(xs))
    if pad == "edge":
        return rows * edge / budget
    from fractions import Fraction

    return float(rows * Fraction(naive.expected_max_exact(xs, rows)) / budget)


@SETTINGS
@given(st.lists(st.integers(1, 30), min_size=1, max_size=8), st.integers(1, 3),
       st.integers(30, 90), st.sampled_from([0.0, 0.3, 0.6, 0.9]),
       st.sampled_from(["edge", "batch"]))
def test_min_fill_equals_brute_force(lengths, k, budget, min_fill, pad):
    def fills_ok(edges):
        members = naive._bucket_members(lengths, edges)
        return all(_fill_of(xs, e, budget, pad) >= min_fill - 1e-12
                   for e, xs in zip(edges, members) if xs)

    cost = ((lambda e: naive.edge_padding(lengths, e)) if pad == "edge"
            else (lambda e: naive.batch_padding_exact(lengths, e, budget)))
    last = max(lengths)
    inner = sorted(set(lengths) - {last})
    oracle = naive.brute_force(lambda e: cost(e) if fills_ok(e) else float("inf"), inner,
                               last, k, lengths, 0.0, 1.0)
    kw = dict(pad=pad, token_budget=budget, min_fill=min_fill)
    if oracle is None or oracle[0] == float("inf"):
        with pytest.raises(BucketoptError, match="min_fill"):
            bucketopt.solve(lengths, k, **kw)
        return
    sol = bucketopt.solve(lengths, k, **kw)
    assert fills_ok(sol.boundaries)
    assert float(cost(sol.boundaries)) == pytest.approx(float(oracle[0]), rel=1e-9, abs=1e-9)
    for f, e, xs in zip(sol.fill, sol.boundaries,
                        naive._bucket_members(lengths, sol.boundaries)):
        if xs:
            assert f == pytest.approx(_fill_of(xs, e, budget, pad), rel=1e-9)


def test_low_fill_note_on_a_heavy_tail_and_not_on_the_embedded_example():
    from bucketopt.datasets import seed_like

    tail = bucketopt.solve(heavy_tail(), 8, pad="batch", token_budget=65_536)
    assert tail.warnings and "--min-fill" in tail.warnings[0] and "--objective time" in \
        tail.warnings[0]
    assert min(tail.fill) < 0.5
    fixed = bucketopt.solve(heavy_tail(), 8, pad="batch", token_budget=65_536, min_fill=0.5)
    assert not fixed.warnings and min(fixed.fill) >= 0.5 - 1e-9
    assert not bucketopt.solve(seed_like(), 6, pad="batch", token_budget=65_536).warnings


@SETTINGS
@given(st.lists(st.integers(1, 60), min_size=1, max_size=30), st.integers(1, 40),
       st.sampled_from(["truncate", "drop", "split"]))
def test_overflow_policies_on_the_histogram_equal_a_per_sample_loop(lengths, cap, policy):
    out = []
    for x in lengths:
        if x <= cap:
            out.append(x)
        elif policy == "truncate":
            out.append(cap)
        elif policy == "split":
            out += [cap] * (x // cap) + ([x % cap] if x % cap else [])
    if not out:
        with pytest.raises(BucketoptError, match="max_length"):
            apply_overflow(Histogram.from_lengths(lengths), cap, policy)
        return
    hist, report = apply_overflow(Histogram.from_lengths(lengths), cap, policy)
    assert hist == Histogram.from_lengths(out)
    assert report["samples_over"] == sum(x > cap for x in lengths)
    assert report["tokens_lost"] == sum(lengths) - sum(out)


def test_max_length_in_solve_reports_what_it_touched():
    lengths = heavy_tail()
    sol = bucketopt.solve(lengths, 6, pad="batch", token_budget=65_536, max_length=4096,
                          overflow="split")
    report = sol.extra["overflow"]
    assert sol.boundaries[-1] <= 4096 and report["samples_over"] == int((lengths > 4096).sum())
    assert sol.real_tokens == int(lengths.sum())  # split loses no token
    assert any("4,096" in w for w in sol.warnings)
    with pytest.raises(BucketoptError, match="overflow"):
        bucketopt.solve(lengths, 6, max_length=10, overflow="wrap")


def test_a_profile_makes_time_the_default_objective():
    lengths = heavy_tail(5_000)
    profile = dict(alpha=0.05, beta=1e-5, gamma=1e-9, token_budget=65_536)
    default = bucketopt.solve(lengths, 4, pad="batch", profile=profile)
    timed = bucketopt.solve(lengths, 4, pad="batch", profile=profile, objective="time")
    padded = bucketopt.solve(lengths, 4, pad="batch", profile=profile, objective="padding")
    assert default.objective == "time" and default.boundaries == timed.boundaries
    assert padded.objective == "padding"
    assert default.ktok_per_s >= padded.ktok_per_s * (1 - 1e-12)
    assert padded.padding_fraction <= default.padding_fraction + 1e-12


def test_cli_solve_reports_fill_and_notes(tmp_path, capsys):
    path = tmp_path / "lens.npy"
    np.save(path, heavy_tail())
    assert main(["solve", "--lens", str(path), "-k", "8", "--pad", "batch",
                 "--token-budget", "65536", "--json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert len(out["fill"]) == len(out["boundaries"]) and out["warnings"]
    assert "note:" in captured.err
    assert main(["solve", "--lens", str(path), "-k", "8", "--pad", "batch",
                 "--token-budget", "65536", "--min-fill", "0.5", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["warnings"] == []
    assert main(["solve", "--lens", str(path), "-k", "4", "--max-length", "2048",
                 "--overflow", "drop", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["overflow"]["overflow"] == "drop" and out["boundaries"][-1] <= 2048
    assert main(["solve", "--lens", str(path), "-k", "4", "--min-fill", "2"]) == 2
    assert "--min-fill" in capsys.readouterr().err


def test_compare_puts_the_padding_optimum_beside_solves_time_plan_with_a_profile():
    lengths = heavy_tail(8_000)
    profile = dict(alpha=0.05, beta=1e-5, gamma=1e-9, token_budget=65_536, world_size=4)
    c = bucketopt.compare(lengths, 4, profile=profile, world_size=None, diversity=False)
    rows = c.strategies
    assert {"bucketed", "bucketed-padding"} <= set(rows)
    timed = bucketopt.solve(lengths, 4, token_budget=65_536, profile=profile, world_size=None)
    padded = bucketopt.solve(lengths, 4, token_budget=65_536, profile=profile, world_size=None,
                             objective="padding")
    assert rows["bucketed"]["boundaries"] == list(timed.boundaries)  # solve's default: time
    assert rows["bucketed-padding"]["boundaries"] == list(padded.boundaries)
    # the time optimum is at least as fast as the padding optimum, by the model it minimises
    assert rows["bucketed"]["ktok_per_s"] == pytest.approx(timed.ktok_per_s, rel=1e-12)
    assert rows["bucketed"]["ktok_per_s"] >= rows["bucketed-padding"]["ktok_per_s"] * (1 - 1e-9)
    untimed = bucketopt.compare(lengths, 4, token_budget=65_536, diversity=False).strategies
    assert not any(name.startswith("bucketed-") for name in untimed)
    assert untimed["bucketed"]["boundaries"] == list(bucketopt.solve(
        lengths, 4, token_budget=65_536).boundaries)


@pytest.mark.parametrize("policy", ["truncate", "drop", "split"])
@pytest.mark.parametrize("world", [1, 3])
def test_sampler_items_follow_the_overflow_policy(policy, world):
    from bucketopt.data.overflow import OverflowDataset

    rng = np.random.default_rng(5)
    lengths = rng.integers(1, 300, size=500)
    cap = 120
    data = [list(range(x)) for x in lengths]
    items = []
    for rank in range(world):
        sampler = bucketopt.BucketBatchSampler(lengths, [40, 80, cap], token_budget=480,
                                               world_size=world, rank=rank, max_length=cap,
                                               overflow=policy)
        for batch in sampler:
            rows = [OverflowDataset(data, cap)[item] for item in batch]
            assert max(len(r) for r in rows) * len(rows) <= 480
            items += batch
    if policy == "split":  # every token of every sample exactly once
        assert sorted(items) == sorted((i, c) for i, x in enumerate(lengths)
                                       for c in range(-(-x // cap)))
    else:
        want = range(500) if policy == "truncate" else np.flatnonzero(lengths <= cap)
        assert sorted(items) == list(want)
