"""One answer for the same flags: solve, sweep, compare, export and the sampler find the same
plan (boundaries, batch sizes and, with a profile, the same predicted Ktok/s), on the CLI and in
Python, with one set of defaults (bucketopt.validate)."""

from __future__ import annotations

import inspect
import json

import numpy as np
import pytest

import bucketopt
from bucketopt.cli import main
from bucketopt.show.export import sampler_kwargs
from bucketopt.training.packed_rows import fastest_diverse, recommended_row
from bucketopt.validate import (
    DEFAULT_PACKING,
    DEFAULT_PAD,
    DEFAULT_SYNC_BUCKETS,
    DEFAULT_WORLD_SIZE,
    default_objective,
)

from . import solver_settings

PROFILE = "rtx-pro-6000-blackwell"
K = 4
BUDGET = 65_536
# (pad, profile, gpus): both paddings, without a profile and with it on 1 and 8 GPUs
FLAG_SETS = [(pad, profile, gpus) for pad in ("edge", "batch")
             for profile, gpus in ((None, None), (PROFILE, 1), (PROFILE, 8))]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    rng = np.random.default_rng(46)
    lengths = np.minimum(np.round(rng.lognormal(6.5, 1.0, 3_000)).astype(np.int64) + 1, 32_768)
    path = tmp_path_factory.mktemp("one") / "lens.npy"
    np.save(path, lengths)
    return lengths, str(path)


def flags(pad, profile, gpus):
    return solver_settings.cli_flags(BUDGET, pad, profile, gpus)


def python_kwargs(pad, profile, gpus):
    return solver_settings.python_kwargs(BUDGET, pad, profile, gpus)


def cli_json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def batch_sizes_seen(sampler):
    """bucket -> the sizes of the batches the sampler's epoch-0 plan yields."""
    seen = {}
    for batch in sampler.plan(0).batches():
        bucket = int(np.searchsorted(sampler.edges, sampler.lengths[batch].max(), side="left"))
        seen.setdefault(bucket, []).append(len(batch))
    return seen


