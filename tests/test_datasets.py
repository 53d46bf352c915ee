"""The embedded example reproduces every published figure exactly and smoothly."""

from __future__ import annotations

import numpy as np

import bucketopt
from bucketopt.datasets import BINS, N_SAMPLES, PERCENTILES, STORY_GUESS, seed_like


def test_seed_like_matches_every_published_figure():
    lengths = seed_like()
    assert lengths.shape == (N_SAMPLES,) and lengths.dtype == np.int64
    for p, value in PERCENTILES.items():
        assert int(np.percentile(lengths, p)) == value, p
    for lo, hi, count in BINS:
        assert int(((lengths >= lo) & (lengths < hi)).sum()) == count, (lo, hi)


def test_seed_like_is_deterministic_and_shuffled():
    a, b = seed_like(), seed_like()
    np.testing.assert_array_equal(a, b)
    s = seed_like(shuffled=False)
    np.testing.assert_array_equal(np.sort(a), s)
    assert not np.array_equal(a, s)


def test_seed_like_has_no_spikes_at_the_knots():
    """Counts per length change smoothly: no length holds far more than its neighbourhood."""
    counts = np.bincount(seed_like(), minlength=8192)[65:4900]
    window = 15
    kernel = np.ones(window) / window
    local = np.convolve(counts, kernel, mode="same")[window:-window]
    inner = counts[window:-window]
    assert np.max(inner / np.maximum(local, 1)) < 1.5


def test_story_figures():
    lengths = seed_like()
    optimal = bucketopt.solve(lengths, 6)
    guess = bucketopt.evaluate(lengths, STORY_GUESS)
    assert 0.17 < optimal.padding_fraction < 0.19
    assert 0.33 < guess.padding_fraction < 0.35
