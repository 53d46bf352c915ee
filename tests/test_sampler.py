"""BucketBatchSampler and the diversity metrics: invariants over random configurations."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from bucketopt import BucketBatchSampler, BucketoptError
from bucketopt._packing import greedy_starts
from bucketopt.diversity import (
    compare_diversity,
    epoch_churn,
    measure,
    step_mix_gap,
    strategy_batches,
)
from bucketopt.histogram import Histogram

from . import naive

SETTINGS = settings(max_examples=int(os.environ.get("BUCKETOPT_SAMPLER_EXAMPLES", "120")),
                    deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@st.composite
def configs(draw):
    lengths = draw(st.lists(st.integers(1, 60), min_size=1, max_size=150))
    top = max(lengths)
    inner = draw(st.lists(st.integers(1, max(1, top - 1)), max_size=5))
    edges = sorted({x for x in inner if x < top} | {top + draw(st.integers(0, 4))})
    token_budget = edges[-1] + draw(st.sampled_from([0, 0, 1, 7, 30, 100, 400]))
    return dict(
        lengths=np.asarray(lengths), boundaries=edges, token_budget=token_budget,
        world_size=draw(st.integers(1, 16)), grad_accum=draw(st.integers(1, 8)),
        packing=draw(st.sampled_from(["fixed", "greedy"])),
        sync_buckets=draw(st.sampled_from([True, False, "step"])),
        drop_last=draw(st.booleans()), seed=draw(st.integers(0, 2**32)),
    )


@st.composite
def big_configs(draw):
    """Thousands of samples and small budgets: hundreds of batches, so the schedule shows."""
    n = draw(st.integers(300, 4000))
    top = draw(st.integers(8, 300))
    lengths = np.random.default_rng(draw(st.integers(0, 2**32))).integers(1, top + 1, n)
    inner = draw(st.lists(st.integers(1, top - 1), min_size=1, max_size=6))
    edges = sorted(set(inner) | {top})
    return dict(
        lengths=lengths, boundaries=edges, token_budget=top * draw(st.integers(1, 4)),
        world_size=draw(st.integers(1, 16)), grad_accum=draw(st.integers(1, 8)),
        packing=draw(st.sampled_from(["fixed", "greedy"])), sync_buckets=True, drop_last=False,
        seed=draw(st.integers(0, 2**32)),
    )


def bucket_of(lengths, edges):
    return np.searchsorted(np.asarray(edges), lengths, side="left")


def batch_count_bounds(cfg):
    """(fewest, most) batches the packing can make, per bucket, from the counts alone."""
    lengths, edges, budget = cfg["lengths"], np.asarray(cfg["boundaries"]), cfg["token_budget"]
    buckets = bucket_of(lengths, edges)
    lo, hi = [], []
    for k in np.unique(buckets):
        members = lengths[buckets == k]
        n_k = members.size
        hi.append(-(-n_k // (budget // edges[k])))  # fixed packing: exactly this many
        lo.append(-(-n_k // (budget // members.min())))
    return lo, hi


def all_ranks(cfg, epoch=0):
    """The batches every rank yields for one epoch (one sampler instance per rank)."""
    out = []
    for rank in range(cfg["world_size"]):
        sampler = BucketBatchSampler(**cfg, rank=rank)
        sampler.set_epoch(epoch)
        out.append([list(b) for b in sampler])
        assert len(out[-1]) == len(sampler)
    return out, sampler


def build_or_explain(cfg):
    """Build rank 0; None where it refused. It may refuse only where no multiple of world_size
    lies between the most batches the packing can make and n (splitting reaches any count up to
    n), so that every epoch can be planned."""
    n, G = cfg["lengths"].size, cfg["world_size"]
    _, hi = batch_count_bounds(cfg)
    try:
        return BucketBatchSampler(**cfg)
    except BucketoptError as exc:
        assert not cfg["drop_last"]
        assert "world_size" in str(exc)
        assert -(-sum(hi) // G) * G > n
        return None


@SETTINGS
@given(configs(), st.integers(0, 3))
def test_every_index_once_equal_ranks_within_budget(cfg, epoch):
    sampler = build_or_explain(cfg)
    n, G = cfg["lengths"].size, cfg["world_size"]
    _, hi = batch_count_bounds(cfg)
    if not cfg["drop_last"]:
        # refused exactly when fixed packing's count (greedy's most) cannot be split evenly
        assert (sampler is None) == (-(-sum(hi) // G) * G > n)
    if sampler is None:
        return
    ranks, last = all_ranks(cfg, epoch)
    counts = {len(r) for r in ranks}
    assert len(counts) == 1  # every rank the same number of batches
    lengths, edges = cfg["lengths"], np.asarray(cfg["boundaries"])
    buckets = bucket_of(lengths, edges)
    seen = np.zeros(n, dtype=int)
    for batches in ranks:
        for batch in batches:
            assert batch and all(isinstance(i, int) for i in batch)
            seen[batch] += 1
            assert len(batch) * lengths[batch].max() <= cfg["token_budget"]
            assert len(set(buckets[batch].tolist())) == 1  # a batch never mixes buckets
            if cfg["packing"] == "fixed":
                k = buckets[batch[0]]
                assert len(batch) <= cfg["token_budget"] // edges[k]
    assert seen.max() <= 1
    if cfg["drop_last"]:
        assert last.dropped == n - seen.sum()
        plan = last.plan()
        assert plan.split_batches == 0
        # only the remainder goes: what does not fill a micro-step, then an optimizer step
        G, A = cfg["world_size"], cfg["grad_accum"]
        assert plan.dropped_batches < (G + G * A if cfg["sync_buckets"] is True else G * A)
    else:
        assert seen.min() == 1 and last.dropped == 0


@SETTINGS
@given(configs(), st.integers(0, 3), st.data())
def test_deterministic_and_exact_resume(cfg, epoch, data):
    sampler = build_or_explain(cfg)
    assume(sampler is not None)
    sampler.set_epoch(epoch)
    full = list(sampler)
    again = BucketBatchSampler(**cfg)
    again.set_epoch(epoch)
    assert list(again) == full  # same seed and epoch: the same batches
    for position in sorted({0, len(full), data.draw(st.integers(0, len(full)))}):
        first = BucketBatchSampler(**cfg)
        first.set_epoch(epoch)
        it = iter(first)
        taken = [next(it) for _ in range(position)]
        assert taken == full[:position]
        state = first.state_dict()
        resumed = BucketBatchSampler(**cfg)
        resumed.load_state_dict(state)
        resumed.set_epoch(epoch)  # a training loop re-selects the epoch: the resume point stays
        assert len(resumed) == len(full) - position
        assert list(resumed) == full[position:]
        assert list(resumed) == full  # the next pass is the whole epoch again


@SETTINGS
@given(st.one_of(configs(), big_configs()))
def test_sync_buckets_lockstep_and_stratified(cfg):
    cfg = {**cfg, "sync_buckets": True, "drop_last": False}
    lengths, edges = cfg["lengths"], np.asarray(cfg["boundaries"])
    G, A = cfg["world_size"], cfg["grad_accum"]
    _, hi = batch_count_bounds(cfg)
    buckets = bucket_of(lengths, edges)
    n_k = np.bincount(buckets)[np.unique(buckets)]
    # every bucket can be split up to a multiple of G on its own: no micro-step mixes buckets
    assume(all(n >= h + G - 1 for n, h in zip(n_k, hi)))
    ranks, sampler = all_ranks(cfg)
    plan = sampler.plan()
    assert plan.mixed_steps == 0
    steps = np.array([[buckets[batch[0]] for batch in r] for r in ranks])  # (G, micro-steps)
    assert (steps == steps[0]).all()  # all ranks in the same bucket at every micro-step
    if any(n - h >= G * (A + 1) for n, h in zip(n_k, hi)):
        assert steps.shape[1] % A == 0  # whole optimizer steps
    # systematic sampling: every prefix of t micro-steps holds each bucket's share of them, +-1
    # plus the spread of the K stream offsets
    seq = steps[0]
    total = seq.size
    K = len(n_k)
    for k in np.unique(seq):
        share = np.count_nonzero(seq == k) / total
        prefix = np.cumsum(seq == k)
        drift = np.abs(prefix - np.arange(1, total + 1) * share)
        assert drift.max() <= 1 + K * share + 1e-9


@SETTINGS
@given(st.one_of(configs(), big_configs()), st.sampled_from([False, "step"]))
def test_unsynced_modes_stratify_every_optimizer_step(cfg, mode):
    cfg = {**cfg, "sync_buckets": mode}
    sampler = build_or_explain(cfg)
    assume(sampler is not None and sampler.plan().n_batches > 0)
    plan = sampler.plan()
    G, A = cfg["world_size"], cfg["grad_accum"]
    seq = plan.buckets
    per_step = G * A
    if mode == "step":  # inside an optimizer step, micro-steps run by bucket
        micro = seq.reshape(-1, G)
        for first in range(0, micro.shape[0], A):
            chunk = micro[first:first + A]
            assert (chunk.max(axis=1)[:-1] <= chunk.min(axis=1)[1:]).all()
    # systematic sampling over batches: at every optimizer-step boundary each bucket has had its
    # share of the batches, within 1 plus the spread of the K offsets
    ends = np.r_[np.arange(per_step, seq.size, per_step), seq.size]
    K = np.unique(seq).size
    if cfg["drop_last"]:
        return  # the dropped tail shifts the shares; the bound holds for the full epoch
    for k in np.unique(seq):
        share = np.count_nonzero(seq == k) / seq.size
        prefix = np.cumsum(seq == k)[ends - 1]
        drift = np.abs(prefix - ends * share)
        assert drift.max() <= 1 + K * share + 1e-9


@SETTINGS
@given(st.lists(st.integers(1, 50), min_size=1, max_size=200), st.integers(50, 400),
       st.lists(st.booleans(), min_size=200, max_size=200))
def test_greedy_kernel_matches_naive(lengths, budget, cuts):
    lengths = np.asarray(lengths, dtype=np.int64)
    segment = np.asarray(cuts[:lengths.size])
    starts = greedy_starts(lengths, segment, np.int64(budget))
    bounds = [*np.flatnonzero(segment).tolist(), lengths.size]
    expected, lo = [], 0
    for hi in bounds:
        if hi > lo:
            expected += [lo + b[0] for b in naive.greedy_pack(lengths[lo:hi].tolist(), budget)]
        lo = hi
    assert starts.tolist() == expected


@SETTINGS
@given(st.lists(st.integers(1, 30), min_size=2, max_size=80), st.data())
def test_step_mix_gap_and_churn_match_naive(lengths, data):
    n = len(lengths)
    perm = data.draw(st.permutations(range(n)))
    cut = sorted(set(data.draw(st.lists(st.integers(1, n - 1), max_size=6))))
    steps = [perm[a:b] for a, b in zip([0, *cut], [*cut, n])]
    gap = step_mix_gap(lengths, steps)
    assert gap == pytest.approx(naive.step_mix_gap(lengths, steps), abs=1e-12)
    assert 0.0 <= gap <= 1.0
    assert step_mix_gap(lengths, [list(range(n))]) == pytest.approx(0.0, abs=1e-12)
    other = [perm[a:b] for a, b in zip([0, *cut[1:]], [*cut[1:], n])]
    assert epoch_churn(steps, other) == pytest.approx(naive.epoch_churn(steps, other))
    assert epoch_churn(steps, [list(reversed(s)) for s in reversed(steps)]) == 1.0


def test_strategies_on_small_data():
    lengths = np.random.default_rng(3).integers(1, 200, 3000)
    edges = [40, 90, 140, 199]
    out = compare_diversity(lengths, edges, token_budget=800, world_size=4, grad_accum=2)
    assert out["sorted"].epoch_churn == 1.0  # static batches
    for name in ("shuffle", "bucketed"):
        assert out[name].epoch_churn < 0.05
        assert out[name].step_mix_gap < out["sorted"].step_mix_gap
    for name in out:
        for epoch in (0, 1):
            batches = strategy_batches(lengths, name, token_budget=800, epoch=epoch,
                                       boundaries=edges, world_size=4, grad_accum=2)
            flat = np.concatenate(batches)
            assert np.array_equal(np.sort(flat), np.arange(lengths.size))
            assert max(len(b) * lengths[b].max() for b in batches) <= 800


def test_epoch_view_is_the_real_order():
    lengths = np.random.default_rng(5).integers(1, 120, 2000)
    sampler = BucketBatchSampler(lengths, [30, 60, 119], token_budget=480, world_size=4,
                                 grad_accum=2, seed=9)
    plan = sampler.plan()
    view = sampler.epoch_view()
    assert view.n_batches == plan.n_batches
    assert view.total_real_tokens == lengths.sum()
    first = plan.batch(0)
    assert view.sizes[0] == first.size and view.real_tokens[0] == lengths[first].sum()
    assert np.array_equal(view.buckets, plan.buckets)
    edge = sampler.epoch_view(pad="edge")
    assert set(np.unique(edge.padded_lens).tolist()) <= {30, 60, 119}


def test_embedded_example_diversity_targets():
    import bucketopt
    from bucketopt.datasets import seed_like

    lengths = seed_like()
    edges = bucketopt.solve(lengths, 6, token_budget=65536).boundaries
    synced = compare_diversity(lengths, edges, token_budget=65536, world_size=8, grad_accum=4)
    assert synced["sorted"].epoch_churn == 1.0
    assert synced["bucketed"].epoch_churn < 0.01
    # one bucket per micro-step cannot reach half of sorted's gap here (an LP over all step
    # compositions puts the floor at 0.30: docs/sampler.md); the modes that spread batches do
    for mode in (False, "step"):
        free = compare_diversity(lengths, edges, token_budget=65536, world_size=8, grad_accum=4,
                                 strategies=("bucketed",), sync_buckets=mode)
        assert free["bucketed"].epoch_churn < 0.01
        assert free["bucketed"].step_mix_gap <= synced["sorted"].step_mix_gap / 2


@pytest.mark.parametrize("kwargs, match", [
    ({"rank": 8, "world_size": 8}, "rank"),
    ({"rank": -1}, "rank"),
    ({"world_size": 0}, "world_size"),
    ({"grad_accum": 0}, "grad_accum"),
    ({"grad_accum": 1.5}, "grad_accum"),
    ({"packing": "best"}, "packing"),
    ({"seed": -3}, "seed"),
    ({"sync_buckets": "yes"}, "sync_buckets"),
    ({"drop_last": None}, "drop_last"),
    ({"token_budget": None}, "token_budget"),
    ({"token_budget": 50}, "longest sample"),
    ({"token_budget": 80, "boundaries": [20, 90]}, "exceeds token_budget"),
    ({"boundaries": [20, 40]}, "longest"),
    ({"boundaries": [40, 20, 60]}, "increasing"),
    ({"lengths": [3, 0, 5]}, "positive"),
    ({"lengths": []}, "empty"),
    ({"lengths": Histogram.from_lengths([5, 60])}, "dataset order"),
])
def test_bad_input_is_one_clear_error(kwargs, match):
    args = {"lengths": [5, 60, 30, 12], "boundaries": [20, 60], "token_budget": 120, **kwargs}
    with pytest.raises(BucketoptError, match=match):
        BucketBatchSampler(args.pop("lengths"), args.pop("boundaries"), **args)


def test_too_few_samples_for_the_ranks():
    with pytest.raises(BucketoptError, match="drop_last=True"):
        BucketBatchSampler([5, 6, 7], [7], token_budget=7, world_size=8)
    sampler = BucketBatchSampler([5, 6, 7], [7], token_budget=7, world_size=8, drop_last=True)
    assert len(sampler) == 0 and sampler.dropped == 3


def test_state_must_match_the_configuration():
    lengths = np.arange(1, 200)
    sampler = BucketBatchSampler(lengths, [50, 199], token_budget=400, world_size=2)
    state = json.loads(json.dumps(sampler.state_dict()))  # checkpoints may be JSON
    sampler.load_state_dict(state)
    with pytest.raises(BucketoptError, match="fingerprint"):
        BucketBatchSampler(lengths, [50, 199], token_budget=400, world_size=4).load_state_dict(
            state)
    with pytest.raises(BucketoptError, match="seed"):
        BucketBatchSampler(lengths, [50, 199], token_budget=400, world_size=2,
                           seed=1).load_state_dict(state)
    with pytest.raises(BucketoptError, match="position"):
        sampler.load_state_dict({**state, "position": len(sampler) + 1})
    with pytest.raises(BucketoptError, match="missing"):
        sampler.load_state_dict({"epoch": 0})
    with pytest.raises(BucketoptError, match="dict"):
        sampler.load_state_dict([1, 2])
    # rank 0's state resumes every rank: all ranks are at the same position
    other = BucketBatchSampler(lengths, [50, 199], token_budget=400, world_size=2, rank=1)
    sampler.set_epoch(1)
    it = iter(sampler)
    next(it), next(it)
    other.load_state_dict(sampler.state_dict())
    assert other.epoch == 1 and len(other) == len(sampler) - 2
    other.set_epoch(2)  # another epoch: the resume point no longer applies
    assert len(other) == other.plan(2).micro_steps


def test_measure_validates_steps():
    with pytest.raises(BucketoptError):
        step_mix_gap([1, 2, 3], [[0, 5]])
    with pytest.raises(BucketoptError):
        step_mix_gap([1, 2, 3], [])
    d = measure([1, 2, 3, 4], [[0], [1], [2], [3]], [[1], [0], [3], [2]], world_size=2,
                grad_accum=1)
    assert d.epoch_churn == 1.0 and d.n_steps == 2


def test_simulated_ddp_run_world_size_8():
    """Eight ranks, grad_accum 4, two epochs, a crash and restart from rank 0's checkpoint."""
    lengths = np.random.default_rng(8).integers(1, 500, 20_000)
    edges = [64, 128, 256, 499]
    world, accum = 8, 4

    def start():
        return [BucketBatchSampler(lengths, edges, token_budget=2048, rank=r, world_size=world,
                                   grad_accum=accum, seed=123) for r in range(world)]

    ranks = start()
    buckets = bucket_of(lengths, np.asarray(edges))
    for epoch in (0, 1):
        for sampler in ranks:
            sampler.set_epoch(epoch)
        seen = []
        iters = [iter(s) for s in ranks]
        micro = 0
        while True:
            batches = [next(it, None) for it in iters]
            if all(b is None for b in batches):
                break
            assert all(b is not None for b in batches)  # nobody runs out early: no hang
            assert len({buckets[b[0]] for b in batches}) == 1  # same bucket on every rank
            seen += [i for b in batches for i in b]
            micro += 1
            if epoch == 1 and micro == 37:  # crash after 37 micro-steps; rank 0 saved state
                state = ranks[0].state_dict()
                ranks = start()
                for sampler in ranks:
                    sampler.load_state_dict(state)
                    sampler.set_epoch(epoch)
                iters = [iter(s) for s in ranks]
        assert micro % accum == 0  # whole optimizer steps
        assert sorted(seen) == list(range(lengths.size))
    unsynced = BucketBatchSampler(lengths, edges, token_budget=2048, world_size=world,
                                  grad_accum=accum, sync_buckets=False)
    assert unsynced.plan().mixed_steps > 0  # without sync_buckets ranks do hold other buckets