@pytest.mark.parametrize("pad, profile, gpus", FLAG_SETS)
def test_every_entry_finds_the_same_plan(data, capsys, pad, profile, gpus):
    lengths, path = data
    argv = ["--lens", path, *flags(pad, profile, gpus), "--json", "-q"]
    solved = cli_json(capsys, ["solve", "-k", str(K), *argv])
    plan = (solved["boundaries"], solved["batch_sizes"])
    assert plan[1] == [BUDGET // b for b in plan[0]]  # fixed packing: B = floor(T / b)

    swept = cli_json(capsys, ["sweep", "-k", f"2:{K + 1}", *argv])
    row = next(r for r in swept["rows"] if r["k"] == K)
    assert (row["boundaries"], row["batch_sizes"]) == plan

    compared = cli_json(capsys, ["compare", "-k", str(K), *argv])
    assert compared["pad"] == pad
    assert compared["objective"] == default_objective(profile)
    bucketed = compared["strategies"]["bucketed"]
    assert (bucketed["boundaries"], bucketed["batch_sizes"]) == plan
    assert bucketed["padding_fraction"] == pytest.approx(solved["padding_fraction"], rel=1e-12)
    assert bucketed["bucketopt"] is True
    settings = bucketed["settings"]
    assert settings == {"pad": pad, "objective": default_objective(profile),
                        "sync_buckets": DEFAULT_SYNC_BUCKETS, "packing": DEFAULT_PACKING,
                        "world_size": gpus or 1, "source": "bucketopt"}
    if profile is None:  # no time row without a profile
        assert "ktok_per_s" not in solved and bucketed.get("ktok_per_s") is None
        assert not any(name.startswith("bucketed-") for name in compared["strategies"])
    else:  # the same prediction: solve's synced analytic model
        for key in ("ktok_per_s", "eta_days"):
            assert bucketed[key] == pytest.approx(solved[key], rel=1e-12), key
        for key in ("ktok_per_s_interval", "eta_days_interval"):
            assert bucketed[key] == pytest.approx(solved[key], rel=1e-12), key
        assert "ktok_per_s_simulated" in bucketed  # the simulation kept beside it
        assert row["ktok_per_s"] == pytest.approx(solved["ktok_per_s"], rel=1e-12)
        padding = cli_json(capsys, ["solve", "-k", str(K), *argv, "--objective", "padding"])
        second = compared["strategies"]["bucketed-padding"]
        assert (second["boundaries"], second["batch_sizes"]) == (padding["boundaries"],
                                                                 padding["batch_sizes"])
        assert second["ktok_per_s"] == pytest.approx(padding["ktok_per_s"], rel=1e-12)
        assert second["settings"]["objective"] == "padding"

    assert main(["export", "-k", str(K), "--format", "sampler", *argv[:-2], "-q"]) == 0
    config = json.loads(capsys.readouterr().out)
    assert (config["boundaries"], config["batch_sizes"]) == plan

    # Python: the same calls, the same answer
    kwargs = python_kwargs(pad, profile, gpus)
    sol = bucketopt.solve(lengths, K, **kwargs)
    assert (list(sol.boundaries), list(sol.batch_sizes)) == plan
    swept_py = bucketopt.sweep(lengths, range(2, K + 2), **kwargs)
    assert list(swept_py[K].boundaries) == plan[0]
    c = bucketopt.compare(lengths, K, diversity=False, rules=(), **kwargs)
    assert (c.strategies["bucketed"]["boundaries"], c.strategies["bucketed"]["batch_sizes"]) \
        == plan
    if profile is not None:
        assert c.strategies["bucketed"]["ktok_per_s"] == pytest.approx(sol.ktok_per_s,
                                                                      rel=1e-12)

    # the sampler: from the boundaries and the budget, and from the export
    for sampler in (bucketopt.BucketBatchSampler(lengths, sol.boundaries, token_budget=BUDGET),
                    bucketopt.BucketBatchSampler(lengths, **sampler_kwargs(config))):
        assert sampler.batch_sizes.tolist() == plan[1]
        counts = np.bincount(np.searchsorted(sampler.edges, lengths, side="left"),
                             minlength=len(plan[1]))
        for bucket, sizes in batch_sizes_seen(sampler).items():
            assert max(sizes) <= plan[1][bucket]
            if counts[bucket] >= plan[1][bucket]:  # a full batch is the plan's size
                assert max(sizes) == plan[1][bucket]


MODEL = dict(m0=2.0e9, m1=3.0e5, m2=40.0, capacity=30.0e9)  # a card given by hand


@pytest.mark.parametrize("budget", [None, BUDGET])
def test_the_sampler_batches_a_memory_plan_as_solve_sized_it(data, budget):
    lengths, _ = data
    sol = bucketopt.solve(lengths, K, token_budget=budget, memory=MODEL)
    sizes = list(sol.batch_sizes)
    direct = bucketopt.BucketBatchSampler(lengths, sol.boundaries, token_budget=budget,
                                          memory=MODEL)
    assert direct.batch_sizes.tolist() == sizes
    config = bucketopt.show.export.to_sampler_json(sol)
    kwargs = sampler_kwargs(config)
    if budget is not None:  # the memory model sizes some buckets below floor(T / b)
        assert sizes != [budget // b for b in sol.boundaries]
    assert bucketopt.BucketBatchSampler(lengths, **kwargs).batch_sizes.tolist() == sizes


def test_one_set_of_defaults():
    solve = inspect.signature(bucketopt.solve).parameters
    for fn in (bucketopt.solve, bucketopt.sweep, bucketopt.evaluate, bucketopt.compare):
        assert inspect.signature(fn).parameters["pad"].default == DEFAULT_PAD, fn.__name__
    for fn in (bucketopt.solve, bucketopt.sweep, bucketopt.evaluate,
               bucketopt.BucketBatchSampler):
        params = inspect.signature(fn).parameters
        assert params["sync_buckets"].default is DEFAULT_SYNC_BUCKETS, fn
    assert inspect.signature(bucketopt.BucketBatchSampler).parameters["packing"].default \
        == DEFAULT_PACKING
    for fn in (bucketopt.solve, bucketopt.sweep, bucketopt.evaluate, bucketopt.compare):
        assert inspect.signature(fn).parameters["world_size"].default == DEFAULT_WORLD_SIZE, fn
    assert solve["objective"].default is None  # resolved by default_objective
    assert (default_objective(None), default_objective(PROFILE)) == ("padding", "time")
    from bucketopt.cli import build_parser

    parser = build_parser()
    for command in ("solve", "sweep", "compare", "export"):
        argv = [command, "-k", "3"] if command != "sweep" else [command, "-k", "1:3"]
        if command == "export":
            argv += ["--format", "sampler"]
        args = parser.parse_args(argv)
        assert args.pad == DEFAULT_PAD and args.objective is None, command


def test_the_recommendation_is_one_rule_for_table_json_and_plot(data, capsys):
    _, path = data
    argv = ["compare", "--lens", path, "-k", "3", "--token-budget", str(BUDGET),
            "--profile", PROFILE, "--gpus", "8", "-q"]
    out = cli_json(capsys, [*argv, "--json"])
    rows = out["strategies"]
    assert out["recommended"] == recommended_row(rows) == fastest_diverse(rows)
    assert [name for name, row in rows.items() if row["recommended"]] == [out["recommended"]]
    for name, row in rows.items():
        assert row["bucketopt"] == (row["settings"]["source"] == "bucketopt"), name
        assert {"pad", "objective", "sync_buckets", "packing", "world_size",
                "source"} <= set(row["settings"]), name
    assert {n for n, r in rows.items() if r["bucketopt"]} >= {
        "bucketed", "bucketed-padding", "packed-balanced", "packed-bucketed"}
    assert not any(rows[n]["bucketopt"] for n in ("sorted", "shuffle", "packed", "lhotse"))
    # the table marks bucketopt's rows (+), the recommended one (=>) and the settings
    assert main(argv) == 0
    table = capsys.readouterr().out
    marked = [line.split()[1] for line in table.splitlines() if line.startswith("=> ")]
    assert marked == [out["recommended"]]
    assert "bucketed +" in table and "edge/time/synced/fixed" in table
    assert f"recommended: {out['recommended']}," in table


@pytest.mark.parametrize("timed", [False, True])
def test_recommended_row_rule(timed):
    def row(pad, gap=None, rate=None):
        return {"padding_fraction": pad, "step_mix_gap": gap,
                "ktok_per_s": rate if timed else None}

    rows = {"sorted": row(0.01, 0.9, 50.0), "shuffle": row(0.5, 0.2, 10.0),
            "bucketed": row(0.1, 0.15, 30.0), "lhotse": row(0.05, None, 40.0),
            "packed": row(0.0, 0.3, 35.0)}
    # diverse rows: shuffle and bucketed (lhotse has no step mix figure, packed is less diverse)
    assert recommended_row(rows) == "bucketed"
    for r in rows.values():
        r["step_mix_gap"] = None
    # without diversity figures: every row but sorted
    assert recommended_row(rows) == ("lhotse" if timed else "packed")


def test_the_plot_draws_every_bucketopt_row_blue_and_marks_the_recommended(data):
    pytest.importorskip("matplotlib")
    from bucketopt.show.plots import OPTIMAL_COLOR, plot_comparison

    lengths, _ = data
    c = bucketopt.compare(lengths, 3, token_budget=BUDGET, profile=PROFILE, world_size=8)
    fig = plot_comparison(c.strategies)
    from matplotlib.colors import to_rgba

    names = list(c.strategies)
    for ax in fig.axes:
        bars = sorted(ax.patches, key=lambda p: p.get_y())  # first row on top
        for name, bar in zip(names, bars):
            row = c.strategies[name]
            blue = bar.get_facecolor()[:3] == to_rgba(OPTIMAL_COLOR)[:3]
            assert blue == row["bucketopt"], name
            assert bool(bar.get_hatch()) == row["recommended"], name
        labels = [t.get_text() for t in ax.texts]
        assert sum("(recommended)" in t for t in labels) == 1


def test_a_batch_padding_sweep_gives_solves_rows_or_says_it_does_not(data):
    from bucketopt.objectives.batch import EXACT_CANDIDATES, SWEEP_REFINED_ROWS

    lengths, _ = data
    assert np.unique(lengths).size > EXACT_CANDIDATES  # rows come from a candidate grid
    kwargs = dict(token_budget=BUDGET, pad="batch")
    swept = bucketopt.sweep(lengths, range(1, SWEEP_REFINED_ROWS + 1), **kwargs)
    for k in (2, 5, 9, SWEEP_REFINED_ROWS):
        assert swept[k].boundaries == bucketopt.solve(lengths, k, **kwargs).boundaries, k
        assert not any("not refined" in w for w in swept[k].warnings)
    longer = bucketopt.sweep(lengths, range(1, SWEEP_REFINED_ROWS + 2), **kwargs)
    for k, sol in zip(longer.ks, longer.solutions):
        noted = any("not refined" in w for w in sol.warnings)
        assert noted == (k != longer.recommended_k), k


def test_python_defaults_give_one_answer_with_a_profile(data):
    """No world size given: solve and compare's bucketed row plan for the same ranks (the
    default's), so they find the same boundaries and predict the same Ktok/s."""
    lengths, _ = data
    sol = bucketopt.solve(lengths, K, token_budget=BUDGET, profile=PROFILE)
    row = bucketopt.compare(lengths, K, token_budget=BUDGET, profile=PROFILE, diversity=False,
                            rules=()).strategies["bucketed"]
    assert tuple(row["boundaries"]) == tuple(sol.boundaries)
    assert row["ktok_per_s"] == pytest.approx(sol.ktok_per_s)
