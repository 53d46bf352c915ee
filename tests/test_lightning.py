"""BucketBatchSampler under Lightning's Trainer (CPU; skipped where lightning is absent): the
documented lines (use_distributed_sampler=False, set_epoch, mark_consumed) give every sample
once and a resume that skips nothing, though Lightning's loader runs ahead of the step."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning")
from torch.utils.data import DataLoader, Dataset  # noqa: E402

from bucketopt import BucketBatchSampler  # noqa: E402

LENGTHS = np.random.default_rng(1).integers(1, 100, 300)
EDGES, BUDGET = [25, 50, 100], 400


class Tokens(Dataset):
    def __len__(self):
        return LENGTHS.size

    def __getitem__(self, i):
        return torch.full((int(LENGTHS[i]),), i)


def collate(samples):
    return torch.nn.utils.rnn.pad_sequence(samples, batch_first=True, padding_value=-1)


class Module(L.LightningModule):
    def __init__(self, stop_after=None, resume=None):
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)
        self.seen, self.stop_after, self.resume, self.state = [], stop_after, resume, None

    def train_dataloader(self):
        t = self.trainer
        self.sampler = BucketBatchSampler(LENGTHS, EDGES, token_budget=BUDGET, seed=3,
                                          rank=t.global_rank, world_size=t.world_size,
                                          grad_accum=t.accumulate_grad_batches)
        if self.resume is not None:
            self.sampler.load_state_dict(self.resume)
        return DataLoader(Tokens(), batch_sampler=self.sampler, collate_fn=collate,
                          num_workers=2)

    def on_train_epoch_start(self):
        self.sampler.set_epoch(self.trainer.current_epoch)

    def training_step(self, batch, _):
        assert batch.numel() <= BUDGET
        self.seen.append(sorted(int(row[0]) for row in batch))
        return self.layer(batch[:, :1].float().clamp(min=0)).sum()

    def on_train_batch_end(self, *_):
        self.sampler.mark_consumed()  # the step happened: count it
        if self.stop_after and len(self.seen) == self.stop_after:
            self.state = self.sampler.state_dict()
            self.trainer.should_stop = True

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def fit(module):
    L.Trainer(max_epochs=1, use_distributed_sampler=False, logger=False, accelerator="cpu",
              enable_checkpointing=False, enable_progress_bar=False,
              enable_model_summary=False).fit(module)
    return module


def test_lightning_epoch_and_exact_resume():
    full = fit(Module())
    assert sorted(i for b in full.seen for i in b) == list(range(LENGTHS.size))
    stopped = fit(Module(stop_after=5))
    assert stopped.state["position"] == 5 and stopped.sampler._handed > 5  # ran ahead
    resumed = fit(Module(resume=stopped.state))
    assert stopped.seen[:5] + resumed.seen == full.seen


# ------------------------------------------------------------------------------- packed rows
class Packed(L.LightningModule):
    """The packed-rows recipe of docs/trainer.md: rows from the varlen sampler, VarlenCollator,
    the summed loss per row and the gradients scaled to the step's token mean before the step."""

    def __init__(self, stop_after=None, resume=None):
        super().__init__()
        from bucketopt.integrations.tokens import TokenMean

        from . import _trainer_job as job

        self.job, self.model = job, job.tiny_model()
        self.mean, self.grads, self.seen, self.counts = TokenMean(), [], [], []
        self.stop_after, self.resume, self.state = stop_after, resume, None

    def train_dataloader(self):  # called every epoch (reload_dataloaders_every_n_epochs=1)
        from bucketopt.integrations.collate import VarlenCollator

        t, job = self.trainer, self.job
        if not hasattr(self, "sampler"):
            self.sampler = BucketBatchSampler(job.sample_lengths(PACKED_N), None,
                                              token_budget=job.TOKEN_BUDGET, seed=4,
                                              packing="varlen-balanced", rank=t.global_rank,
                                              world_size=t.world_size,
                                              grad_accum=t.accumulate_grad_batches)
            if self.resume is not None:
                self.sampler.load_state_dict(self.resume)
        # the epoch's rows before Lightning takes len(loader): epochs differ in rows
        self.sampler.set_epoch(t.current_epoch)
        collate, docs = VarlenCollator(), job.tokens(PACKED_N)
        data = [{"input_ids": torch.tensor(d), "idx": i} for i, d in enumerate(docs)]
        return DataLoader(data, batch_sampler=self.sampler, num_workers=2,
                          collate_fn=lambda rows: (collate(rows), [r["idx"] for r in rows]))

    def training_step(self, batch, _):
        batch, idx = batch
        assert batch["input_ids"].shape[0] == 1
        assert batch["input_ids"].numel() <= self.job.TOKEN_BUDGET
        self.seen.append((self.trainer.current_epoch, idx))
        labels = batch.pop("labels")
        self.counts.append(int((labels[..., 1:] != -100).sum()))
        return self.mean.loss(self.model(**batch).logits, labels)  # summed over its tokens

    def on_before_optimizer_step(self, optimizer):
        t = self.trainer  # Lightning divided each loss by accumulate_grad_batches: undo that
        total = t.strategy.reduce(torch.tensor(float(self.mean.tokens)), reduce_op="sum")
        self.mean.scale(self.parameters(), total, t.accumulate_grad_batches * t.world_size)
        step = self.counts[-t.accumulate_grad_batches:]
        if not self.grads and len(set(step)) > 1:  # the first step whose rows differ
            params = list(self.parameters())
            self.grads = [len(self.seen) - len(step), [p.detach().clone() for p in params],
                          [p.grad.clone() for p in params]]

    def on_train_batch_end(self, *_):
        self.sampler.mark_consumed()
        if self.stop_after and len(self.seen) == self.stop_after:
            self.state = self.sampler.state_dict()
            self.trainer.should_stop = True

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


PACKED_N = 200  # epoch 0 packs into 28 rows, epoch 1 into 30


def fit_packed(module, epochs=2):
    L.Trainer(max_epochs=epochs, use_distributed_sampler=False, logger=False, accelerator="cpu",
              enable_checkpointing=False, enable_progress_bar=False, accumulate_grad_batches=2,
              reload_dataloaders_every_n_epochs=1, enable_model_summary=False).fit(module)
    return module


def test_lightning_packed_rows_token_mean_and_exact_resume():
    from bucketopt.integrations.collate import varlen_collate

    torch.set_num_threads(1)
    full = fit_packed(Packed())
    assert [sum(e == epoch for e, _ in full.seen) for epoch in (0, 1)] == [28, 30]
    for epoch in (0, 1):
        seen = sorted(i for e, idx in full.seen if e == epoch for i in idx)
        assert seen == list(range(PACKED_N))  # every document once per epoch
    docs = full.job.tokens(PACKED_N)
    first, weights, grads = full.grads  # a step of rows with different token counts
    reference = full.job.tiny_model()  # its weights, one forward over all its documents
    with torch.no_grad():
        for p, w in zip(reference.parameters(), weights):
            p.copy_(w.reshape(p.shape))
    step = [docs[i] for _, idx in full.seen[first:first + 2] for i in idx]
    reference(**varlen_collate(step)).loss.backward()
    for mine, p in zip(grads, reference.parameters()):
        torch.testing.assert_close(mine, p.grad, atol=1e-5, rtol=1e-4)
    stopped = fit_packed(Packed(stop_after=4), epochs=1)
    assert stopped.state["position"] == 4 and stopped.sampler._handed > 4  # ran ahead
    resumed = fit_packed(Packed(resume=stopped.state))
    assert stopped.seen[:4] + resumed.seen == full.seen
