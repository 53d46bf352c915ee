"""A real multi-process gloo run on CPU (benchmarks/gloo_run.py): opt-in, BUCKETOPT_GLOO=1.

It starts 3 processes and trains a tiny model for a few minutes' worth of CPU, so the default
suite skips it: ``BUCKETOPT_GLOO=1 python -m pytest tests/test_gloo.py``. It checks that the
run measures what it says (every figure present, finite, against its prediction and interval,
the verdict consistent with them); the figures themselves are in docs/cost_model.md.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(os.environ.get("BUCKETOPT_GLOO") != "1",
                                reason="a multi-process gloo run: set BUCKETOPT_GLOO=1")

ROOT = Path(__file__).resolve().parent.parent


def test_gloo_run_measures_step_times_and_rank_waits_of_both_plans(capsys):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from bucketopt.training.verify import verdict

    sys.path.insert(0, str(ROOT / "benchmarks"))  # the spawned ranks import gloo_run too
    try:
        import gloo_run

        assert gloo_run.main(["--steps", "8", "--probe-time", "20", "--json"]) == 0
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    report = json.loads(capsys.readouterr().out)
    assert report["ranks"] == 3 and set(report["plans"]) == {"bucketed", "packed"}
    for name, entry in report["plans"].items():
        assert entry["steps"] == 8
        assert entry["compute_speed_factor"] > 0
        for figures in (entry["figures"], entry["figures_at_measured_speed"]):
            keys = {"step:step_time_p50", "step:step_time_p90", "step_less_comm:step_time_p50",
                    "rank_wait_s"}
            assert keys <= set(figures), name
            for key, f in figures.items():
                low, high = f["interval"]
                assert np.isfinite(f["measured"]) and f["measured"] >= 0
                assert low <= f["predicted"] <= high
                assert {"inside": f["inside"], "off_by": f["off_by"]} == verdict(
                    f["measured"], [low, high]), (name, key)
        assert entry["figures"]["step:step_time_p50"]["measured"] <= \
            entry["figures"]["step:step_time_p90"]["measured"]
