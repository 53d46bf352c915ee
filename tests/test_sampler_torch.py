"""BucketBatchSampler inside a real torch DataLoader (CPU torch; skipped where torch is absent)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader, Dataset  # noqa: E402

from bucketopt import BucketBatchSampler, BucketoptError  # noqa: E402

EDGES = [24, 48, 96, 160]
BUDGET = 640


class Sequences(Dataset):
    """Sample i is a 1-D tensor of lengths[i] tokens, each holding the value i."""

    def __init__(self, lengths):
        self.lengths = lengths

    def __len__(self):
        return len(self.lengths)

    def __getitem__(self, i):
        return torch.full((int(self.lengths[i]),), i, dtype=torch.long)


def pad_to_edge(samples):
    """Static shapes: pad every row to the bucket edge of the batch's longest sample."""
    longest = max(s.numel() for s in samples)
    width = next(e for e in EDGES if e >= longest)
    out = torch.full((len(samples), width), -1, dtype=torch.long)
    for row, s in enumerate(samples):
        out[row, : s.numel()] = s
    return out


def sample_ids(batch):
    return sorted(int(row[0]) for row in batch)


@pytest.fixture(scope="module")
def lengths():
    return np.random.default_rng(11).integers(1, 161, 1500)


def loader(lengths, **kwargs):
    sampler = BucketBatchSampler(lengths, EDGES, token_budget=BUDGET, **kwargs)
    return sampler, DataLoader(Sequences(lengths), batch_sampler=sampler, collate_fn=pad_to_edge)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_dataloader_yields_the_sampler_batches(lengths, num_workers):
    sampler = BucketBatchSampler(lengths, EDGES, token_budget=BUDGET, seed=4)
    dl = DataLoader(Sequences(lengths), batch_sampler=sampler, collate_fn=pad_to_edge,
                    num_workers=num_workers)
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        expected = [sorted(b) for b in sampler]
        got = [sample_ids(batch) for batch in dl]
        assert len(dl) == len(sampler) == len(got)
        assert got == expected
        assert sorted(i for b in got for i in b) == list(range(lengths.size))
        for batch in dl:
            assert batch.numel() <= BUDGET  # rows x padded length within the token budget


def test_dataloader_checkpoint_and_resume(lengths):
    sampler, dl = loader(lengths, seed=2, grad_accum=3)
    sampler.set_epoch(1)
    full = [sample_ids(b) for b in dl]
    sampler, dl = loader(lengths, seed=2, grad_accum=3)
    sampler.set_epoch(1)
    consumed = []
    for step, batch in enumerate(dl):
        consumed.append(sample_ids(batch))
        if step == 9:
            state = sampler.state_dict(position=step + 1)
            break
    sampler, dl = loader(lengths, seed=2, grad_accum=3)
    sampler.load_state_dict(state)
    sampler.set_epoch(1)
    rest = [sample_ids(b) for b in dl]
    assert consumed + rest == full


def test_eight_ranks_step_in_lockstep_with_equal_shapes(lengths):
    world = 8
    ranks = [loader(lengths, rank=r, world_size=world, grad_accum=4, seed=7) for r in range(world)]
    for epoch in (0, 1):
        for sampler, _ in ranks:
            sampler.set_epoch(epoch)
        lens = {len(dl) for _, dl in ranks}
        assert len(lens) == 1
        seen = []
        steps = 0
        for micro in zip(*(iter(dl) for _, dl in ranks), strict=True):
            widths = {batch.shape[1] for batch in micro}
            assert len(widths) == 1  # one bucket per micro-step: the same padded length
            seen += [i for batch in micro for i in sample_ids(batch)]
            steps += 1
        assert steps == lens.pop()
        assert sorted(seen) == list(range(lengths.size))


def test_the_training_loop_in_the_docs_runs():
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "sampler.md").read_text()
    section = text.split("## In a training loop", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    namespace = {"__name__": "docs_sampler"}
    exec(compile(code, "docs/sampler.md", "exec"), namespace)
    state = namespace["checkpoint"]["sampler"]
    assert state["epoch"] == 1 and state["position"] == 10
    sampler = namespace["sampler"]
    resumed = BucketBatchSampler(namespace["lengths"], namespace["boundaries"],
                                 token_budget=65536, world_size=8, grad_accum=4)
    resumed.load_state_dict(state)
    sampler.set_epoch(1)
    assert list(resumed) == list(sampler)[10:]


def test_prefetching_loader_state_is_what_the_loop_consumed(lengths):
    """The trap: with workers the sampler runs ahead of the loop. An untracked state_dict() is
    refused; a tracked loader saves what the loop received, and resuming skips nothing."""
    sampler, _ = loader(lengths, seed=5)
    full = [sorted(b) for b in sampler]
    sampler, _ = loader(lengths, seed=5)
    dl = DataLoader(Sequences(lengths), batch_sampler=sampler, collate_fn=pad_to_edge,
                    num_workers=2, prefetch_factor=2)
    for step, _batch in enumerate(dl):
        if step == 4:
            break
    assert sampler._handed > 5  # the workers were handed batches the loop never saw
    with pytest.raises(BucketoptError, match=r"sampler.track\(loader\) or pass position="):
        sampler.state_dict()
    del dl

    sampler, _ = loader(lengths, seed=5)
    tracked = sampler.track(DataLoader(Sequences(lengths), batch_sampler=sampler,
                                       collate_fn=pad_to_edge, num_workers=2, prefetch_factor=2))
    assert len(tracked) == len(sampler) and tracked.dataset is not None
    consumed = []
    for batch in tracked:
        consumed.append(sample_ids(batch))
        if len(consumed) == 5:
            state = tracked.state_dict()
            break
    assert sampler._handed > 5 and state["position"] == 5
    resumed, dl = loader(lengths, seed=5)
    resumed.load_state_dict(state)
    rest = [sample_ids(b) for b in dl]
    assert consumed + rest == full  # not one batch skipped or repeated


def test_accelerate_prepare_is_one_line_and_tracked(lengths):
    accelerate = pytest.importorskip("accelerate")
    from accelerate.data_loader import BatchSamplerShard

    from bucketopt.integrations.accelerate import passthrough, prepare

    sampler, dl = loader(lengths, seed=9)
    full = [sample_ids(b) for b in dl]
    sampler, dl = loader(lengths, seed=9)
    prepared = prepare(accelerate.Accelerator(cpu=True), dl)
    consumed = []
    for batch in prepared:  # accelerate fetches one batch ahead of the loop
        consumed.append(sample_ids(batch))
        if len(consumed) == 4:
            break
    assert sampler.state_dict()["position"] == 4 and sampler._handed > 4
    resumed, dl = loader(lengths, seed=9)
    resumed.load_state_dict(sampler.state_dict())
    assert consumed + [sample_ids(b) for b in dl] == full
    # on several processes Accelerate wraps the sampler in a shard; it is made a pass-through
    rank1 = BucketBatchSampler(lengths, EDGES, token_budget=BUDGET, world_size=2, rank=1)
    shard = BatchSamplerShard(rank1, num_processes=2, process_index=1)
    holder = type("Loader", (), {"batch_sampler": shard})()
    passthrough(holder, rank1)
    assert list(shard) == list(rank1)
    with pytest.raises(BucketoptError, match="batch_sampler=BucketBatchSampler"):
        prepare(accelerate.Accelerator(cpu=True), DataLoader(Sequences(lengths), batch_size=2))
