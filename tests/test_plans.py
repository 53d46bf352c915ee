"""batch_plan() and Comparison.batches(): the batches a user trains on are the batches timed."""

from __future__ import annotations

import numpy as np
import pytest

import bucketopt
from bucketopt import BucketoptError, batch_plan, compare, simulate


def padding_fraction(lengths, batches):
    """Explicit per-batch loop: every batch padded to its longest sample."""
    real = padded = 0
    for b in batches:
        real += int(lengths[b].sum())
        padded += len(b) * int(lengths[b].max()) - int(lengths[b].sum())
    return padded / (real + padded)


@pytest.fixture(scope="module")
def lengths():
    return np.random.default_rng(2).integers(5, 900, 3000)


def test_comparison_batches_are_the_batches_it_timed(lengths):
    c = compare(lengths, 4, token_budget=4096, simulations=2, sampler=True, grad_accum=2,
                world_size=4, seed=3, pad="batch")  # padding_fraction: each batch's longest
    names = [n for n in c.strategies if n != "packed"]
    assert {"sorted", "shuffle", "bucketed", "sampler"} <= set(names)
    for name in names:
        for epoch in (0, 1):
            batches = c.batches(name, epoch)
            flat = np.sort(np.concatenate(batches))
            assert (flat == np.arange(lengths.size)).all()  # every sample once
            assert max(len(b) * lengths[b].max() for b in batches) <= 4096
            timed = c.epochs[name][epoch]
            assert len(batches) == timed.n_batches
            assert padding_fraction(lengths, batches) == pytest.approx(timed.padding_fraction,
                                                                     rel=1e-12)
    with pytest.raises(BucketoptError, match="no batches of whole samples"):
        c.batches("packed")
    with pytest.raises(BucketoptError, match="name must be one of"):
        c.batches("nope")


def test_batch_plan_is_public_and_iterates_like_a_batch_sampler(lengths):
    edges = bucketopt.solve(lengths, 4, token_budget=4096, pad="batch").boundaries
    plan = batch_plan(lengths, "bucketed", token_budget=4096, boundaries=edges, seed=1, epoch=2)
    batches = list(plan)
    assert len(batches) == len(plan) and all(isinstance(i, int) for i in batches[0])
    timed = simulate(lengths, "bucketed", token_budget=4096, boundaries=edges, seed=1, epoch=2)
    assert padding_fraction(lengths, [np.asarray(b) for b in batches]) == pytest.approx(
        timed.padding_fraction, rel=1e-12)
    assert (plan.sizes == timed.sizes).all()
    other = batch_plan(lengths, "bucketed", token_budget=4096, boundaries=edges, seed=1, epoch=3)
    assert [b for b in other] != batches  # another epoch, another shuffle
    with pytest.raises(BucketoptError, match="strategy must be one of"):
        batch_plan(lengths, "packed", token_budget=4096)
    with pytest.raises(BucketoptError, match="needs `boundaries`"):
        batch_plan(lengths, "bucketed", token_budget=4096)
