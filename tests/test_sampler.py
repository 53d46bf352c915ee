"""BucketBatchSampler and the diversity metrics: invariants over random configurations."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from bucketopt import BucketBatchSampler, BucketoptError
from bucketopt.data.histogram import Histogram
from bucketopt.training.diversity import (
    compare_diversity,
    epoch_churn,
    measure,
    step_mix_gap,
    strategy_batches,
)

from . import naive

SETTINGS = settings(max_examples=int(os.environ.get("BUCKETOPT_SAMPLER_EXAMPLES", "120")),
                    deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@st.composite
def configs(draw, fit_grad_accum=False):
    """Small random configurations; ``fit_grad_accum`` lowers grad_accum to at most the
    batches per rank of an epoch (more is refused: see build_or_explain)."""
    lengths = draw(st.lists(st.integers(1, 60), min_size=1, max_size=150))
    top = max(lengths)
    inner = draw(st.lists(st.integers(1, max(1, top - 1)), max_size=5))
    edges = sorted({x for x in inner if x < top} | {top + draw(st.integers(0, 4))})
    token_budget = edges[-1] + draw(st.sampled_from([0, 0, 1, 7, 30, 100, 400]))
    cfg = dict(
        lengths=np.asarray(lengths), boundaries=edges, token_budget=token_budget,
        world_size=draw(st.integers(1, 16)), grad_accum=draw(st.integers(1, 8)),
        packing=draw(st.sampled_from(["fixed", "greedy"])),
        sync_buckets=draw(st.sampled_from([True, False, "step"])),
        drop_last=draw(st.booleans()), seed=draw(st.integers(0, 2**32)),
    )
    if fit_grad_accum:
        try:
            steps = BucketBatchSampler(**{**cfg, "grad_accum": 1}).plan(0).micro_steps
        except BucketoptError:
            steps = 0
        cfg["grad_accum"] = max(1, min(cfg["grad_accum"], steps))
    return cfg


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
    n, G, A = cfg["lengths"].size, cfg["world_size"], cfg["grad_accum"]
    lo, hi = batch_count_bounds(cfg)
    try:
        return BucketBatchSampler(**cfg)
    except BucketoptError as exc:
        message = str(exc)
        if message.startswith("drop_last=True leaves no batch"):
            assert cfg["drop_last"] and sum(lo) < G  # not even one batch per rank
        elif message.startswith(f"grad_accum={A} is more than"):
            # an epoch shorter than one optimizer step: the same plan with grad_accum=1 has
            # fewer than grad_accum batches per rank
            assert BucketBatchSampler(**{**cfg, "grad_accum": 1}).plan(0).micro_steps < A
        else:
            assert not cfg["drop_last"]
            assert "world_size" in message
            assert -(-sum(hi) // G) * G > n
        return None


@SETTINGS
@given(configs(), st.integers(0, 3))
def test_every_index_once_equal_ranks_within_budget(cfg, epoch):
    sampler = build_or_explain(cfg)
    n, G = cfg["lengths"].size, cfg["world_size"]
    _, hi = batch_count_bounds(cfg)
    if not cfg["drop_last"] and -(-sum(hi) // G) * G > n:
        # refused when fixed packing's count (greedy's most) cannot be split evenly
        assert sampler is None
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
@given(configs(fit_grad_accum=True), st.integers(0, 3), st.data())
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
    sampler = build_or_explain(cfg)
    assume(sampler is not None)
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
@given(st.one_of(configs(fit_grad_accum=True), big_configs()), st.sampled_from([False, "step"]))
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
    with pytest.raises(BucketoptError, match=r"^drop_last=True leaves no batch: 3 samples"):
        BucketBatchSampler([5, 6, 7], [7], token_budget=7, world_size=8, drop_last=True)
    sampler = BucketBatchSampler([5, 6, 7], [7], token_budget=7, world_size=2, drop_last=True)
    assert len(sampler) == 1 and sampler.dropped == 1


def test_state_must_match_the_configuration():
    lengths = np.arange(1, 200)
    sampler = BucketBatchSampler(lengths, [50, 199], token_budget=400, world_size=2)
    state = json.loads(json.dumps(sampler.state_dict()))  # checkpoints may be JSON
    sampler.load_state_dict(state)
    # the message names the setting that differs, with both values
    for change, expected in [
        ({"token_budget": 800}, r"token_budget=400 \(this sampler: token_budget=800\)"),
        ({"boundaries": [60, 199]}, r"boundaries=\[50, 199\] \(this sampler: boundaries=\[60"),
        ({"packing": "greedy"}, r"packing='fixed' \(this sampler: packing='greedy'\)"),
        ({"drop_last": True}, r"drop_last=False \(this sampler: drop_last=True\)"),
        ({"sync_buckets": "step"}, r"sync_buckets=True \(this sampler: sync_buckets='step'\)"),
        ({"lengths": lengths[::-1]}, r"the lengths differ"),
        ({"lengths": lengths[1:]}, r"samples=199 \(this sampler: 198\)"),
        ({"seed": 1}, r"state seed=0 does not match this sampler's seed=1"),
    ]:
        kwargs = {"lengths": lengths, "boundaries": [50, 199], "token_budget": 400,
                  "world_size": 2, **change}
        other = BucketBatchSampler(kwargs.pop("lengths"), kwargs.pop("boundaries"), **kwargs)
        with pytest.raises(BucketoptError, match=expected):
            other.load_state_dict(state)
    # two settings differ: both are named
    other = BucketBatchSampler(lengths, [50, 199], token_budget=800, packing="greedy")
    with pytest.raises(BucketoptError, match="token_budget=400.*; packing='fixed'"):
        other.load_state_dict(state)
    with pytest.raises(BucketoptError, match="edited or corrupted"):
        sampler.load_state_dict({**state, "fingerprint": "0" * 16})
    with pytest.raises(BucketoptError, match="position"):
        sampler.load_state_dict({**state, "position": len(sampler) + 1})
    with pytest.raises(BucketoptError, match="missing"):
        sampler.load_state_dict({"epoch": 0})
    with pytest.raises(BucketoptError, match="dict"):
        sampler.load_state_dict([1, 2])
    with pytest.raises(BucketoptError, match="segments"):
        sampler.load_state_dict({**state, "segments": [[2, 1]]})
    with pytest.raises(BucketoptError, match="segments"):
        sampler.load_state_dict({**state, "segments": [[2, 1, 0]] * 100})
    # rank 0's state resumes every rank: all ranks are at the same position
    other = BucketBatchSampler(lengths, [50, 199], token_budget=400, world_size=2, rank=1)
    sampler.set_epoch(1)
    it = iter(sampler)
    next(it), next(it)
    other.load_state_dict(sampler.state_dict())
    assert other.epoch == 1 and len(other) == len(sampler) - 2
    other.set_epoch(2)  # another epoch: the resume point no longer applies
    assert len(other) == other.plan(2).micro_steps


def test_version_1_states_still_resume():
    from bucketopt.training.sampler import _legacy_fingerprint

    lengths = np.arange(1, 200)
    sampler = BucketBatchSampler(lengths, [50, 199], token_budget=400, world_size=2)
    full = list(sampler)
    legacy = {"version": 1, "epoch": 0, "position": 3, "seed": 0,
              "fingerprint": _legacy_fingerprint(sampler)}
    sampler.load_state_dict(legacy)
    assert list(sampler) == full[3:]
    other = BucketBatchSampler(lengths, [50, 199], token_budget=400, world_size=4)
    with pytest.raises(BucketoptError, match="version 1"):
        other.load_state_dict(legacy)


def test_position_past_the_epoch_and_tiny_epochs_are_refused():
    lengths = np.random.default_rng(0).integers(1, 100, 40)
    sampler = BucketBatchSampler(lengths, [50, 99], token_budget=500)
    steps = len(sampler)
    with pytest.raises(BucketoptError, match=rf"^position must be <= {steps} .*got 1000000000"):
        sampler.state_dict(position=10**9)
    with pytest.raises(BucketoptError, match="`position` must be an integer >= 0; got -1."):
        sampler.state_dict(position=-1)
    assert sampler.state_dict(position=steps)["position"] == steps
    # grad_accum above the batches per rank would have split every batch to single samples
    with pytest.raises(BucketoptError, match=rf"^grad_accum={steps + 1} is more than the {steps} "):
        BucketBatchSampler(lengths, [50, 99], token_budget=500, grad_accum=steps + 1)
    exact = BucketBatchSampler(lengths, [50, 99], token_budget=500, grad_accum=steps)
    assert exact.plan().split_batches <= 1 and min(exact.plan().sizes) > 1


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


def test_row_diversity_and_sampler_epochs():
    from bucketopt.training.diversity import row_diversity, sampler_epochs

    lengths = np.random.default_rng(4).integers(1, 300, 4000)
    edges = [50, 120, 200, 299]
    out = row_diversity(lengths, edges, token_budget=1200, world_size=4, grad_accum=2)
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


def consume(samplers, steps):
    """Iterate every rank ``steps`` batches; returns their batches and the open iterators."""
    its = [iter(s) for s in samplers]
    taken = [[next(it) for _ in range(steps)] for it in its]
    return taken, its


def rest_is_feasible(cfg, rest, world_size):
    """Whether the remaining samples can be split evenly over ``world_size`` ranks (the
    fixed-packing count bounds greedy's)."""
    if cfg["drop_last"] or not rest:
        return True
    _, hi = batch_count_bounds({**cfg, "lengths": cfg["lengths"][rest]})
    return -(-sum(hi) // world_size) * world_size <= len(rest)


@SETTINGS
@given(configs(fit_grad_accum=True), st.integers(0, 2), st.data())
def test_elastic_resume_keeps_every_index_exactly_once(cfg, epoch, data):
    sampler = build_or_explain(cfg)
    assume(sampler is not None)
    G = cfg["world_size"]
    sampler.set_epoch(epoch)
    steps = len(sampler)
    position = data.draw(st.integers(0, steps), label="position")
    old = [BucketBatchSampler(**cfg, rank=r) for r in range(G)]
    for s in old:
        s.set_epoch(epoch)
    taken, _ = consume(old, position)
    state = json.loads(json.dumps(old[0].state_dict()))
    consumed = [i for rank in taken for b in rank for i in b]
    kept = set(old[0].plan(epoch).order[np.concatenate(
        [np.arange(a, b) for a, b in zip(old[0].plan().starts, old[0].plan().stops)]
        or [np.zeros(0, int)])].tolist())  # the samples the epoch keeps (all but drop_last's)
    rest = sorted(kept - set(consumed))
    for hop in range(2):  # G -> G' -> G'': two elastic resumes inside one epoch
        G2 = data.draw(st.integers(1, 12), label=f"world size {hop}")
        A2 = data.draw(st.integers(1, 4), label=f"grad_accum {hop}")
        kwargs = {**cfg, "world_size": G2, "grad_accum": A2}
        if build_or_explain(kwargs) is None:  # refused as a whole (checked there)
            return
        new = [BucketBatchSampler(**kwargs, rank=r) for r in range(G2)]
        try:
            for s in new:
                s.load_state_dict(state)
        except BucketoptError as exc:
            assert str(exc).startswith(f"cannot resume at world_size={G2}")
            assert not rest_is_feasible(cfg, rest, G2)
            return
        for s in new:
            s.set_epoch(epoch)  # the loop re-selects the epoch: the re-planned rest stays
        counts = {len(s) for s in new}
        assert len(counts) == 1  # every rank the same number of batches
        n_rest = counts.pop()
        out = [list(s) for s in new]
        got = [i for rank in out for b in rank for i in b]
        lengths, edges = cfg["lengths"], np.asarray(cfg["boundaries"])
        for b in (b for rank in out for b in rank):
            assert len(b) * lengths[b].max() <= cfg["token_budget"]
            assert np.unique(bucket_of(lengths[b], edges)).size == 1
        if cfg["drop_last"]:
            assert len(set(got)) == len(got) and set(got) <= set(rest)
        else:
            assert sorted(got) == rest  # every remaining sample exactly once
        # stop part-way through the rest and hop again
        cut = data.draw(st.integers(0, n_rest), label=f"cut {hop}")
        for s in new:
            s.load_state_dict(state)
        taken, _ = consume(new, cut)
        done = {i for rank in taken for b in rank for i in b}
        state = json.loads(json.dumps(new[0].state_dict()))
        rest = sorted(set(rest) - done) if not cfg["drop_last"] else sorted(set(got) - done)
        if cfg["drop_last"]:
            return  # a re-plan may drop more: "at most once" was checked above
    # the next epoch is a whole epoch at the new world size
    new[0].set_epoch(epoch + 1)
    assert new[0].plan().segments == () and len(new[0]) == new[0].plan(epoch + 1).micro_steps


def test_elastic_resume_from_8_to_3_ranks():
    lengths = np.random.default_rng(5).integers(1, 400, 3000)
    edges, budget = [64, 128, 256, 400], 1600
    old = [BucketBatchSampler(lengths, edges, token_budget=budget, world_size=8, rank=r,
                              grad_accum=2, seed=3) for r in range(8)]
    for s in old:
        s.set_epoch(1)
    steps = len(old[0])
    taken, _ = consume(old, steps // 3)
    state = old[3].state_dict()  # any rank's state: all ranks are at the same position
    assert state["world_size"] == 8 and state["position"] == steps // 3
    new = [BucketBatchSampler(lengths, edges, token_budget=budget, world_size=3, rank=r,
                              grad_accum=2, seed=3) for r in range(3)]
    for s in new:
        s.load_state_dict(state)
        s.set_epoch(1)
    assert len({len(s) for s in new}) == 1
    rest = [list(s) for s in new]
    seen = [i for part in (taken, rest) for rank in part for b in rank for i in b]
    assert sorted(seen) == list(range(lengths.size))  # exactly once over both world sizes
    plan = new[0].plan()
    assert plan.segments == ((8, 2, steps // 3),) and plan.mixed_steps == 0
    for b in (b for rank in rest for b in rank):
        assert len(b) * lengths[b].max() <= budget
    # a state taken after the elastic resume resumes again, at any world size
    for s in new:
        s.load_state_dict(state)
    taken2, _ = consume(new, 5)
    again = [BucketBatchSampler(lengths, edges, token_budget=budget, world_size=5, rank=r,
                                grad_accum=2, seed=3) for r in range(5)]
    for s in again:
        s.load_state_dict(new[0].state_dict())
    rest2 = [list(s) for s in again]
    seen = [i for part in (taken, taken2, rest2) for rank in part for b in rank for i in b]
    assert sorted(seen) == list(range(lengths.size))
    # at the same world size the state is a plain position: the uninterrupted batches
    same = BucketBatchSampler(lengths, edges, token_budget=budget, world_size=3, rank=1,
                              grad_accum=2, seed=3)
    same.load_state_dict(new[0].state_dict())
    assert list(same) == rest[1][5:]


def test_state_dict_refuses_a_guess_while_a_loader_runs_ahead():
    lengths = np.random.default_rng(1).integers(1, 100, 400)
    sampler = BucketBatchSampler(lengths, [50, 99], token_budget=500)
    it = iter(sampler)  # iterated directly: what it handed out is what the loop has
    next(it), next(it)
    assert sampler.state_dict()["position"] == 2
    tracked = BucketBatchSampler(lengths, [50, 99], token_budget=500)
    loader = tracked.track(tracked)  # any iterable over the sampler's batches
    seen = []
    for batch in loader:
        seen.append(batch)
        if len(seen) == 3:
            break
    assert tracked.state_dict()["position"] == tracked.consumed == 3
    with pytest.raises(BucketoptError, match="batches=100 would bring the consumed count"):
        tracked.mark_consumed(100)


def test_per_sample_passes_run_in_chunks_with_the_same_results():
    from bucketopt.training import sampler as mod

    rng = np.random.default_rng(5)
    lengths = rng.integers(1, 5_000, size=mod.CHUNK * 2 + 17)
    edges = np.array([100, 900, 2_500, 5_000])
    ids = mod._bucket_ids(edges, lengths)
    assert ids.dtype.itemsize == 1  # 4 buckets: one byte per sample
    assert np.array_equal(ids, np.searchsorted(edges, lengths, side="left"))
    import hashlib

    whole = hashlib.sha256(lengths.astype(np.int64).tobytes()).hexdigest()[:16]
    assert mod._digest(lengths.astype(np.int32)) == whole  # chunked, any integer dtype
