"""Robust calibration: pooled repeats, outliers, held-out error and bootstrap intervals."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bucketopt import BucketoptError
from bucketopt.cli import main
from bucketopt.cost.calibration import calibrate

from .test_calibrate_cli import TRUE, synthetic, write_csv


def plain_nnls(sizes, lens, seconds):
    """Reference: non-negative least squares on relative error, every row, no pooling."""
    from scipy.optimize import nnls

    s, length, t = (np.asarray(a, dtype=float) for a in (sizes, lens, seconds))
    design = np.stack([np.ones_like(s), s * length, s * length ** 2], axis=1) / t[:, None]
    norms = np.linalg.norm(design, axis=0)
    coef, _ = nnls(design / norms, np.ones_like(t))
    return coef / norms


def test_repeats_are_pooled():
    sizes, lens, seconds = synthetic(n=60, seed=4)
    once = calibrate(sizes, lens, seconds, bootstrap=0)
    thrice = calibrate(np.tile(sizes, 3), np.tile(lens, 3), np.tile(seconds, 3), bootstrap=0)
    assert thrice.n_measurements == 3 * once.n_measurements
    assert thrice.n_shapes == once.n_shapes == len(set(zip(sizes, lens)))
    for key in ("alpha", "beta", "gamma"):
        assert getattr(thrice, key) == pytest.approx(getattr(once, key), rel=1e-9)


def test_a_slow_repeat_does_not_move_its_shape():
    # Three repeats of every shape, one of them 5x slow: the median ignores it.
    sizes, lens, seconds = synthetic(n=40, noise=0.0, seed=5)
    slow = seconds.copy()
    slow[::7] *= 5
    fit = calibrate(np.tile(sizes, 3), np.tile(lens, 3), np.r_[seconds, seconds, slow],
                    bootstrap=0)
    for key, value in TRUE.items():
        assert getattr(fit, key) == pytest.approx(value, rel=1e-6), key
    assert {o["row"] for o in fit.outliers} == {80 + i for i in range(0, 40, 7)}


@pytest.mark.parametrize("factor, count", [(3.0, 20), (0.2, 6)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_outlier_rows_are_flagged_and_do_not_drag_the_fit(seed, factor, count):
    # Slow rows (a busy machine) and fast ones (a timer that missed work) alike.
    sizes, lens, seconds = synthetic(seed=seed)
    rng = np.random.default_rng(100 + seed)
    bad = rng.choice(seconds.size, size=count, replace=False)
    busy = seconds.copy()
    busy[bad] *= factor
    fit = calibrate(sizes, lens, busy, bootstrap=0)
    for key, value in TRUE.items():
        assert getattr(fit, key) == pytest.approx(value, rel=0.05), key
    flagged = {o["row"] for o in fit.outliers}
    assert set(bad.tolist()) <= flagged and len(flagged - set(bad.tolist())) <= 3
    assert fit.r2_inliers > 0.99 and fit.r2_inliers > fit.r2
    # Plain least squares on every row is dragged further by the same rows.
    naive = plain_nnls(sizes, lens, busy)
    robust_err = max(abs(fit.beta / TRUE["beta"] - 1), abs(fit.gamma / TRUE["gamma"] - 1))
    naive_err = max(abs(naive[1] / TRUE["beta"] - 1), abs(naive[2] / TRUE["gamma"] - 1))
    assert robust_err < 0.5 * naive_err


def test_heldout_error_is_out_of_sample():
    exact = calibrate(*synthetic(noise=0.0), bootstrap=0)
    assert exact.heldout["median_rel_error"] < 1e-6
    noisy = calibrate(*synthetic(noise=0.05), bootstrap=0)
    h = noisy.heldout
    assert h["folds"] == 5
    # Held-out error is at least the in-sample error and of the size of the noise.
    assert h["median_rel_error"] >= noisy.median_rel_error * 0.95
    assert 0.015 < h["median_rel_error"] < 0.08
    assert calibrate(*synthetic(), folds=0, bootstrap=0).heldout is None


def test_bootstrap_intervals_cover_the_truth_and_shrink_with_data():
    widths = []
    for n in (60, 600):
        fit = calibrate(*synthetic(n=n, seed=7), bootstrap=100)
        for key, value in TRUE.items():
            low, high = fit.intervals[key]
            assert low <= getattr(fit, key) <= high
            assert low <= value * 1.02 and high >= value * 0.98, (n, key)
        widths.append(fit.intervals["beta"][1] - fit.intervals["beta"][0])
        assert len(fit.coefficient_sets) == 100
    assert widths[1] < widths[0]


def test_bootstrap_and_folds_are_validated():
    data = synthetic(n=20)
    for kw in (dict(folds=-1), dict(bootstrap=1.5), dict(bootstrap=True)):
        with pytest.raises(BucketoptError, match="must be an integer"):
            calibrate(*data, **kw)
    with pytest.raises(BucketoptError, match="3 distinct"):
        calibrate([1, 1, 1, 2, 2, 2], [8, 8, 8, 16, 16, 16], [1.0, 1.1, 0.9, 2.0, 2.1, 1.9])


def test_cli_json_reports_robust_fit_and_profile_carries_uncertainty(tmp_path, capsys):
    sizes, lens, seconds = synthetic(seed=3)
    seconds = seconds.copy()
    seconds[:5] *= 4
    csv = write_csv(tmp_path / "m.csv", sizes, lens, seconds)
    out = tmp_path / "p.json"
    assert main(["calibrate", "--measurements", str(csv), "--json", "-o", str(out),
                 "--bootstrap", "50", "-q"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["n_shapes"] == len(set(zip(sizes, lens))) and data["loss"] == "soft_l1"
    assert {0, 1, 2, 3, 4} <= {o["row"] for o in data["outliers"]}
    assert data["heldout"]["folds"] == 5 and data["intervals"]["resamples"] == 50
    for key, value in TRUE.items():
        low, high = data["intervals"][key]
        assert low <= data[key] <= high
        assert data[key] == pytest.approx(value, rel=0.05)
    profile = json.loads(out.read_text())
    assert len(profile["uncertainty"]["coefficient_sets"]) == 50
    assert profile["uncertainty"]["coverage"] == 0.95
    assert main(["calibrate", "--measurements", str(csv)]) == 0
    text = capsys.readouterr().out
    assert "held-out" in text and "outlier" in text and "95% interval" in text
    assert main(["calibrate", "--measurements", str(csv), "--bootstrap", "-1"]) == 2
    assert "--bootstrap" in capsys.readouterr().err
