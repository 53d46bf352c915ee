"""BucketedTrainer on packed rows (``packing="varlen-balanced"``): a tiny Llama (random weights,
built from a config, CPU) trained by the Hugging Face Trainer on rows of whole documents.

Checked: every document exactly once per epoch, rows within the budget, epochs of different row
counts with the step count, learning-rate schedule and epoch boundaries right, the loss of every
document in a packed row equal to its loss run alone, the step's gradient equal to the gradient
of one forward over all the step's documents (padded buckets too), and a run killed mid-epoch
resuming exactly where its checkpoint stopped. Skipped where transformers is absent.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("datasets")
pytest.importorskip("accelerate")

import torch

from bucketopt import BucketBatchSampler, BucketoptError
from bucketopt.integrations.collate import VarlenCollator, varlen_collate

from . import _trainer_job as job

ROOT = Path(__file__).resolve().parent.parent
N = 200  # documents: with one bucket, epoch 0 packs into 28 rows and epoch 1 into 30
PACKED = dict(packing="varlen-balanced", n=N, boundaries=None)


def plan_sampler(world_size=1, grad_accum=job.GRAD_ACCUM):
    return BucketBatchSampler(job.sample_lengths(N), None, token_budget=job.TOKEN_BUDGET,
                              seed=7, packing="varlen-balanced", world_size=world_size,
                              grad_accum=grad_accum)


def planned(sampler, epoch):
    return [[int(i) for i in row] for row in sampler.plan(epoch).batches(0)]


def rows(records):
    return [(r["epoch"], r["idx"]) for r in records]


@pytest.fixture(scope="module")
def packed_run(tmp_path_factory):
    """Two uninterrupted epochs of packed rows, workers prefetching, a checkpoint every 3 steps."""
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("packed")
    trainer = job.trainer(out, save_steps=3, num_workers=2, epochs=2, check_documents=True,
                          **PACKED)
    trainer.train()
    return out, trainer


def test_every_document_once_per_epoch_rows_within_budget(packed_run):
    _, trainer = packed_run
    lengths = job.sample_lengths(N)
    by_epoch = defaultdict(list)
    for r in trainer.trained:
        by_epoch[r["epoch"]].append(r)
    assert sorted(by_epoch) == [0, 1]
    plan = plan_sampler()
    for epoch, records in by_epoch.items():
        seen = sorted(i for r in records for i in r["idx"])
        assert seen == list(range(N))  # every document exactly once in every epoch
        assert [r["idx"] for r in records] == planned(plan, epoch)  # the sampler's rows
        for r in records:  # one flattened row of exactly its documents, within the budget
            assert r["shape"] == [1, int(lengths[r["idx"]].sum())]
            assert r["shape"][1] <= job.TOKEN_BUDGET
    assert [len(by_epoch[e]) for e in (0, 1)] == [28, 30]  # epochs differ in rows


def test_steps_schedule_and_epochs_follow_the_plan(packed_run):
    _, trainer = packed_run
    updates = [-(-n // job.GRAD_ACCUM) for n in (28, 30)]
    assert trainer.state.global_step == trainer.state.max_steps == sum(updates)  # 14 + 15
    assert trainer.state.epoch == pytest.approx(2.0)
    assert set(trainer.lr_scheduler.get_last_lr()) == {0.0}  # linear decay: 0 at the last step
    # the optimizer steps of epoch 1 start right after epoch 0's last one
    first = [next(r["step"] for r in trainer.trained if r["epoch"] == e) for e in (0, 1)]
    assert first == [0, updates[0]]


def test_document_losses_equal_their_losses_alone(packed_run):
    _, trainer = packed_run
    gaps = [r["gap"] for r in trainer.trained]
    assert len(gaps) == 58 and max(gaps) <= 1e-5
    # the check can fail: the same row without restarting positions (one causal sequence)
    model = trainer.model.eval()
    data = job.tokens(N)
    idx = trainer.trained[0]["idx"]
    batch = varlen_collate([data[i] for i in idx])
    with torch.no_grad():
        crossed = model(input_ids=batch["input_ids"], use_cache=False).logits[0]
    lengths = [len(data[i]) for i in idx]
    losses = job.document_losses(crossed, batch["input_ids"][0], lengths)
    with torch.no_grad():
        alone = [job.document_losses(model(input_ids=torch.tensor([data[i]]),
                                           use_cache=False).logits[0],
                                     torch.tensor(data[i]), [len(data[i])])[0] for i in idx]
    assert max(abs(a - b) for a, b in zip(losses[1:], alone[1:])) > 1e-4


@pytest.mark.parametrize("attention", ["eager", "sdpa"])
def test_document_mask_on_cpu_attention_implementations(attention, tmp_path):
    """transformers builds the per-document mask from restarting position_ids (no attention
    mask, no cache) for both CPU implementations of Llama."""
    trainer = job.trainer(tmp_path, check_documents=True, model=job.tiny_model(attention),
                          args={"max_steps": 4, "save_strategy": "no"}, **PACKED)
    trainer.train()
    assert len(trainer.trained) == 8 and max(r["gap"] for r in trainer.trained) <= 1e-5


def test_transformers_flattening_collator_keeps_documents_apart(tmp_path):
    """DataCollatorWithFlattening's rows carry no use_cache: Llama would then build a key/value
    cache in training and skip the document mask; the trainer passes use_cache=False."""
    from transformers import DataCollatorWithFlattening

    flatten = DataCollatorWithFlattening()

    def collate(features):
        batch = flatten([{"input_ids": f["input_ids"]} for f in features])
        batch["idx"] = torch.tensor([f["idx"] for f in features])
        return batch

    trainer = job.trainer(tmp_path, check_documents=True, collator=collate,
                          args={"max_steps": 3, "save_strategy": "no"}, **PACKED)
    trainer.train()
    assert max(r["gap"] for r in trainer.trained) <= 1e-5
    model, data = job.tiny_model().train(), job.tokens(N)
    docs = [data[i] for i in trainer.trained[0]["idx"]]
    batch = flatten([{"input_ids": d} for d in docs])
    assert "use_cache" not in batch and model.config.use_cache
    with torch.no_grad():  # the same row as the collator made it: the documents see each other
        leaky = job.document_losses(model(**batch).logits[0], batch["input_ids"][0],
                                    [len(d) for d in docs])
        fine = job.document_losses(model(**batch, use_cache=False).logits[0],
                                   batch["input_ids"][0], [len(d) for d in docs])
    assert max(abs(a - b) for a, b in zip(leaky, fine)) > 1e-4


def _first_step_gradient(tmp_path, packing, grad_accum, accepts_loss_kwargs):
    from transformers import TrainerCallback

    model = job.tiny_model()
    if not accepts_loss_kwargs:
        model.accepts_loss_kwargs = False  # the Trainer would average per-batch means
    extra = dict(PACKED, packing=packing) if packing != "fixed" else {"n": N}
    trainer = job.trainer(tmp_path, model=model, args={
        "max_steps": 1, "max_grad_norm": 0.0, "save_strategy": "no",
        "gradient_accumulation_steps": grad_accum}, **extra)
    grads = []

    class Grads(TrainerCallback):
        def on_pre_optimizer_step(self, args, state, control, **kwargs):
            grads.append([p.grad.detach().clone() for p in trainer.model.parameters()])

    trainer.add_callback(Grads())
    trainer.train()
    return trainer, grads[0]


@pytest.mark.parametrize("packing", ["fixed", "varlen-balanced"])
@pytest.mark.parametrize("accepts_loss_kwargs", [True, False])
def test_step_gradient_is_the_mean_over_all_its_tokens(packing, accepts_loss_kwargs, tmp_path):
    grad_accum = 3
    trainer, grads = _first_step_gradient(tmp_path, packing, grad_accum, accepts_loss_kwargs)
    step = trainer.trained
    assert len(step) == grad_accum
    data = job.tokens(N)
    counts = [sum(len(data[i]) - 1 for i in r["idx"]) for r in step]
    assert len(set(counts)) > 1  # the micro-batches hold different numbers of label tokens
    if accepts_loss_kwargs:
        assert {r["items"] for r in step} == {sum(counts)}  # num_items_in_batch: the step's
    # the reference: one forward over all the step's documents, mean over all their tokens
    model = job.tiny_model()
    docs = [data[i] for r in step for i in r["idx"]]
    model(**varlen_collate(docs)).loss.backward()
    for mine, p in zip(grads, model.parameters()):
        torch.testing.assert_close(mine, p.grad, atol=1e-5, rtol=1e-4)
    # the mean of the micro-batches' means is measurably another gradient
    model.zero_grad()
    for r in step:
        (model(**varlen_collate([data[i] for i in r["idx"]])).loss / grad_accum).backward()
    gap = max(float((a - p.grad).abs().max()) for a, p in zip(grads, model.parameters()))
    assert gap > 1e-4


def test_killed_mid_epoch_resumes_exactly_where_the_checkpoint_stopped(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    command = [sys.executable, "-m", "tests._trainer_job", str(tmp_path), "--packing",
               "varlen-balanced", "--docs", str(N), "--one-bucket", "--epochs", "2",
               "--save-steps", "3", "--workers", "2"]
    proc = subprocess.Popen([*command, "--hang-after", "6"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not (tmp_path / "hanging").exists():
            assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
            assert time.monotonic() < deadline, "the job never reached its checkpoint"
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the job and its loader workers, mid-epoch
        proc.wait(timeout=60)
    killed = [json.loads(line) for line in (tmp_path / "trained.jsonl").read_text().splitlines()]
    after = 6 * job.GRAD_ACCUM
    assert len(killed) == after + 2  # a micro-batch trained after checkpoint-6, killed in the next
    result = subprocess.run([*command, str(tmp_path / "checkpoint-6")], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=400)
    assert result.returncode == 0, result.stderr[-3000:]
    resumed = json.loads((tmp_path / "batches-resumed.json").read_text())
    assert resumed["seeks"] == [[after, after]]  # the sampler was put there, not replayed
    trained = killed[:after] + resumed["trained"]  # what the checkpoint kept, then the resume
    plan = plan_sampler()
    assert rows(trained) == [(e, b) for e in (0, 1) for b in planned(plan, e)]
    for epoch in (0, 1):
        seen = sorted(i for r in trained if r["epoch"] == epoch for i in r["idx"])
        assert seen == list(range(N))  # every document exactly once per epoch
    assert resumed["global_step"] == resumed["max_steps"] == 14 + 15


def test_resume_with_another_grad_accum_replans_the_rest(packed_run, tmp_path):
    """An elastic resume inside the Trainer: the rest of the epoch re-planned for 3 micro-steps
    per optimizer step; every document still exactly once, the step count from the new plan."""
    out, full = packed_run
    resumed = job.trainer(tmp_path, args={"gradient_accumulation_steps": 3}, epochs=2,
                          **PACKED)
    resumed.train(resume_from_checkpoint=str(out / "checkpoint-3"))
    after = 3 * job.GRAD_ACCUM
    trained = full.trained[:after] + resumed.trained
    for epoch in (0, 1):
        seen = sorted(i for r in trained if r["epoch"] == epoch for i in r["idx"])
        assert seen == list(range(N))
    assert resumed.seeks == [[9, 0]]  # 3 steps x 3 micro-steps trained; the new rest from its start
    rest = sum(r["epoch"] == 0 for r in resumed.trained)
    whole = plan_sampler(grad_accum=3).plan(1).micro_steps
    assert sum(r["epoch"] == 1 for r in resumed.trained) == whole
    assert resumed.state.global_step == resumed.state.max_steps == 3 + -(-rest // 3) + -(
        -whole // 3)


def test_default_collator_is_the_flattening_one(tmp_path):
    import datasets
    from transformers import TrainingArguments

    from bucketopt.integrations.transformers import BucketedTrainer

    data = datasets.Dataset.from_dict({"input_ids": job.tokens(N), "text": ["x"] * N})
    args = TrainingArguments(str(tmp_path), max_steps=3, save_strategy="no", report_to=[],
                             use_cpu=True, disable_tqdm=True, logging_strategy="no")
    trainer = BucketedTrainer(model=job.tiny_model(), args=args, train_dataset=data,
                              boundaries=None, token_budget=job.TOKEN_BUDGET, packing="varlen")
    assert isinstance(trainer.data_collator, VarlenCollator)
    assert trainer.data_collator.options == {"attention": "position_ids"}
    trainer.train()  # the text column is dropped, the documents flattened
    assert trainer.state.global_step == 3


def test_sft_trainer_packs_rows_with_padding_free(tmp_path):
    trl = pytest.importorskip("trl")
    from bucketopt.integrations.transformers import bucketed

    tokenizer = job.word_tokenizer()
    args = trl.SFTConfig(output_dir=str(tmp_path), num_train_epochs=1,
                         gradient_accumulation_steps=job.GRAD_ACCUM, save_strategy="no",
                         logging_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True,
                         max_length=None, seed=7)
    shapes, keys = [], set()

    class Recording(bucketed(trl.SFTTrainer)):
        def compute_loss(self, model, inputs, *a, **k):
            shapes.append(tuple(inputs["input_ids"].shape))
            keys.update(inputs)
            return super().compute_loss(model, inputs, *a, **k)

    trainer = Recording(model=job.tiny_model(), args=args, train_dataset=job.dataset(N),
                        processing_class=tokenizer, boundaries=None,
                        token_budget=job.TOKEN_BUDGET, packing="varlen-balanced")
    assert trainer.data_collator.padding_free
    trainer.train()
    lengths = job.sample_lengths(N)
    flat = [(1, int(lengths[r].sum())) for r in planned(trainer.bucket_sampler, 0)]
    assert shapes == flat  # the sampler's rows, flattened
    assert {"position_ids", "cu_seq_lens_q"} <= keys and "attention_mask" not in keys


def test_packed_rows_refuse_a_padding_collator_and_bad_options(tmp_path):
    from bucketopt.integrations.transformers import BucketedTrainer

    trainer = job.trainer(tmp_path, collator=job.pad_collate, **PACKED)
    with pytest.raises(BucketoptError, match=r"flattened into one sequence, but the collator "
                                             r"returned input_ids of shape \(\d+, \d+\)"):
        trainer.train()
    with pytest.raises(BucketoptError, match="packing must be one of"):
        BucketedTrainer(model=job.tiny_model(), boundaries=None, token_budget=100,
                        packing="rows")
    with pytest.raises(BucketoptError, match="None, one bucket, with packing='varlen' only"):
        BucketedTrainer(model=job.tiny_model(), boundaries=None, token_budget=100)


def test_the_offline_example_in_the_docs_runs(tmp_path, monkeypatch):
    text = (ROOT / "docs" / "trainer.md").read_text()
    section = text.split("## Offline: a model built from its config", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    torch.set_num_threads(1)
    monkeypatch.chdir(tmp_path)  # its output directory is relative
    namespace = {"__name__": "docs_trainer"}
    exec(compile(code, "docs/trainer.md", "exec"), namespace)
    trainer = namespace["trainer"]
    counts = [trainer.bucket_sampler.plan(e).micro_steps for e in (0, 1)]
    assert trainer.state.global_step == trainer.state.max_steps == sum(-(-c // 2) for c in counts)
    assert trainer.state.epoch == pytest.approx(2.0)
    assert (tmp_path / "out-offline" / "checkpoint-10" / "bucketopt_sampler.json").exists()
