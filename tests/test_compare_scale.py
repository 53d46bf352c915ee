"""compare/simulate/diversity at scale: the histogram and array routes against the per-sample
references (plan_arrays' index plans, the list-based metrics, tests/naive.py), and the subsample
route of compare() against the exact one."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bucketopt import BucketoptError, Histogram, simulate
from bucketopt.training.compare import _Stages, compare, subsample
from bucketopt.training.diversity import (
    decile_bins,
    decile_cuts,
    epoch_churn,
    measure,
    plan_churn,
    row_diversity,
    strategy_batches,
)
from bucketopt.training.epoch import epoch_from_batches
from bucketopt.training.simulate import greedy_stream, plan_arrays, sorted_batches, sorted_epoch

from . import naive

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def dataset(draw):
    lengths = draw(st.lists(st.integers(1, 300), min_size=1, max_size=150))
    budget = draw(st.integers(max(lengths), 4 * max(lengths) + 50))
    inner = draw(st.lists(st.integers(1, max(lengths)), max_size=4, unique=True))
    boundaries = [*sorted(set(inner) - {max(lengths)}), max(lengths)]
    return lengths, budget, boundaries


def per_sample_epoch(lengths, strategy, budget, boundaries, seed, epoch, packing, pad):
    """The exact per-sample simulation: the index plan, batch by batch."""
    order, starts, buckets = plan_arrays(lengths, strategy, token_budget=budget,
                                        boundaries=boundaries, seed=seed, epoch=epoch,
                                        packing=packing)
    return epoch_from_batches(lengths, np.split(order, starts[1:]), strategy=strategy, pad=pad,
                              edges=boundaries, buckets=buckets)


@SETTINGS
@given(dataset(), st.sampled_from(["sorted", "shuffle", "bucketed"]),
       st.sampled_from(["fixed", "greedy"]), st.sampled_from(["batch", "edge"]),
       st.integers(0, 3))
def test_lean_simulate_is_the_per_sample_simulation(data, strategy, packing, pad, epoch):
    lengths, budget, boundaries = data
    got = simulate(lengths, strategy, token_budget=budget, boundaries=boundaries, seed=7,
                   epoch=epoch, packing=packing, pad=pad)
    want = per_sample_epoch(lengths, strategy, budget, boundaries, 7, epoch, packing,
                            pad if strategy == "bucketed" else "batch")
    for name in ("sizes", "padded_lens", "real_tokens"):
        assert getattr(got, name).dtype == np.int64
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name))
    if strategy == "bucketed":
        np.testing.assert_array_equal(got.buckets, want.buckets)


@SETTINGS
@given(dataset())
def test_sorted_batches_from_the_histogram_are_the_naive_greedy_batches(data):
    lengths, budget, _ = data
    ordered = sorted(lengths)
    want = naive.greedy_pack(ordered, budget)
    sizes, tops, real = sorted_batches(Histogram.from_lengths(lengths), budget)
    assert sizes.tolist() == [len(b) for b in want]
    assert tops.tolist() == [max(ordered[i] for i in b) for b in want]
    assert real.tolist() == [sum(ordered[i] for i in b) for b in want]
    e = sorted_epoch(Histogram.from_lengths(lengths), budget, seed=3, epoch=1)
    ref = simulate(lengths, "sorted", token_budget=budget, seed=3, epoch=1)
    np.testing.assert_array_equal(e.real_tokens, ref.real_tokens)


@SETTINGS
@given(st.lists(st.integers(1, 50), min_size=1, max_size=80), st.integers(0, 40),
       st.integers(1, 7))
def test_greedy_stream_carries_the_open_batch_across_chunks(lengths, extra, chunk):
    budget = max(lengths) + extra
    want = naive.greedy_pack(lengths, budget)
    sizes, tops, real = greedy_stream(np.asarray(lengths, dtype=np.int32), budget, chunk=chunk)
    assert sizes.tolist() == [len(b) for b in want]
    assert tops.tolist() == [max(lengths[i] for i in b) for b in want]
    assert real.tolist() == [sum(lengths[i] for i in b) for b in want]


@SETTINGS
@given(st.lists(st.integers(1, 40), min_size=1, max_size=200))
def test_decile_cuts_from_the_histogram_equal_numpy_percentile(lengths):
    cuts = decile_cuts(Histogram.from_lengths(lengths))
    np.testing.assert_array_equal(cuts, np.percentile(lengths, np.arange(10, 100, 10)))


def test_decile_cuts_on_a_large_dataset():
    lengths = np.random.default_rng(0).integers(1, 9000, 300_001)
    np.testing.assert_array_equal(decile_cuts(Histogram.from_lengths(lengths)),
                                  np.percentile(lengths, np.arange(10, 100, 10)))


@st.composite
def two_epochs(draw):
    """Two epochs of batches over the same samples where some batches repeat (as sets)."""
    n = draw(st.integers(1, 30))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))

    def cut(perm):  # consecutive non-empty batches
        marks = sorted(set(rng.integers(1, perm.size, size=draw(st.integers(0, perm.size)))
                           .tolist())) if perm.size > 1 else []
        return [list(b) for b in np.split(perm, marks)]

    first = cut(rng.permutation(n))
    keep = [b for b in first if rng.random() < 0.5]  # these reappear, shuffled inside
    rest = np.array(sorted(set(range(n)) - {i for b in keep for i in b}), dtype=np.int64)
    second = [list(rng.permutation(b)) for b in keep] + (cut(rng.permutation(rest))
                                                          if rest.size else [])
    order = rng.permutation(len(second))
    return first, [second[i] for i in order]


@SETTINGS
@given(two_epochs())
def test_signature_churn_equals_set_comparison(epochs):
    first, second = epochs
    want = naive.epoch_churn(first, second)
    assert epoch_churn(first, second) == want

    def flat(batches):
        return (np.concatenate([np.asarray(b, dtype=np.int64) for b in batches]),
                np.array([len(b) for b in batches]))

    assert plan_churn(*flat(first), *flat(second)) == want


def test_churn_with_a_repeated_index_compares_real_sets():
    assert epoch_churn([[0, 0, 1]], [[1, 0]]) == 1.0
    assert epoch_churn([[2, 1], [3]], [[1, 2], [3, 4]]) == 0.5


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dataset(), st.integers(1, 3), st.integers(1, 2), st.integers(0, 9))
def test_array_diversity_equals_the_list_based_metrics(data, world, accum, seed):
    lengths, budget, boundaries = data
    try:
        got = row_diversity(lengths, boundaries, token_budget=budget, world_size=world,
                                   grad_accum=accum, seed=seed)
    except BucketoptError:  # the sampler refuses this configuration: nothing to compare
        return
    for name in ("sorted", "shuffle", "bucketed", "sampler"):
        if name == "bucketed":
            epochs = [np.split(o, s[1:]) for o, s, _ in (
                plan_arrays(lengths, "bucketed", token_budget=budget, boundaries=boundaries,
                           seed=seed, epoch=e) for e in (0, 1))]
        else:
            epochs = [strategy_batches(lengths, "bucketed" if name == "sampler" else name,
                                       token_budget=budget, epoch=e, seed=seed,
                                       boundaries=boundaries, world_size=world,
                                       grad_accum=accum) for e in (0, 1)]
        want = measure(lengths, *epochs, world_size=world, grad_accum=accum)
        assert got[name]["step_mix_gap"] == want.step_mix_gap, name
        assert got[name]["epoch_churn"] == want.epoch_churn, name
        per_step = min(world * accum, len(epochs[0]))
        steps = [np.concatenate(epochs[0][i:i + per_step])
                 for i in range(0, len(epochs[0]), per_step)]
        assert got[name]["step_mix_gap"] == pytest.approx(naive.step_mix_gap(lengths, steps))


def test_decile_bins_unchanged():
    lengths = [5, 1, 9, 3, 3, 7, 2]
    cuts = decile_cuts(Histogram.from_lengths(lengths))
    np.testing.assert_array_equal(decile_bins(lengths),
                                  np.searchsorted(cuts, lengths, side="right"))


# --- compare(): the subsample route --------------------------------------------------------

def test_subsample_is_a_uniform_draw_without_replacement():
    hist = Histogram(np.array([10, 20, 30]), np.array([5, 1000, 3]))
    a = subsample(hist, 500, seed=1)
    assert a.size == 500 and np.array_equal(a, subsample(hist, 500, seed=1))
    values, counts = np.unique(a, return_counts=True)
    assert set(values) <= {10, 20, 30}
    assert all(c <= hist.counts[list(hist.values).index(v)] for v, c in zip(values, counts))
    assert np.array_equal(subsample(hist, hist.n, seed=2), np.repeat(hist.values, hist.counts))
    # the mean count of each length is its share: 200 draws of 500 of 1,008
    draws = np.array([np.bincount(subsample(hist, 500, seed=s) // 10, minlength=4)[1:]
                      for s in range(200)])
    np.testing.assert_allclose(draws.mean(axis=0), 500 * hist.counts / hist.n, rtol=0.05)


def test_subsample_of_a_billion_samples_draws_with_replacement():
    hist = Histogram(np.array([1, 2]), np.array([3 * 10**9, 10**9]))
    a = subsample(hist, 20_000, seed=0)
    assert a.size == 20_000 and set(np.unique(a)) <= {1, 2}
    assert np.mean(a == 1) == pytest.approx(0.75, abs=0.02)


LENGTHS = np.random.default_rng(5).lognormal(6.5, 0.6, 40_000).clip(10, 4000).astype(np.int64)


@pytest.fixture(scope="module")
def routes():
    kw = dict(token_budget=16_384, profile="rtx-pro-6000-blackwell", world_size=4)
    return (compare(LENGTHS, 4, simulated_samples=None, **kw),
            compare(LENGTHS, 4, simulated_samples=10_000, **kw))


def test_below_the_threshold_the_route_is_exact(routes):
    full, _ = routes
    same = compare(LENGTHS, 4, token_budget=16_384, profile="rtx-pro-6000-blackwell",
                   world_size=4, simulated_samples=LENGTHS.size)
    assert same.strategies == full.strategies
    assert full.simulation["subsampled"] is False
    assert full.simulation["simulated_samples"] == LENGTHS.size
    assert "simulated_samples" not in full.strategies["shuffle"]


def test_subsample_route_says_what_it_simulated_and_agrees(routes):
    full, sub = routes
    assert sub.simulation == {**sub.simulation, "samples": LENGTHS.size,
                              "simulated_samples": 10_000, "subsampled": True}
    assert "sorted" in sub.simulation["from_histogram"]
    assert "10,000 of the 40,000 samples" in sub.simulation_line
    # the histogram figures are exact: the sorted row and every analytic column
    assert sub.strategies["sorted"] == full.strategies["sorted"]
    for name, row in sub.strategies.items():
        ref = full.strategies[name]
        assert row["real_tokens"] == ref["real_tokens"] == int(LENGTHS.sum())
        if name != "sorted":
            assert row["simulated_samples"] == 10_000 and row["scaled"] is True
        if row["padding_fraction_analytic"] is not None:
            assert row["padding_fraction_analytic"] == ref["padding_fraction_analytic"]
            assert row["ktok_per_s_analytic"] == ref["ktok_per_s_analytic"]
        # simulated shares and rates: those of a uniform subsample; totals: scaled up
        assert row["padding_fraction_simulated"] == pytest.approx(
            ref["padding_fraction_simulated"], abs=0.02)
        assert row["ktok_per_s"] == pytest.approx(ref["ktok_per_s"], rel=0.05)
        assert row["eta_days"] == pytest.approx(ref["eta_days"], rel=0.05)
        assert row["batches"] == pytest.approx(ref["batches"], rel=0.05)
        lo, hi = row["eta_days_interval"]
        assert lo <= row["eta_days"] <= hi
    for name in ("shuffle", "bucketed"):
        assert sub.strategies[name]["step_mix_gap"] == pytest.approx(
            full.strategies[name]["step_mix_gap"], abs=0.03)
    json.dumps(sub.to_dict(), allow_nan=False)


def test_simulated_samples_is_checked():
    for bad in (0, -1, 2.5, True, "1"):
        with pytest.raises(BucketoptError, match="simulated_samples"):
            compare(LENGTHS[:500], 2, token_budget=16_384, simulated_samples=bad,
                    diversity=False)


def test_progress_line_follows_the_progress_rules(monkeypatch):
    stream = io.StringIO()
    stages = _Stages(3, True)
    stages.bar.stream, stages.bar.delay = stream, 0.0
    stages("shuffle")
    stages("bucketed")
    stages.close()
    text = stream.getvalue()
    assert text.startswith("\rcompare [") and "steps" in text and text.endswith("\n")
    quiet = _Stages(3, False)
    quiet.bar.stream = stream = io.StringIO()
    quiet("shuffle")
    quiet.close()
    assert stream.getvalue() == ""
    not_a_tty = _Stages(3, None)  # StringIO is not a terminal
    assert not_a_tty.bar.enabled is False


# --- the sampler's plan: one in-place copy, chunked greedy packing -------------------------

def _greedy_starts(lengths, segment_start, token_budget):
    return np.asarray(naive.greedy_starts(lengths, segment_start, token_budget), dtype=np.int64)


def _pack_reference(sampler, rng, grouped, counts):
    """The plan's packing written the direct way: a permutation per bucket, then greedy
    packing over all the shuffled lengths with a break at every bucket."""

    order = np.empty_like(grouped)
    offsets = np.r_[0, np.cumsum(counts)]
    for k in np.flatnonzero(counts):
        lo, hi = offsets[k], offsets[k + 1]
        order[lo:hi] = grouped[lo:hi][rng.permutation(hi - lo)]
    if sampler.packing == "fixed":
        starts = np.concatenate([np.arange(offsets[k], offsets[k + 1], sampler.batch_sizes[k])
                                 for k in np.flatnonzero(counts)])
    else:
        segment = np.zeros(order.size, dtype=np.bool_)
        segment[offsets[:-1][counts > 0]] = True
        starts = _greedy_starts(sampler.lengths[order], segment, np.int64(sampler.token_budget))
    buckets = np.searchsorted(offsets, starts, side="right") - 1
    return order, starts, np.r_[starts[1:], order.size], buckets


@SETTINGS
@given(dataset(), st.sampled_from(["fixed", "greedy"]), st.integers(1, 5), st.integers(0, 3))
def test_sampler_packing_is_the_direct_packing(data, packing, chunk, epoch):
    import bucketopt.training._sampler_plan as plan_module
    from bucketopt import BucketBatchSampler

    lengths, budget, boundaries = data
    try:
        sampler = BucketBatchSampler(lengths, boundaries, token_budget=budget, packing=packing)
    except BucketoptError:
        return
    old_chunk, plan_module.CHUNK = plan_module.CHUNK, chunk
    try:
        got = plan_module._pack(sampler, np.random.default_rng((1, epoch)), sampler._members,
                                sampler._bucket_counts)
    finally:
        plan_module.CHUNK = old_chunk
    want = _pack_reference(sampler, np.random.default_rng((1, epoch)), sampler._members,
                           sampler._bucket_counts)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    assert got[0].dtype == np.int32 and got[1].dtype == np.int64


def test_a_histogram_beyond_the_threshold_is_never_expanded(monkeypatch):
    kw = dict(token_budget=16_384, simulated_samples=10_000, seed=3)
    from_lengths = compare(LENGTHS, 3, **kw)
    hist = Histogram.from_lengths(LENGTHS)
    monkeypatch.setattr(Histogram, "to_lengths", lambda self: pytest.fail("expanded"))
    from_hist = compare(hist, 3, **kw)
    assert from_hist.strategies == from_lengths.strategies  # the subsample is the histogram's
    assert from_hist.lengths is None
    with pytest.raises(BucketoptError, match="one length per sample"):
        from_hist.batches("bucketed")


def test_cli_reads_the_histogram_beyond_the_threshold(tmp_path, monkeypatch, capsys):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    import bucketopt.training.compare as comparison_module
    from bucketopt.cli import main

    path = tmp_path / "lengths.parquet"
    pq.write_table(pa.table({"seq_len": LENGTHS.astype(np.int32)}), path)
    monkeypatch.setattr(comparison_module, "SIMULATED_SAMPLES", 10_000)
    monkeypatch.setitem(compare.__kwdefaults__, "simulated_samples", 10_000)
    read = []
    import bucketopt.commands.compare as command

    real_read = command.read_lengths
    monkeypatch.setattr(command, "read_lengths", lambda args, per_sample: (
        read.append(per_sample) or real_read(args, per_sample=per_sample)))
    assert main(["compare", "--lens", str(path), "-k", "3", "--token-budget", "16384",
                 "--json", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert read == [False]
    assert out["simulation"]["subsampled"] is True
    assert out["simulation"]["simulated_samples"] == 10_000
    want = compare(LENGTHS, 3, token_budget=16_384, simulated_samples=10_000)
    assert out["strategies"]["bucketed"]["padding_fraction"] == \
        want.strategies["bucketed"]["padding_fraction"]
    assert out["strategies"]["shuffle"]["padding_fraction_simulated"] == \
        want.strategies["shuffle"]["padding_fraction_simulated"]
    assert main(["compare", "--lens", str(path), "-k", "3", "--token-budget", "16384",
                 "--quiet"]) == 0
    assert "a seeded uniform subsample of 10,000 of the 40,000 samples" in \
        capsys.readouterr().out


def _plan_reference(lengths, strategy, budget, boundaries, seed, epoch, packing):
    """plan_arrays written the direct way: argsort, permutation, gathers, a take."""

    lengths = np.asarray(lengths, dtype=np.int64)
    rng = np.random.default_rng((seed, epoch))
    n = lengths.size
    no_breaks = np.zeros(n, dtype=np.bool_)
    buckets = None
    if strategy == "sorted":
        order = np.argsort(lengths, kind="stable")
        starts = _greedy_starts(lengths[order], no_breaks, budget)
    elif strategy == "shuffle":
        order = rng.permutation(n)
        starts = _greedy_starts(lengths[order], no_breaks, budget)
    else:
        edges = np.asarray(boundaries)
        sizes = budget // edges
        perm = rng.permutation(n)
        bucket_of = np.searchsorted(edges, lengths[perm], side="left")
        within = np.argsort(bucket_of, kind="stable")
        order, sample_bucket = perm[within], bucket_of[within]
        change = np.r_[True, sample_bucket[1:] != sample_bucket[:-1]]
        if packing == "greedy":
            starts = _greedy_starts(lengths[order], change, budget)
        else:
            first = np.flatnonzero(change)
            counts = np.diff(np.r_[first, n])
            starts = np.concatenate([f + np.arange(0, c, sizes[sample_bucket[f]])
                                     for f, c in zip(first, counts)])
        buckets = sample_bucket[starts]
    batch_order = rng.permutation(starts.size)
    ends = np.r_[starts[1:], n]
    sizes_b = (ends - starts)[batch_order]
    new_starts = np.r_[0, np.cumsum(sizes_b)[:-1]]
    take = np.repeat(starts[batch_order] - new_starts, sizes_b) + np.arange(n)
    return order[take], new_starts, None if buckets is None else buckets[batch_order]


@SETTINGS
@given(dataset(), st.sampled_from(["sorted", "shuffle", "bucketed"]),
       st.sampled_from(["fixed", "greedy"]), st.integers(1, 5), st.integers(0, 3),
       st.booleans())
def test_batch_plan_is_the_direct_plan(data, strategy, packing, chunk, epoch, table):
    import importlib

    simulate_module = importlib.import_module("bucketopt.training.simulate")
    lengths, budget, boundaries = data
    saved = simulate_module.CHUNK, simulate_module.LUT_MAX
    simulate_module.CHUNK = chunk
    simulate_module.LUT_MAX = saved[1] if table else 0  # 0: a binary search per sample
    try:
        got = plan_arrays(lengths, strategy, token_budget=budget, boundaries=boundaries, seed=2,
                         epoch=epoch, packing=packing)
    finally:
        simulate_module.CHUNK, simulate_module.LUT_MAX = saved
    want = _plan_reference(lengths, strategy, budget, boundaries, 2, epoch, packing)
    for a, b in zip(got[:2], want[:2]):
        assert a.dtype == np.int64
        np.testing.assert_array_equal(a, b)
    if strategy == "bucketed":
        np.testing.assert_array_equal(got[2], want[2])
    else:
        assert got[2] is None


@SETTINGS
@given(dataset(), st.integers(1, 3), st.booleans(), st.integers(0, 6))
def test_plan_indices_from_lists_the_remaining_batches(data, world, drop_last, first):
    from bucketopt import BucketBatchSampler

    lengths, budget, boundaries = data
    try:
        plan = BucketBatchSampler(lengths, boundaries, token_budget=budget, world_size=world,
                                  drop_last=drop_last).plan(0)
    except BucketoptError:
        return
    rest = plan.batches()[first:]
    want = np.concatenate(rest) if rest else np.zeros(0, dtype=np.int64)
    np.testing.assert_array_equal(plan.indices_from(first), want)
