"""Calibrate the cost model on measured micro-batch step times.

Given measured seconds ``t_i`` of micro-batches of ``s_i`` rows padded to ``L_i``, find
``alpha, beta, gamma >= 0`` of ``t = alpha + beta s L + gamma s L^2`` in four steps:

1. **Pool repeats.** Rows of the same shape (s, L) become one point: the median of their times
   (robust to a stray slow step), so a shape timed 50 times weighs as much as one timed 3 times.
2. **Robust fit on relative error.** Minimise ``sum_i rho((t_model(s_i, L_i) / t_i - 1) / c)``
   with the soft-L1 loss ``rho(z) = 2 (sqrt(1 + z^2) - 1)`` (quadratic for small errors, linear
   for large ones) under ``alpha, beta, gamma >= 0`` (``scipy.optimize.least_squares``, bounded
   trust region). The scale ``c`` is the robust spread of the residuals (1.4826 x their median
   absolute value, from a first non-negative least-squares fit; refined once). Rows whose
   relative error exceeds ``max(4 c_rows, 5%)`` (``c_rows`` the same spread over single rows)
   are outliers: they are dropped and the fit repeated on the rest. Relative error weights a
   0.05 s step as much as a 5 s one, so no shape dominates the fit.
3. **Quality.** R^2 on the pooled times (all rows, and without the outliers), relative errors
   of every row, the outlier rows, and the k-fold held-out error (each fold of shapes predicted
   by a fit that never saw it; outliers excluded).
4. **Uncertainty.** A bootstrap over the pooled shapes (resample with replacement, refit) gives
   95% intervals of the coefficients; the coefficient sets travel in the profile
   (``uncertainty``), and every prediction made with it carries an interval
   (:mod:`bucketopt.cost.intervals`).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import BucketoptError
from ..validate import check_int
from .costmodel import COEFFICIENT_FLOOR, CostModel, Profile

COLUMNS = ("batch_size", "padded_len", "seconds")
MIN_ROWS = 6
MIN_SHAPES = 3
LOSS = "soft_l1"
FOLDS = 5
BOOTSTRAP = 200
# The most folds and bootstrap resamples calibrate() runs (each is one robust refit).
MAX_RESAMPLES = 10_000
COVERAGE = 0.95
OUTLIER_SCALES = 4.0  # a row is an outlier beyond max(4 c, 5%) relative error
OUTLIER_FLOOR = 0.05
SCALE_BOUNDS = (0.005, 0.5)  # the soft-L1 scale c is kept in [0.5%, 50%]
# How repeats of one shape are pooled: their median (the default), or "low", their 25th
# percentile: load from other processes only ever slows a step down, so the fast quarter of the
# repeats is the least inflated figure of a shape on a busy machine (what ``probe`` uses).
POOLS = {"median": 0.5, "low": 0.25}
MAX_LISTED = 1000  # outlier rows listed in to_dict() / the profile (all are counted)


@dataclass(frozen=True)
class Calibration:
    """Fitted coefficients and the quality of the fit.

    ``r2`` and the ``*_rel_error`` fields describe the in-sample fit (every row; R^2 on the
    pooled shape medians); ``heldout`` the k-fold out-of-sample error on shapes; ``intervals``
    the bootstrap coefficient intervals; ``outliers`` the rows the robust fit discounted.
    """

    alpha: float
    beta: float
    gamma: float
    n_measurements: int
    r2: float
    median_rel_error: float
    max_rel_error: float
    rms_rel_error: float
    residuals: tuple = field(default=(), repr=False)  # predicted / measured - 1, per row
    n_shapes: int = 0
    loss: str = LOSS
    scale: float = 0.0  # robust scale c of the relative residuals
    heldout: dict | None = None
    intervals: dict = field(default_factory=dict)
    coefficient_sets: tuple = field(default=(), repr=False)  # bootstrap (alpha, beta, gamma)
    outliers: tuple = ()
    r2_inliers: float | None = None  # R^2 on the pooled shapes without the outlier rows
    pool: str = "median"  # how repeats of a shape were pooled (POOLS)

    def cost_model(self, world_size: int = 1) -> CostModel:
        return CostModel(self.alpha, self.beta, self.gamma, world_size=world_size,
                         name="calibrated")

    def uncertainty(self) -> dict | None:
        """The profile's ``uncertainty`` field: the bootstrap coefficient sets."""
        if not self.coefficient_sets:
            return None
        return {"method": "bootstrap over the measured shapes, robust refit of each resample",
                "coverage": COVERAGE,
                "coefficient_sets": [list(c) for c in self.coefficient_sets]}

    def to_profile(self, *, name="calibrated", description="", world_size=1, token_budget=None,
                   source=None) -> Profile:
        provenance = {
            "method": ("robust (soft-L1) non-negative fit on the relative error of measured "
                       "micro-batch times, repeats of a shape pooled by their "
                       + ("median" if self.pool == "median" else "25th percentile")),
            "n_measurements": self.n_measurements,
            "n_shapes": self.n_shapes,
            "r2": self.r2,
            "median_rel_error": self.median_rel_error,
            "max_rel_error": self.max_rel_error,
            "heldout": self.heldout,
            "intervals": self.intervals,
            "n_outliers": len(self.outliers),
            "outlier_rows": [o["row"] for o in self.outliers[:MAX_LISTED]],
        }
        if source is not None:
            provenance["measurements"] = str(source)
        return Profile(name=name, description=description, alpha=self.alpha, beta=self.beta,
                       gamma=self.gamma, world_size=world_size, token_budget=token_budget,
                       provenance=provenance, uncertainty=self.uncertainty())

    def to_dict(self) -> dict:
        return {
            "alpha": self.alpha,
            "beta": self.beta,
            "gamma": self.gamma,
            "units": {"alpha": "s", "beta": "s per padded token",
                      "gamma": "s per padded token x padded length"},
            "n_measurements": self.n_measurements,
            "n_shapes": self.n_shapes,
            "loss": self.loss,
            "scale": self.scale,
            "r2": self.r2,
            "r2_inliers": self.r2_inliers,
            "pool": self.pool,
            "median_rel_error": self.median_rel_error,
            "max_rel_error": self.max_rel_error,
            "rms_rel_error": self.rms_rel_error,
            "heldout": self.heldout,
            "intervals": self.intervals,
            "n_outliers": len(self.outliers),
            "outliers": list(self.outliers[:MAX_LISTED]),  # the first MAX_LISTED
        }


