"""BucketedTrainer in a real 2-process DDP job (torchrun, gloo, CPU): equal batch counts, every
sample once over the ranks, one bucket per micro-step, and an exact resume on both ranks.

About 40 s, so opt-in: ``BUCKETOPT_DDP_TESTS=1 python -m pytest tests/test_trainer_ddp.py``.
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
pytest.importorskip("datasets")
pytestmark = pytest.mark.skipif(not os.environ.get("BUCKETOPT_DDP_TESTS"),
                                reason="a 2-process torchrun job (~40 s): BUCKETOPT_DDP_TESTS=1")

from . import _trainer_job as job  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def torchrun(*args, port):
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    result = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node",
                             "2", "--master_port", str(port), "-m", "tests._trainer_job",
                             *map(str, args)], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=400)
    assert result.returncode == 0, result.stderr[-3000:]


def test_two_ranks_train_every_sample_once_and_resume_exactly(tmp_path):
    torchrun(tmp_path, port=29611)
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["sampler_world_size"] for r in ranks] == [2, 2]
    assert len(ranks[0]["trained"]) == len(ranks[1]["trained"])  # no hang: equal counts
    seen = sorted(i for r in ranks for b in r["trained"] for i in b["idx"])
    assert seen == list(range(job.N_SAMPLES))
    lengths, edges = job.sample_lengths(), np.asarray(job.BOUNDARIES)
    for a, b in zip(ranks[0]["trained"], ranks[1]["trained"]):  # one bucket per micro-step
        buckets = np.searchsorted(edges, lengths[a["idx"] + b["idx"]], side="left")
        assert np.unique(buckets).size == 1
    torchrun(tmp_path, tmp_path / "checkpoint-2", port=29612)
    after = 2 * job.GRAD_ACCUM
    for r in (0, 1):
        resumed = json.loads((tmp_path / f"rank{r}-resumed.json").read_text())
        assert resumed["trained"] == ranks[r]["trained"][after:]
        assert resumed["seeks"] == [[after, after]]
