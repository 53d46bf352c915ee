"""The predicted step-time distribution: p50, p90, mean and rank wait (bucketopt.cost.steps)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import bucketopt
from bucketopt.cli import main
from bucketopt.cost.costmodel import CostModel, step_times
from bucketopt.cost.steps import KEYS, epoch_steps, histogram_steps, weighted_quantiles
from bucketopt.data.histogram import as_histogram
from bucketopt.training.epoch import epoch_from_batches

PROFILE = {"name": "t", "alpha": 0.05, "beta": 2e-6, "gamma": 1e-9,
           "uncertainty": {"coverage": 0.95, "coefficient_sets": [
               [0.04, 1.8e-6, 0.8e-9], [0.06, 2.2e-6, 1.2e-9], [0.05, 2.1e-6, 1e-9]]}}


@pytest.fixture(scope="module")
def lengths():
    rng = np.random.default_rng(5)
    return np.r_[rng.integers(30, 500, 6_000), rng.integers(500, 4_000, 2_000)]


def _sampler_epoch(lengths, edges, budget, world, pad):
    """The sampler's epoch in training order (rank r's i-th batch is batch i*G + r)."""
    per_rank = [list(bucketopt.BucketBatchSampler(lengths, edges, token_budget=budget, rank=r,
                                                  world_size=world, seed=1))
                for r in range(world)]
    batches = [per_rank[r][i] for i in range(min(map(len, per_rank))) for r in range(world)]
    return epoch_from_batches(lengths, batches, strategy="sampler", pad=pad, edges=edges)


def _reference(epoch, model):
    """p50, p90, mean and rank wait read straight off the epoch's steps."""
    batch = model.batch_times(epoch)
    g = model.world_size
    padded = np.zeros(-(-batch.size // g) * g)
    padded[:batch.size] = batch
    per_step = padded.reshape(-1, g)
    steps = step_times(epoch, model)
    return [float(np.quantile(steps, 0.5, method="inverted_cdf")),
            float(np.quantile(steps, 0.9, method="inverted_cdf")), float(steps.mean()),
            float((steps - per_step.mean(axis=1)).mean())]


def test_weighted_quantiles_are_the_inverse_distribution_function():
    rng = np.random.default_rng(0)
    values = rng.random(200)
    for q in (0.1, 0.5, 0.9):
        got = weighted_quantiles(values, np.ones(200), [q])[0]
        assert got == np.quantile(values, q, method="inverted_cdf")
    # weights are repeats
    counts = rng.integers(1, 5, 200)
    got = weighted_quantiles(values, counts, [0.5, 0.9])
    assert got == [np.quantile(np.repeat(values, counts), q, method="inverted_cdf")
                   for q in (0.5, 0.9)]


@pytest.mark.parametrize("pad", ["edge", "batch"])
@pytest.mark.parametrize("world", [1, 4])
def test_synced_histogram_steps_match_the_sampler_epochs_steps(lengths, pad, world):
    edges = bucketopt.solve(lengths, 5, token_budget=16_384).boundaries
    model = CostModel(0.05, 2e-6, 1e-9, world_size=world)
    predicted = histogram_steps(as_histogram(lengths), edges, 16_384, pad, model)
    measured = _reference(_sampler_epoch(lengths, edges, 16_384, world, pad), model)
    for key, value in zip(KEYS, measured):  # waits: within 1% of a step (partial batches)
        tol = 0.03 if key != "rank_wait_s" else 0.15
        assert predicted[key] == pytest.approx(value, rel=tol, abs=0.01 * measured[2]), key
    assert predicted["step_time_p50"] <= predicted["step_time_p90"]
    if world == 1 or pad == "edge":
        assert predicted["rank_wait_s"] == pytest.approx(0.0, abs=1e-3)


@pytest.mark.parametrize("pad", ["edge", "batch"])
def test_random_order_steps_match_simulated_epochs(lengths, pad):
    edges = bucketopt.solve(lengths, 5, token_budget=16_384).boundaries
    model = CostModel(0.05, 2e-6, 1e-9, world_size=4)
    predicted = histogram_steps(as_histogram(lengths), edges, 16_384, pad, model,
                                sync_buckets=False)
    epochs = [bucketopt.simulate(lengths, "bucketed", token_budget=16_384, boundaries=edges,
                                 pad=pad, seed=s) for s in range(6)]
    pooled = epoch_steps(epochs, model)
    for key in KEYS:
        assert predicted[key] == pytest.approx(pooled[key], rel=0.06), key
    assert predicted["rank_wait_s"] > 0.05 * predicted["step_time_mean"]  # ranks wait


def test_intervals_come_from_the_coefficient_sets_and_hold_the_point(lengths):
    sol = bucketopt.solve(lengths, 4, token_budget=16_384, profile=PROFILE, world_size=4)
    out = sol.to_dict()
    for key in KEYS:
        low, high = out[key + "_interval"]
        assert low <= out[key] <= high, key
    # the p50's interval is the central 95% of the p50 under each coefficient set
    model = CostModel(0.05, 2e-6, 1e-9, world_size=4)
    per_set = [histogram_steps(as_histogram(lengths), sol.boundaries, 16_384, "edge",
                               CostModel(*c, world_size=4))["step_time_p50"]
               for c in PROFILE["uncertainty"]["coefficient_sets"]]
    point = histogram_steps(as_histogram(lengths), sol.boundaries, 16_384, "edge",
                            model)["step_time_p50"]
    assert out["step_time_p50"] == pytest.approx(point)
    low, high = out["step_time_p50_interval"]
    assert low == pytest.approx(min(np.quantile(per_set, 0.025), point))
    assert high == pytest.approx(max(np.quantile(per_set, 0.975), point))
    # the mean step time is the epoch time over the steps the prediction counts
    assert out["step_time_mean"] > 0 and not any(k.startswith("step_time") for k in
                                                  bucketopt.solve(lengths, 4).to_dict())


def test_solve_json_table_and_plan_carry_the_step_times(lengths, tmp_path, capsys):
    path = tmp_path / "lens.npy"
    np.save(path, lengths)
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps(PROFILE))
    plan = tmp_path / "plan.json"
    base = ["solve", "--lens", str(path), "-k", "4", "--token-budget", "16384", "--profile",
            str(profile), "--gpus", "2"]
    assert main([*base, "--json", "-o", str(plan), "-q"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert main([*base, "-q"]) == 0
    table = capsys.readouterr().out
    line = next(x for x in table.splitlines() if x.startswith("predicted step time: "))
    assert "p50" in line and "p90" in line and "expected rank wait" in line
    saved = json.loads(plan.read_text())["predictions"]
    for key in KEYS:
        assert saved[key] == out[key] and saved[key + "_interval"] == out[key + "_interval"]
    from bucketopt.plan import load_plan
    from bucketopt.solution import solution_from_plan

    loaded = load_plan(plan)
    assert loaded["predictions"]["step_time_p90"] == out["step_time_p90"]
    assert solution_from_plan(loaded).extra["step_time_p50"] == out["step_time_p50"]
    # a plan of an earlier version (no step times) still reads; a wrong one is refused
    for key in KEYS:
        del saved[key], saved[key + "_interval"]
    from bucketopt.plan import plan_checksum, validate_plan

    data = json.loads(plan.read_text())
    data["predictions"] = saved
    data["checksum"] = plan_checksum(data)
    assert "step_time_p50" not in validate_plan(data)["predictions"]
    data = json.loads(plan.read_text())
    data["predictions"]["step_time_p50_interval"] = [0.0, 1e-9]
    data["checksum"] = plan_checksum(data)
    with pytest.raises(bucketopt.BucketoptError, match="step_time_p50_interval"):
        validate_plan(data)


def test_compare_rows_carry_the_step_times(lengths, tmp_path, capsys):
    path = tmp_path / "lens.npy"
    np.save(path, lengths)
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps(PROFILE))
    assert main(["compare", "--lens", str(path), "-k", "4", "--token-budget", "16384",
                 "--profile", str(profile), "--gpus", "2", "--simulations", "1", "--json",
                 "-q"]) == 0
    rows = json.loads(capsys.readouterr().out)["strategies"]
    for name, row in rows.items():
        if row.get("ktok_per_s") is None:
            continue
        for key in KEYS:
            low, high = row[key + "_interval"]
            assert low <= row[key] <= high, (name, key)
        assert row["step_time_p50"] <= row["step_time_p90"], name
    # bucketopt's plan row: solve's own prediction, the simulated figures kept beside it
    sol = bucketopt.solve(lengths, 4, token_budget=16_384, profile=str(profile), world_size=2)
    row = rows["bucketed"]
    for key in KEYS:
        assert row[key] == pytest.approx(sol.extra[key]), key
        assert f"{key}_simulated" in row


# --- steps whose ranks scatter (noisy_step_stats, sampled_step_stats) ------------------------

def _naive_noisy(features, world, coef, noise, extra):
    """Every step with every noise row, one outcome at a time."""
    batch = [sum(f * c for f, c in zip(row, coef)) for row in features]
    batch += [0.0] * (-len(batch) % world)
    steps, waits = [], []
    for i in range(0, len(batch), world):
        for row, add in zip(noise, extra):
            ranks = [batch[i + r] * row[r] for r in range(world)]
            steps.append(max(ranks) + add)
            waits.append(max(ranks) + add - sum(ranks) / world)
    return [float(np.quantile(steps, 0.5, method="inverted_cdf")),
            float(np.quantile(steps, 0.9, method="inverted_cdf")),
            float(np.mean(steps)), float(np.mean(waits))]


@pytest.mark.parametrize("world", [1, 2, 3])
def test_noisy_step_stats_match_every_step_with_every_row(world):
    from bucketopt.cost.steps import noisy_step_stats

    rng = np.random.default_rng(world)
    features = np.c_[np.ones(17), rng.integers(100, 4000, 17), rng.integers(1e4, 1e6, 17)]
    noise = rng.lognormal(0.0, 0.2, (11, world))
    extra = rng.normal(0.002, 0.001, 11)
    coef = [0.01, 2e-6, 1e-9]
    assert noisy_step_stats(features, world, coef, noise) == pytest.approx(
        _naive_noisy(features.tolist(), world, coef, noise.tolist(), [0.0] * 11), rel=1e-12)
    assert noisy_step_stats(features, world, coef, noise, extra) == pytest.approx(
        _naive_noisy(features.tolist(), world, coef, noise.tolist(), extra.tolist()), rel=1e-12)


def test_without_scatter_the_noisy_figures_are_the_plain_ones():
    from bucketopt.cost.steps import noisy_step_stats, step_stats

    rng = np.random.default_rng(0)
    features = np.c_[np.ones(30), rng.integers(100, 4000, 30), rng.integers(1e4, 1e6, 30)]
    coef = [0.01, 2e-6, 1e-9]
    plain = step_stats(features, 3)(coef)
    assert noisy_step_stats(features, 3, coef, np.ones((5, 3))) == pytest.approx(plain)
    # the same factor on every rank scales the step and the wait alike
    assert noisy_step_stats(features, 3, coef, np.full((1, 3), 1.5)) == pytest.approx(
        [1.5 * x for x in plain])


def test_equal_ranks_that_scatter_wait_the_expected_max_less_the_mean():
    from bucketopt.cost.steps import noisy_step_stats

    rng = np.random.default_rng(1)
    noise = rng.lognormal(0.0, 0.1, (400, 3))
    got = noisy_step_stats([[1.0, 0.0, 0.0]] * 6, 3, [0.02, 0, 0], noise)
    assert got[3] == pytest.approx(0.02 * (noise.max(axis=1) - noise.mean(axis=1)).mean())
    assert got[2] == pytest.approx(0.02 * noise.max(axis=1).mean())
    assert got[0] <= got[1] and got[3] > 0


def test_sampled_runs_scatter_about_the_expected_figures():
    from bucketopt.cost.steps import noisy_step_stats, sampled_step_stats

    rng = np.random.default_rng(2)
    features = np.c_[np.ones(60), rng.integers(100, 4000, 60), rng.integers(1e4, 1e6, 60)]
    noise = rng.lognormal(0.0, 0.15, (50, 2))
    coef = [0.01, 2e-6, 1e-9]
    runs = sampled_step_stats(features, 2, [coef], noise, draws=4000, seed=3)
    expected = noisy_step_stats(features, 2, coef, noise)
    assert runs.shape == (4000, 4)
    # a run's mean step and mean wait are unbiased: their average over runs is the expectation
    for j in (2, 3):
        spread = runs[:, j].std() / np.sqrt(runs.shape[0])
        assert abs(runs[:, j].mean() - expected[j]) < 5 * spread
    assert np.all(runs[:, 0] <= runs[:, 1])
    # a single noise row and one coefficient vector: every run measures the same figures
    one = sampled_step_stats(features, 2, [coef], noise[:1], draws=3)
    times = (np.asarray(features) @ coef).reshape(-1, 2) * noise[0]
    step = times.max(axis=1)
    assert one == pytest.approx(np.tile([np.quantile(step, 0.5), np.quantile(step, 0.9),
                                         step.mean(), (step - times.mean(axis=1)).mean()],
                                        (3, 1)))
    # coefficient vectors are taken in turn
    two = sampled_step_stats(features, 2, [coef, [2 * c for c in coef]], noise[:1], draws=2)
    assert two[1] == pytest.approx(2 * two[0])


@pytest.mark.parametrize("noise", [np.ones((3, 2)), np.zeros((2, 3)), np.full((2, 3), np.nan),
                                   np.ones((0, 3)), np.ones(3)])
def test_bad_noise_is_one_clear_error(noise):
    from bucketopt.cost.steps import noisy_step_stats

    with pytest.raises(bucketopt.BucketoptError, match="noise must be"):
        noisy_step_stats([[1.0, 1.0, 1.0]] * 3, 3, [1.0, 0, 0], noise)
    with pytest.raises(bucketopt.BucketoptError, match="extra must"):
        noisy_step_stats([[1.0, 1.0, 1.0]] * 3, 3, [1.0, 0, 0], np.ones((2, 3)), [0.0])


def test_scatter_rows_reproduce_every_lockstep_step_exactly():
    """With the coefficients the rows were read with, every measured step of one shape comes
    back: its time (the ranks' mean of busy + wait) and its mean wait, one row each."""
    from bucketopt.cost.steps import noisy_step_stats, scatter_rows

    rng = np.random.default_rng(8)
    busy = rng.lognormal(np.log(0.03), 0.2, (9, 3))
    wait = busy.max(axis=1, keepdims=True) - busy + rng.uniform(0, 0.002, (9, 3))
    coef = [0.005, 4e-5, 0.0]
    predicted = np.full(9, 0.005 + 4e-5 * 512)
    noise, extra = scatter_rows(busy, wait, predicted)
    step = (busy + wait).mean(axis=1)
    for k in range(9):
        one = noisy_step_stats([[1.0, 512.0, 512.0 * 512]] * 3, 3, coef, noise[k:k + 1],
                               extra[k:k + 1])
        assert one == pytest.approx([step[k], step[k], step[k], wait[k].mean()])
    # all rows: the measured steps' distribution
    got = noisy_step_stats([[1.0, 512.0, 512.0 * 512]] * 3, 3, coef, noise, extra)
    assert got == pytest.approx([np.quantile(step, 0.5, method="inverted_cdf"),
                                 np.quantile(step, 0.9, method="inverted_cdf"), step.mean(),
                                 wait.mean()])


def test_ranked_prediction_with_scatter_holds_its_value_and_widens_by_the_runs():
    from bucketopt.cost.costmodel import profile_from_dict
    from bucketopt.cost.steps import noisy_step_stats, step_stats
    from bucketopt.training.verify import predict_ranked_steps

    rng = np.random.default_rng(4)
    features = np.c_[np.ones(90), rng.integers(100, 4000, 90), rng.integers(1e4, 1e6, 90)]
    model = profile_from_dict(PROFILE).cost_model(world_size=3)
    coef = [model.alpha, model.beta, model.gamma]
    plain = predict_ranked_steps(features, 3, model, 0.05)
    assert [plain[k]["value"] for k in KEYS] == pytest.approx(step_stats(features, 3)(coef))
    assert all("sample_interval" not in v for v in plain.values())
    noise = rng.lognormal(0.0, 0.1, (40, 3))
    extra = rng.uniform(0, 0.001, 40)
    noisy = predict_ranked_steps(features, 3, model, 0.05, noise=noise, extra=extra, draws=500)
    assert [noisy[k]["value"] for k in KEYS] == pytest.approx(
        noisy_step_stats(features, 3, coef, noise, extra))
    for entry in noisy.values():
        low, high = entry["sample_interval"]
        assert low <= entry["value"] <= high
        widened = entry["interval"]
        assert widened == pytest.approx([low * 0.95, high * 1.05])
    # the scatter makes ranks wait and a 30-step run's p90 uncertain beyond the coefficients
    assert noisy["rank_wait_s"]["value"] > plain["rank_wait_s"]["value"]
    p90 = noisy["step_time_p90"]
    assert p90["sample_interval"][1] - p90["sample_interval"][0] > \
        p90["coefficient_interval"][1] - p90["coefficient_interval"][0]


def test_sampled_runs_draw_the_extra_with_its_row():
    from bucketopt.cost.steps import sampled_step_stats

    features = [[1.0, 0.0, 0.0]] * 6
    # two rows: equal ranks and no extra, or a slow rank and 1 s of extra; every run's step
    # times and waits are made of these two outcomes only
    runs = sampled_step_stats(features, 2, [[1.0, 0, 0]], [[1.0, 1.0], [1.0, 2.0]],
                              [0.0, 1.0], draws=300, seed=1)
    share = (runs[:, 2] - 1.0) / 2.0  # the mean step: 1 + 2 x the share of slow steps
    assert np.allclose(runs[:, 3], share * 1.5)  # a slow step waits 0.5 + 1
    assert np.allclose(share * 3, np.round(share * 3))  # 3 steps a run
    assert runs[:, 2].std() > 0