def _column(values, name: str, *, integer: bool) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise BucketoptError(f"`{name}` must hold numbers.", param=name) from None
    if arr.ndim != 1:
        raise BucketoptError(f"`{name}` must be 1-D; got shape {arr.shape}.", param=name)
    bad = ~np.isfinite(arr) | (arr <= 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise BucketoptError(f"`{name}` must be positive; got {arr[i]} in row {i + 1}.", param=name)
    if integer and np.any(arr != np.floor(arr)):
        i = int(np.flatnonzero(arr != np.floor(arr))[0])
        raise BucketoptError(f"`{name}` must be an integer; got {arr[i]} in row {i + 1}.",
                             param=name)
    return arr


def calibrate(batch_size, padded_len, seconds, *, folds: int = FOLDS,
              bootstrap: int = BOOTSTRAP, seed: int = 0, pool: str = "median") -> Calibration:
    """Fit non-negative alpha, beta, gamma to measured micro-batch times (robustly).

    Parameters
    ----------
    batch_size, padded_len : array-like of int
        Rows and padded length of each measured micro-batch.
    seconds : array-like of float
        Measured time of each micro-batch (forward + backward + optimizer share).
    folds : int
        Folds of the held-out error over the distinct shapes (0: none; else 2 to 10,000).
    bootstrap : int
        Bootstrap resamples for the coefficient intervals (0: none; at most 10,000).
    seed : int
        Seed of the fold split and the bootstrap.
    pool : {"median", "low"}
        How repeats of a shape become one point: their median, or their 25th percentile (the
        least load-inflated figure on a busy machine; :func:`bucketopt.cost.probe.probe`).

    Examples
    --------
    >>> s = [1, 2, 4, 8, 16, 4, 2, 1]
    >>> L = [512, 512, 1024, 1024, 2048, 4096, 8192, 8192]
    >>> t = [0.01 + 1e-5 * a * b + 1e-9 * a * b * b for a, b in zip(s, L)]
    >>> round(calibrate(s, L, t).beta * 1e5, 6)
    1.0
    """
    folds = check_int(folds, "folds", low=0, high=MAX_RESAMPLES)
    bootstrap = check_int(bootstrap, "bootstrap", low=0, high=MAX_RESAMPLES)
    seed = check_int(seed, "seed", low=0, high=2**63 - 1)
    if pool not in POOLS:
        raise BucketoptError(f"`pool` must be one of {', '.join(POOLS)}; got {pool!r}.",
                             param="pool")
    quantile = POOLS[pool]
    if folds == 1:
        raise BucketoptError("`folds` must be 0 (no held-out error) or at least 2 (one fold "
                             "has nothing to train on); got 1.", param="folds")
    s = _column(batch_size, "batch_size", integer=True)
    length = _column(padded_len, "padded_len", integer=True)
    t = _column(seconds, "seconds", integer=False)
    if not (s.size == length.size == t.size):
        raise BucketoptError(
            f"batch_size, padded_len and seconds must have the same length; got {s.size}, "
            f"{length.size}, {t.size}.",
            param=None,
        )
    if s.size < MIN_ROWS:
        raise BucketoptError(
            f"calibration needs at least {MIN_ROWS} measurements; got {s.size}."
        )
    with np.errstate(over="ignore"):  # out-of-range values are refused below
        tokens = s * length
        design = np.stack([np.ones_like(s), tokens, tokens * length], axis=1)
    if np.unique(length).size < 2 or np.unique(tokens).size < 2:
        raise BucketoptError(
            "measurements must vary both the padded length and the tokens per batch (at least 2 "
            "distinct values each) to separate alpha, beta and gamma."
        )
    with np.errstate(over="ignore"):
        rows = design / t[:, None]
        norms = np.linalg.norm(rows, axis=0)
    if not (np.isfinite(rows).all() and np.isfinite(norms).all()):
        raise BucketoptError("measurements out of range: batch_size x padded_len^2 / seconds "
                             "overflows float64.", param=None)
    shapes, pooled_t = _pool(s, length, t, quantile)
    if shapes.shape[0] < MIN_SHAPES:
        raise BucketoptError(
            f"measurements must cover at least {MIN_SHAPES} distinct (batch_size, padded_len) "
            f"shapes to separate alpha, beta and gamma; got {shapes.shape[0]}.",
            param=None,
        )
    pooled = _features(shapes)
    scale_cols = np.linalg.norm(pooled / pooled_t[:, None], axis=0)
    scale_cols[scale_cols == 0] = 1.0

    first = _nnls_fit(pooled, pooled_t, scale_cols)
    scale = _robust_scale(pooled @ first / pooled_t - 1.0)
    coef = _robust_fit(pooled, pooled_t, scale_cols, scale, first)
    scale = _robust_scale(pooled @ coef / pooled_t - 1.0)
    coef = _robust_fit(pooled, pooled_t, scale_cols, scale, coef)
    # Rows far outside the robust scale are dropped and the fit repeated on the rest (a large
    # error in a soft-L1 loss still pulls linearly; a dropped row pulls not at all).
    # The rows' own spread sets the limit: pooled medians are less noisy than single rows.
    rel = design @ coef / t - 1.0
    keep = np.abs(rel) <= max(OUTLIER_SCALES * _robust_scale(rel), OUTLIER_FLOOR)
    if not keep.all():
        kept_shapes, kept_t = _pool(s[keep], length[keep], t[keep], quantile)
        kept = _features(kept_shapes)
        if kept_shapes.shape[0] >= MIN_SHAPES and np.unique(kept_shapes[:, 1]).size >= 2 \
                and np.unique(kept[:, 1]).size >= 2:
            pooled, pooled_t = kept, kept_t
            coef = _robust_fit(pooled, pooled_t, scale_cols, scale, coef)
            scale = _robust_scale(pooled @ coef / pooled_t - 1.0)

    # a coefficient fitted below the profile's floor is rounding noise of a term the data do
    # not show: it is taken as 0, which the profile accepts
    coef = np.where(coef < COEFFICIENT_FLOOR, 0.0, coef)
    predicted = design @ coef
    rel = predicted / t - 1.0
    all_shapes, all_t = _pool(s, length, t, quantile)
    r2 = _r2(_features(all_shapes) @ coef, all_t)
    limit = max(OUTLIER_SCALES * _robust_scale(rel[keep] if keep.any() else rel), OUTLIER_FLOOR)
    outliers = tuple(
        {"row": int(i), "batch_size": int(s[i]), "padded_len": int(length[i]),
         "seconds": float(t[i]), "predicted": float(predicted[i]), "rel_error": float(rel[i])}
        for i in np.flatnonzero(np.abs(rel) > limit)
    )
    r2_inliers = _r2(pooled @ coef, pooled_t)
    rng = np.random.default_rng(seed)
    heldout = _kfold(pooled, pooled_t, scale_cols, scale, coef, folds, rng)
    sets = _bootstrap(pooled, pooled_t, scale_cols, scale, coef, bootstrap, rng)
    intervals = {}
    if sets.size:
        q = (1.0 - COVERAGE) / 2.0
        lo, hi = np.quantile(sets, [q, 1.0 - q], axis=0)
        intervals = {key: [float(min(lo[i], coef[i])), float(max(hi[i], coef[i]))]
                     for i, key in enumerate(("alpha", "beta", "gamma"))}
        intervals["coverage"] = COVERAGE
        intervals["resamples"] = int(bootstrap)
    return Calibration(
        alpha=float(coef[0]), beta=float(coef[1]), gamma=float(coef[2]),
        n_measurements=int(t.size), r2=0.0 if r2 is None else r2,
        median_rel_error=float(np.median(np.abs(rel))),
        max_rel_error=float(np.max(np.abs(rel))),
        rms_rel_error=float(np.sqrt(np.mean(rel ** 2))),
        residuals=tuple(float(r) for r in rel),
        n_shapes=int(all_shapes.shape[0]), loss=LOSS, scale=float(scale), heldout=heldout,
        intervals=intervals, coefficient_sets=tuple(
            tuple(float(v) if v >= COEFFICIENT_FLOOR else 0.0 for v in c) for c in sets),
        outliers=outliers, r2_inliers=r2_inliers, pool=pool,
    )


def _pool(s, length, t, quantile):
    """(distinct shapes (n, 2), median seconds per shape)."""
    shapes, inverse, counts = np.unique(np.stack([s, length], axis=1), axis=0,
                                        return_inverse=True, return_counts=True)
    order = np.argsort(inverse.ravel(), kind="stable")
    groups = np.split(t[order], np.cumsum(counts)[:-1])
    return shapes, np.array([np.quantile(g, quantile) for g in groups])


def _features(shapes) -> np.ndarray:
    """[1, s L, s L^2] per shape."""
    tokens = shapes[:, 0] * shapes[:, 1]
    return np.stack([np.ones(shapes.shape[0]), tokens, tokens * shapes[:, 1]],
                    axis=1).astype(np.float64)


def _r2(predicted, measured) -> float | None:
    """R^2 of ``predicted`` against ``measured`` seconds (None when they do not vary)."""
    ss_tot = float(np.sum((measured - measured.mean()) ** 2))
    if ss_tot <= 0:
        return None
    value = 1.0 - float(np.sum((predicted - measured) ** 2)) / ss_tot
    return value if math.isfinite(value) else None


def _robust_scale(rel) -> float:
    """1.4826 x the median absolute relative residual, kept within SCALE_BOUNDS."""
    c = 1.4826 * float(np.median(np.abs(rel)))
    return float(min(max(c, SCALE_BOUNDS[0]), SCALE_BOUNDS[1]))


def _nnls_fit(design, t, scale_cols) -> np.ndarray:
    """Non-negative least squares on relative error (the robust fit's starting point)."""
    from scipy.optimize import nnls

    rows = design / t[:, None] / scale_cols
    try:
        scaled, _ = nnls(rows, np.ones_like(t))
    except RuntimeError as exc:  # iteration limit on degenerate data
        raise BucketoptError(f"the least-squares fit did not converge: {exc}") from None
    return scaled / scale_cols


def _robust_fit(design, t, scale_cols, scale, start) -> np.ndarray:
    """Soft-L1 fit of the relative error with alpha, beta, gamma >= 0."""
    from scipy.optimize import least_squares

    rows = design / t[:, None] / scale_cols
    x0 = np.maximum(start * scale_cols, 1e-12)
    result = least_squares(lambda x: rows @ x - 1.0, x0, jac=lambda x: rows,
                           bounds=(0.0, np.inf), loss=LOSS, f_scale=scale, method="trf",
                           x_scale=1.0)
    x = result.x
    # A coefficient the fit drives to the bound is exactly 0 (not round-off above it).
    x = np.where(x < 1e-9 * max(float(x.max()), 1e-300), 0.0, x)
    return x / scale_cols


def _kfold(design, t, scale_cols, scale, coef, folds, rng) -> dict | None:
    """Held-out relative error: each fold of shapes predicted by a fit on the others."""
    n = t.size
    k = min(int(folds), n)
    if k < 2 or n < MIN_SHAPES + 1:
        return None
    order = rng.permutation(n)
    errors = np.empty(n)
    for f in range(k):
        test = order[f::k]
        train = np.setdiff1d(order, test)
        fit = _robust_fit(design[train], t[train], scale_cols, scale, coef)
        errors[test] = design[test] @ fit / t[test] - 1.0
    err = np.abs(errors)
    return {"folds": k, "median_rel_error": float(np.median(err)),
            "p90_rel_error": float(np.quantile(err, 0.9)),
            "max_rel_error": float(err.max())}


def _bootstrap(design, t, scale_cols, scale, coef, resamples, rng) -> np.ndarray:
    """(resamples, 3) coefficient sets refitted on shapes drawn with replacement."""
    n = t.size
    out = np.empty((int(resamples), 3))
    for b in range(int(resamples)):
        pick = rng.integers(0, n, size=n)
        out[b] = _robust_fit(design[pick], t[pick], scale_cols, scale, coef)
    return out


def read_measurements(path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(batch_size, padded_len, seconds) from a CSV with a header naming those columns."""
    from ..data.guards import TEXT_LIMIT, check_readable_file, short
    from ..data.guards import name as file_name

    check_readable_file(path, f"measurements file {short(str(path))}", limit=TEXT_LIMIT)
    path = Path(path)
    label = file_name(str(path))
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None:
                raise BucketoptError(f"measurements file {label} is empty.")
            header = [h.strip().lower() for h in header]
            twice = [c for c in COLUMNS if header.count(c) > 1]
            if twice:
                raise BucketoptError(
                    f"measurements file {label}: the header names column {twice[0]} twice.")
            missing = [c for c in COLUMNS if c not in header]
            if missing:
                raise BucketoptError(
                    f"measurements file {label} lacks the column(s) {', '.join(missing)}; it needs "
                    f"a header with {', '.join(COLUMNS)} (got {', '.join(header) or 'nothing'})."
                )
            idx = [header.index(c) for c in COLUMNS]
            out = [[], [], []]
            for line_no, row in enumerate(reader, start=2):
                if not row or all(not cell.strip() for cell in row):
                    continue
                if len(row) != len(header):
                    raise BucketoptError(
                        f"measurements file {label}, line {line_no}: {len(row)} fields where the "
                        f"header has {len(header)}; every row needs one value per column."
                    )
                for col, i in enumerate(idx):
                    try:
                        out[col].append(float(row[i]))
                    except (IndexError, ValueError):
                        cell = row[i] if i < len(row) else ""
                        raise BucketoptError(
                            f"measurements file {label}, line {line_no}: `{COLUMNS[col]}` must be "
                            f"a number; got {short(cell, 40)}."
                        ) from None
    except (UnicodeDecodeError, csv.Error):
        raise BucketoptError(f"measurements file {label} is not a text CSV.") from None
    except OSError as exc:
        raise BucketoptError(f"could not read measurements file {label}: {exc.strerror}.") from None
    return tuple(np.asarray(c, dtype=np.float64) for c in out)
