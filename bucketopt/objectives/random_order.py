"""Expected seconds of a bucketed epoch whose batches run in random order over G ranks.

The closed form of the time objective when ranks do not share a bucket at each step
(``sync_buckets`` False): :func:`batch_time_atoms` is the law of one micro-batch's time, and
:func:`analytic_epoch_seconds` the expected slowest of G batches drawn from it, step by step.
:func:`bucketopt.cost.intervals.annotate` predicts Ktok/s and ETA with it.
"""

from __future__ import annotations

import numpy as np


def _max_distribution(values, counts, draws):
    """P(longest of ``draws`` samples without replacement = each value) for one bucket."""
    from scipy.special import gammaln

    total = int(counts.sum())
    below = np.cumsum(counts)
    log_cdf = np.full(values.size, -np.inf)
    ok = below >= draws
    log_cdf[ok] = (gammaln(below[ok] + 1) - gammaln(below[ok] - draws + 1)
                   - gammaln(total + 1) + gammaln(total - draws + 1))
    cdf = np.exp(log_cdf)
    return np.diff(np.r_[0.0, cdf])


def batch_time_atoms(hist, boundaries, sizes, pad, cost_model):
    """The distribution of micro-batch times of a bucketed epoch: (times, batch counts).

    Bucket k with N samples yields q = N // B_k batches of B_k rows and one of r = N mod B_k.
    ``pad="edge"``: rows are padded to the edge, every full batch costs the same.
    ``pad="batch"``: rows are padded to the batch's longest member, whose law is the maximum of
    draws without replacement from the bucket. ``sizes``: every bucket's batch size B_k, or a
    token budget T (B_k = T // b_k).
    """
    from .synced import per_bucket_sizes

    edges = np.asarray(boundaries, dtype=np.int64)
    sizes = per_bucket_sizes(edges, sizes)
    which = np.searchsorted(edges, hist.values, side="left")
    parts = [bucket_time_atoms(hist.values[which == k], hist.counts[which == k], int(edge),
                               int(sizes[k]), pad, cost_model) for k, edge in enumerate(edges)]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def bucket_time_atoms(values, counts, edge, batch_size, pad, cost_model):
    """(times, batch counts) of one bucket's micro-batches (see :func:`batch_time_atoms`)."""
    n = int(counts.sum())
    if n == 0:
        return np.empty(0), np.empty(0)
    size = min(int(batch_size), n)
    q, r = divmod(n, size)
    times, weights = [], []
    for rows, batches in ((size, q), (r, 1)):
        if rows == 0 or batches == 0:
            continue
        if pad == "edge":
            times.append(np.atleast_1d(cost_model.micro_batch_time(rows, edge)))
            weights.append(np.array([float(batches)]))
        else:
            times.append(cost_model.micro_batch_time(rows, values))
            weights.append(batches * _max_distribution(values, counts, rows))
    return np.concatenate(times), np.concatenate(weights)


def expected_step_max(times, weights, draws):
    """E[slowest of ``draws`` micro-batches] drawn independently from (times, weights).

    ``draws`` may be a sequence: one expectation per entry, from one sort.
    """
    order = np.argsort(times, kind="stable")  # timsort: merges the buckets' sorted runs fast
    t, w = times[order], weights[order]
    cdf = np.cumsum(w) / w.sum()
    cdf[-1] = 1.0
    cdf[cdf < 1e-30] = 0.0  # powers of tiny values would be subnormal: slow, and irrelevant
    # (t * p).sum(), not np.dot: a threaded BLAS call costs milliseconds on a busy machine.
    out = [float((t * np.diff(cdf ** d, prepend=0.0)).sum()) for d in np.atleast_1d(draws)]
    return out if np.ndim(draws) else out[0]


def analytic_epoch_seconds(hist, boundaries, sizes, pad, cost_model) -> float:
    """Expected epoch time of a bucketed epoch whose batches run in random order.

    With nb batches over G ranks there are nb // G full steps, each lasting the expected slowest
    of G batch times (independent draws from the epoch's batch-time distribution), plus one
    step of the remaining nb mod G batches.
    """
    times, weights = batch_time_atoms(hist, boundaries, sizes, pad, cost_model)
    return _seconds_from_atoms(times, weights, cost_model.world_size)


def _seconds_from_atoms(times, weights, world_size) -> float:
    n_batches = round(float(weights.sum()))
    g = world_size
    full, rest = divmod(n_batches, g)
    step, last = expected_step_max(times, weights, [g, max(rest, 1)])
    return full * step + (last if rest else 0.0)
