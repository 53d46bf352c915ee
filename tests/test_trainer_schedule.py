"""The Trainer's step accounting from the sampler's plans (bucketopt.integrations._schedule): pure
Python, checked against a walk over the plans epoch by epoch and over every checkpoint a run
could resume from (hypothesis), without transformers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bucketopt import BucketBatchSampler, BucketoptError
from bucketopt.integrations._schedule import trainer_schedule


def sampler_of(lengths, world_size=1, grad_accum=2, packing="varlen-balanced", seed=4):
    return BucketBatchSampler(lengths, None if packing.startswith("varlen") else [32, 64, 96],
                              token_budget=384, seed=seed, packing=packing,
                              world_size=world_size, grad_accum=grad_accum)


def lengths_of(n, seed=3):
    return np.random.default_rng(seed).integers(2, 97, n)


def updates(sampler, epoch):
    return -(-sampler.plan(epoch).micro_steps // sampler.grad_accum)


def checkpoint(sampler, epoch, step_in_epoch, first_step):
    """The state BucketedTrainer saves after ``step_in_epoch`` optimizer steps of ``epoch``."""
    sampler.set_epoch(epoch)
    position = min(step_in_epoch * sampler.grad_accum, sampler.plan(epoch).micro_steps)
    state = sampler.state_dict(position=position)
    state["trainer"] = {"global_step": first_step + step_in_epoch, "epoch_first_step": first_step}
    return state


def test_a_fresh_run_counts_every_epoch_from_its_plan():
    sampler = sampler_of(lengths_of(200))
    counts = [sampler.plan(e).micro_steps for e in range(3)]
    assert counts[0] != counts[1]  # packed rows: epochs differ
    s = trainer_schedule(sampler, num_train_epochs=3)
    assert s.max_steps == sum(-(-c // 2) for c in counts) and s.num_epochs == 3
    assert [s.batches(e) for e in range(3)] == counts
    half = trainer_schedule(sampler, num_train_epochs=1.5)
    assert half.num_epochs == 2 and half.max_steps == -(-counts[0] // 2) + -(-counts[1] // 4)
    capped = trainer_schedule(sampler, num_train_epochs=1, max_steps=20)
    assert capped.max_steps == 20 and capped.num_epochs == 2  # 14 in epoch 0, 6 in epoch 1


@settings(max_examples=40, deadline=None)
@given(st.integers(60, 300), st.integers(1, 3), st.integers(1, 3), st.integers(0, 10**6),
       st.sampled_from(["fixed", "greedy", "varlen", "varlen-balanced"]), st.booleans())
def test_every_checkpoint_resumes_on_the_uninterrupted_schedule(n, world_size, grad_accum, pick,
                                                                 packing, with_state):
    lengths = lengths_of(n, seed=n)
    try:
        fresh = trainer_schedule(sampler_of(lengths, world_size, grad_accum, packing),
                                 num_train_epochs=2)
    except BucketoptError:  # too little data for the ranks and steps: refused up front
        return
    # every optimizer step of the run is a checkpoint; pick one
    steps = [(e, k, first) for e, first in ((0, 0), (1, fresh.updates(0)))
             for k in range(1, fresh.updates(e) + 1)]
    epoch, k, first = steps[pick % len(steps)]
    global_step = first + k
    resumed_sampler = sampler_of(lengths, world_size, grad_accum, packing)
    state = checkpoint(sampler_of(lengths, world_size, grad_accum, packing), epoch, k, first)
    s = trainer_schedule(resumed_sampler, num_train_epochs=2, global_step=global_step,
                         state=state if with_state else None, resume=True)
    assert s.max_steps == fresh.max_steps and s.num_epochs == 2
    if k == fresh.updates(epoch):  # the checkpoint closed its epoch
        assert (s.start_epoch, s.start_batches, s.first_step) == (epoch + 1, 0, global_step)
    else:
        assert (s.start_epoch, s.start_batches, s.first_step) == (epoch, k * grad_accum, first)
        assert s.batches(epoch) == fresh.batches(epoch)
        assert resumed_sampler.epoch == epoch and resumed_sampler.consumed == k * grad_accum
        rest = [list(b) for b in resumed_sampler]
        whole = sampler_of(lengths, world_size, grad_accum, packing)
        whole.set_epoch(epoch)
        assert rest == [list(b) for b in whole][k * grad_accum:]  # exactly where it stopped


@settings(max_examples=25, deadline=None)
@given(st.integers(150, 300), st.integers(1, 3), st.integers(1, 3), st.integers(1, 3),
       st.integers(1, 3), st.integers(0, 10**6))
def test_an_elastic_resume_counts_the_replanned_rest(n, old_ws, old_ga, new_ws, new_ga, pick):
    if (old_ws, old_ga) == (new_ws, new_ga):
        return  # not elastic: the test above
    lengths = lengths_of(n, seed=n)
    try:
        old = sampler_of(lengths, old_ws, old_ga)
        new = sampler_of(lengths, new_ws, new_ga)
    except BucketoptError:
        return
    k = 1 + pick % updates(old, 0)
    state = checkpoint(old, 0, k, 0)
    try:
        s = trainer_schedule(new, num_train_epochs=2, global_step=k, state=state, resume=True)
    except BucketoptError:  # a rest too small for the new ranks: the sampler refuses it
        return
    if k == updates(old, 0):
        assert s.start_epoch == 1 and s.max_steps == k + updates(new, 1)
        return
    rest = new.plan().micro_steps  # the re-planned rest of epoch 0 at the new layout
    assert (s.start_epoch, s.start_batches, s.first_step) == (0, k * new_ga, 0)
    assert s.batches(0) == k * new_ga + rest
    assert s.max_steps == k + -(-rest // new_ga) + updates(new, 1)
    # every sample of epoch 0 exactly once: the old ranks' consumed part, then the new rest
    done = [i for r in range(old_ws) for b in old.plan(0).batches(r)[:k * old_ga] for i in b]
    again = [i for r in range(new_ws) for b in new.plan().batches(r) for i in b]
    assert sorted(done + again) == list(range(n))


def test_states_that_disagree_with_the_trainer_are_refused():
    lengths = lengths_of(200)
    state = checkpoint(sampler_of(lengths), 0, 3, 0)
    with pytest.raises(BucketoptError, match="saved at global step 3, its trainer_state.json "
                                             "is at step 5"):
        trainer_schedule(sampler_of(lengths), num_train_epochs=1, global_step=5, state=state,
                         resume=True)
    edited = {**state, "position": 4}
    with pytest.raises(BucketoptError, match="consumed 4 batches of epoch 0, but the Trainer "
                                             "counts 6"):
        trainer_schedule(sampler_of(lengths), num_train_epochs=1, global_step=3, state=edited,
                         resume=True)
    with pytest.raises(BucketoptError, match="not a dict"):
        trainer_schedule(sampler_of(lengths), num_train_epochs=1, global_step=3, state=[1],
                         resume=True)
    with pytest.raises(BucketoptError, match="other settings: token_budget"):
        other = BucketBatchSampler(lengths, None, token_budget=512, seed=4,
                                   packing="varlen-balanced", grad_accum=2)
        trainer_schedule(other, num_train_epochs=1, global_step=3, state=state, resume=True)
    again = trainer_schedule(sampler_of(lengths), num_train_epochs=1, global_step=3,
                             state=state, resume=True, ignore_data_skip=True)
    assert (again.start_epoch, again.start_batches, again.first_step) == (0, 0, 3)
