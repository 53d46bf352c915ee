"""A real multi-process gloo run on CPU (benchmarks/gloo_run.py): opt-in, BUCKETOPT_GLOO=1
(the schedule of its one spawn is checked without it).

It starts 3 processes (the lockstep probe interleaved with both plans' steps, after a short
single-process probe) and trains a tiny model for about a minute of CPU, so the default suite
skips it:
``BUCKETOPT_GLOO=1 python -m pytest tests/test_gloo.py``. It checks that the run measures what
it says (every figure present, finite, against its prediction and interval, the verdict
consistent with them); it asserts no timing: the figures themselves are in docs/cost_model.md.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

opt_in = pytest.mark.skipif(os.environ.get("BUCKETOPT_GLOO") != "1",
                            reason="a multi-process gloo run: set BUCKETOPT_GLOO=1")

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def gloo_run():
    sys.path.insert(0, str(ROOT / "benchmarks"))  # the spawned ranks import gloo_run too
    try:
        import gloo_run

        yield gloo_run
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def test_the_probe_and_the_plans_interleave_every_step_once(gloo_run, monkeypatch):
    """The schedule of the one spawn (no process started): every probe round holds every design
    shape once, the same on every rank; every plan step runs once, in order, each rank its own
    batch; the plans' steps spread over the rounds."""
    import bucketopt
    from bucketopt.cost.probe import design_shapes
    from bucketopt.training.verify import plan_batches

    seen = {}

    def fake(spec, sequences, world, port):
        seen["sequences"] = sequences
        return np.zeros((world, len(sequences[0]), 5)), 0.001

    monkeypatch.setattr(gloo_run, "run_ranks", fake)
    lengths = gloo_run.tiny_lengths(n=600, max_length=128)
    plan = bucketopt.solve(lengths, 3, token_budget=128, world_size=3).to_plan()
    plans = {"bucketed": (plan_batches(plan, lengths), 10),
             "packed": (plan_batches(plan, lengths, packing="varlen"), 10)}
    table, _latency, tags = gloo_run.interleaved_run("spec", 3, 128, 4, plans, 0)
    sequences = seen["sequences"]
    assert table.shape == (3, len(tags), 5) and all(len(q) == len(tags) for q in sequences)
    shapes = design_shapes(128, 128)
    for r in range(1, 5):
        steps = [k for k, tag in enumerate(tags) if tag[0] == "probe" and tag[1] == r]
        assert sorted(tags[k][2] for k in steps) == sorted(shapes)
        assert all(sequences[0][k] == q[k] for k in steps for q in sequences)
    for name, (batches, n) in plans.items():
        steps = [k for k, tag in enumerate(tags) if tag[0] == name]
        assert [tags[k][1] for k in steps] == list(range(n))
        for i, k in enumerate(steps):
            assert [q[k] for q in sequences] == [list(batches.shape(i * 3 + rank))
                                                  for rank in range(3)]
        # spread over the rounds: some before the last probe round, some after the first
        probe_round = {r: [k for k, tag in enumerate(tags) if tag[0] == "probe" and tag[1] == r]
                       for r in (1, 4)}
        assert steps[0] < min(probe_round[4]) and steps[-1] > max(probe_round[1])


@opt_in
def test_gloo_run_measures_step_times_and_rank_waits_of_both_plans(gloo_run, capsys):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from bucketopt.training.verify import verdict

    assert gloo_run.main(["--steps", "8", "--probe-time", "15", "--lockstep-rounds", "4",
                          "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ranks"] == 3 and set(report["plans"]) == {"bucketed", "packed"}
    lock = report["lockstep"]
    # the lockstep probe: 4 rounds over the probe's shapes, every rank every step
    assert lock["rounds"] == 4 and lock["steps"] == 4 * lock["shapes"]
    assert 0 < lock["scatter_rows"] < lock["steps"]  # the on-budget steps only
    assert lock["alpha"] > 0 and lock["claimed_error"] >= 0.05
    assert lock["equal_shape_wait_from_scatter"] >= 0
    assert lock["noise_quantiles"] == sorted(lock["noise_quantiles"])
    for name, entry in report["plans"].items():
        assert entry["steps"] == 8
        sp = entry["single_process"]
        assert sp["compute_speed_factor"] > 0
        for figures, keys in ((entry["figures"], {"step:step_time_p50", "step:step_time_p90",
                                                  "step:step_time_mean", "rank_wait_s"}),
                              (sp["figures"], {"step:step_time_p50",
                                               "step_less_comm:step_time_p50", "rank_wait_s"}),
                              (sp["figures_at_measured_speed"], {"rank_wait_s"})):
            assert keys <= set(figures), name
            for key, f in figures.items():
                low, high = f["interval"]
                assert np.isfinite(f["measured"]) and f["measured"] >= 0
                assert low <= f["predicted"] <= high
                assert {"inside": f["inside"], "off_by": f["off_by"]} == verdict(
                    f["measured"], [low, high]), (name, key)
        figures = entry["figures"]
        assert set(figures) == {"step:step_time_p50", "step:step_time_p90",
                                "step:step_time_mean", "rank_wait_s"}
        assert figures["step:step_time_p50"]["measured"] <= \
            figures["step:step_time_p90"]["measured"]
        # the lockstep profile predicts a wait where ranks scatter; one that knows no scatter
        # predicts none for the bucketed plan's equal shapes
        assert figures["rank_wait_s"]["predicted"] > 0
