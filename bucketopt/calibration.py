"""Calibrate the cost model on measured micro-batch step times.

Given measured seconds ``t_i`` of micro-batches of ``s_i`` rows padded to ``L_i``, find
``alpha, beta, gamma >= 0`` minimising the squared *relative* error
``sum_i ((alpha + beta s_i L_i + gamma s_i L_i^2) / t_i - 1)^2``: a non-negative least-squares
problem (rows divided by the measured time, columns scaled to unit norm for conditioning).
Relative error weights a 0.05 s step as much as a 5 s one, so no shape dominates the fit.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .costmodel import CostModel, Profile
from .errors import BucketoptError

COLUMNS = ("batch_size", "padded_len", "seconds")
MIN_ROWS = 6


@dataclass(frozen=True)
class Calibration:
    """Fitted coefficients and the quality of the fit."""

    alpha: float
    beta: float
    gamma: float
    n_measurements: int
    r2: float
    median_rel_error: float
    max_rel_error: float
    rms_rel_error: float
    residuals: tuple = field(default=(), repr=False)  # predicted / measured - 1, per row

    def cost_model(self, world_size: int = 1) -> CostModel:
        return CostModel(self.alpha, self.beta, self.gamma, world_size=world_size,
                         name="calibrated")

    def to_profile(self, *, name="calibrated", description="", world_size=1, token_budget=None,
                   source=None) -> Profile:
        provenance = {
            "method": "non-negative least squares on relative error of measured micro-batch times",
            "n_measurements": self.n_measurements,
            "r2": self.r2,
            "median_rel_error": self.median_rel_error,
            "max_rel_error": self.max_rel_error,
        }
        if source is not None:
            provenance["measurements"] = str(source)
        return Profile(name=name, description=description, alpha=self.alpha, beta=self.beta,
                       gamma=self.gamma, world_size=world_size, token_budget=token_budget,
                       provenance=provenance)

    def to_dict(self) -> dict:
        return {
            "alpha": self.alpha,
            "beta": self.beta,
            "gamma": self.gamma,
            "units": {"alpha": "s", "beta": "s per padded token",
                      "gamma": "s per padded token x padded length"},
            "n_measurements": self.n_measurements,
            "r2": self.r2,
            "median_rel_error": self.median_rel_error,
            "max_rel_error": self.max_rel_error,
            "rms_rel_error": self.rms_rel_error,
        }


def _column(values, name: str, *, integer: bool) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise BucketoptError(f"`{name}` must hold numbers.") from None
    if arr.ndim != 1:
        raise BucketoptError(f"`{name}` must be 1-D; got shape {arr.shape}.")
    bad = ~np.isfinite(arr) | (arr <= 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise BucketoptError(f"`{name}` must be positive; got {arr[i]} in row {i + 1}.")
    if integer and np.any(arr != np.floor(arr)):
        i = int(np.flatnonzero(arr != np.floor(arr))[0])
        raise BucketoptError(f"`{name}` must be an integer; got {arr[i]} in row {i + 1}.")
    return arr


def calibrate(batch_size, padded_len, seconds) -> Calibration:
    """Fit non-negative alpha, beta, gamma to measured micro-batch times.

    Parameters
    ----------
    batch_size, padded_len : array-like of int
        Rows and padded length of each measured micro-batch.
    seconds : array-like of float
        Measured time of each micro-batch (forward + backward + optimizer share).

    Examples
    --------
    >>> s = [1, 2, 4, 8, 16, 4, 2, 1]
    >>> L = [512, 512, 1024, 1024, 2048, 4096, 8192, 8192]
    >>> t = [0.01 + 1e-5 * a * b + 1e-9 * a * b * b for a, b in zip(s, L)]
    >>> round(calibrate(s, L, t).beta * 1e5, 6)
    1.0
    """
    s = _column(batch_size, "batch_size", integer=True)
    length = _column(padded_len, "padded_len", integer=True)
    t = _column(seconds, "seconds", integer=False)
    if not (s.size == length.size == t.size):
        raise BucketoptError(
            f"batch_size, padded_len and seconds must have the same length; got {s.size}, "
            f"{length.size}, {t.size}."
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
    from scipy.optimize import nnls

    with np.errstate(over="ignore"):
        rows = design / t[:, None]
        norms = np.linalg.norm(rows, axis=0)
    if not (np.isfinite(rows).all() and np.isfinite(norms).all()):
        raise BucketoptError("measurements out of range: batch_size x padded_len^2 / seconds "
                             "overflows float64.")
    try:
        scaled, _ = nnls(rows / norms, np.ones_like(t))
    except RuntimeError as exc:  # iteration limit on degenerate data
        raise BucketoptError(f"the least-squares fit did not converge: {exc}") from None
    coef = scaled / norms
    predicted = design @ coef
    rel = predicted / t - 1.0
    ss_res = float(np.sum((predicted - t) ** 2))
    ss_tot = float(np.sum((t - t.mean()) ** 2))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else float("nan")
    return Calibration(
        alpha=float(coef[0]), beta=float(coef[1]), gamma=float(coef[2]),
        n_measurements=int(t.size), r2=r2 if math.isfinite(r2) else 0.0,
        median_rel_error=float(np.median(np.abs(rel))),
        max_rel_error=float(np.max(np.abs(rel))),
        rms_rel_error=float(np.sqrt(np.mean(rel ** 2))),
        residuals=tuple(float(r) for r in rel),
    )


def read_measurements(path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(batch_size, padded_len, seconds) from a CSV with a header naming those columns."""
    path = Path(path)
    if not path.is_file():
        raise BucketoptError(f"measurements file {path} does not exist.")
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None:
                raise BucketoptError(f"measurements file {path} is empty.")
            header = [h.strip().lower() for h in header]
            missing = [c for c in COLUMNS if c not in header]
            if missing:
                raise BucketoptError(
                    f"measurements file {path} lacks the column(s) {', '.join(missing)}; it needs "
                    f"a header with {', '.join(COLUMNS)} (got {', '.join(header) or 'nothing'})."
                )
            idx = [header.index(c) for c in COLUMNS]
            out = [[], [], []]
            for line_no, row in enumerate(reader, start=2):
                if not row or all(not cell.strip() for cell in row):
                    continue
                for col, i in enumerate(idx):
                    try:
                        out[col].append(float(row[i]))
                    except (IndexError, ValueError):
                        cell = row[i] if i < len(row) else ""
                        raise BucketoptError(
                            f"measurements file {path}, line {line_no}: `{COLUMNS[col]}` must be "
                            f"a number; got {cell!r}."
                        ) from None
    except UnicodeDecodeError:
        raise BucketoptError(f"measurements file {path} is not a text CSV.") from None
    except OSError as exc:
        raise BucketoptError(f"could not read measurements file {path}: {exc.strerror}.") from None
    return tuple(np.asarray(c, dtype=np.float64) for c in out)
