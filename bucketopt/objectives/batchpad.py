"""Dynamic padding (``pad="batch"``): the exact expected padding of a bucket and the DP over it.

A bucket of N samples is shuffled and cut into batches of B = floor(T / edge) samples, the last one
partial (r = N mod B); every batch is padded to its own longest member. With c(v) the samples of
the bucket of length <= v, the longest of s samples drawn without replacement satisfies
P(max <= v) = C(c(v), s) / C(N, s), so

    E[max_s] = top - sum_{v < top} (next length - v) * C(c(v), s) / C(N, s)
    padding  = q * B * E[max_B] + r * E[max_r] - (sum of the bucket's lengths),  q = N // B

(r = 1 gives the mean). For large s the probabilities collapse a few lengths below the top, so the
sum is walked from the top down and stops once the rest is provably below 1e-15 of N x top. The
log binomials come from a compensated table of log(a!) while n <= WALK_TABLE_MAX (cached, at
most 32 MiB), and from Stirling differences arranged without cancellation above it
(:func:`bucketopt.orderstats.log_binom_ratio`), so memory does not grow with n.

The DP over this cost lives in :mod:`bucketopt.objectives.batch`.
"""

from __future__ import annotations

import numpy as np

from ..data.histogram import Histogram
from ..errors import BucketoptError
from ..orderstats import expected_max, walk_tables


def expected_padding_per_bucket(hist: Histogram, edges, sizes) -> np.ndarray:
    """Expected dynamic padding (padded tokens) of each bucket: float64 array.

    ``edges`` are inclusive upper edges; ``sizes`` the batch size of each bucket.

    Examples
    --------
    >>> from bucketopt.data.histogram import Histogram
    >>> h = Histogram.from_lengths([1, 2, 3, 4])
    >>> expected_padding_per_bucket(h, [4], [2]).round(6).tolist()  # E[max of 2] = 10/3
    [3.333333]
    """
    return expected_padding_and_fill(hist, edges, sizes)[0]


def expected_padding_and_fill(hist: Histogram, edges, sizes):
    """(expected padding, expected padded tokens of the largest batch) of each bucket.

    The largest batch has min(B, N) rows padded to the longest of them.
    """
    from ._batch_kernels import batch_bucket_cost

    edges = np.asarray(edges, dtype=np.int64)
    sizes = np.asarray(sizes, dtype=np.int64)
    values = hist.values
    pc = np.r_[0, np.cumsum(hist.counts)].astype(np.int64)
    pt = np.r_[0, np.cumsum(hist.values * hist.counts)].astype(np.int64)
    lf_hi, lf_lo = walk_tables(hist.n)
    cut = np.searchsorted(values, edges, side="right")
    out = np.zeros(edges.size)
    full = np.zeros(edges.size)
    lo = 0
    for k, hi in enumerate(cut):
        if hi > lo:
            out[k] = batch_bucket_cost(values, pc, pt, lf_hi, lf_lo, lo, int(hi),
                                       int(sizes[k]), np.inf)
            rows = min(int(sizes[k]), int(pc[hi] - pc[lo]))
            full[k] = rows * expected_max(values, pc, lf_hi, lf_lo, lo, int(hi), rows)
        lo = max(lo, int(hi))
    return out, full


def expected_batch_padding(lengths, batch_size: int) -> float:
    """Expected padded tokens of one bucket shuffled and cut into batches of ``batch_size``."""
    from ..data.histogram import as_histogram

    hist = as_histogram(lengths)
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
            or batch_size < 1:
        raise BucketoptError(f"`batch_size` must be an integer >= 1; got {batch_size!r}.",
                             param="batch_size")
    return float(expected_padding_per_bucket(hist, [hist.max_length], [batch_size])[0])