def test_comparison_diversity_and_sampler_epochs():
    from bucketopt.diversity import comparison_diversity, sampler_epochs

    lengths = np.random.default_rng(4).integers(1, 300, 4000)
    edges = [50, 120, 200, 299]
    out = comparison_diversity(lengths, edges, token_budget=1200, world_size=4, grad_accum=2)
    assert set(out) == {"sorted", "shuffle", "bucketed", "sampler"}
    assert out["sorted"]["epoch_churn"] == 1.0
    for fields in out.values():
        assert 0.0 <= fields["step_mix_gap"] <= 1.0 and 0.0 <= fields["epoch_churn"] <= 1.0
    eps = sampler_epochs(lengths, edges, token_budget=1200, world_size=4, grad_accum=2, epochs=2)
    plans = BucketBatchSampler(lengths, edges, token_budget=1200, world_size=4, grad_accum=2)
    for e, epoch in enumerate(eps):
        assert epoch.n_batches == plans.plan(e).n_batches
        assert epoch.total_real_tokens == lengths.sum()
        assert (epoch.computed_tokens <= 1200).all()


def test_compare_cli_reports_diversity(tmp_path, capsys):
    from bucketopt.cli import main

    lengths = np.random.default_rng(6).integers(20, 2000, 3000)
    path = tmp_path / "lens.npy"
    np.save(path, lengths)
    argv = ["compare", "--lens", str(path), "-k", "3", "--token-budget", "4096", "--gpus", "4",
            "--grad-accum", "2", "--json"]
    assert main([*argv, "--sampler"]) == 0
    rows = json.loads(capsys.readouterr().out)["strategies"]
    for name in ("sorted", "shuffle", "bucketed", "sampler"):
        assert 0.0 <= rows[name]["step_mix_gap"] <= 1.0
        assert rows[name]["diversity_ranks"] == 4 and rows[name]["grad_accum"] == 2
    assert rows["sorted"]["epoch_churn"] == 1.0
    assert rows["sampler"]["real_tokens"] == lengths.sum()
    assert rows["sampler"]["boundaries"] == rows["bucketed"]["boundaries"]
    assert main([*argv, "--no-diversity"]) == 0
    rows = json.loads(capsys.readouterr().out)["strategies"]
    assert "sampler" not in rows and all("step_mix_gap" not in r for r in rows.values())
    assert main(argv[:-1]) == 0
    assert "step mix gap" in capsys.readouterr().out
