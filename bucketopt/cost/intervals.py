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

import math
from dataclasses import replace

import numpy as np

from ..errors import BucketoptError

MAX_SETS = 2000  # coefficient sets a profile may carry
SECONDS_PER_DAY = 86_400.0


def parse_uncertainty(value, source: str = "profile") -> dict | None:
    """Validate a profile's ``uncertainty`` field (None when absent).

    Examples
    --------
    >>> parse_uncertainty({"coefficient_sets": [[0.1, 1e-4, 0.0]], "coverage": 1.0})["coverage"]
    1.0
    """
    if value is None:
        return None
    if not isinstance(value, dict):
        raise BucketoptError(f"`uncertainty` in {source} must be a JSON object; got "
                             f"{type(value).__name__}.")
    sets = value.get("coefficient_sets")
    if not isinstance(sets, (list, tuple)) or not sets:
        raise BucketoptError(f"`uncertainty.coefficient_sets` in {source} must be a non-empty "
                             "list of [alpha, beta, gamma].")
    if len(sets) > MAX_SETS:
        raise BucketoptError(f"`uncertainty.coefficient_sets` in {source} holds {len(sets):,} "
                             f"sets; at most {MAX_SETS:,} are allowed.")
    clean = []
    for i, entry in enumerate(sets):
        if not isinstance(entry, (list, tuple)) or len(entry) != 3 or any(
                isinstance(v, bool) or not isinstance(v, (int, float)) for v in entry):
            raise BucketoptError(f"`uncertainty.coefficient_sets[{i}]` in {source} must be "
                                 f"[alpha, beta, gamma] (3 numbers); got {entry!r:.80}.")
        entry = [float(v) for v in entry]
        if not all(math.isfinite(v) and v >= 0 for v in entry) or not any(entry):
            raise BucketoptError(f"`uncertainty.coefficient_sets[{i}]` in {source} must hold "
                                 f"finite numbers >= 0, not all 0; got {entry}.")
        clean.append(entry)
    coverage = value.get("coverage", 1.0)
    if isinstance(coverage, bool) or not isinstance(coverage, (int, float)) \
            or not 0 < coverage <= 1:
        raise BucketoptError(f"`uncertainty.coverage` in {source} must be a number in (0, 1]; "
                             f"got {coverage!r}.")
    out = {key: v for key, v in value.items() if key not in ("coefficient_sets", "coverage")}
    out.update(coverage=float(coverage), coefficient_sets=clean)
    return out


def _cost_model(profile, world_size=None, epochs=1):
    """A CostModel from a CostModel, a Profile, a name, a path or a dict."""
    from .costmodel import CostModel, load_profile

    if isinstance(profile, CostModel):
        return profile
    return load_profile(profile).cost_model(world_size=world_size, epochs=epochs)


def _sets(cost_model):
    unc = getattr(cost_model, "uncertainty", None)
    if not unc:
        return np.empty((0, 3)), 1.0
    return np.asarray(unc["coefficient_sets"], dtype=np.float64), float(unc["coverage"])


def interval(values, point: float, coverage: float) -> list:
    """[low, high]: the central ``coverage`` share of ``values``, widened to hold ``point``."""
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return [float(point), float(point)]
    q = (1.0 - coverage) / 2.0
    lo, hi = np.quantile(values, [q, 1.0 - q])
    return [float(min(lo, point)), float(max(hi, point))]


def from_seconds(set_seconds, point_seconds: float, *, real_tokens: int, epochs: int,
                 coverage: float) -> dict:
    """``ktok_per_s_interval`` and ``eta_days_interval`` from epoch seconds per coefficient set."""
    lo, hi = interval(set_seconds, point_seconds, coverage)
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
    from .costmodel import CostModel, batch_time_atoms

    columns, weights = [], None
    for unit in ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)):
        times, w = batch_time_atoms(hist, boundaries, sizes, pad, CostModel(*unit))
        columns.append(times)
        weights = w
    return np.stack(columns, axis=1), weights


def _atoms_seconds(times, weights, world_size) -> float:
    from .costmodel import expected_step_max

    n_batches = round(float(weights.sum()))
    full, rest = divmod(n_batches, world_size)
    step, last = expected_step_max(times, weights, [world_size, max(rest, 1)])
    return full * step + (last if rest else 0.0)


def solution_intervals(solution, hist, cost_model, seconds=None) -> dict:
    """Intervals of the analytic fast path (:func:`bucketopt.cost.costmodel.annotate`) for
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
