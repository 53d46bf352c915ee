"""The step timer: rows from a fake clock, a real torch loop into calibrate, the Trainer hook."""

from __future__ import annotations

import numpy as np
import pytest

from bucketopt import BucketoptError
from bucketopt.cost.calibration import calibrate, read_measurements
from bucketopt.cost.steptimer import StepTimer


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_rows_are_the_clock_differences_and_skip_the_first_steps(tmp_path):
    clock = FakeClock()
    path = tmp_path / "steps.csv"
    timer = StepTimer(path, skip=2, flush_every=3, clock=clock)
    shapes = [(1, 8), (2, 16), (4, 32), (8, 64), (16, 8), (3, 5), (7, 9)]
    for i, (s, length) in enumerate(shapes):
        with timer.step(s, length):
            clock.now += 0.5 + i
    assert [r[:2] for r in timer.rows] == shapes[2:]
    assert [r[2] for r in timer.rows] == [0.5 + i for i in range(2, len(shapes))]
    sizes, lens, seconds = read_measurements(path)  # flushed every 3: 3 of 5 rows so far
    assert list(sizes) == [4, 8, 16]
    timer.close()
    sizes, lens, seconds = read_measurements(path)
    assert list(zip(sizes.astype(int), lens.astype(int))) == shapes[2:]
    assert list(seconds) == [0.5 + i for i in range(2, len(shapes))]


def test_a_step_that_raises_is_not_written():
    clock = FakeClock()
    timer = StepTimer(skip=0, clock=clock)
    with pytest.raises(KeyError), timer.step(4, 4):
        clock.now += 1.0
        raise KeyError("boom")
    with timer.step(np.zeros((3, 7))):  # a 2-D array gives (batch, length)
        clock.now += 2.0
    assert timer.rows == [(3, 7, 2.0, 1)]


@pytest.mark.parametrize("args", [(0, 5), (2, 2.5), (np.zeros((2, 3, 4)),), ("x",)])
def test_bad_shapes_are_one_clear_error(args):
    with pytest.raises(BucketoptError, match="StepTimer"):
        StepTimer().start(*args)


def test_bad_options_and_paths(tmp_path):
    with pytest.raises(BucketoptError, match="skip"):
        StepTimer(skip=-1)
    with pytest.raises(BucketoptError, match="could not write"):
        StepTimer(tmp_path / "no" / "such" / "dir.csv")


def test_plain_torch_loop_feeds_calibrate(tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(64, 16), torch.nn.Linear(16, 64))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    path = tmp_path / "steps.csv"
    shapes = [(s, length) for length in (8, 16, 32, 64) for s in (1, 4, 16)]
    with StepTimer(path, skip=1) as timer:
        for s, length in [shapes[0], *shapes, *shapes]:
            ids = torch.randint(0, 64, (s, length))
            with timer.step(ids):
                loss = model(ids).logsumexp(-1).mean()
                loss.backward()
                opt.step()
                opt.zero_grad()
    sizes, lens, seconds = read_measurements(path)
    assert len(seconds) == 2 * len(shapes)
    assert set(zip(sizes.astype(int).tolist(), lens.astype(int).tolist())) == set(shapes)
    assert (seconds > 0).all()
    fit = calibrate(sizes, lens, seconds, bootstrap=0)
    assert fit.n_shapes == len(shapes)


def test_trainer_callback_times_every_micro_batch(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from bucketopt.cost.steptimer import step_timer_callback

    config = transformers.GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=50,
                                     n_positions=32)
    model = transformers.GPT2LMHeadModel(config)
    rng = np.random.default_rng(0)
    rows = [{"input_ids": rng.integers(0, 50, size=int(n)).tolist()}
            for n in rng.integers(4, 32, size=24)]

    class Data(torch.utils.data.Dataset):
        def __len__(self):
            return len(rows)

        def __getitem__(self, i):
            return rows[i]

    def collate(batch):
        width = max(len(b["input_ids"]) for b in batch)
        ids = torch.tensor([b["input_ids"] + [0] * (width - len(b["input_ids"]))
                            for b in batch])
        return {"input_ids": ids, "labels": ids}

    path = tmp_path / "steps.csv"
    args = transformers.TrainingArguments(output_dir=str(tmp_path / "out"),
                                          per_device_train_batch_size=4,
                                          gradient_accumulation_steps=2, num_train_epochs=1,
                                          report_to=[], save_strategy="no", logging_steps=1000,
                                          use_cpu=True, disable_tqdm=True)
    callback = step_timer_callback(path, skip=0)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=Data(),
                                   data_collator=collate, callbacks=[callback])
    trainer.train()
    sizes, lens, seconds = read_measurements(path)
    assert len(seconds) == len(rows) // 4  # every micro-batch of every accumulation step
    assert (sizes == 4).all() and (lens <= 31).all() and (seconds > 0).all()
