"""Calibration from measured step times: recovery of known coefficients, the CLI, bad input."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from bucketopt import BucketoptError
from bucketopt.cli import main
from bucketopt.cost.calibration import calibrate

TRUE = dict(alpha=0.04, beta=1.6e-4, gamma=1.9e-8)


def synthetic(n=200, noise=0.02, seed=0, **coeffs):
    """Step times of a sweep of shapes, with relative noise.

    Padded lengths log-uniform in [128, 8192], batch sizes log-uniform from 1 to the most rows a
    131,072-token budget holds: small batches expose alpha, long rows gamma.
    """
    c = {**TRUE, **coeffs}
    rng = np.random.default_rng(seed)
    lens = np.rint(np.exp(rng.uniform(np.log(128), np.log(8192), size=n))).astype(np.int64)
    top = np.log(131_072 // lens)
    sizes = np.rint(np.exp(rng.uniform(0, 1, size=n) * top)).astype(np.int64)
    exact = c["alpha"] + c["beta"] * sizes * lens + c["gamma"] * sizes * lens * lens
    seconds = exact * (1 + noise * rng.standard_normal(n))
    return sizes, lens, seconds


def write_csv(path, sizes, lens, seconds, header="batch_size,padded_len,seconds"):
    rows = [header] + [f"{s},{L},{float(t)!r}" for s, L, t in zip(sizes, lens, seconds)]
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_recovers_known_coefficients_within_five_percent(seed):
    fit = calibrate(*synthetic(seed=seed))
    for key, value in TRUE.items():
        assert getattr(fit, key) == pytest.approx(value, rel=0.05), key
    assert fit.r2 > 0.99 and fit.median_rel_error < 0.03
    assert len(fit.residuals) == 200


def test_exact_data_is_fitted_exactly_and_zero_terms_stay_zero():
    sizes, lens, seconds = synthetic(noise=0.0, alpha=0.0)
    fit = calibrate(sizes, lens, seconds)
    assert fit.alpha == pytest.approx(0.0, abs=1e-9)
    assert fit.beta == pytest.approx(TRUE["beta"], rel=1e-6)
    assert fit.gamma == pytest.approx(TRUE["gamma"], rel=1e-6)
    assert fit.max_rel_error < 1e-6


def test_coefficients_are_never_negative():
    # Times that fall with the batch's tokens would need beta < 0: the fit clamps it at 0.
    sizes = np.array([1, 2, 4, 8, 16, 32])
    lens = np.array([64, 128, 64, 128, 64, 128])
    seconds = 1.0 / (sizes * lens)
    fit = calibrate(sizes, lens, seconds)
    assert min(fit.alpha, fit.beta, fit.gamma) >= 0


def test_cli_json_and_profile_used_by_solve(tmp_path, capsys):
    csv = write_csv(tmp_path / "m.csv", *synthetic())
    out = tmp_path / "profile.json"
    assert main(["calibrate", "--measurements", str(csv), "--json", "-o", str(out),
                 "--gpus", "4", "--token-budget", "65536", "-q"]) == 0
    data = json.loads(capsys.readouterr().out)
    for key, value in TRUE.items():
        assert data[key] == pytest.approx(value, rel=0.05)
    profile = json.loads(out.read_text())
    assert profile["world_size"] == 4 and profile["token_budget"] == 65536
    assert profile["alpha"] == data["alpha"]
    lens = tmp_path / "lens.txt"
    lens.write_text("\n".join(str(x) for x in range(100, 4000, 7)) + "\n")
    assert main(["solve", "--lens", str(lens), "-k", "3", "--profile", str(out), "--epochs", "2",
                 "--json", "-q"]) == 0
    solved = json.loads(capsys.readouterr().out)
    assert solved["token_budget"] == 65536 and solved["world_size"] == 4
    assert solved["ktok_per_s"] > 0 and solved["eta_days"] > 0


def test_cli_table(tmp_path, capsys):
    csv = write_csv(tmp_path / "m.csv", *synthetic())
    assert main(["calibrate", "--measurements", str(csv)]) == 0
    text = capsys.readouterr().out
    assert "gamma" in text and "R^2" in text


@pytest.mark.parametrize("content, match", [
    ("batch_size,padded_len\n1,2\n", "seconds"),
    ("", "empty"),
    ("batch_size,padded_len,seconds\n" + "4,512,0.1\n" * 3, "at least"),
    ("batch_size,padded_len,seconds\n" + "4,512,0.1\n" * 5 + "4,512,-0.1\n", "positive"),
    ("batch_size,padded_len,seconds\n" + "4,512,0.1\n" * 5 + "4,512,abc\n", "number"),
    ("batch_size,padded_len,seconds\n" + "4.5,512,0.1\n" * 6, "integer"),
    ("batch_size,padded_len,seconds\n" + "4,512,0.1\n" * 8, "vary"),
    ("batch_size,padded_len,seconds\n1e300,1e300,0.1\n" + "".join(
        f"{s},{s * 100},0.1\n" for s in range(1, 7)), "out of range"),
])
def test_bad_measurements_exit_2_with_one_line(tmp_path, capsys, content, match):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    assert main(["calibrate", "--measurements", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert match in err


def test_missing_file_and_python_errors(tmp_path, capsys):
    assert main(["calibrate", "--measurements", str(tmp_path / "nope.csv")]) == 2
    assert "does not exist" in capsys.readouterr().err
    with pytest.raises(BucketoptError, match="same length"):
        calibrate([1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6], [1.0] * 5)


def test_subprocess_calibrate(tmp_path):
    csv = write_csv(tmp_path / "m.csv", *synthetic(seed=3))
    proc = subprocess.run([sys.executable, "-m", "bucketopt", "calibrate", "--measurements",
                           str(csv), "--json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["beta"] == pytest.approx(TRUE["beta"], rel=0.05)
