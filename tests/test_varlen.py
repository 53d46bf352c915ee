"""BucketBatchSampler(packing="varlen"): rows of documents under the token budget, on real-shaped
data with 8 and 3 ranks, resumable (also elastically), and rank-balanced when asked."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bucketopt import BucketBatchSampler, BucketoptError
from bucketopt.datasets import seed_like
from bucketopt.training._varlen_plan import VARLEN, most_rows

from ._varlen_job import tiny_llama

SETTINGS = settings(max_examples=int(os.environ.get("BUCKETOPT_VARLEN_EXAMPLES", "60")),
                    deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SYNCS = (True, False, "step")


def story():
    """Every 45th sample of the embedded example (20,047 lengths), its solved boundaries."""
    return seed_like()[::45], (1013, 1628, 2340, 3170, 4632, 8191), 16384


def heavy_tail():
    """Pareto-tailed lengths: mostly short documents, a few up to the budget."""
    rng = np.random.default_rng(11)
    lengths = np.minimum((rng.pareto(1.1, 12_000) + 1) * 60, 16_000).astype(np.int64)
    return lengths, (128, 512, 2048, 16_000), 16_384


DATA = {"story": story(), "heavy": heavy_tail()}


def ranks_of(lengths, boundaries, budget, G, **kw):
    return [BucketBatchSampler(lengths, boundaries, token_budget=budget, world_size=G, rank=r,
                               **kw) for r in range(G)]


def check_epoch(lengths, boundaries, budget, out, *, bucketed_rows=True):
    """Every index exactly once, every rank the same count, no row over the budget."""
    assert len({len(rows) for rows in out}) == 1  # equal counts on every rank
    seen = np.zeros(lengths.size, dtype=int)
    bucket = np.searchsorted(np.asarray(boundaries), lengths, side="left")
    for rows in out:
        for row in rows:
            assert row and all(isinstance(i, int) for i in row)
            assert lengths[row].sum() <= budget  # real tokens of the row within the budget
            if bucketed_rows:
                assert np.unique(bucket[row]).size == 1  # documents of one bucket per row
            seen[row] += 1
    np.testing.assert_array_equal(seen, 1)  # exactly once


def step_attention(sampler):
    """Per optimizer step, the sum over its micro-steps of the heaviest rank's attention (sum of
    d**2 of its row): what the step waits for when every micro-step waits for its slowest rank."""
    plan = sampler.plan()
    d = sampler.lengths[plan.order].astype(np.float64)
    att = np.add.reduceat(d * d, plan.starts) if plan.n_batches else np.zeros(0)
    assert (plan.starts[1:] == plan.stops[:-1]).all()  # rows are consecutive slices of order
    heaviest = att.reshape(-1, plan.world_size).max(axis=1)
    return np.bincount(np.arange(heaviest.size) // plan.grad_accum, weights=heaviest)


@pytest.mark.parametrize("data", sorted(DATA))
@pytest.mark.parametrize("G", [8, 3])
def test_invariants_on_real_data(data, G):
    lengths, boundaries, budget = DATA[data]
    for packing in VARLEN:
        for sync in SYNCS:
            ranks = ranks_of(lengths, boundaries, budget, G, packing=packing, sync_buckets=sync,
                             grad_accum=2, seed=7)
            out = [list(s) for s in ranks]
            check_epoch(lengths, boundaries, budget, out,
                        bucketed_rows=packing == "varlen" or sync is True)
            plan = ranks[0].plan()
            assert plan.natural_batches <= most_rows(lengths, ranks[0]._bucket_of,
                                                     len(boundaries), budget)
            assert plan.micro_steps % 2 == 0  # whole optimizer steps (grad_accum=2)
            if sync is True:  # one bucket per micro-step
                assert plan.mixed_steps == 0
    # packing a shuffle: boundaries=None is one bucket
    one = ranks_of(lengths, None, budget, G, packing="varlen")
    check_epoch(lengths, [lengths.max()], budget, [list(s) for s in one])
    assert one[0].edges.tolist() == [lengths.max()]


@pytest.mark.parametrize("data", sorted(DATA))
@pytest.mark.parametrize("G", [8, 3])
def test_balanced_lowers_the_heaviest_rank(data, G):
    lengths, boundaries, budget = DATA[data]
    ratios = []
    for edges in (boundaries, None):
        for sync in SYNCS:
            for A in (1, 4):
                kw = dict(token_budget=budget, world_size=G, sync_buckets=sync, grad_accum=A,
                          seed=2)
                plain = BucketBatchSampler(lengths, edges, packing="varlen", **kw)
                balanced = BucketBatchSampler(lengths, edges, packing="varlen-balanced", **kw)
                a, b = step_attention(plain), step_attention(balanced)
                assert a.shape == b.shape  # the same optimizer steps
                assert (b <= a).all()  # never heavier, step by step
                assert b.sum() < a.sum()
                ratios.append(b.sum() / a.sum())
                p, q = plain.plan(), balanced.plan()
                if sync is True:
                    assert q.mixed_steps <= p.mixed_steps  # one bucket per micro-step stays
                rows, pb, qb = G * A, p.batches(), q.batches()
                for first in range(0, p.n_batches, max(rows, p.n_batches // 40 // rows * rows)):
                    same = [np.sort(np.concatenate(x[first:first + rows])) for x in (pb, qb)]
                    np.testing.assert_array_equal(*same)  # an optimizer step keeps its documents
    assert np.mean(ratios) < 0.9, ratios


@pytest.mark.parametrize("packing", VARLEN)
def test_resume_mid_epoch_gives_the_remaining_rows(packing):
    lengths, boundaries, budget = DATA["story"]
    kw = dict(token_budget=budget, world_size=8, rank=5, grad_accum=4, packing=packing, seed=3)
    sampler = BucketBatchSampler(lengths, boundaries, **kw)
    sampler.set_epoch(2)
    full = list(sampler)
    first = BucketBatchSampler(lengths, boundaries, **kw)
    first.set_epoch(2)
    it = iter(first)
    for _ in range(17):
        next(it)
    state = json.loads(json.dumps(first.state_dict()))
    resumed = BucketBatchSampler(lengths, boundaries, **kw)
    resumed.load_state_dict(state)
    resumed.set_epoch(2)
    assert len(resumed) == len(full) - 17
    assert list(resumed) == full[17:]
    # another packing is another plan: refused, naming the setting
    other = "varlen" if packing != "varlen" else "varlen-balanced"
    with pytest.raises(BucketoptError, match=f"packing='{packing}' \\(this sampler: "
                                             f"packing='{other}'\\)"):
        BucketBatchSampler(lengths, boundaries, **{**kw, "packing": other}).load_state_dict(
            state)


@pytest.mark.parametrize("data", sorted(DATA))
@pytest.mark.parametrize("packing", VARLEN)
def test_elastic_resume_from_8_to_3_ranks(data, packing):
    lengths, boundaries, budget = DATA[data]
    kw = dict(grad_accum=2, packing=packing, seed=4)
    old = ranks_of(lengths, boundaries, budget, 8, **kw)
    for s in old:
        s.set_epoch(1)
    steps = len(old[0])
    its = [iter(s) for s in old]
    taken = [[next(it) for _ in range(steps // 3)] for it in its]
    state = json.loads(json.dumps(old[6].state_dict()))
    new = ranks_of(lengths, boundaries, budget, 3, **kw)
    for s in new:
        s.load_state_dict(state)
        s.set_epoch(1)
    rest = [list(s) for s in new]
    assert len({len(r) for r in rest}) == 1  # equal counts on the 3 new ranks
    both = [row for part in (taken, rest) for rows in part for row in rows]
    check_epoch(lengths, boundaries, budget, [both], bucketed_rows=packing == "varlen")
    assert new[0].plan().segments == ((8, 2, steps // 3),)


def test_dataloader_and_collate_end_to_end():
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from torch.utils.data import DataLoader, Dataset

    from bucketopt.integrations.collate import VarlenCollator

    rng = np.random.default_rng(0)
    lengths = rng.integers(2, 40, 300)
    docs = [rng.integers(3, 61, d) for d in lengths]

    class Docs(Dataset):
        def __len__(self):
            return len(docs)

        def __getitem__(self, i):
            return {"input_ids": torch.from_numpy(docs[i])}

    budget, G = 128, 3
    collate = VarlenCollator(attention="flash_attn")
    batches = {r: [] for r in range(G)}
    samplers = ranks_of(lengths, (8, 20, 40), budget, G, packing="varlen-balanced", seed=1)
    # the prefetch trap holds for rows too: an untracked loader with workers runs ahead
    ahead = ranks_of(lengths, (8, 20, 40), budget, G, packing="varlen-balanced", seed=1)[0]
    untracked = iter(DataLoader(Docs(), batch_sampler=ahead, collate_fn=collate, num_workers=2))
    next(untracked)
    with pytest.raises(BucketoptError, match="cannot tell how many"):
        ahead.state_dict()
    del untracked
    for r, sampler in enumerate(samplers):
        loader = sampler.track(DataLoader(Docs(), batch_sampler=sampler, collate_fn=collate,
                                          num_workers=2 if r == 0 else 0))  # workers prefetch
        batches[r] = list(loader)
        assert sampler.state_dict()["position"] == len(sampler)  # what the loop consumed
    seen = []
    for r, sampler in enumerate(samplers):
        assert len(batches[r]) == len(batches[0])
        for row, batch in zip(sampler.plan().batches(r), batches[r]):
            assert batch["input_ids"].shape == (1, lengths[row].sum()) and batch[
                "input_ids"].numel() <= budget
            assert batch["cu_seq_lens_q"].tolist() == np.r_[0, np.cumsum(lengths[row])].tolist()
            seen += row.tolist()
    assert sorted(seen) == list(range(lengths.size))
    # one row through a tiny causal LM: its loss is the token-weighted loss of its documents
    model = tiny_llama().eval()
    row = samplers[0].plan().batches(0)[0]
    with torch.no_grad():
        packed = model(**batches[0][0]).loss.item()
        alone = [model(input_ids=torch.from_numpy(docs[i])[None],
                       labels=torch.from_numpy(docs[i])[None], use_cache=False).loss.item()
                 for i in row]
    weights = lengths[row] - 1
    assert abs(packed - float(np.dot(alone, weights) / weights.sum())) <= 1e-5


def test_epoch_view_times_rows_padding_free():
    lengths, boundaries, budget = DATA["heavy"]
    sampler = BucketBatchSampler(lengths, boundaries, token_budget=budget, world_size=8,
                                 packing="varlen-balanced")
    view = sampler.epoch_view()
    rows = sampler.plan().batches()
    assert view.packed and view.strategy == "packed-bucketed-balanced"
    assert view.padding_fraction == 0.0
    np.testing.assert_array_equal(view.real_tokens, [lengths[r].sum() for r in rows])
    np.testing.assert_allclose(view.attention, [(lengths[r].astype(float) ** 2).sum()
                                                for r in rows])
    assert sampler.epoch_view(pad="batch").padding_fraction > 0  # the same rows, padded


def test_the_packing_example_in_the_docs_runs():
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "sampler.md").read_text()
    section = text.split("## Packing (varlen)", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    if "import torch" in code:
        pytest.importorskip("torch")
    namespace = {"__name__": "docs_varlen"}
    exec(compile(code, "docs/sampler.md", "exec"), namespace)
    assert namespace["steps"] > 0


@pytest.mark.parametrize("overflow", ["split", "drop", "truncate"])
def test_rows_of_items_with_max_length(overflow):
    """With max_length the sampler packs items (chunks of long samples with "split")."""
    lengths = DATA["heavy"][0]
    samplers = ranks_of(lengths, None, 4096, 3, packing="varlen-balanced", max_length=4096,
                        overflow=overflow)
    out = [list(s) for s in samplers]
    assert len({len(rows) for rows in out}) == 1
    items = [item for rows in out for row in rows for item in row]
    if overflow == "split":  # (index, chunk) pairs: every chunk of every sample once
        chunks = -(-lengths // 4096)
        assert sorted(items) == [(i, c) for i in range(lengths.size) for c in range(chunks[i])]
        size = lambda item: min(4096, lengths[item[0]] - 4096 * item[1])  # noqa: E731
    else:
        kept = np.flatnonzero(lengths <= 4096) if overflow == "drop" else np.arange(lengths.size)
        assert sorted(items) == kept.tolist()
        size = lambda i: min(4096, lengths[i])  # noqa: E731
    for row in (row for rows in out for row in rows):
        assert sum(size(item) for item in row) <= 4096


@pytest.mark.parametrize(("kwargs", "match"), [
    (dict(boundaries=None, packing="fixed"), "boundaries are required with packing='fixed'"),
    (dict(packing="packed"), "packing must be one of"),
    (dict(token_budget=30), "smaller than the longest sample"),
])
def test_bad_input_is_one_clear_error(kwargs, match):
    base = dict(lengths=[5, 40, 7, 12], boundaries=[10, 40], token_budget=64, packing="varlen")
    with pytest.raises(BucketoptError, match=match):
        BucketBatchSampler(**{**base, **kwargs})


# ------------------------------------------------------------------ random small configurations
@st.composite
def configs(draw):
    """Small random configurations, grad_accum lowered to the micro-steps an epoch has (more is
    refused, see build), so that most draws plan an epoch."""
    lengths = np.asarray(draw(st.lists(st.integers(1, 60), min_size=1, max_size=200)))
    top = int(lengths.max())
    inner = draw(st.lists(st.integers(1, max(1, top - 1)), max_size=4))
    edges = sorted({x for x in inner if x < top} | {top + draw(st.integers(0, 4))})
    cfg = dict(lengths=lengths, boundaries=edges,
               token_budget=top + draw(st.sampled_from([0, 1, 7, 30, 100, 400])),
               world_size=draw(st.integers(1, max(1, min(9, lengths.size // 3)))),
               grad_accum=draw(st.integers(1, 4)),
               packing=draw(st.sampled_from(VARLEN)), sync_buckets=draw(st.sampled_from(SYNCS)),
               drop_last=draw(st.booleans()), seed=draw(st.integers(0, 2**32)))
    try:
        steps = BucketBatchSampler(**{**cfg, "grad_accum": 1}).plan(0).micro_steps
    except BucketoptError:
        steps = 0
    cfg["grad_accum"] = max(1, min(cfg["grad_accum"], steps))
    return cfg


def build(cfg):
    """Rank 0, or None where refused; refused only where the bound on the rows cannot be split
    up to a multiple of world_size (or grad_accum / drop_last leave no step)."""
    try:
        return BucketBatchSampler(**cfg)
    except BucketoptError as exc:
        message = str(exc)
        if message.startswith("cannot give each of"):
            lengths, G = cfg["lengths"], cfg["world_size"]
            of = np.searchsorted(np.asarray(cfg["boundaries"]), lengths, side="left")
            bound = most_rows(lengths, of, len(cfg["boundaries"]), cfg["token_budget"])
            assert not cfg["drop_last"] and -(-bound // G) * G > lengths.size
        else:
            assert message.startswith(("grad_accum=", "drop_last=True leaves no batch"))
        return None


@SETTINGS
@given(configs(), st.integers(0, 2), st.data())
def test_random_configurations_hold_the_invariants(cfg, epoch, data):
    sampler = build(cfg)
    if sampler is None:  # refused, and build checked that the refusal is right
        return
    lengths, G = cfg["lengths"], cfg["world_size"]
    out = []
    for r in range(G):
        s = BucketBatchSampler(**{**cfg, "rank": r})
        s.set_epoch(epoch)
        out.append(list(s))
    assert len({len(rows) for rows in out}) == 1
    seen = np.zeros(lengths.size, dtype=int)
    for row in (row for rows in out for row in rows):
        assert lengths[row].sum() <= cfg["token_budget"]
        seen[row] += 1
    if cfg["drop_last"]:
        assert seen.max() <= 1 and lengths.size - seen.sum() == s.dropped
    else:
        np.testing.assert_array_equal(seen, 1)
    of = np.searchsorted(np.asarray(cfg["boundaries"]), lengths, side="left")
    assert s.plan().natural_batches <= most_rows(lengths, of, len(cfg["boundaries"]),
                                                 cfg["token_budget"])  # the refusal's bound
    if cfg["packing"] == "varlen-balanced":  # against the same plan unbalanced
        plain = BucketBatchSampler(**{**cfg, "packing": "varlen"})
        plain.set_epoch(epoch)
        a, b = step_attention(plain), step_attention(s)
        assert a.shape == b.shape and (b <= a + 1e-9).all()
        rows, pb, sb = G * cfg["grad_accum"], plain.plan().batches(), s.plan().batches()
        for first in range(0, len(sb), rows):
            np.testing.assert_array_equal(
                *(np.sort(np.concatenate(x[first:first + rows])) for x in (pb, sb)))
    # resume anywhere in the epoch, at this world size or another
    position = data.draw(st.integers(0, len(out[0])))
    first = BucketBatchSampler(**{**cfg, "rank": 0})
    first.set_epoch(epoch)
    it = iter(first)
    for _ in range(position):
        next(it)
    state = first.state_dict()
    again = BucketBatchSampler(**cfg)
    again.load_state_dict(state)
    assert list(again) == out[0][position:]
    G2 = data.draw(st.integers(1, 9))
    if cfg["drop_last"]:
        return
    new = [BucketBatchSampler(**{**cfg, "world_size": G2, "rank": r}) for r in range(G2)] \
        if build({**cfg, "world_size": G2}) is not None else []
    try:
        for s in new:
            s.load_state_dict(state)
    except BucketoptError as exc:
        assert str(exc).startswith(f"cannot resume at world_size={G2}")
        return
    if new:
        rest = [list(s) for s in new]
        assert len({len(r) for r in rest}) == 1
        done = [i for rows in out for row in rows[:position] for i in row]
        got = done + [i for rows in rest for row in rows for i in row]
        assert sorted(got) == list(range(lengths.size))  # exactly once over both world sizes
