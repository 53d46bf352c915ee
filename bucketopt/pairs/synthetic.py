"""Paired lengths made for the tests and the benchmark (benchmarks/pairs.py): three shapes of
real paired data, seeded, integer-valued.

- ``translation``: source x target tokens, strongly correlated (target ~ 1.1 x source), a
  lognormal source length;
- ``qa``: question x answer tokens, nearly independent (short questions, long-tailed answers);
- ``speech``: audio duration in tenths of a second x transcript tokens, about 3 tokens a
  second with spread, durations 1-20 s.
"""

from __future__ import annotations

import numpy as np

SHAPES = ("translation", "qa", "speech")


def paired_lengths(shape: str, n: int, seed: int = 0, *, cap: int | None = None) -> np.ndarray:
    """``n`` pairs (input, output) of the given ``shape`` (one of :data:`SHAPES`); ``cap``
    bounds both columns (a few thousand distinct pairs come from a small cap)."""
    rng = np.random.default_rng(seed)
    if shape == "translation":
        src = np.exp(rng.normal(3.0, 0.6, n))
        tgt = src * rng.normal(1.1, 0.12, n) + rng.normal(0, 2, n)
        a, b = src, tgt
    elif shape == "qa":
        a = np.exp(rng.normal(2.8, 0.5, n))
        b = np.exp(rng.normal(4.2, 0.9, n))
    elif shape == "speech":
        seconds = np.clip(rng.gamma(4.0, 2.2, n), 1.0, 20.0)
        a = seconds * 10  # tenths of a second
        b = seconds * rng.normal(3.0, 0.6, n)
    else:
        raise ValueError(f"shape must be one of {SHAPES}; got {shape!r}")
    a = np.maximum(np.rint(a), 1).astype(np.int64)
    b = np.maximum(np.rint(b), 1).astype(np.int64)
    if cap is not None:
        a = np.minimum(a, cap)
        b = np.minimum(b, cap)
    return np.stack([a, b], axis=1)
