"""Intervals on predictions: propagate a profile's coefficient uncertainty to Ktok/s and ETA.

A profile may carry ``uncertainty``: a set of coefficient vectors ``(alpha, beta, gamma)``
that are all consistent with what the profile was fitted to (bootstrap resamples of measured
step times from :func:`bucketopt.calibrate`, or the coefficients consistent with published
figures for the story profile) and a ``coverage``. A prediction is made once per coefficient
set; its interval is the central ``coverage`` share of those predictions (``coverage=1``: the
whole range), widened to contain the point prediction. Ktok/s and ETA come from the same epoch
seconds, so ``eta_days_interval`` is ``ktok_per_s_interval`` turned around.

A profile without ``uncertainty`` gives a zero-width interval: nothing is known about its
error, and the interval says so by not pretending otherwise (see docs/cost_model.md).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..errors import BucketoptError
from ..objectives.random_order import analytic_epoch_seconds
from .costmodel import (  # noqa: F401  (parse_uncertainty, MAX_SETS: public here too)
    MAX_SETS,
    SECONDS_PER_DAY,
    CostModel,
    load_profile,
    parse_uncertainty,
)
from .coverage import coefficient_sets as _sets
from .coverage import interval


def _cost_model(profile, world_size=None, epochs=1):
    """A CostModel from a CostModel, a Profile, a name, a path or a dict."""
    if isinstance(profile, CostModel):
        return profile
    return load_profile(profile).cost_model(world_size=world_size, epochs=epochs)


def from_seconds(set_seconds, point_seconds: float, *, real_tokens: int, epochs: int,
                 coverage: float) -> dict:
    """``ktok_per_s_interval`` and ``eta_days_interval`` from epoch seconds per coefficient set."""
    lo, hi = interval(set_seconds, point_seconds, coverage)
    if not lo > 0:  # every figure divides by the seconds: a zero epoch has no rate
        raise BucketoptError(
            f"the profile predicts an epoch of {lo:.3g} s: its coefficients are so small that the "
            "epoch time underflows (a coefficient must be 0 or at least 1e-30 s).")
    return {"ktok_per_s_interval": [real_tokens / hi / 1e3, real_tokens / lo / 1e3],
            "eta_days_interval": [epochs * lo / SECONDS_PER_DAY, epochs * hi / SECONDS_PER_DAY]}


def prediction_intervals(seconds_of, profile, *, real_tokens: int, world_size=None,
                         epochs: int = 1) -> dict:
    """Intervals of any prediction: ``seconds_of(cost_model) -> epoch seconds`` is evaluated
    at the profile's point coefficients and at each of its coefficient sets.

    ``profile`` is a CostModel, a Profile, a shipped name, a JSON path or a dict. This is the
    general (slow) path; :func:`solution_intervals` and :func:`epochs_intervals` are the
    vectorised ones used by ``solve``, ``evaluate`` and ``compare``.

    Examples
    --------
    >>> import bucketopt
    >>> from bucketopt.datasets import seed_like
    >>> from bucketopt.cost.costmodel import epoch_time
    >>> lengths = seed_like()[::100]
    >>> epoch = bucketopt.simulate(lengths, "shuffle", token_budget=65_536)
    >>> out = prediction_intervals(lambda m: epoch_time(epoch, m), "rtx-pro-6000-blackwell",
    ...                            real_tokens=int(lengths.sum()), world_size=None)
    >>> low, high = out["ktok_per_s_interval"]
    >>> bool(low < high)
    True
    """
    model = _cost_model(profile, world_size, epochs)
    sets, coverage = _sets(model)
    point = float(seconds_of(model))
    values = [float(seconds_of(replace(model, alpha=a, beta=b, gamma=g, uncertainty=None)))
              for a, b, g in sets]
    return from_seconds(values, point, real_tokens=int(real_tokens), epochs=model.epochs,
                        coverage=coverage)


def _atom_features(hist, boundaries, sizes, pad):
    """Batch-time atoms of a bucketed epoch as features [1, sL, sL^2] (times are linear in the
    coefficients, the atoms' weights do not depend on them)."""
    from ..objectives.random_order import batch_time_atoms

    columns, weights = [], None
    for unit in ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)):
        times, w = batch_time_atoms(hist, boundaries, sizes, pad, CostModel(*unit))
        columns.append(times)
        weights = w
    return np.stack(columns, axis=1), weights


def _atoms_seconds(times, weights, world_size) -> float:
    from ..objectives.random_order import expected_step_max

    n_batches = round(float(weights.sum()))
    full, rest = divmod(n_batches, world_size)
    step, last = expected_step_max(times, weights, [world_size, max(rest, 1)])
    return full * step + (last if rest else 0.0)


