"""A tiny causal LM trained with BucketedTrainer (random weights, CPU), for tests/test_trainer*.py.

Run as ``python -m tests._trainer_job OUT_DIR [CHECKPOINT] [--packing P] [--docs N] [--epochs E]
[--stop-after S] [--hang-after S]``: trains (resuming from CHECKPOINT when given), appends every
trained micro-batch to OUT_DIR/trained[-resumed][-rank{r}].jsonl as it goes, and at the end writes
OUT_DIR/batches.json (``rank{r}.json`` under torchrun). ``--stop-after S`` stops after the
checkpoint of step S; ``--hang-after S`` hangs one micro-batch after that checkpoint (for a kill).
Imports transformers inside functions only (the doctest collection imports this module).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

BOUNDARIES = (16, 32, 64, 96)
TOKEN_BUDGET = 384
N_SAMPLES = 96
GRAD_ACCUM = 2
VARLEN = ("varlen", "varlen-balanced")


def sample_lengths(n=N_SAMPLES):
    return np.random.default_rng(3).integers(2, 97, n)


def tokens(n=N_SAMPLES):
    rng = np.random.default_rng(4)
    return [rng.integers(3, 60, int(d)).tolist() for d in sample_lengths(n)]


def dataset(n=N_SAMPLES):
    import datasets

    return datasets.Dataset.from_dict({"input_ids": tokens(n), "idx": list(range(n))})


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


def row_collate(features):
    """A packed row (bucketopt's VarlenCollator), with the documents' indices for the records."""
    import torch

    from bucketopt.integrations.collate import VarlenCollator

    batch = VarlenCollator()([{"input_ids": f["input_ids"]} for f in features])
    batch["idx"] = torch.tensor([f["idx"] for f in features])
    return batch


def word_tokenizer():
    """A word-level tokenizer of the 64 token ids t0..t63 (pad 0), built offline."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[PAD]": 0, **{f"t{i}": i for i in range(1, 64)}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="t1"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", eos_token="t2")


def tiny_model(attention="sdpa"):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32,
                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                         max_position_embeddings=128, attn_implementation=attention)
    return LlamaForCausalLM(config)


def document_losses(logits, ids, lengths):
    """Mean next-token loss of every document of a packed row, from the row's logits."""
    import torch

    out, start = [], 0
    for d in lengths:
        if d > 1:
            out.append(float(torch.nn.functional.cross_entropy(
                logits[start:start + d - 1].detach().float(), ids[start + 1:start + d])))
        else:
            out.append(None)
        start += d
    return out


