"""Monotone cubic (PCHIP) interpolation in numpy: the embedded example without scipy.

The same arithmetic as ``scipy.interpolate.PchipInterpolator`` (Fritsch-Butland derivatives,
three-point end slopes, the cubic evaluated as c3 + c2 s + c1 s^2 + c0 s^3 from the left knot), so
the embedded example is bit for bit what scipy gives (tests/test_startup.py checks it); importing
scipy.interpolate alone takes longer than the rest of ``bucketopt solve``.
"""

from __future__ import annotations

import numpy as np


def _edge_slope(h0, h1, m0, m1):
    # one-sided three-point estimate of the end derivative, kept shape-preserving
    d = ((2 * h0 + h1) * m0 - h0 * m1) / (h0 + h1)
    if np.sign(d) != np.sign(m0):
        return 0.0
    if np.sign(m0) != np.sign(m1) and abs(d) > 3.0 * abs(m0):
        return 3.0 * m0
    return d


def pchip(x, y, xi) -> np.ndarray:
    """The PCHIP interpolant through (x, y) (x strictly increasing, 3+ points) at ``xi``."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    xi = np.asarray(xi, dtype=np.float64)
    hk = x[1:] - x[:-1]
    mk = (y[1:] - y[:-1]) / hk
    smk = np.sign(mk)
    flat = (smk[1:] != smk[:-1]) | (mk[1:] == 0) | (mk[:-1] == 0)
    w1 = 2 * hk[1:] + hk[:-1]
    w2 = hk[1:] + 2 * hk[:-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        whmean = (w1 / mk[:-1] + w2 / mk[1:]) / (w1 + w2)
    dk = np.zeros_like(y)
    dk[1:-1][~flat] = 1.0 / whmean[~flat]
    dk[0] = _edge_slope(hk[0], hk[1], mk[0], mk[1])
    dk[-1] = _edge_slope(hk[-1], hk[-2], mk[-1], mk[-2])
    # the cubic Hermite pieces, as scipy's CubicHermiteSpline forms them
    slope = np.diff(y) / hk
    t = (dk[:-1] + dk[1:] - 2 * slope) / hk
    c0 = t / hk
    c1 = (slope - dk[:-1]) / hk - t
    c2 = dk[:-1]
    c3 = y[:-1]
    k = np.clip(np.searchsorted(x, xi, side="right") - 1, 0, x.size - 2)
    s = xi - x[k]
    z2 = s * s
    return ((c3[k] + c2[k] * s) + c1[k] * z2) + c0[k] * (z2 * s)
