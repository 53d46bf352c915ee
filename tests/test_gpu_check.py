"""benchmarks/gpu_check.py on the CPU: probe, solve and verify end to end, figures written."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_gpu_check_runs_on_cpu_and_writes_json_and_markdown(tmp_path, capsys):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import gpu_check
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    out = tmp_path / "cpu_check"
    assert gpu_check.main(["--device", "cpu", "--quick", "--threads", "1", "--out",
                           str(out)]) == 0
    data = json.loads(out.with_suffix(".json").read_text())
    text = out.with_suffix(".md").read_text()
    assert data["device"] == "cpu" and data["device_name"].startswith("CPU")
    assert data["solve"]["step_time_p50"] <= data["solve"]["step_time_p90"]
    assert set(data["verify"]) == {"bucketed", "packed"}
    for v in data["verify"].values():
        assert v["steps"] > 0
        assert v["measured"]["peak_memory_bytes"] is None  # CPU: not measured
        for key in ("step_time_mean", "step_time_p50", "step_time_p90", "tokens_per_s"):
            assert v["measured"][key] > 0 and key in v["verdicts"]
            assert f"| {key} |" in text
    assert "verify, packed plan" in text and capsys.readouterr().out.strip() == text.strip()
