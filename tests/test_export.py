"""Exports for other tools: each conversion is checked against a reimplementation of that tool's
documented bucket-assignment rule, on every integer length of random data (edges included)."""

from __future__ import annotations

import bisect
import json

import numpy as np
import pytest

import bucketopt
from bucketopt.cli import main
from bucketopt.errors import BucketoptError
from bucketopt.show.export import (
    export,
    sampler_kwargs,
    to_lhotse,
    to_nemo,
    to_sampler_json,
    to_tf_data,
)


def our_bucket(boundaries, x):
    """bucketopt's convention: bucket k holds (b_{k-1}, b_k]."""
    return int(np.searchsorted(boundaries, x, side="left"))


def lhotse_bucket(duration_bins, x):
    """Lhotse >= 1.27 ``SamplingConstraint.select_bucket``: ``bisect_left(duration_bins, d)``
    (tests/test_export_tools.py runs the real Lhotse)."""
    return bisect.bisect_left(duration_bins, x)


def old_lhotse_bucket(duration_bins, x):
    """Lhotse <= 1.26 DynamicBucketer: ``bisect_right(duration_bins, duration)``."""
    return bisect.bisect_right(duration_bins, x)


def nemo_bucket(bins, x):
    """NeMo FixedBucketBatchSizeConstraint2D (1-D): smallest bin that fits, ``bisect_left``;
    None when the example is longer than every bin."""
    i = bisect.bisect_left(bins, x)
    return None if i == len(bins) else i


def tf_bucket(boundaries, x):
    """tf.data bucket_by_sequence_length: buckets_min <= x < buckets_max with
    buckets_min = [-inf] + boundaries and buckets_max = boundaries + [inf]; the first match."""
    lo = [-np.inf, *boundaries]
    hi = [*boundaries, np.inf]
    return next(i for i in range(len(lo)) if lo[i] <= x < hi[i])


def random_solutions(n_cases=12):
    rng = np.random.default_rng(7)
    for _ in range(n_cases):
        longest = int(rng.integers(5, 300))
        lengths = rng.integers(1, longest + 1, size=int(rng.integers(5, 400)))
        k = int(rng.integers(1, 9))
        budget = int(lengths.max()) * int(rng.integers(1, 6))
        yield lengths, bucketopt.solve(lengths, k, token_budget=budget)


CASES = list(random_solutions())


@pytest.mark.parametrize("lengths, sol", CASES)
@pytest.mark.parametrize("version, rule", [("1.33.0", lhotse_bucket), ("1.27", lhotse_bucket),
                                           ("1.26.0", old_lhotse_bucket),
                                           ("1.16.0", old_lhotse_bucket)])
def test_lhotse_rule_matches_ours(lengths, sol, version, rule):
    cfg = to_lhotse(sol, lhotse_version=version)
    assert cfg["num_buckets"] == len(cfg["duration_bins"]) + 1 == len(sol.boundaries)
    assert cfg["duration_bins"] == sorted(cfg["duration_bins"])
    for x in range(1, int(lengths.max()) + 1):
        assert rule(cfg["duration_bins"], x) == our_bucket(sol.boundaries, x), x
    nemo = to_nemo(sol, lhotse_version=version)["bucket_duration_bins"]
    for x in range(1, int(lengths.max()) + 1):
        assert rule(nemo, x) == our_bucket(sol.boundaries, x), x


def test_lhotse_version_is_detected_or_refused(monkeypatch):
    import bucketopt.show.export as ex

    sol = bucketopt.solve([3, 4, 10, 11, 12], k=2)
    monkeypatch.setattr(ex, "installed_lhotse_version", lambda: "1.20.0")
    assert to_lhotse(sol, lhotse_version="1.33.0")["duration_bins"] == [4]
    assert "1.20.0 installed" in ex.lhotse_target()
    monkeypatch.setattr(ex, "installed_lhotse_version", lambda: None)
    assert to_lhotse(sol)["duration_bins"] == [4]  # no Lhotse: the current rule
    assert "no Lhotse installed" in ex.lhotse_target()
    for bad in ("latest", "", 1.3):
        with pytest.raises(BucketoptError, match="lhotse_version"):
            to_lhotse(sol, lhotse_version=bad)


@pytest.mark.parametrize("lengths, sol", CASES)
def test_nemo_rule_matches_ours(lengths, sol):
    cfg = to_nemo(sol, lhotse_version="1.33.0")
    bins, sizes = cfg["bucket_duration_bins"], cfg["bucket_batch_size"]
    assert len(bins) == len(sizes) == len(sol.boundaries)
    for x in range(1, int(lengths.max()) + 1):
        i = nemo_bucket(bins, x)
        assert i == our_bucket(sol.boundaries, x), x
        assert sizes[i] == sol.batch_sizes[i]
    assert nemo_bucket(bins, bins[-1] + 1) is None  # longer than the last edge: no bucket


@pytest.mark.parametrize("lengths, sol", CASES)
def test_tf_rule_matches_ours(lengths, sol):
    cfg = to_tf_data(sol)
    bounds, sizes = cfg["bucket_boundaries"], cfg["bucket_batch_sizes"]
    assert len(sizes) == len(bounds) + 1
    assert cfg["pad_to_bucket_boundary"] is False
    for x in range(1, int(lengths.max()) + 1):
        i = tf_bucket(bounds, x)
        assert i == our_bucket(sol.boundaries, x), x
        assert sizes[i] == sol.batch_sizes[i]


