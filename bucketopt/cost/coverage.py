"""A profile's coefficient sets, and the interval of a prediction repeated over them.

(:mod:`bucketopt.cost.intervals` and :mod:`bucketopt.cost.steps` both read them.)
"""

from __future__ import annotations

import numpy as np


def coefficient_sets(cost_model):
    """(the profile's coefficient sets as an (n, 3) array, their coverage); (empty, 1.0)
    without ``uncertainty``."""
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
