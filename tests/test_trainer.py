"""BucketedTrainer: a tiny causal LM (random weights, CPU) trained with the Hugging Face Trainer.

Skipped where transformers (with torch and datasets) is absent.
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
pytest.importorskip("accelerate")

from bucketopt import BucketoptError

from . import _trainer_job as job

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    """One uninterrupted epoch, with workers prefetching, checkpoints every 3 optimizer steps."""
    out = tmp_path_factory.mktemp("full")
    trainer = job.trainer(out, save_steps=3, num_workers=2)
    trainer.train()
    return out, trainer


def test_one_epoch_sees_every_sample_once_under_the_budget(full_run):
    _, trainer = full_run
    trained = trainer.trained
    seen = sorted(i for batch in trained for i in batch["idx"])
    assert seen == list(range(job.N_SAMPLES))  # every sample exactly once
    lengths = job.sample_lengths()
    edges = np.asarray(job.BOUNDARIES)
    plan = trainer.bucket_sampler.plan(0)
    assert [len(b) for b in plan.batches(0)] == [len(b["idx"]) for b in trained]
    for batch in trained:
        rows, width = batch["shape"]
        assert rows * width <= job.TOKEN_BUDGET  # never a batch over the token budget
        bucket = np.searchsorted(edges, lengths[batch["idx"]], side="left")
        assert np.unique(bucket).size == 1  # one bucket per batch
        assert rows <= job.TOKEN_BUDGET // edges[bucket[0]]  # sized by its bucket
    sizes = {rows for rows, _ in (b["shape"] for b in trained)}
    assert len(sizes) > 1 and sizes != {trainer.args.per_device_train_batch_size}
    assert trainer.state.global_step == len(trained) // job.GRAD_ACCUM


def test_checkpoints_hold_what_the_loop_consumed(full_run):
    out, trainer = full_run
    steps = sorted(int(p.name.split("-")[1]) for p in out.glob("checkpoint-*"))
    assert steps[:2] == [3, 6] and steps[-1] == trainer.state.global_step
    for step in steps:
        state = json.loads((out / f"checkpoint-{step}" / "bucketopt_sampler.json").read_text())
        # the workers had been handed batches ahead of the loop; the state is what was trained
        assert state["epoch"] == 0 and state["position"] == step * job.GRAD_ACCUM
        assert state["world_size"] == 1 and state["grad_accum"] == job.GRAD_ACCUM


def test_resume_in_a_fresh_process_continues_exactly(full_run, tmp_path):
    out, trainer = full_run
    checkpoint = out / "checkpoint-3"
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    result = subprocess.run([sys.executable, "-m", "tests._trainer_job", str(tmp_path),
                             str(checkpoint)], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-2000:]
    resumed = json.loads((tmp_path / "batches-resumed.json").read_text())
    after = 3 * job.GRAD_ACCUM
    assert resumed["trained"] == trainer.trained[after:]  # the batches the full run had next
    assert resumed["seeks"] == [[after, after]]  # the sampler was put there, not replayed


def test_sft_trainer_batches_with_the_sampler(tmp_path):
    trl = pytest.importorskip("trl")
    from bucketopt.integrations.transformers import bucketed

    tokenizer = job.word_tokenizer()
    args = trl.SFTConfig(output_dir=str(tmp_path), per_device_train_batch_size=4,
                         num_train_epochs=1, gradient_accumulation_steps=job.GRAD_ACCUM,
                         save_strategy="no", logging_strategy="no", report_to=[], use_cpu=True,
                         disable_tqdm=True, max_length=None, seed=7)
    shapes = []

    class Recording(bucketed(trl.SFTTrainer)):
        def compute_loss(self, model, inputs, *a, **k):
            shapes.append(tuple(inputs["input_ids"].shape))
            return super().compute_loss(model, inputs, *a, **k)

    trainer = Recording(model=job.tiny_model(), args=args, train_dataset=job.dataset(),
                        processing_class=tokenizer, boundaries=job.BOUNDARIES,
                        token_budget=job.TOKEN_BUDGET)
    assert tokenizer.pad_token_id == 0 and len(tokenizer) == 64
    trainer.train()
    lengths = job.sample_lengths()
    expected = [(len(b), int(lengths[b].max())) for b in trainer.bucket_sampler.plan(0).batches()]
    assert shapes == expected  # the sampler's batches, padded to their longest sample
    assert max(r * w for r, w in shapes) <= job.TOKEN_BUDGET


def test_bad_arguments_and_an_over_budget_collator(tmp_path):
    from bucketopt.integrations.transformers import BucketedTrainer, bucketed

    with pytest.raises(BucketoptError, match="boundaries are required"):
        BucketedTrainer(model=job.tiny_model(), token_budget=100)
    with pytest.raises(BucketoptError, match="`token_budget` must be an integer"):
        BucketedTrainer(model=job.tiny_model(), boundaries=[8, 16], token_budget="lots")
    with pytest.raises(BucketoptError, match="bucket edge 16 exceeds token_budget=10"):
        BucketedTrainer(model=job.tiny_model(), boundaries=[8, 16], token_budget=10)
    with pytest.raises(BucketoptError, match="boundaries must"):
        BucketedTrainer(model=job.tiny_model(), boundaries=[8, -1], token_budget=100)
    with pytest.raises(BucketoptError, match="trainer_class must be a transformers.Trainer"):
        bucketed(dict)
    trainer = job.trainer(tmp_path, lengths=[5] * 3)
    with pytest.raises(BucketoptError, match="lengths has 3 entries but train_dataset has 96"):
        trainer.get_train_dataloader()

    def pad_to_96(features):  # pads every batch to 96 tokens: over the budget for short buckets
        batch = job.pad_collate(features)
        import torch

        extra = 96 - batch["input_ids"].shape[1]
        for key, fill in (("input_ids", 0), ("attention_mask", 0), ("labels", -100)):
            batch[key] = torch.nn.functional.pad(batch[key], (0, extra), value=fill)
        return batch

    trainer = job.trainer(tmp_path)
    trainer.data_collator = pad_to_96
    with pytest.raises(BucketoptError, match="over token_budget=384: the collator pads beyond"):
        trainer.train()


def test_resume_without_the_state_file_and_a_state_that_disagrees(full_run, tmp_path):
    import shutil

    out, trainer = full_run
    after = 3 * job.GRAD_ACCUM
    plain = tmp_path / "checkpoint-3"  # as a plain Trainer would have saved it
    shutil.copytree(out / "checkpoint-3", plain)
    (plain / "bucketopt_sampler.json").unlink()
    resumed = job.trainer(tmp_path / "a")
    resumed.train(resume_from_checkpoint=str(plain))
    assert resumed.trained == trainer.trained[after:]  # the plan is deterministic: seek to it
    assert resumed.seeks == [[after, after]]
    edited = tmp_path / "edited"
    shutil.copytree(out / "checkpoint-3", edited)
    state = json.loads((edited / "bucketopt_sampler.json").read_text())
    assert state["trainer"] == {"global_step": 3, "epoch_first_step": 0}
    (edited / "bucketopt_sampler.json").write_text(json.dumps({**state, "position": after - 2}))
    with pytest.raises(BucketoptError, match=f"consumed {after - 2} batches of epoch 0, but the "
                                             f"Trainer counts {after}"):
        job.trainer(tmp_path / "b").train(resume_from_checkpoint=str(edited))
    older = {k: v for k, v in state.items() if k != "trainer"}  # a state of an older bucketopt
    (edited / "bucketopt_sampler.json").write_text(json.dumps({**older, "position": after - 2}))
    with pytest.raises(BucketoptError, match=f"consumed {after - 2} batches of epoch 0, but the "
                                             f"Trainer counts {after}"):
        job.trainer(tmp_path / "c").train(resume_from_checkpoint=str(edited))
    (edited / "bucketopt_sampler.json").write_text(json.dumps(older))
    again = job.trainer(tmp_path / "d")
    again.train(resume_from_checkpoint=str(edited))
    assert again.trained == trainer.trained[after:]
    other = json.loads((out / "checkpoint-6" / "bucketopt_sampler.json").read_text())
    (edited / "bucketopt_sampler.json").write_text(json.dumps(other))
    with pytest.raises(BucketoptError, match="saved at global step 6, its trainer_state.json is "
                                             "at step 3: the files come from different"):
        job.trainer(tmp_path / "e").train(resume_from_checkpoint=str(edited))


def test_a_plan_trains_the_batches_it_describes(tmp_path):
    import bucketopt
    from bucketopt import BucketBatchSampler
    from bucketopt.integrations.transformers import BucketedTrainer
    from bucketopt.plan import write_plan

    lengths = job.sample_lengths()
    sol = bucketopt.solve(lengths, 3, token_budget=job.TOKEN_BUDGET, pad="batch")
    path = write_plan(sol, tmp_path / "plan.json")
    trained = []

    class Recording(BucketedTrainer):
        def compute_loss(self, model, inputs, *a, **k):
            trained.append(inputs.pop("idx").tolist())
            return super().compute_loss(model, inputs, *a, **k)

    from transformers import TrainingArguments

    args = TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=4,
                             num_train_epochs=1, gradient_accumulation_steps=job.GRAD_ACCUM,
                             save_strategy="no", logging_strategy="no", report_to=[], seed=7,
                             remove_unused_columns=False, use_cpu=True, disable_tqdm=True)
    trainer = Recording(model=job.tiny_model(), args=args, train_dataset=job.dataset(),
                        data_collator=job.pad_collate, plan=path)
    trainer.train()
    by_hand = BucketBatchSampler(lengths, sol.boundaries, batch_sizes=sol.batch_sizes,
                                 token_budget=job.TOKEN_BUDGET, seed=7,
                                 grad_accum=job.GRAD_ACCUM)
    assert trained == list(by_hand)  # the plan's batches, in the sampler's order
    with pytest.raises(BucketoptError, match="not both"):
        BucketedTrainer(model=job.tiny_model(), plan=path, token_budget=100)
    with pytest.raises(BucketoptError, match="differs from the plan"):
        BucketedTrainer(model=job.tiny_model(), plan=path, packing="varlen")
    other = Recording(model=job.tiny_model(), args=args, train_dataset=job.dataset(n=95),
                      data_collator=job.pad_collate, plan=path)
    with pytest.raises(BucketoptError, match="other lengths"):
        other.bucket_sampler  # noqa: B018
    accepted = Recording(model=job.tiny_model(), args=args, train_dataset=job.dataset(n=95),
                         data_collator=job.pad_collate, plan=path, allow_other_lengths=True)
    assert list(accepted.bucket_sampler.edges) == list(sol.boundaries)
