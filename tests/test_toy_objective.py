"""A new objective is one module and one registration line (tests/toy_objective.py: the fewest
optimizer steps), and the certified DP proves its optimum: the brute-force one over every
boundary set (tests/naive.py), whatever the lengths, k, token budget and shares."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bucketopt
from bucketopt import objectives

from . import naive


@pytest.fixture
def toy():
    """The toy objective registered for the test, the registry as it was afterwards."""
    import importlib
    import sys

    before = dict(objectives._REGISTRY)
    name = f"{__package__}.toy_objective"
    sys.modules.pop(name, None)
    module = importlib.import_module(name)  # (its import registers it)
    try:
        yield module
    finally:
        objectives._REGISTRY.clear()
        objectives._REGISTRY.update(before)


def steps(lengths, boundaries, token_budget):
    """Optimizer steps of the buckets: ceil(samples / (T // edge)) each."""
    counts = naive.bucket_counts(lengths, boundaries)
    return sum(math.ceil(c / (token_budget // b)) for c, b in zip(counts, boundaries) if c)


SHARES = [(0.0, 1.0), (0.1, 1.0), (0.0, 0.6)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(1, 40), min_size=1, max_size=30), st.integers(1, 4),
       st.integers(40, 200), st.sampled_from(SHARES))
def test_the_certified_dp_proves_the_fewest_steps(toy, lengths, k, budget, shares):
    oracle = naive.brute_force(lambda edges: steps(lengths, edges, budget),
                               sorted(set(lengths))[:-1], max(lengths), k, lengths, *shares)
    solve = lambda: bucketopt.solve(lengths, k, token_budget=budget, objective="steps",  # noqa: E731
                                    min_share=shares[0], max_share=shares[1])
    if oracle is None:
        with pytest.raises(bucketopt.BucketoptError):
            solve()
        return
    solution = solve()
    assert steps(lengths, solution.boundaries, budget) == oracle[0]
    assert solution.optimality["exact"] and solution.optimality["lower_bound"] == oracle[0]
    assert len(solution.boundaries) <= k


def test_the_toy_is_a_registered_objective(toy):
    assert "steps" in objectives.names()
    obj = objectives.make_objective("steps", "edge")
    assert isinstance(obj, toy.FewestSteps)
    lengths = [3, 3, 5, 9, 9, 9, 12]
    # T = 24: one bucket at 12 takes batches of 2 (4 steps); (0, 5] and (5, 12] take 1 + 2
    best = bucketopt.solve(np.array(lengths), 3, token_budget=24, objective="steps")
    assert steps(lengths, best.boundaries, 24) == 3 < steps(lengths, (12,), 24) == 4
