"""A real DDP job (gloo, CPU) training a tiny causal LM on packed rows (tests/test_varlen_ddp.py).

``python -m torch.distributed.run --nproc_per_node G -m tests._varlen_job OUT PHASE``:
``PHASE="first"`` trains the first ``STOP`` micro-steps of epoch 0 and saves rank 0's sampler
state; ``"rest"`` loads that state (saved at another world size: elastic) and trains the rest.
Every rank writes the rows it trained and its losses to ``OUT/PHASE-rank{r}.json``.
torch and transformers are imported inside functions only (the doctest collection imports this).
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

N_DOCS, BOUNDARIES, TOKEN_BUDGET, GRAD_ACCUM, SEED, STOP = 400, (16, 40, 60), 256, 2, 3, 6


def documents():
    rng = np.random.default_rng(0)
    lengths = rng.integers(2, 61, N_DOCS)
    return lengths, [rng.integers(3, 61, d) for d in lengths]


def tiny_llama():
    """A causal LM with random weights (seed 0) and tiny dimensions, sdpa attention."""
    import torch
    import transformers

    config = transformers.LlamaConfig(vocab_size=61, hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=1, num_attention_heads=4,
                                      num_key_value_heads=2, max_position_embeddings=256,
                                      bos_token_id=1, eos_token_id=2, pad_token_id=0,
                                      attn_implementation="sdpa")
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config)


def main(out, phase):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader, Dataset

    from bucketopt import BucketBatchSampler
    from bucketopt.integrations.collate import VarlenCollator

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    lengths, docs = documents()

    class Docs(Dataset):
        def __len__(self):
            return N_DOCS

        def __getitem__(self, i):
            return {"input_ids": torch.from_numpy(docs[i]), "idx": i}

    sampler = BucketBatchSampler(lengths, BOUNDARIES, token_budget=TOKEN_BUDGET, rank=rank,
                                 world_size=world, grad_accum=GRAD_ACCUM, seed=SEED,
                                 packing="varlen-balanced")
    if phase == "rest":
        with open(os.path.join(out, "state.json")) as fh:
            sampler.load_state_dict(json.load(fh))
    collate = VarlenCollator()
    loader = sampler.track(DataLoader(Docs(), batch_sampler=sampler, num_workers=2,
                                      collate_fn=lambda rows: (collate(rows),
                                                               [r["idx"] for r in rows])))
    model = DistributedDataParallel(tiny_llama())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    rows, losses, tokens = [], [], []
    for step, (batch, idx) in enumerate(loader):
        last = (step + 1) % GRAD_ACCUM == 0 or step + 1 == len(loader)
        ctx = model.no_sync() if not last else _nullcontext()
        with ctx:
            loss = model(**batch).loss
            (loss / GRAD_ACCUM).backward()
        if last:
            optimizer.step()
            optimizer.zero_grad()
        rows.append(idx)
        losses.append(float(loss))
        tokens.append(int(batch["input_ids"].numel()))
        if phase == "first" and step + 1 == STOP:
            break
    if phase == "first" and rank == 0:
        with open(os.path.join(out, "state.json"), "w") as fh:
            json.dump(sampler.state_dict(), fh)
    with open(os.path.join(out, f"{phase}-rank{rank}.json"), "w") as fh:
        json.dump({"rows": rows, "losses": losses, "tokens": tokens, "world_size": world}, fh)
    dist.barrier()
    dist.destroy_process_group()


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
