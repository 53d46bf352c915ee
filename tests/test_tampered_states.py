"""Tampered saved states: refused when loaded (one BucketoptError naming the field), never later
while iterating; a state that loads iterates to the end, every item of the stream once."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bucketopt.errors import BucketoptError
from bucketopt.training.streaming import StreamBatcher

ITEMS = list(range(40))
SIZE = dict(length=lambda i: 1 + i % 4, token_budget=8, buffer_size=10)


def saved_state(batches=3, world_size=1):
    one = StreamBatcher(ITEMS, [2, 4], world_size=world_size, **SIZE)
    steps = one.micro_steps()
    seen = [i for _ in range(batches) for batch in next(steps) for i in batch]
    return seen, json.loads(json.dumps(one.state_dict()))


def resume(state):
    """Load ``state`` into a fresh batcher and run the pass to its end: the items batched."""
    two = StreamBatcher(ITEMS, [2, 4], **SIZE)
    two.load_state_dict(state)
    return [i for batch in two for i in batch], two


def edited(path, value, batches=3):
    _seen, state = saved_state(batches)
    node = state
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return state


@pytest.mark.parametrize("path, value, field", [
    (("stats", "batches"), "x", "stats.batches"),
    (("stats", "real_tokens"), None, "stats.real_tokens"),
    (("stats", "items"), -5, "stats.items"),
    (("buffer", 0, 0, 0), float("inf"), "buffer[0][0][0]"),
    (("buffer", 0, 0, 0), 0.5, "buffer[0][0][0]"),
    (("buffer", 0, 0, 1), "1", "buffer[0][0][1]"),
    (("rng", 1, 0), -1, "rng[1][0]"),
    (("rng", 1, 624), 625, "rng[1][624]"),
    (("rng", 2), "x", "rng[2]"),
    (("seed",), np.array([0, 1]), "seed"),
    (("done",), "yes", "done"),
    (("tail",), [[[]]], "tail[0][0]"),
    (("epoch",), 1.0, "epoch"),
])
def test_a_field_of_the_wrong_kind_is_refused_at_load_naming_it(path, value, field):
    state = edited(path, value)
    with pytest.raises(BucketoptError) as info:
        StreamBatcher(ITEMS, [2, 4], **SIZE).load_state_dict(state)
    assert f"`{field}`" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("edit, words", [
    (lambda s: s.update(done=True), "say the stream has ended"),
    (lambda s: s.update(buffer=[[], []]), "`held`"),
    (lambda s: s.update(position=10**6), "`stats.items`"),
    (lambda s: (s.update(position=10**6), s["stats"].update(items=10**6)), "past the end"),
    (lambda s: (s.update(position=41), s["stats"].update(items=41)), "past the end"),
])
def test_fields_that_do_not_fit_together_are_refused_at_load(edit, words):
    _seen, state = saved_state()
    edit(state)
    with pytest.raises(BucketoptError, match=words):
        StreamBatcher(ITEMS, [2, 4], **SIZE).load_state_dict(state)


def test_a_finished_pass_without_its_tail_is_refused_and_a_real_one_loads():
    one = StreamBatcher(ITEMS, [2, 4], **SIZE)
    assert sorted(i for batch in one for i in batch) == ITEMS
    done = json.loads(json.dumps(one.state_dict()))
    assert done["done"] and done["tail"] == []
    assert resume(done)[0] == []  # nothing left of that pass
    with pytest.raises(BucketoptError, match="`tail` must be"):
        StreamBatcher(ITEMS, [2, 4], **SIZE).load_state_dict({**done, "tail": None})


def test_a_numpy_integer_seed_is_taken_as_its_value():
    seen, state = saved_state()
    state["seed"] = np.int64(0)
    rest, _ = resume(state)
    assert sorted(seen + rest) == ITEMS


JUNK = st.one_of(st.none(), st.booleans(), st.text(max_size=3),
                 st.integers(-3, 60), st.integers(2**62, 2**70),
                 st.floats(allow_nan=True, allow_infinity=True),
                 st.just(np.array([1, 2])), st.just(np.int64(3)), st.lists(st.integers(0, 3),
                                                                          max_size=3),
                 st.dictionaries(st.text(max_size=2), st.integers(), max_size=2))


def _paths(state, prefix=()):
    """Every place in the state a value can be replaced."""
    out = []
    items = state.items() if isinstance(state, dict) else enumerate(state)
    for key, value in items:
        out.append((*prefix, key))
        if isinstance(value, (dict, list)) and not (prefix and prefix[0] == "rng" and key == 1):
            out += _paths(value, (*prefix, key))
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.integers(0, 12), pick=st.integers(0, 10**6), value=JUNK)
def test_a_mutated_state_loads_and_finishes_every_item_once_or_is_refused_at_load(
        batches, pick, value):
    seen, state = saved_state(batches)
    paths = [*_paths(state), ("rng", 1, 0), ("rng", 1, 624)]
    path = paths[pick % len(paths)]
    node = state
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = copy.deepcopy(value)
    batcher = StreamBatcher(ITEMS, [2, 4], **SIZE)
    try:
        batcher.load_state_dict(state)
    except BucketoptError as err:
        assert "\n" not in str(err)
        return
    rest = [i for batch in batcher for i in batch]  # no error of any kind while iterating
    together = seen + rest
    assert len(together) == len(set(together))  # nothing twice
    assert sorted(together) == ITEMS  # and nothing lost (one rank: no batch is ever dropped)


# --- BucketBatchSampler states -----------------------------------------------------------------

from bucketopt import BucketBatchSampler  # noqa: E402

LENGTHS = np.random.default_rng(0).integers(1, 200, 3000)


def sampler(**kw):
    return BucketBatchSampler(LENGTHS, [50, 120, 199], token_budget=400, seed=3, **kw)


@pytest.mark.parametrize("field", ["seed", "version", "fingerprint", "settings", "epoch",
                                   "position", "world_size", "grad_accum", "segments"])
def test_a_numpy_array_in_a_sampler_state_is_one_error_naming_the_field(field):
    state = sampler().state_dict()
    state[field] = np.array([1, 2])
    with pytest.raises(BucketoptError, match=field) as info:
        sampler().load_state_dict(state)
    assert "\n" not in str(info.value)


def test_a_numpy_array_inside_the_settings_is_a_setting_that_differs():
    state = sampler().state_dict()
    state["settings"]["boundaries"] = np.array([50, 120, 199])
    with pytest.raises(BucketoptError, match="boundaries"):
        sampler().load_state_dict(state)


@pytest.mark.parametrize("segments, words", [
    ([[2, 1, 0]] * 64, "repeats the world size"),
    ([[2, 1, 1], [3, 1, 0], [1, 1, 0]], "own world size"),
    ([[2**20, 1, 0]], r"\[1, 65536\]"),
])
def test_segments_no_resume_could_record_are_refused_before_any_plan_is_built(segments, words):
    state = sampler().state_dict()
    with pytest.raises(BucketoptError, match=words):
        sampler().load_state_dict({**state, "segments": segments})


def test_a_chain_of_resumes_through_a_state_saved_at_position_0_gives_every_sample_once():
    first = sampler(world_size=2)
    it = iter(first)
    consumed = [int(i) for _ in range(5) for i in next(it)]  # rank 0's batches ...
    consumed += [int(i) for b in first.plan().batches()[1:10:2] for i in b]  # ... and rank 1's
    state = first.state_dict()
    second = sampler(world_size=4)
    second.load_state_dict(state)
    saved_at_0 = second.state_dict()  # nothing consumed at 4 ranks
    assert saved_at_0["position"] == 0 and len(saved_at_0["segments"]) == 1
    third = sampler(world_size=3)
    third.load_state_dict(saved_at_0)
    assert len(third.plan().segments) == 2
    rest = [int(i) for b in third.plan().batches() for i in b]
    assert sorted(consumed + rest) == list(range(LENGTHS.size))
    # many zero-position segments load without building a plan for each
    many = {**saved_at_0, "segments": [[2 + i % 2, 1, 0] for i in range(63)] + [[5, 1, 0]]}
    fourth = sampler(world_size=3)
    fourth.load_state_dict(many)
    assert sorted(int(i) for b in fourth.plan().batches() for i in b) == list(range(LENGTHS.size))


# --- a Trainer checkpoint's trainer_state.json ---------------------------------------------------

@pytest.mark.parametrize("content, step", [
    ('{"global_step": 12}', 12), ('\ufeff{"global_step": 3}', 3), ('{}', 0),
    ('{"global_step": "x"}', None), ('{"global_step": -1}', None), ('{"global_step": 2.5}', None),
    ('{"global_step": true}', None), ('[1]', None), ('{"global_step": 1' + "0" * 5000 + '}', None),
    ('{"global_step": ' + "[" * 100_000 + "]" * 100_000 + '}', None),
])
def test_a_checkpoints_global_step_is_read_or_refused_in_one_line(tmp_path, content, step):
    from bucketopt.integrations.transformers import _checkpoint_step

    (tmp_path / "trainer_state.json").write_text(content, encoding="utf-8")
    if step is not None:
        assert _checkpoint_step(tmp_path) == step
        return
    with pytest.raises(BucketoptError) as info:
        _checkpoint_step(tmp_path)
    assert "trainer_state.json" in str(info.value) and "\n" not in str(info.value)
