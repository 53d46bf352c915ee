"""Packed rows in a real DDP job (torchrun, gloo, CPU, a tiny Llama): 3 ranks train part of an
epoch, 2 ranks resume the rest from rank 0's state (elastic). No rank waits on another (equal row
counts), every document is trained exactly once over both jobs, no row exceeds the budget.

About 30 s, so opt-in: ``BUCKETOPT_DDP_TESTS=1 python -m pytest tests/test_varlen_ddp.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytestmark = pytest.mark.skipif(not os.environ.get("BUCKETOPT_DDP_TESTS"),
                                reason="two torchrun jobs (~30 s): BUCKETOPT_DDP_TESTS=1")

from . import _varlen_job as job  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def torchrun(out, phase, ranks, port):
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    result = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node",
                             str(ranks), "--master_port", str(port), "-m", "tests._varlen_job",
                             str(out), phase], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=400)
    assert result.returncode == 0, result.stderr[-3000:]
    return [json.loads((out / f"{phase}-rank{r}.json").read_text()) for r in range(ranks)]


def test_packed_rows_train_once_and_resume_elastically(tmp_path):
    first = torchrun(tmp_path, "first", 3, port=29631)
    state = json.loads((tmp_path / "state.json").read_text())
    assert state["world_size"] == 3 and state["position"] == job.STOP
    rest = torchrun(tmp_path, "rest", 2, port=29632)
    assert {len(r["rows"]) for r in first} == {job.STOP}
    assert len({len(r["rows"]) for r in rest}) == 1  # equal counts on the 2 new ranks
    lengths, _ = job.documents()
    seen = [i for part in (first, rest) for r in part for row in r["rows"] for i in row]
    assert sorted(seen) == list(range(job.N_DOCS))  # every document exactly once
    for r in (*first, *rest):
        assert max(r["tokens"]) <= job.TOKEN_BUDGET
        assert np.isfinite(r["losses"]).all()
        for row, tokens in zip(r["rows"], r["tokens"]):
            assert tokens == lengths[row].sum()  # one flattened row of exactly its documents
