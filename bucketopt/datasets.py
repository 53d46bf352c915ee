"""Embedded example data: a faithful reconstruction of the story's published length distribution.

The story (8x RTX PRO 6000 Blackwell, 902,087 samples) published nine percentiles and six bin
counts of its ``seq_len`` column. :func:`seed_like` returns 902,087 lengths that match all fifteen
figures exactly. Between the published knots the quantile function is a monotone cubic (PCHIP) in
the sample rank, so the density is continuous: no spikes at the knots.
"""

from __future__ import annotations

import numpy as np

N_SAMPLES = 902_087
PERCENTILES = {0: 65, 10: 637, 25: 1035, 50: 1727, 75: 2912, 90: 4200, 95: 4374, 99: 4917,
               100: 8191}
BINS = ((0, 256, 1_140), (256, 512, 47_379), (512, 1024, 172_819), (1024, 2048, 303_816),
        (2048, 4096, 255_713), (4096, 8192, 121_220))
STORY_GUESS = (512, 1024, 2048, 4096, 8192)
"""The boundaries guessed in the story before any data was looked at (powers of two)."""


def published_knots(n: int = N_SAMPLES) -> tuple[np.ndarray, np.ndarray]:
    """(rank, length) points that every faithful reconstruction passes through.

    Percentile p sits at rank p/100 * (n - 1) (numpy's linear rule). A bin edge e with c samples
    below it sits half-way between ranks c - 1 and c at length e - 0.5, so rounding puts exactly
    c samples below e.
    """
    ranks, lengths = [], []
    for p, v in PERCENTILES.items():
        ranks.append(p / 100 * (n - 1))
        lengths.append(float(v))
    cum = np.cumsum([c for _, _, c in BINS])
    for (_, hi, _), c in zip(BINS[:-1], cum[:-1]):
        ranks.append(c - 0.5)
        lengths.append(hi - 0.5)
    order = np.argsort(ranks)
    return np.asarray(ranks)[order], np.asarray(lengths)[order]


def seed_like(*, shuffled: bool = True) -> np.ndarray:
    """902,087 sequence lengths matching every published percentile and bin count.

    Parameters
    ----------
    shuffled : bool
        Return the lengths in a fixed pseudo-random order (like a real dataset on disk);
        ``False`` returns them sorted. Either way the result is deterministic.

    Examples
    --------
    >>> import numpy as np
    >>> from bucketopt.datasets import seed_like
    >>> a = seed_like()
    >>> len(a), int(np.percentile(a, 50)), int(a.max())
    (902087, 1727, 8191)
    """
    from .data.pchip import pchip  # scipy's PchipInterpolator, bit for bit, without its import

    ranks, lengths = published_knots(N_SAMPLES)
    out = np.rint(pchip(ranks, lengths, np.arange(N_SAMPLES, dtype=np.float64))).astype(np.int64)
    if shuffled:
        out = out[np.random.default_rng(902_087).permutation(N_SAMPLES)]
    return out


def piecewise_linear_like(*, shuffled: bool = True) -> np.ndarray:
    """A second reconstruction: the quantile function linear between the published knots.

    It matches the same fifteen published figures as :func:`seed_like` but spreads the samples
    differently between the knots (a piecewise-constant density). Use it to check that a result
    does not hinge on how :func:`seed_like` interpolates.

    Examples
    --------
    >>> import numpy as np
    >>> a = piecewise_linear_like()
    >>> len(a), int(np.percentile(a, 90)), int((a < 512).sum())
    (902087, 4200, 48519)
    """
    ranks, lengths = published_knots(N_SAMPLES)
    out = np.rint(np.interp(np.arange(N_SAMPLES, dtype=np.float64), ranks, lengths))
    out = out.astype(np.int64)
    if shuffled:
        out = out[np.random.default_rng(902_088).permutation(N_SAMPLES)]
    return out
