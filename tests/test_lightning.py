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
