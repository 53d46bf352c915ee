"""The predicted distribution of step times: p50, p90, the mean and the expected rank wait.

The mean step time is all that Ktok/s and ETA need; a training run also sees how steps scatter
(a long bucket's steps against a short one's, a rank that waits for the slowest). The cost
model knows each step's batches and ranks, so the same step model that gives the mean gives
the distribution:

- **From a histogram** (``solve``, ``evaluate``, the plan; :func:`histogram_steps`): every
  bucket's micro-batches as atoms (time, count) exactly as the analytic mean uses them
  (:func:`bucketopt.objectives.random_order.bucket_time_atoms`: full batches and the last
  partial one; with dynamic padding the law of the batch's longest sample). A step is the
  slowest of G micro-batches drawn independently: within one bucket when the ranks take one
  bucket per step (``sync_buckets``), from all buckets' batches otherwise; its distribution
  function is the batches' raised to the power G. Steps weigh by their count.
- **From simulated epochs** (``compare``; :func:`epoch_steps`): every step's time is the
  slowest of its ranks' batches (:func:`bucketopt.cost.costmodel.step_times`), and the
  quantiles are read from those times.

``rank_wait_s`` is the expected seconds a rank waits per step for the slowest one (the step
time minus the mean of the ranks' own times; a rank with no batch in the last step waits the
whole step). Every figure is repeated with the profile's coefficient sets for its interval
(:func:`bucketopt.cost.intervals.interval`).
"""

from __future__ import annotations

import numpy as np

QUANTILES = (0.5, 0.9)
KEYS = ("step_time_p50", "step_time_p90", "step_time_mean", "rank_wait_s")
UNIT_MODELS = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))


