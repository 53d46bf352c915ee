"""BucketedTrainer in real DDP jobs (torchrun, gloo, CPU). Padded buckets on 2 processes: equal
batch counts, every sample once over the ranks, one bucket per micro-step, an exact resume on both
ranks. Packed rows (``packing="varlen-balanced"``) on 3 processes, resumed on 2 (elastic): every
document once over both jobs, the step count re-planned, and the first optimizer step's gradient
equal to one forward over all the documents of the step on all ranks (mean over their tokens).

About 2 minutes, so opt-in: ``BUCKETOPT_DDP_TESTS=1 python -m pytest tests/test_trainer_ddp.py``.
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
                                reason="torchrun jobs of 2 and 3 processes (~2 min): "
                                       "BUCKETOPT_DDP_TESTS=1")

from . import _trainer_job as job  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def torchrun(*args, port, ranks=2):
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    result = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node",
                             str(ranks), "--master_port", str(port), "-m", "tests._trainer_job",
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


def test_packed_rows_on_three_ranks_resume_on_two(tmp_path):
    import torch

    from bucketopt.integrations.collate import varlen_collate

    n, options = 300, ("--packing", "varlen-balanced", "--docs", "300", "--workers", "1")
    torchrun(tmp_path, *options, "--stop-after", "4", "--grads", port=29613, ranks=3)
    first = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(3)]
    state = json.loads((tmp_path / "checkpoint-4" / "bucketopt_sampler.json").read_text())
    assert state["world_size"] == 3 and state["position"] == 4 * job.GRAD_ACCUM
    torchrun(tmp_path, tmp_path / "checkpoint-4", *options, port=29614, ranks=2)
    rest = [json.loads((tmp_path / f"rank{r}-resumed.json").read_text()) for r in range(2)]
    assert {len(r["trained"]) for r in first} == {4 * job.GRAD_ACCUM}
    assert len({len(r["trained"]) for r in rest}) == 1  # equal counts on the 2 new ranks
    seen = sorted(i for part in (first, rest) for r in part for b in r["trained"]
                  for i in b["idx"])
    assert seen == list(range(n))  # every document exactly once over both jobs
    lengths = job.sample_lengths(n)
    for r in (*first, *rest):
        for b in r["trained"]:
            assert b["shape"] == [1, int(lengths[b["idx"]].sum())]
            assert b["shape"][1] <= job.TOKEN_BUDGET
    steps = 4 + -(-len(rest[0]["trained"]) // job.GRAD_ACCUM)
    assert {(r["global_step"], r["max_steps"]) for r in rest} == {(steps, steps)}
    assert [r["seeks"] for r in rest] == [[[4 * job.GRAD_ACCUM, 0]]] * 2  # re-planned rest
    # the first step's gradient (after DDP's all-reduce) against one forward over all its
    # documents on all ranks, mean over all their label tokens
    data = job.tokens(n)
    docs = [data[i] for r in first for b in r["trained"][:job.GRAD_ACCUM] for i in b["idx"]]
    model = job.tiny_model()
    model(**varlen_collate(docs)).loss.backward()
    reference = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    for r in first:
        mine = torch.tensor([x for p in r["grads"] for x in p])
        torch.testing.assert_close(mine, reference, atol=1e-5, rtol=1e-4)