def solution_intervals(solution, hist, cost_model, seconds=None) -> dict:
    """Intervals of the analytic fast path (:func:`bucketopt.cost.intervals.annotate`) for
    ``solution``: its expected epoch time re-evaluated at each coefficient set.

    ``seconds`` is the point prediction when the caller already has it.
    """
    sets, coverage = _sets(cost_model)
    coef = np.array([cost_model.alpha, cost_model.beta, cost_model.gamma])
    g = cost_model.world_size
    values, point = [], seconds
    if sets.size or point is None:
        features, weights = _atom_features(hist, solution.boundaries, solution.batch_sizes,
                                           solution.pad)
        if point is None:
            point = _atoms_seconds(features @ coef, weights, g)
        values = [_atoms_seconds(features @ c, weights, g) for c in sets]
    return from_seconds(values, point, real_tokens=solution.real_tokens,
                        epochs=cost_model.epochs, coverage=coverage)


def _epoch_seconds(epoch, coefs, world_size) -> np.ndarray:
    """Seconds of ``epoch`` (slowest rank per step) for each row of ``coefs``."""
    features = epoch.features()  # [1, s L, s L^2]; packed rows: [1, tokens, sum d^2]
    steps = -(-features.shape[0] // world_size)
    padded = np.zeros((steps * world_size, 3))
    padded[: features.shape[0]] = features
    n_sets = coefs.shape[0]
    if n_sets == 0:
        return np.empty(0)
    # blocks of whole steps with every set (~4M values each): the max over the ranks then runs
    # over rows of n_sets values, as fast for a million batches as for a thousand
    per_block = max(1, 4_000_000 // (world_size * n_sets))
    total = np.zeros(n_sets)
    for lo in range(0, steps, per_block):
        times = padded[lo * world_size:(lo + per_block) * world_size] @ coefs.T  # idle ranks: 0
        total += times.reshape(-1, world_size, n_sets).max(axis=1).sum(axis=0)
    return total


def epochs_intervals(epochs, cost_model) -> dict:
    """Intervals of the mean Ktok/s and ETA over simulated ``epochs`` (a ``compare`` row)."""
    if not epochs:
        raise BucketoptError("no epochs to time.")
    sets, coverage = _sets(cost_model)
    coef = np.array([[cost_model.alpha, cost_model.beta, cost_model.gamma]])
    g, n_epochs = cost_model.world_size, cost_model.epochs
    point_rate, point_eta, set_rate, set_eta = [], [], [], []
    for epoch in epochs:
        real = epoch.total_real_tokens
        point = float(_epoch_seconds(epoch, coef, g)[0])
        seconds = _epoch_seconds(epoch, sets, g) if sets.size else np.empty(0)
        point_rate.append(real / point / 1e3)
        point_eta.append(n_epochs * point / SECONDS_PER_DAY)
        set_rate.append(real / seconds / 1e3)
        set_eta.append(n_epochs * seconds / SECONDS_PER_DAY)
    return {"ktok_per_s_interval": interval(np.mean(set_rate, axis=0), np.mean(point_rate),
                                            coverage),
            "eta_days_interval": interval(np.mean(set_eta, axis=0), np.mean(point_eta),
                                          coverage)}


def annotate(solution, hist, cost_model: CostModel, *, sync_buckets=False):
    """``solution`` with ``ktok_per_s`` and ``eta_days`` from the analytic fast path.

    ``sync_buckets=True``: the ranks take one bucket per micro-step (the sampler's default), and
    the epoch time is the exact sum over buckets of the time DP
    (:mod:`bucketopt.objectives.synced`).
    Otherwise the batches of all buckets run in random order (:func:`analytic_epoch_seconds`).
    With one GPU both are the summed micro-batch time.
    """
    if solution.batch_sizes is None:
        raise BucketoptError("throughput needs a token_budget or a memory model (the batch "
                             "sizes come from it).", param="token_budget")
    sizes = np.asarray(solution.batch_sizes, dtype=np.int64)
    extra = dict(solution.extra)
    if sync_buckets is True:
        from ..objectives.synced import synced_features

        features = synced_features(hist, solution.boundaries, sizes, solution.pad,
                                   cost_model.world_size)
        seconds = float(features @ [cost_model.alpha, cost_model.beta, cost_model.gamma])
        sets, coverage = _sets(cost_model)
        intervals = from_seconds([float(features @ c) for c in sets], seconds,
                                 real_tokens=solution.real_tokens, epochs=cost_model.epochs,
                                 coverage=coverage)
    else:
        seconds = analytic_epoch_seconds(hist, solution.boundaries, sizes, solution.pad,
                                         cost_model)
        intervals = solution_intervals(solution, hist, cost_model, seconds)
    extra.update(profile=cost_model.name, world_size=cost_model.world_size,
                 epochs=cost_model.epochs, epoch_hours=seconds / 3600.0,
                 sync_buckets=sync_buckets)
    extra.update(intervals)
    from .steps import histogram_steps  # p50 / p90 step time and the rank wait

    extra.update(histogram_steps(hist, solution.boundaries, sizes, solution.pad, cost_model,
                                 sync_buckets=sync_buckets))
    return replace(solution, ktok_per_s=solution.real_tokens / seconds / 1e3,
                   eta_days=cost_model.epochs * seconds / SECONDS_PER_DAY, extra=extra)