def weighted_quantiles(values, weights, qs=QUANTILES) -> list:
    """The smallest value whose cumulative weight reaches each ``q`` of the total.

    Examples
    --------
    >>> weighted_quantiles([1.0, 2.0, 3.0], [5, 4, 1])
    [1.0, 2.0]
    """
    values = np.asarray(values, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    order = np.argsort(values, kind="stable")
    cum = np.cumsum(weights[order])
    total = cum[-1]
    picks = [min(int(np.searchsorted(cum, q * total * (1 - 1e-12), side="left")), cum.size - 1)
             for q in qs]
    return [float(values[order][i]) for i in picks]


def bucket_atoms(hist, boundaries, sizes, pad) -> list:
    """Per non-empty bucket: (features (n, 3) = [1, s L, s L^2] per atom, batch counts (n,))."""
    from ..objectives.random_order import bucket_time_atoms
    from ..objectives.synced import per_bucket_sizes
    from .costmodel import CostModel

    edges = np.asarray(boundaries, dtype=np.int64)
    sizes = per_bucket_sizes(edges, sizes)
    which = np.searchsorted(edges, hist.values, side="left")
    out = []
    for k, edge in enumerate(edges):
        values, counts = hist.values[which == k], hist.counts[which == k]
        if not counts.sum():
            continue
        columns, weights = [], None
        for unit in UNIT_MODELS:
            times, weights = bucket_time_atoms(values, counts, int(edge), int(sizes[k]), pad,
                                               CostModel(*unit))
            columns.append(np.asarray(times, dtype=np.float64))
        out.append((np.stack(columns, axis=1), np.asarray(weights, dtype=np.float64)))
    return out


BLOCK = 4_000_000  # atoms x coefficient sets evaluated at once


def _stats_from_groups(groups, coefs, world) -> np.ndarray:
    """(n_sets, 4): [p50, p90, mean, rank wait] of the steps for each coefficient vector (rows
    of ``coefs``). In each group a step is the slowest of ``world`` independent draws of its
    batch atoms: its distribution function is the batches' to the power ``world``."""
    coefs = np.atleast_2d(np.asarray(coefs, dtype=np.float64))
    atoms = sum(f.shape[0] for f, _ in groups)
    per_block = max(1, BLOCK // max(atoms, 1))
    return np.concatenate([_stats_block(groups, coefs[lo:lo + per_block], world)
                           for lo in range(0, coefs.shape[0], per_block)])


def _stats_block(groups, coefs, world) -> np.ndarray:
    all_t, all_w, waits, counts = [], [], [], []
    for features, weights in groups:
        times = features @ coefs.T  # (atoms, sets)
        order = np.argsort(times, axis=0, kind="stable")
        t = np.take_along_axis(times, order, axis=0)
        w = weights[order]
        total = weights.sum()
        cdf = np.cumsum(w, axis=0) / total
        cdf[-1] = 1.0
        cdf[cdf < 1e-30] = 0.0  # powers of tiny values would be subnormal: slow, irrelevant
        steps = total / world
        p_step = np.diff(cdf ** world, axis=0, prepend=0.0)
        batch_mean = (times * weights[:, None]).sum(axis=0) / total
        all_t.append(t)
        all_w.append(p_step * steps)
        waits.append((t * p_step).sum(axis=0) - batch_mean)
        counts.append(steps)
    t, w = np.concatenate(all_t), np.concatenate(all_w)
    order = np.argsort(t, axis=0, kind="stable")
    t, w = np.take_along_axis(t, order, axis=0), np.take_along_axis(w, order, axis=0)
    cum = np.cumsum(w, axis=0)
    total = cum[-1]
    cols = np.arange(t.shape[1])
    out = np.empty((t.shape[1], 4))
    for j, q in enumerate(QUANTILES):
        out[:, j] = t[np.argmax(cum >= q * total * (1 - 1e-12), axis=0), cols]
    out[:, 2] = (t * w).sum(axis=0) / total
    counts = np.asarray(counts)
    out[:, 3] = np.maximum(np.asarray(waits).T @ counts / counts.sum(), 0.0)
    return out


def _with_intervals(point, per_set, coverage) -> dict:
    from .coverage import interval

    out = {}
    per_set = np.asarray(per_set, dtype=np.float64).reshape(-1, len(KEYS))
    for i, key in enumerate(KEYS):
        out[key] = float(point[i])
        out[key + "_interval"] = interval(per_set[:, i], point[i], coverage)
    return out


def histogram_steps(hist, boundaries, sizes, pad, cost_model, *, sync_buckets=True) -> dict:
    """``step_time_p50``, ``step_time_p90``, ``step_time_mean``, ``rank_wait_s`` (seconds)
    and an ``_interval`` of each for a bucketed epoch of ``hist`` (see the module's text).

    Examples
    --------
    >>> import numpy as np
    >>> from bucketopt.cost.costmodel import CostModel
    >>> from bucketopt.data.histogram import as_histogram
    >>> hist = as_histogram(np.repeat([100, 400], [900, 100]))
    >>> out = histogram_steps(hist, [100, 400], 800, "edge", CostModel(0.1, 1e-4, 0.0))
    >>> round(out["step_time_p50"], 3), round(out["step_time_p90"], 3), out["rank_wait_s"]
    (0.18, 0.18, 0.0)
    """
    from .coverage import coefficient_sets as _sets

    groups = bucket_atoms(hist, boundaries, sizes, pad)
    world = int(cost_model.world_size)
    if sync_buckets is not True and world > 1:
        groups = [(np.concatenate([f for f, _ in groups]), np.concatenate([w for _, w in groups]))]
    coef = np.array([cost_model.alpha, cost_model.beta, cost_model.gamma])
    point = _stats_from_groups(groups, coef, world)[0]
    sets, coverage = _sets(cost_model)
    per_set = _stats_from_groups(groups, sets, world) if sets.size else np.empty((0, 4))
    return _with_intervals(point, per_set, coverage)


def _epoch_stats(features_list, coef, world) -> list:
    times, waits = [], []
    for features in features_list:
        batch = features @ coef
        steps = -(-batch.size // world)
        padded = np.zeros(steps * world)
        padded[: batch.size] = batch
        per_step = padded.reshape(steps, world)
        step = per_step.max(axis=1)
        times.append(step)
        waits.append(step - per_step.mean(axis=1))
    t, wait = np.concatenate(times), np.concatenate(waits)
    p50, p90 = weighted_quantiles(t, np.ones_like(t))
    return [p50, p90, float(t.mean()), float(wait.mean())]


def step_stats(features, world) -> callable:
    """A function ``coef -> [p50, p90, mean, rank wait]`` over the steps of batches with
    ``features`` (rows [1, s L, s L^2] in training order; ``world`` consecutive batches a
    step). A list of feature arrays pools the steps of several epochs."""
    features_list = features if isinstance(features, (list, tuple)) else [features]
    return lambda coef: _epoch_stats(features_list, np.asarray(coef, dtype=np.float64), world)


def epoch_steps(epochs, cost_model) -> dict:
    """The step-time figures and intervals over the steps of simulated ``epochs`` (a list of
    :class:`~bucketopt.training.epoch.Epoch`), as compare's rows time them."""
    from .coverage import coefficient_sets as _sets

    stats = step_stats([e.features() for e in epochs], int(cost_model.world_size))
    point = stats([cost_model.alpha, cost_model.beta, cost_model.gamma])
    sets, coverage = _sets(cost_model)
    return _with_intervals(point, [stats(c) for c in sets], coverage)


# --- steps whose ranks scatter: every rank's time times a measured factor -------------------

def _rank_times(features, coef, world) -> np.ndarray:
    """(steps, world) seconds of each rank's batch (``world`` consecutive batches a step; a
    rank with no batch in the last step: 0)."""
    batch = np.asarray(features, dtype=np.float64) @ np.asarray(coef, dtype=np.float64)
    steps = -(-batch.size // world)
    padded = np.zeros(steps * world)
    padded[: batch.size] = batch
    return padded.reshape(steps, world)


def _check_noise(noise, extra, world) -> tuple:
    from ..errors import BucketoptError

    noise = np.asarray(noise, dtype=np.float64)
    if noise.ndim != 2 or noise.shape[1] != world or noise.shape[0] < 1 \
            or not np.all(np.isfinite(noise)) or np.any(noise <= 0):
        raise BucketoptError(f"noise must be a (rows >= 1, world={world}) array of finite "
                             f"factors > 0 (one row: the ranks' factors in one measured step); "
                             f"got shape {noise.shape}.", param="noise")
    if extra is None:
        return noise, np.zeros(noise.shape[0])
    extra = np.asarray(extra, dtype=np.float64)
    if extra.shape != (noise.shape[0],) or not np.all(np.isfinite(extra)):
        raise BucketoptError(f"extra must hold one finite number of seconds per row of noise "
                             f"({noise.shape[0]}); got shape {extra.shape}.", param="extra")
    return noise, extra


def noisy_step_stats(features, world, coef, noise, extra=None) -> list:
    """[p50, p90, mean, rank wait] of the steps when the ranks' times scatter.

    Each step's rank times (``features @ coef``, ``world`` consecutive batches a step, as
    :func:`step_stats`) are multiplied by one row of ``noise``, a (K, ``world``) array whose
    rows are the ranks' factors (measured time / the cost model's) in one measured step, each
    row equally likely and drawn anew for every step; rows keep the ranks' factors together, so
    ranks that slow each other down (sharing cores) do so in the prediction too. A step lasts as
    long as its slowest rank, plus the row's ``extra`` seconds (K,; default 0): what every rank
    waited in that measured step beyond the slowest rank (a barrier's own latency, a waiting
    process woken late); the rank wait is the step less the mean of its ranks' times. The
    figures are exact: the distribution of a step is the mixture of the n steps' K outcomes
    (p50 and p90 its inverse distribution function, as :func:`weighted_quantiles`), held in
    memory (n K ``world`` values: for a slice of steps, not an epoch).

    Examples
    --------
    >>> features = [[1.0, 0.0, 0.0]] * 4          # two steps of two ranks, 1 s a batch
    >>> noise = [[1.0, 1.0], [1.0, 3.0]]          # half the time one rank takes 3x
    >>> noisy_step_stats(features, 2, [1.0, 0.0, 0.0], noise)
    [1.0, 3.0, 2.0, 0.5]
    >>> noisy_step_stats(features, 2, [1.0, 0.0, 0.0], noise, extra=[0.5, 0.5])
    [1.5, 3.5, 2.5, 1.0]
    """
    world = int(world)
    noise, extra = _check_noise(noise, extra, world)
    per_step = _rank_times(features, coef, world)
    outcomes = per_step[:, None, :] * noise[None, :, :]  # (steps, K, world)
    slowest = outcomes.max(axis=2)
    step = (slowest + extra[None, :]).ravel()
    wait = (slowest - outcomes.mean(axis=2) + extra[None, :]).ravel()
    p50, p90 = weighted_quantiles(step, np.ones_like(step))
    return [p50, p90, float(step.mean()), float(wait.mean())]


def sampled_step_stats(features, world, coefs, noise, extra=None, *, draws=2000,
                       seed=0) -> np.ndarray:
    """(draws, 4): [p50, p90, mean, rank wait] of the n steps of ``features`` as one run
    measures them, ``draws`` times over: each draw takes a coefficient vector (a row of
    ``coefs``, in turn) and, for every step, a row of ``noise`` (and its ``extra``) at random
    (see :func:`noisy_step_stats`); p50 and p90 are numpy's linear quantiles of the n step
    times, as measured. Their spread is how much a run of n steps scatters about
    :func:`noisy_step_stats`' figures."""
    from ..errors import BucketoptError

    world = int(world)
    noise, extra = _check_noise(noise, extra, world)
    coefs = np.atleast_2d(np.asarray(coefs, dtype=np.float64))
    if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) \
            or not 1 <= draws <= 1_000_000:
        raise BucketoptError(f"draws must be an integer in [1, 1,000,000]; got {draws!r}.",
                             param="draws")
    rng = np.random.default_rng(seed)
    base = np.stack([_rank_times(features, c, world) for c in coefs])  # (sets, steps, world)
    out = np.empty((draws, 4))
    block = max(1, 4_000_000 // max(base.shape[1] * world, 1))
    for lo in range(0, draws, block):
        n = min(block, draws - lo)
        rows = rng.integers(0, noise.shape[0], (n, base.shape[1]))
        times = base[np.arange(lo, lo + n) % coefs.shape[0]] * noise[rows]
        slowest = times.max(axis=2)
        step = slowest + extra[rows]
        out[lo:lo + n, 0:2] = np.quantile(step, [0.5, 0.9], axis=1).T
        out[lo:lo + n, 2] = step.mean(axis=1)
        out[lo:lo + n, 3] = (step - times.mean(axis=2)).mean(axis=1)
    return out


def scatter_rows(busy, wait, predicted) -> tuple:
    """(noise, extra) for :func:`noisy_step_stats` from steps timed in lockstep (every rank
    the same shape): ``busy`` and ``wait``, (K, world) seconds, each rank's step less its
    barrier wait, and that wait; ``predicted`` (K,), the cost model's time of each step's shape.
    A row's factors are the ranks' busy times over the prediction; its extra, the ranks' mean
    wait less what the factors make them wait (the slowest busy time less the mean), so that
    with the same coefficients every measured step is reproduced exactly: its time (the mean
    over ranks of busy + wait) and its mean wait.

    Examples
    --------
    >>> noise, extra = scatter_rows([[1.0, 2.0]], [[1.25, 0.25]], [2.0])
    >>> noise.tolist(), extra.tolist()
    ([[0.5, 1.0]], [0.25])
    """
    busy = np.asarray(busy, dtype=np.float64)
    wait = np.asarray(wait, dtype=np.float64)
    predicted = np.asarray(predicted, dtype=np.float64)
    noise = busy / predicted[:, None]
    extra = wait.mean(axis=1) - (busy.max(axis=1) - busy.mean(axis=1))
    return noise, extra
