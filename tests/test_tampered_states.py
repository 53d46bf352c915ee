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
