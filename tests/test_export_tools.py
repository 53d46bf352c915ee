"""Exports checked against the tools that read them, not against our reading of their docs.

Lhotse (installed by .ci/run; skipped where absent): every sample of a length exactly at, one
below and one above every exported edge must land, through Lhotse's own bucket assignment (its
``DynamicBucketingSampler`` over a real ``CutSet``, and ``SamplingConstraint.select_bucket``),
in the bucket bucketopt put it in. The NeMo export runs the same way through Lhotse's
``FixedBucketBatchSizeConstraint`` (the class NeMo's 1-D bucketing defers to). The sampler export
runs through :class:`bucketopt.training.sampler.BucketBatchSampler`.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import bucketopt
from bucketopt.show.export import installed_lhotse_version, to_lhotse, to_nemo, to_sampler_json


def our_bucket(boundaries, x) -> int:
    return int(np.searchsorted(boundaries, x, side="left"))


def probe_lengths(boundaries) -> list[int]:
    """Every edge, edge - 1 and edge + 1 (within 1 .. the last edge)."""
    top = boundaries[-1]
    return sorted({x for b in boundaries for x in (b - 1, b, b + 1) if 1 <= x <= top})


def solutions():
    rng = np.random.default_rng(11)
    out = [bucketopt.solve([3, 4, 10, 11, 12], k=2, token_budget=24),
           bucketopt.evaluate(np.arange(1, 41), (10, 20, 30, 40), token_budget=400)]
    for _ in range(6):
        longest = int(rng.integers(8, 400))
        lengths = rng.integers(1, longest + 1, size=int(rng.integers(20, 300)))
        out.append(bucketopt.solve(lengths, int(rng.integers(2, 9)),
                                   token_budget=longest * int(rng.integers(2, 8))))
    return out


SOLUTIONS = solutions()


def _cuts(lengths):
    from lhotse import CutSet
    from lhotse.testing.dummies import dummy_cut

    return CutSet.from_cuts(dummy_cut(i, duration=float(x), recording_duration=float(x))
                            for i, x in enumerate(lengths))


def _batches(sampler) -> list[list[int]]:
    """The sampler's batches as lists of cut indices (cut ids are dummy-cut-00042 etc.)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eager CutSet / buffer-size advice
        return [[int(c.id.rsplit("-", 1)[-1]) for c in batch] for batch in sampler]


pytestmark = pytest.mark.filterwarnings("ignore:You are using DynamicBucketingSampler:UserWarning")


@pytest.mark.parametrize("sol", SOLUTIONS)
def test_lhotse_puts_every_edge_sample_in_our_bucket(sol):
    pytest.importorskip("lhotse")
    from lhotse.dataset import DynamicBucketingSampler
    from lhotse.dataset.sampling.base import TimeConstraint

    version = installed_lhotse_version()
    cfg = to_lhotse(sol)  # the installed version's rule
    lengths = probe_lengths(sol.boundaries)
    ours = [our_bucket(sol.boundaries, x) for x in lengths]
    # Lhotse's own bucket selection, as the sampler calls it for each cut.
    constraint = TimeConstraint(max_cuts=len(lengths))
    theirs = [constraint.select_bucket(cfg["duration_bins"], example_len=float(x))
              for x in lengths]
    assert theirs == ours, (version, cfg, lengths)
    # The whole sampler on a real CutSet: with room for every cut in one batch, each batch is
    # exactly one of Lhotse's buckets, so the batches must be bucketopt's buckets.
    sampler = DynamicBucketingSampler(_cuts(lengths), duration_bins=cfg["duration_bins"],
                                      max_cuts=len(lengths), buffer_size=len(lengths) + 10,
                                      shuffle=False, drop_last=False, world_size=1, rank=0)
    batches = _batches(sampler)
    got = sorted(sorted(lengths[i] for i in batch) for batch in batches)
    want = sorted(sorted(x for x, b in zip(lengths, ours) if b == k) for k in set(ours))
    assert got == want, (version, cfg)


@pytest.mark.parametrize("sol", SOLUTIONS)
def test_lhotse_runs_the_nemo_export_bucket_by_bucket(sol):
    pytest.importorskip("lhotse")
    from lhotse.dataset import DynamicBucketingSampler
    from lhotse.dataset.sampling.dynamic_bucketing import FixedBucketBatchSizeConstraint

    cfg = to_nemo(sol)
    bins, sizes = cfg["bucket_duration_bins"], cfg["bucket_batch_size"]
    lengths = probe_lengths(sol.boundaries) * 3  # several per bucket, so batches fill up
    ours = [our_bucket(sol.boundaries, x) for x in lengths]
    constraint = FixedBucketBatchSizeConstraint(max_seq_len_buckets=bins, batch_sizes=sizes)
    assert [constraint.select_bucket(bins, example_len=float(x)) for x in lengths] == ours
    # As NeMo builds it: the same bins as the sampler's duration_bins, the constraint per bucket.
    sampler = DynamicBucketingSampler(_cuts(lengths), constraint=constraint, duration_bins=bins,
                                      buffer_size=len(lengths) + 10, shuffle=False,
                                      drop_last=False, world_size=1, rank=0)
    seen = []
    for batch in _batches(sampler):
        buckets = {ours[i] for i in batch}
        assert len(buckets) == 1, [lengths[i] for i in batch]
        assert len(batch) <= sol.batch_sizes[buckets.pop()]
        seen.extend(batch)
    assert sorted(seen) == list(range(len(lengths)))


def test_lhotse_sampler_round_trip_on_the_issue_example():
    """Boundaries (10, 20, 30, 40): lengths 10, 11, 20, 21, 30, 31 each in bucketopt's bucket."""
    pytest.importorskip("lhotse")
    from lhotse.dataset.sampling.base import TimeConstraint

    sol = bucketopt.evaluate(np.arange(1, 41), (10, 20, 30, 40))
    bins = to_lhotse(sol)["duration_bins"]
    pick = TimeConstraint(max_cuts=1).select_bucket
    assert [pick(bins, example_len=x) for x in (10, 11, 20, 21, 30, 31, 40)] == \
        [0, 1, 1, 2, 2, 3, 3]


@pytest.mark.parametrize("sol", SOLUTIONS)
def test_bucketopt_sampler_batches_hold_one_bucket(sol):
    from bucketopt.show.export import sampler_kwargs
    from bucketopt.training.sampler import BucketBatchSampler

    lengths = np.array(probe_lengths(sol.boundaries) * 4)
    sampler = BucketBatchSampler(lengths, **sampler_kwargs(to_sampler_json(sol)))
    seen = []
    for batch in sampler:
        buckets = {our_bucket(sol.boundaries, lengths[i]) for i in batch}
        assert len(buckets) == 1, lengths[list(batch)]
        assert len(batch) * sol.boundaries[buckets.pop()] <= sol.token_budget
        seen.extend(int(i) for i in batch)
    assert sorted(seen) == list(range(lengths.size))