def trainer(out_dir, *, save_steps=3, num_workers=0, base=None, packing="fixed",
            n=N_SAMPLES, epochs=1, check_documents=False, log=None, hang_after=None,
            stop_after=None, model=None, collator="default", args=None, **extra):
    """A BucketedTrainer (or ``bucketed(base)``) that records every micro-batch it trains."""
    import torch
    from transformers import TrainerCallback, TrainingArguments

    from bucketopt.integrations.transformers import BucketedTrainer, bucketed

    cls = BucketedTrainer if base is None else bucketed(base)

    class Recording(cls):
        trained: list
        seeks: list

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            idx = inputs.pop("idx", None)
            record = {"idx": None if idx is None else idx.tolist(),
                      "shape": list(inputs["input_ids"].shape),
                      "epoch": self.bucket_sampler.epoch, "step": self.state.global_step,
                      "items": None if num_items_in_batch is None else int(num_items_in_batch)}
            loss, outputs = super().compute_loss(model, inputs, return_outputs=True,
                                                 num_items_in_batch=num_items_in_batch)
            record["loss"] = float(loss.detach())
            if check_documents and idx is not None:
                record["gap"] = self._document_gap(model, inputs, outputs, idx.tolist())
            self.trained.append(record)
            if log is not None:
                with open(log, "a") as fh:
                    fh.write(json.dumps(record) + "\n")
            if self.hang is not None and self.hang[0] == "after-save":
                self.hang[1] += 1
                if self.hang[1] == 2:  # one micro-batch trained after the checkpoint: hang
                    open(os.path.join(str(out_dir), "hanging"), "w").close()
                    time.sleep(600)
            return (loss, outputs) if return_outputs else loss

        def _document_gap(self, model, inputs, outputs, idx):
            """Largest |loss of a document in the packed row - its loss run alone|."""
            lengths = [len(self.train_dataset[i]["input_ids"]) for i in idx]
            ids = inputs["input_ids"][0]
            packed = document_losses(outputs.logits[0], ids, lengths)
            gap, start = 0.0, 0
            with torch.no_grad():
                for d, mine in zip(lengths, packed):
                    if mine is not None:
                        alone = model(input_ids=ids[None, start:start + d], use_cache=False)
                        gap = max(gap, abs(mine - document_losses(alone.logits[0],
                                                                  ids[start:start + d],
                                                                  [d])[0]))
                    start += d
            return gap

        def _bucket_seek(self, loader, num_batches):  # the O(1) resume, instead of a replay
            out = super()._bucket_seek(loader, num_batches)
            self.seeks.append([num_batches, self.bucket_sampler.consumed])
            return out

    class Stop(TrainerCallback):
        def on_save(self, args, state, control, **kwargs):
            if stop_after is not None and state.global_step == stop_after:
                control.should_training_stop = True
            if hang_after is not None and state.global_step == hang_after:
                t.hang = ["after-save", 0]
            return control

    options = dict(output_dir=str(out_dir), per_device_train_batch_size=4,
                   num_train_epochs=epochs, gradient_accumulation_steps=GRAD_ACCUM,
                   learning_rate=1e-3, save_strategy="steps", save_steps=save_steps,
                   logging_strategy="no", report_to=[], seed=7,
                   dataloader_num_workers=num_workers, remove_unused_columns=False,
                   use_cpu=True, disable_tqdm=True)
    options.update(args or {})
    if collator == "default":
        collator = row_collate if packing in VARLEN else pad_collate
    t = Recording(model=tiny_model() if model is None else model,
                  args=TrainingArguments(**options), train_dataset=dataset(n),
                  data_collator=collator, boundaries=extra.pop("boundaries", BOUNDARIES),
                  token_budget=TOKEN_BUDGET, packing=packing, callbacks=[Stop()], **extra)
    t.trained, t.seeks, t.hang = [], [], None
    return t


def main(argv):
    """OUT_DIR [CHECKPOINT] [options]; under torchrun every rank writes its own files."""
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("checkpoint", nargs="?")
    parser.add_argument("--packing", default="fixed")
    parser.add_argument("--docs", type=int, default=N_SAMPLES)
    parser.add_argument("--epochs", type=float, default=1)
    parser.add_argument("--save-steps", type=int, default=2)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--stop-after", type=int)
    parser.add_argument("--hang-after", type=int)
    parser.add_argument("--one-bucket", action="store_true")
    parser.add_argument("--grads", action="store_true", help="save the first step's gradient")
    a = parser.parse_intermixed_args(argv)
    resumed = "-resumed" if a.checkpoint else ""
    rank = os.environ.get("RANK")
    suffix = resumed + ("" if rank is None else f"-rank{rank}")
    extra = {"boundaries": None} if a.one_bucket else {}
    t = trainer(a.out, save_steps=a.save_steps, packing=a.packing, n=a.docs, epochs=a.epochs,
                num_workers=a.workers, log=os.path.join(a.out, f"trained{suffix}.jsonl"),
                stop_after=a.stop_after, hang_after=a.hang_after,
                args={"max_grad_norm": 0.0} if a.grads else None, **extra)
    grads = []
    if a.grads:
        from transformers import TrainerCallback

        class Grads(TrainerCallback):
            def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
                if not grads:
                    grads.append([p.grad.reshape(-1).tolist() for p in t.model.parameters()])

        t.add_callback(Grads())
    t.train(resume_from_checkpoint=a.checkpoint)
    name = "batches" if t.args.world_size == 1 else f"rank{t.args.process_index}"
    with open(os.path.join(a.out, f"{name}{resumed}.json"), "w") as fh:
        json.dump({"trained": t.trained, "seeks": t.seeks, "world_size": t.args.world_size,
                   "sampler_world_size": t.bucket_sampler.world_size,
                   "global_step": t.state.global_step, "max_steps": t.state.max_steps,
                   "grads": grads[0] if grads else None}, fh)


if __name__ == "__main__":
    main(sys.argv[1:])
