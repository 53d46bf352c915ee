"""Expected seconds of a bucketed epoch step by step, as the sampler runs it (world ranks).

The arrays the time kernels need are built here once per histogram (:class:`TimeArrays`), and
:func:`bucket_seconds` re-scores any boundaries with the same step model as the time DP
(``bucketopt.objectives._time_kernels``; docs/method.md): with ``world`` = 1 the summed
micro-batch time, with ``world`` = G > 1 and buckets synced across ranks, each bucket's
micro-steps, each as long as the slowest of its G batches. (Batches of all buckets in random order:
:mod:`.random_order`.)
"""

from __future__ import annotations

import math

import numpy as np

from ..data.histogram import Histogram
from ..orderstats import log_binomial

PAD_CODES = {"edge": 0, "batch": 1}
# Draw counts up to S0_CAP keep running order-statistic sums in the time DP; fewer when the sums
# could overflow float64 (C(n, S) x length^2 x distinct lengths must stay below 1e290).
S0_CAP = 64


class TimeArrays:
    """Prefix sums over a histogram's distinct lengths and, for dynamic padding, log(a!)."""

    def __init__(self, hist: Histogram, pad: str):
        from ..orderstats import log_factorials

        self.hist = hist
        self.values = hist.values
        counts = hist.counts.astype(np.float64)
        x = hist.values.astype(np.float64)
        self.pcv = np.r_[0, np.cumsum(hist.counts)].astype(np.int64)
        self.pq1 = np.r_[0.0, np.cumsum(counts * x)]
        self.pq2 = np.r_[0.0, np.cumsum(counts * x * x)]
        self.pad_code = PAD_CODES[pad]
        if self.pad_code == 1:
            self.lf_hi, self.lf_lo = log_factorials(hist.n)
        else:
            self.lf_hi = self.lf_lo = np.zeros(1)
        self.s0 = running_draws(hist)


def running_draws(hist: Histogram) -> int:
    """The largest draw count whose running sums cannot overflow (see S0_CAP)."""
    n = max(hist.n, 2)
    scale = 2 * math.log10(float(hist.max_length) + 1) + math.log10(hist.m + 1)
    s0 = 1
    for s in range(2, S0_CAP + 1):
        log_binom = (log_binomial(n, s) if s <= n else 0.0) / math.log(10)
        if log_binom + scale > 290:
            break
        s0 = s
    return s0


def per_bucket_sizes(edges, sizes) -> np.ndarray:
    """Every bucket's batch size: ``sizes`` itself (one per edge), or a token budget T (a
    number) giving T // edge."""
    edges = np.asarray(edges, dtype=np.int64)
    if np.ndim(sizes) == 0:
        return int(sizes) // np.maximum(edges, 1)
    sizes = np.asarray(sizes, dtype=np.int64)
    if sizes.shape != edges.shape:
        raise ValueError("one batch size per edge")
    return sizes


def bucket_features(arrays: TimeArrays, edges, sizes, world: int) -> np.ndarray:
    """(buckets, 3): steps, sum of w E[M] and sum of w E[M^2] over each bucket's steps with
    ``world`` ranks (buckets synced across them); seconds are linear in them (see
    :func:`bucket_seconds`). ``sizes``: every bucket's batch size, or a token budget."""
    from ._time_kernels import bucket_features as kernel

    edges = np.asarray(edges, dtype=np.int64)
    sizes = per_bucket_sizes(edges, sizes)
    cut = np.searchsorted(arrays.values, edges, side="right")
    out = np.zeros((edges.size, 3))
    lo = 0
    for k, hi in enumerate(cut):
        hi = int(hi)
        if hi > lo:
            out[k] = kernel(*kernel_args(arrays, lo, hi, edges[k], sizes[k], world))
        lo = max(lo, hi)
    return out


def kernel_args(arrays: TimeArrays, lo, hi, edge, size, world) -> tuple:
    """The arguments of :func:`._time_kernels.bucket_features` for the bucket of the values
    ``arrays.values[lo:hi]``: the one spelling of its call (:meth:`.time.Time.kernels_ahead`
    compiles it ahead for the same types)."""
    return (arrays.values, arrays.pcv, arrays.pq1, arrays.pq2, int(lo), int(hi), int(edge),
            int(size), int(world), arrays.pad_code, arrays.lf_hi, arrays.lf_lo)


def bucket_seconds(arrays: TimeArrays, edges, sizes, cost_model, world: int) -> np.ndarray:
    """Expected seconds of every bucket of ``edges`` under ``cost_model`` over ``world`` ranks.

    The sum is the epoch time with buckets synced across ``world`` ranks (``world`` = 1: the
    summed micro-batch time).
    """
    m = cost_model
    return bucket_features(arrays, edges, sizes, world) @ np.array([m.alpha, m.beta, m.gamma])


def synced_features(hist: Histogram, edges, sizes, pad: str, world: int) -> np.ndarray:
    """Epoch seconds per unit of alpha, beta and gamma (the step model is linear in them): the
    synced epoch time under (alpha, beta, gamma) is ``features @ (alpha, beta, gamma)``."""
    return bucket_features(TimeArrays(hist, pad), edges, sizes, world).sum(axis=0)
