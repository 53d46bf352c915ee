"""The Accelerate recipe for packed rows (docs/trainer.md), for real on CPU: a tiny Llama built from
a config trains rows of documents from ``BucketBatchSampler(..., packing="varlen-balanced")``
collated by ``VarlenCollator``, through ``bucketopt.integrations.accelerate.prepare`` and
``TokenMean``. Every document once per epoch, the step's gradient the token mean over the step,
and a stopped run resumes with nothing skipped or repeated. Skipped where accelerate is absent."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
accelerate = pytest.importorskip("accelerate")

from torch.utils.data import DataLoader, Dataset  # noqa: E402

from bucketopt import BucketBatchSampler  # noqa: E402
from bucketopt.integrations.accelerate import prepare  # noqa: E402
from bucketopt.integrations.collate import VarlenCollator, varlen_collate  # noqa: E402
from bucketopt.integrations.tokens import TokenMean, label_tokens  # noqa: E402

from . import _trainer_job as job  # noqa: E402

N, BUDGET, GRAD_ACCUM = 200, 384, 2  # epoch 0 packs into 28 rows, epoch 1 into 30
LENGTHS = job.sample_lengths(N)
DOCS = job.tokens(N)


class Documents(Dataset):
    def __len__(self):
        return N

    def __getitem__(self, i):
        return {"input_ids": torch.tensor(DOCS[i]), "idx": i}


def train(epochs=2, stop_after=None, state=None):
    """The documented loop, recording the rows it trains and the first step's gradient."""
    accelerator = accelerate.Accelerator(cpu=True)
    sampler = BucketBatchSampler(LENGTHS, None, token_budget=BUDGET, seed=4,
                                 packing="varlen-balanced", rank=accelerator.process_index,
                                 world_size=accelerator.num_processes, grad_accum=GRAD_ACCUM)
    if state is not None:
        sampler.load_state_dict(state)
    model = job.tiny_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = accelerator.prepare(model, optimizer)
    collate = VarlenCollator()
    loader = prepare(accelerator, DataLoader(
        Documents(), batch_sampler=sampler, num_workers=2,
        collate_fn=lambda rows: (collate(rows), [r["idx"] for r in rows])))
    mean, trained, grads, steps = TokenMean(), [], [], 0
    for epoch in range(sampler.epoch, epochs):
        sampler.set_epoch(epoch)
        end = sampler.consumed + len(loader)  # micro-steps of this epoch
        for i, (batch, idx) in enumerate(loader, start=sampler.consumed):
            assert batch["input_ids"].shape == (1, LENGTHS[idx].sum()) and i < end
            trained.append((epoch, idx, label_tokens(batch)))
            labels = batch.pop("labels")
            last = (i + 1) % GRAD_ACCUM == 0 or i + 1 == end
            with contextlib.nullcontext() if last else accelerator.no_sync(model):
                accelerator.backward(mean.loss(model(**batch).logits, labels))
            if last:
                total = accelerator.reduce(torch.tensor(mean.tokens), "sum")
                mean.scale(model.parameters(), total, accelerator.num_processes)
                counts = {n for _, _, n in trained[-GRAD_ACCUM:]}
                if not grads and len(counts) > 1:  # the first step whose rows differ
                    grads = [(i + 1 - GRAD_ACCUM, [p.detach().clone() for p in model.parameters()],
                              [p.grad.clone() for p in model.parameters()])]
                optimizer.step()
                optimizer.zero_grad()
                steps += 1
                if steps == stop_after:
                    return trained, grads, sampler.state_dict()
    return trained, grads, sampler.state_dict()


@pytest.fixture(scope="module")
def full():
    torch.set_num_threads(1)
    return train()


def test_every_document_once_per_epoch_and_the_token_mean_gradient(full):
    trained, grads, _ = full
    assert [sum(e == epoch for e, _, _ in trained) for epoch in (0, 1)] == [28, 30]
    for epoch in (0, 1):
        seen = sorted(i for e, idx, _ in trained if e == epoch for i in idx)
        assert seen == list(range(N))
    (first, weights, grads), = grads  # a step of rows with different token counts
    step = trained[first:first + GRAD_ACCUM]
    assert len({n for _, _, n in step}) > 1
    model = job.tiny_model()  # the weights of that step, one forward over all its documents
    with torch.no_grad():
        for p, w in zip(model.parameters(), weights):
            p.copy_(w)
    model(**varlen_collate([DOCS[i] for _, idx, _ in step for i in idx])).loss.backward()
    for mine, p in zip(grads, model.parameters()):
        torch.testing.assert_close(mine, p.grad, atol=1e-5, rtol=1e-4)


def test_a_stopped_run_resumes_with_nothing_skipped_or_repeated(full):
    trained, _, _ = full
    stopped, _, state = train(stop_after=4)
    assert state["epoch"] == 0 and state["position"] == 4 * GRAD_ACCUM
    resumed, _, _ = train(state=state)
    assert [(e, i) for e, i, _ in stopped + resumed] == [(e, i) for e, i, _ in trained]
    assert np.isfinite([n for _, _, n in resumed]).all()
