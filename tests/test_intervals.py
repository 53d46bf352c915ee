"""Prediction intervals: the vectorised paths against per-set loops, profiles that carry them."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bucketopt
from bucketopt import BucketoptError
from bucketopt.cost.costmodel import (
    CostModel,
    epoch_time,
    load_profile,
    parse_uncertainty,
    profile_from_dict,
    time_epoch,
)
from bucketopt.cost.intervals import (
    epochs_intervals,
    interval,
    prediction_intervals,
    solution_intervals,
)
from bucketopt.data.histogram import Histogram
from bucketopt.objectives.random_order import analytic_epoch_seconds

STORY = "rtx-pro-6000-blackwell"


def profile_with_sets(sets, coverage=1.0, **kw):
    base = dict(name="p", alpha=0.02, beta=1e-4, gamma=1e-7, token_budget=512, world_size=1)
    base.update(kw)
    base["uncertainty"] = {"coverage": coverage, "coefficient_sets": sets}
    return base


def random_sets(rng, n=12):
    return [[0.02 * rng.uniform(0.5, 1.5), 1e-4 * rng.uniform(0.8, 1.2),
             1e-7 * rng.uniform(0.5, 1.5)] for _ in range(n)]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 200), min_size=5, max_size=200), st.integers(1, 3),
       st.sampled_from(["edge", "batch"]), st.integers(1, 8), st.integers(0, 10_000))
def test_solution_intervals_equal_the_per_set_loop(lengths, k, pad, gpus, seed):
    # The vectorised path (features computed once) against re-running the analytic fast
    # path with every coefficient set.
    rng = np.random.default_rng(seed)
    prof = profile_from_dict(profile_with_sets(random_sets(rng), world_size=gpus))
    hist = Histogram.from_lengths(lengths)
    sol = bucketopt.solve(lengths, k, token_budget=512, pad=pad)
    model = prof.cost_model()
    fast = solution_intervals(sol, hist, model)

    def seconds_of(m):
        return analytic_epoch_seconds(hist, sol.boundaries, 512, pad, m)

    slow = prediction_intervals(seconds_of, prof, real_tokens=sol.real_tokens)
    for key in ("ktok_per_s_interval", "eta_days_interval"):
        assert fast[key] == pytest.approx(slow[key], rel=1e-9)
    point = sol.real_tokens / seconds_of(model) / 1e3
    low, high = fast["ktok_per_s_interval"]
    assert low <= point * (1 + 1e-12) and point <= high * (1 + 1e-12)


@pytest.mark.parametrize("gpus", [1, 3, 8])
def test_epochs_intervals_equal_time_epoch_per_set(gpus):
    rng = np.random.default_rng(gpus)
    sets = random_sets(rng)
    prof = profile_from_dict(profile_with_sets(sets, world_size=gpus))
    model = prof.cost_model(epochs=4)
    lengths = rng.integers(1, 400, size=3000)
    epochs = [bucketopt.simulate(lengths, "shuffle", token_budget=512, seed=0, epoch=e)
              for e in range(3)]
    out = epochs_intervals(epochs, model)
    rates = [np.mean([time_epoch(ep, CostModel(*c, world_size=gpus)).ktok_per_s
                      for ep in epochs]) for c in sets]
    etas = [np.mean([time_epoch(ep, CostModel(*c, world_size=gpus, epochs=4)).eta_days
                     for ep in epochs]) for c in sets]
    point = np.mean([time_epoch(ep, model).ktok_per_s for ep in epochs])
    assert out["ktok_per_s_interval"] == pytest.approx(
        [min(min(rates), point), max(max(rates), point)], rel=1e-9)
    point_eta = np.mean([time_epoch(ep, model).eta_days for ep in epochs])
    assert out["eta_days_interval"] == pytest.approx(
        [min(min(etas), point_eta), max(max(etas), point_eta)], rel=1e-9)


def test_coverage_takes_the_central_share_and_holds_the_point():
    values = np.arange(1.0, 101.0)
    assert interval(values, 50.0, 1.0) == [1.0, 100.0]
    low, high = interval(values, 50.0, 0.9)
    assert low == pytest.approx(np.quantile(values, 0.05))
    assert high == pytest.approx(np.quantile(values, 0.95))
    assert interval(values, 500.0, 0.9)[1] == 500.0  # widened to hold the point
    assert interval([], 3.0, 0.9) == [3.0, 3.0]


def test_a_profile_without_uncertainty_gives_a_zero_width_interval():
    lengths = np.arange(1, 400)
    plain = dict(alpha=0.02, beta=1e-4, gamma=1e-7, token_budget=512)
    sol = bucketopt.solve(lengths, 3, profile=plain)
    assert sol.extra["ktok_per_s_interval"] == [pytest.approx(sol.ktok_per_s)] * 2
    assert sol.extra["eta_days_interval"] == [pytest.approx(sol.eta_days)] * 2


def test_wider_coefficient_sets_give_wider_intervals():
    lengths = np.random.default_rng(0).integers(1, 500, size=5000)
    widths = []
    for spread in (0.01, 0.1, 0.3):
        sets = [[0.02, 1e-4 * (1 + s), 1e-7 * (1 + s)] for s in (-spread, 0.0, spread)]
        sol = bucketopt.solve(lengths, 4, pad="batch", profile=profile_with_sets(sets))
        low, high = sol.extra["ktok_per_s_interval"]
        widths.append(high - low)
    assert widths[0] < widths[1] < widths[2]


def test_profile_round_trip_keeps_the_uncertainty(tmp_path):
    rng = np.random.default_rng(3)
    prof = profile_from_dict(profile_with_sets(random_sets(rng), coverage=0.9))
    again = load_profile(str(prof.save(tmp_path / "p.json")))
    assert again.uncertainty == prof.uncertainty
    assert again.cost_model().uncertainty == prof.uncertainty


@pytest.mark.parametrize("uncertainty, match", [
    ([1, 2], "JSON object"),
    ({"coefficient_sets": []}, "non-empty"),
    ({"coefficient_sets": [[1.0, 2.0]]}, "3 numbers"),
    ({"coefficient_sets": [[1.0, -2.0, 0.0]]}, r"\[0, 1e\+06\]"),
    ({"coefficient_sets": [[0.0, 0.0, 0.0]]}, "not all 0"),
    ({"coefficient_sets": [[1.0, "x", 0.0]]}, r"coefficient_sets\[0\]\[1\].*got 'x'"),
    ({"coefficient_sets": [[1e7, 0.0, 0.0]]}, r"\[0, 1e\+06\]"),  # as the main coefficients
    ({"coefficient_sets": [[10**400, 0.0, 0.0]]}, "about 401 digits"),
    ({"coefficient_sets": [[1.0, 1.0, 1.0]], "coverage": 0}, "coverage"),
    ({"coefficient_sets": [[1.0, 1.0, 1.0]] * 5000}, "at most"),
])
def test_bad_uncertainty_is_one_clear_error(tmp_path, uncertainty, match):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"alpha": 1.0, "beta": 1.0, "gamma": 0.0,
                                "uncertainty": uncertainty}))
    with pytest.raises(BucketoptError, match=match):
        bucketopt.solve([1, 2, 3], 2, profile=str(path), token_budget=64)
    assert parse_uncertainty(None) is None


def test_general_path_with_any_epoch_callable():
    lengths = np.random.default_rng(1).integers(1, 300, size=2000)
    epoch = bucketopt.simulate(lengths, "sorted", token_budget=512)
    sets = [[0.01, 1e-4, 1e-7], [0.03, 1.2e-4, 2e-7]]
    out = prediction_intervals(lambda m: epoch_time(epoch, m),
                               profile_with_sets(sets), real_tokens=int(lengths.sum()),
                               epochs=2)
    seconds = [epoch_time(epoch, CostModel(*c)) for c in sets]
    point = epoch_time(epoch, CostModel(0.02, 1e-4, 1e-7))
    lo, hi = min(*seconds, point), max(*seconds, point)
    assert out["eta_days_interval"] == pytest.approx([2 * lo / 86400, 2 * hi / 86400])
    assert out["ktok_per_s_interval"] == pytest.approx([lengths.sum() / hi / 1e3,
                                                        lengths.sum() / lo / 1e3])


# --- the story profile ---------------------------------------------------------------------


def test_story_profile_has_a_physical_alpha_and_coefficient_sets():
    prof = load_profile(STORY)
    assert prof.alpha > 0
    sets = np.asarray(prof.uncertainty["coefficient_sets"])
    assert sets.shape[1] == 3 and sets.shape[0] >= 20 and (sets[:, 0] > 0).all()
    assert prof.uncertainty["coverage"] == 1.0
    assert prof.provenance["measured_on_gpu"] is False


def test_story_intervals_contain_the_published_figures(tmp_path, capsys):
    from bucketopt.cli import main
    from bucketopt.datasets import seed_like

    path = tmp_path / "lens.npy"
    np.save(path, seed_like())
    # the story's run: dynamic padding, the padding optimum, batches in random order (the
    # bucketed row's simulated figures; its own Ktok/s is solve's, for the synced sampler)
    assert main(["compare", "--lens", str(path), "-k", "6", "--profile", STORY, "--gpus", "8",
                 "--epochs", "6", "--pad", "batch", "--objective", "padding", "--json",
                 "-q"]) == 0
    rows = json.loads(capsys.readouterr().out)["strategies"]
    for name, published, run in (("sorted", 32.0, ""), ("shuffle", 12.0, ""),
                                 ("bucketed", 25.1, "_simulated")):
        low, high = rows[name]["ktok_per_s_interval" + run]
        assert low <= published <= high, (name, low, high)
        assert low <= rows[name]["ktok_per_s" + run] <= high
    low, high = rows["bucketed"]["eta_days_interval_simulated"]
    assert low <= 5.1 <= high
    # The analytic fast path (batches of all buckets in random order, as the story's run and
    # compare's simulation) carries the same kind of interval.
    from bucketopt.cost.intervals import annotate

    lengths = seed_like()
    sol = bucketopt.evaluate(lengths, rows["bucketed"]["boundaries"], pad="batch",
                             token_budget=load_profile(STORY).token_budget)
    out = annotate(sol, Histogram.from_lengths(lengths),
                   load_profile(STORY).cost_model(epochs=6))
    low, high = out.extra["ktok_per_s_interval"]
    assert low <= 25.1 <= high and low <= out.ktok_per_s <= high
    low, high = out.extra["eta_days_interval"]
    assert low <= 5.1 <= high and low <= out.eta_days <= high
