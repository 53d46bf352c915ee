"""A tiny causal LM trained with BucketedTrainer (random weights, CPU), for tests/test_trainer.py.

Run as ``python -m tests._trainer_job OUT_DIR [CHECKPOINT]``: trains one epoch (resuming from
CHECKPOINT when given) and writes the trained micro-batches to OUT_DIR/batches.json. Imports
transformers inside functions only (the doctest collection imports this module).
"""

from __future__ import annotations

import json
import sys

import numpy as np

BOUNDARIES = (16, 32, 64, 96)
TOKEN_BUDGET = 384
N_SAMPLES = 96
GRAD_ACCUM = 2


def sample_lengths():
    return np.random.default_rng(3).integers(2, 97, N_SAMPLES)


def dataset():
    import datasets

    rng = np.random.default_rng(4)
    rows = [rng.integers(3, 60, int(n)).tolist() for n in sample_lengths()]
    return datasets.Dataset.from_dict({"input_ids": rows, "idx": list(range(N_SAMPLES))})


def pad_collate(features):
    """A plain padding collator: pad to the batch's longest sample."""
    import torch

    width = max(len(f["input_ids"]) for f in features)
    ids = torch.zeros((len(features), width), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, f in enumerate(features):
        ids[row, :len(f["input_ids"])] = torch.tensor(f["input_ids"])
        mask[row, :len(f["input_ids"])] = 1
    labels = ids.masked_fill(mask == 0, -100)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels,
            "idx": torch.tensor([f["idx"] for f in features])}


def tiny_model():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32,
                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                         max_position_embeddings=128)
    return LlamaForCausalLM(config)


def trainer(out_dir, *, save_steps=3, num_workers=0, base=None, **extra):
    """A BucketedTrainer (or ``bucketed(base)``) that records every micro-batch it trains."""
    from transformers import TrainingArguments

    from bucketopt.integrations.transformers import BucketedTrainer, bucketed

    cls = BucketedTrainer if base is None else bucketed(base)

    class Recording(cls):
        trained: list
        seeks: list

        def compute_loss(self, model, inputs, *args, **kwargs):
            idx = inputs.pop("idx", None)
            self.trained.append({"idx": None if idx is None else idx.tolist(),
                                 "shape": list(inputs["input_ids"].shape)})
            return super().compute_loss(model, inputs, *args, **kwargs)

        def _bucket_seek(self, loader, num_batches):  # the O(1) resume, instead of a replay
            out = super()._bucket_seek(loader, num_batches)
            self.seeks.append([num_batches, self.bucket_sampler.consumed])
            return out

    args = TrainingArguments(
        output_dir=str(out_dir), per_device_train_batch_size=4, num_train_epochs=1,
        gradient_accumulation_steps=GRAD_ACCUM, learning_rate=1e-3, save_strategy="steps",
        save_steps=save_steps, logging_strategy="no", report_to=[], seed=7,
        dataloader_num_workers=num_workers, remove_unused_columns=False, use_cpu=True,
        disable_tqdm=True)
    t = Recording(model=tiny_model(), args=args, train_dataset=dataset(),
                  data_collator=pad_collate, boundaries=BOUNDARIES, token_budget=TOKEN_BUDGET,
                  **extra)
    t.trained, t.seeks = [], []
    return t


def main(argv):
    """OUT_DIR [CHECKPOINT]: one epoch; under torchrun every rank writes its own file."""
    out_dir, resume = argv[0], (argv[1] if len(argv) > 1 else None)
    t = trainer(out_dir, save_steps=2)
    t.train(resume_from_checkpoint=resume)
    name = "batches" if t.args.world_size == 1 else f"rank{t.args.process_index}"
    with open(f"{out_dir}/{name}{'-resumed' if resume else ''}.json", "w") as fh:
        json.dump({"trained": t.trained, "seeks": t.seeks, "world_size": t.args.world_size,
                   "sampler_world_size": t.bucket_sampler.world_size}, fh)


if __name__ == "__main__":
    main(sys.argv[1:])
