"""BucketBatchSampler on pairs with 2-D bins: the 1-D guarantees (every sample once per epoch
over all ranks, one bin per batch within its batch size, the same bin on every rank, exact and
elastic resume), and the plan file of a 2-D plan (fingerprint, checksum, from_plan)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bucketopt
from bucketopt import BucketBatchSampler
from bucketopt.errors import BucketoptError
from bucketopt.pairs import assign_bins
from bucketopt.plan import load_plan, plan_text

from .test_sampler import consume


def _pairs(n, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(1, 120, n)
    return np.stack([a, np.maximum(1, a // 2 + rng.integers(-10, 40, n))], axis=1)


def _check_batches(pairs, sol, ranks, budget):
    ids = assign_bins(pairs[:, 0], pairs[:, 1], np.array(sol.bins))
    for rank in ranks:
        for batch in rank:
            (t,) = set(ids[batch].tolist())  # one bin per batch
            e0, e1 = sol.bins[t]
            assert len(batch) <= budget // (e0 + e1)
            assert (pairs[batch, 0] <= e0).all() and (pairs[batch, 1] <= e1).all()
    steps = np.array([[ids[b[0]] for b in rank] for rank in ranks])
    assert (steps == steps[0]).all()  # every rank in the same bin at each micro-step


@settings(max_examples=25, deadline=None)
@given(st.integers(50, 400), st.integers(0, 10**6), st.integers(1, 4), st.integers(1, 3),
       st.integers(0, 3))
def test_every_sample_once_per_epoch_over_ranks(n, seed, world, k_extra, epoch):
    pairs = _pairs(n, seed)
    budget = 1200
    sol = bucketopt.solve(pairs, 2 + k_extra, token_budget=budget)
    try:
        ranks = [BucketBatchSampler(pairs, sol.bins, token_budget=budget, world_size=world,
                                    rank=r, seed=seed) for r in range(world)]
    except BucketoptError as exc:  # too few batches for the ranks: refused at once
        assert "world_size" in str(exc)
        return
    for s in ranks:
        s.set_epoch(epoch)
    batches = [list(s) for s in ranks]
    seen = sorted(i for rank in batches for b in rank for i in b)
    assert seen == list(range(n))
    _check_batches(pairs, sol, batches, budget)


def test_exact_and_elastic_resume():
    pairs = _pairs(3000, 2)
    budget = 1600
    sol = bucketopt.solve(pairs, 8, token_budget=budget)
    old = [BucketBatchSampler(pairs, sol.bins, token_budget=budget, world_size=4, rank=r,
                              grad_accum=2, seed=3) for r in range(4)]
    for s in old:
        s.set_epoch(1)
    steps = len(old[0])
    taken, _ = consume(old, steps // 3)
    state = json.loads(json.dumps(old[2].state_dict()))
    new = [BucketBatchSampler(pairs, sol.bins, token_budget=budget, world_size=3, rank=r,
                              grad_accum=2, seed=3) for r in range(3)]
    for s in new:
        s.load_state_dict(state)
        s.set_epoch(1)
    rest = [list(s) for s in new]
    seen = [i for part in (taken, rest) for rank in part for b in rank for i in b]
    assert sorted(seen) == list(range(len(pairs)))  # exactly once over both world sizes
    _check_batches(pairs, sol, rest, budget)
    same = BucketBatchSampler(pairs, sol.bins, token_budget=budget, world_size=4, rank=1,
                              grad_accum=2, seed=3)
    same.load_state_dict(state)
    same.set_epoch(1)
    full = BucketBatchSampler(pairs, sol.bins, token_budget=budget, world_size=4, rank=1,
                              grad_accum=2, seed=3)
    full.set_epoch(1)
    assert list(same) == list(full)[steps // 3:]  # exact resume: the uninterrupted batches
    other = _pairs(3000, 9)
    other_sol = bucketopt.solve(other, 8, token_budget=budget)
    moved = BucketBatchSampler(other, other_sol.bins, token_budget=budget, world_size=4,
                               rank=1, grad_accum=2, seed=3)
    with pytest.raises(BucketoptError):
        moved.load_state_dict(state)  # a state of other pairs / bins is refused


def test_plan_round_trip_and_from_plan(tmp_path):
    pairs = _pairs(800, 4)
    sol = bucketopt.solve(pairs, None, grid=(3, 2), token_budget=1000)
    plan = sol.to_plan()
    assert plan["kind"] == "2d" and plan["bins"] == [list(b) for b in sol.bins]
    assert plan["batch_sizes"] == list(sol.batch_sizes) and plan["grid"] == [3, 2]
    assert plan["optimality"]["exact"] is True and plan["predictions"]["unassigned"] == 0
    path = tmp_path / "plan.json"
    path.write_text(plan_text(plan))
    assert load_plan(str(path)) == load_plan(plan)
    sampler = BucketBatchSampler.from_plan(str(path), pairs)
    batches = list(sampler)
    assert sorted(i for b in batches for i in b) == list(range(len(pairs)))
    _check_batches(pairs, sol, [batches], 1000)
    with pytest.raises(BucketoptError, match="other lengths"):
        BucketBatchSampler.from_plan(plan, _pairs(800, 5))
    tampered = {**plan, "bins": [[b[0], b[1] + 1] for b in plan["bins"]]}
    with pytest.raises(BucketoptError, match="batch_sizes|checksum"):
        load_plan(tampered)
    with pytest.raises(BucketoptError, match="checksum"):
        load_plan({**plan, "k": 7})


def test_cli_solve_writes_a_2d_plan(tmp_path, capsys):
    from bucketopt.cli import main

    pairs = _pairs(500, 6)
    np.save(tmp_path / "p.npy", pairs)
    assert main(["solve", "--lens", str(tmp_path / "p.npy"), "-k", "5", "--token-budget",
                 "900", "-o", str(tmp_path / "plan.json")]) == 0
    plan = load_plan(str(tmp_path / "plan.json"))
    assert plan["bins"] == [list(b) for b in bucketopt.solve(pairs, 5, token_budget=900).bins]


def test_bad_bins_for_the_sampler():
    pairs = _pairs(200, 1)
    with pytest.raises(BucketoptError, match="fit no bin"):
        BucketBatchSampler(pairs, [(10, 10), (119, 30)], token_budget=500)
    sol = bucketopt.solve(pairs, 3, token_budget=500)
    with pytest.raises(BucketoptError, match="packing"):
        BucketBatchSampler(pairs, sol.bins, token_budget=500, packing="varlen")


def test_stream_batcher_runs_a_2d_plan():
    from bucketopt.training.streaming import StreamBatcher

    pairs = _pairs(600, 8)
    sol = bucketopt.solve(pairs, 5, token_budget=1000)
    plan = sol.to_plan()
    items = list(range(len(pairs)))
    ranks = [StreamBatcher.from_plan(plan, items, length=lambda i: tuple(pairs[i]),
                                     lengths=pairs, world_size=2, rank=r, buffer_size=2000)
             for r in range(2)]
    batches = [list(b) for b in ranks]
    assert sorted(i for rank in batches for b in rank for i in b) == items
    _check_batches(pairs, sol, [[b for rank in batches for b in rank]], 1000)
    with pytest.raises(BucketoptError, match="other lengths"):
        StreamBatcher.from_plan(plan, items, length=lambda i: tuple(pairs[i]),
                                lengths=_pairs(600, 9))
    bad = StreamBatcher.from_plan(plan, [0], length=lambda i: (10**6, 1), buffer_size=2000)
    with pytest.raises(BucketoptError, match="fits no bin"):
        list(bad)