@pytest.mark.parametrize("lengths, sol", CASES)
def test_tf_pad_to_bucket_boundary_pads_to_our_edge(lengths, sol):
    cfg = to_tf_data(sol, pad_to_bucket_boundary=True)
    bounds, sizes = cfg["bucket_boundaries"], cfg["bucket_batch_sizes"]
    assert len(sizes) == len(bounds) + 1
    assert cfg["pad_to_bucket_boundary"] is True
    for x in range(1, int(lengths.max()) + 1):
        i = tf_bucket(bounds, x)
        assert i == our_bucket(sol.boundaries, x), x
        # TF pads to "bucket boundary minus 1" and needs every element < max(boundaries).
        assert bounds[i] - 1 == sol.boundaries[i]
        assert x < max(bounds)
        assert sizes[i] == sol.batch_sizes[i]


def test_edges_themselves_land_in_their_bucket():
    sol = bucketopt.solve([3, 4, 10, 11, 12], k=2, token_budget=24)
    assert sol.boundaries == (4, 12)
    bins = to_lhotse(sol, lhotse_version="1.33.0")["duration_bins"]
    assert lhotse_bucket(bins, 4) == 0
    assert lhotse_bucket(bins, 5) == 1
    assert nemo_bucket(to_nemo(sol, lhotse_version="1.33.0")["bucket_duration_bins"], 4) == 0
    assert tf_bucket(to_tf_data(sol)["bucket_boundaries"], 4) == 0
    assert tf_bucket(to_tf_data(sol)["bucket_boundaries"], 5) == 1


def test_sampler_json_round_trip(tmp_path):
    lengths = np.random.default_rng(3).integers(1, 500, size=300)
    sol = bucketopt.solve(lengths, 4, token_budget=2000)
    cfg = to_sampler_json(sol)
    path = tmp_path / "buckets.json"
    path.write_text(json.dumps(cfg))
    kwargs = sampler_kwargs(path)
    assert kwargs == {"boundaries": sol.boundaries, "token_budget": 2000}
    assert cfg["batch_sizes"] == list(sol.batch_sizes)
    try:
        from bucketopt.training.sampler import BucketBatchSampler
    except ImportError:
        return
    batches = list(BucketBatchSampler(lengths, **kwargs))
    seen = np.sort(np.concatenate([np.asarray(b) for b in batches]))
    assert np.array_equal(seen, np.arange(lengths.size))


def test_exports_that_need_batch_sizes_say_so():
    sol = bucketopt.solve([3, 4, 10, 11, 12], k=2)
    with pytest.raises(BucketoptError, match="token_budget"):
        to_nemo(sol)
    with pytest.raises(BucketoptError, match="token_budget"):
        to_tf_data(sol)
    assert to_lhotse(sol, lhotse_version="1.33.0")["duration_bins"] == [4]


def test_bad_inputs_are_clear_errors(tmp_path):
    sol = bucketopt.solve([3, 4, 10, 11, 12], k=2)
    with pytest.raises(BucketoptError, match="format"):
        export(sol, "yaml")
    with pytest.raises(BucketoptError, match="Solution"):
        to_lhotse([4, 12])
    bad = tmp_path / "bad.json"
    bad.write_text('{"boundaries": [1]}')
    with pytest.raises(BucketoptError, match="sampler config"):
        sampler_kwargs(bad)
    bad.write_text("[" * 100_000 + "]" * 100_000)  # nesting deeper than the recursion limit
    with pytest.raises(BucketoptError, match="not valid JSON"):
        sampler_kwargs(bad)
    for cfg, word in (({}, "boundaries"), ({"boundaries": 5}, "boundaries"),
                      ({"boundaries": [5, 3], "token_budget": 9}, "strictly increasing"),
                      ({"boundaries": [3, 5]}, "token_budget"),
                      ({"boundaries": [3, 5], "token_budget": "9"}, "token_budget")):
        with pytest.raises(BucketoptError, match=word):
            sampler_kwargs({"format": "bucketopt.training.sampler/1", **cfg})


def test_cli_export_matches_python(tmp_path, capsys):
    lengths = np.random.default_rng(5).integers(10, 3000, size=2000)
    path = tmp_path / "lens.npy"
    np.save(path, lengths)
    sol = bucketopt.solve(lengths, 4, token_budget=8192)
    for fmt, fn in (("tf", to_tf_data), ("nemo", to_nemo), ("lhotse", to_lhotse),
                    ("sampler", to_sampler_json)):
        assert main(["export", "--lens", str(path), "-k", "4", "--token-budget", "8192",
                     "--format", fmt]) == 0
        assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(fn(sol)))
    out = tmp_path / "tf.json"
    assert main(["export", "--lens", str(path), "--boundaries", "1000,2000,3000",
                 "--token-budget", "8192", "-f", "tf", "--pad-to-bucket-boundary", "-o",
                 str(out), "-q"]) == 0
    assert json.loads(out.read_text())["bucket_boundaries"] == [1001, 2001, 3001]


@pytest.mark.parametrize("argv", [
    ["export", "-k", "3", "--boundaries", "5,9", "-f", "tf"],
    ["export", "-f", "tf"],
    ["export", "-k", "3", "-f", "nemo"],
    ["export", "--boundaries", "5,x", "-f", "lhotse"],
    ["export", "-k", "3", "-f", "lhotse", "--pad-to-bucket-boundary"],
])
def test_cli_export_errors(argv, tmp_path, capsys):
    path = tmp_path / "lens.npy"
    np.save(path, np.arange(1, 50))
    assert main([*argv, "--lens", str(path), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bucketopt: error:")
