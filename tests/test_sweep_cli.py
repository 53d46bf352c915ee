"""`bucketopt sweep` and the recommended k."""

from __future__ import annotations

import json

import numpy as np
import pytest

import bucketopt
from bucketopt.cli import main
from bucketopt.commands.sweep import parse_k_range
from bucketopt.errors import BucketoptError
from bucketopt.solution import Solution
from bucketopt.solver import recommend_k


@pytest.fixture
def lens_file(tmp_path):
    lengths = np.random.default_rng(11).integers(20, 4000, size=3000)
    path = tmp_path / "lens.npy"
    np.save(path, lengths)
    return path, lengths


def test_json_has_recommended_k_and_one_row_per_k(lens_file, capsys):
    path, lengths = lens_file
    assert main(["sweep", "--lens", str(path), "-k", "2:9", "--token-budget", "16384",
                 "--json", "-q"]) == 0
    out = json.loads(capsys.readouterr().out)
    expected = bucketopt.sweep(lengths, range(2, 10), token_budget=16384)
    assert out["ks"] == list(range(2, 10))
    assert len(out["rows"]) == 8
    assert out["recommended_k"] == expected.recommended_k
    for row, sol in zip(out["rows"], expected.solutions):
        assert row["boundaries"] == list(sol.boundaries)
        assert row["padding_fraction"] == pytest.approx(sol.padding_fraction)
    # The rule itself: the smallest k within 1 percentage point of the best in the range.
    fractions = [r["padding_fraction"] for r in out["rows"]]
    within = [k for k, f in zip(out["ks"], fractions) if f <= min(fractions) + 0.01 + 1e-12]
    assert out["recommended_k"] == min(within)
    assert out["criterion"] == "padding"


def test_tolerance_moves_the_recommendation(lens_file, capsys):
    path, _ = lens_file
    picks = []
    for tol in ("0", "0.05"):
        assert main(["sweep", "--lens", str(path), "-k", "1:10", "--tolerance", tol,
                     "--json", "-q"]) == 0
        picks.append(json.loads(capsys.readouterr().out)["recommended_k"])
    assert picks[1] < picks[0]


def test_table_marks_the_recommended_k(lens_file, capsys):
    path, lengths = lens_file
    assert main(["sweep", "--lens", str(path), "-k", "6", "-q"]) == 0
    out = capsys.readouterr().out
    k = bucketopt.sweep(lengths, 6).recommended_k
    assert f"recommended: k={k}" in out
    assert sum(line.lstrip().startswith(f"{k}*") for line in out.splitlines()) == 1


def test_plot_written(lens_file, tmp_path):
    path, _ = lens_file
    plot = tmp_path / "sweep.svg"
    assert main(["sweep", "--lens", str(path), "-k", "1:6", "--plot", str(plot), "-q"]) == 0
    assert plot.read_text().lstrip().startswith("<?xml")


@pytest.mark.parametrize("krange", ["5:2", "0:3", "a:b", "1:", ":4", "1.5:3", "-2:3"])
def test_bad_k_range_is_one_line_exit_2(krange, lens_file, capsys):
    path, _ = lens_file
    assert main(["sweep", "--lens", str(path), f"-k={krange}", "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bucketopt: error:") and "-k" in err[0]


def test_parse_k_range():
    assert parse_k_range("3:5") == [3, 4, 5]
    assert parse_k_range("4") == [1, 2, 3, 4]
    with pytest.raises(BucketoptError):
        parse_k_range("0")


def _sol(fraction, rate):
    return Solution(boundaries=(1,), counts=(1,), batch_sizes=None, real_tokens=1,
                    padded_tokens=0, padding_fraction=fraction, ktok_per_s=rate)


def test_recommend_k_throughput_criterion():
    ks = [1, 2, 3, 4]
    sols = [_sol(0.5, 10.0), _sol(0.3, 19.0), _sol(0.2, 19.85), _sol(0.1, 20.0)]
    # 1% of the best Ktok/s (20.0) is 19.8: k=3 is the first at or above it.
    assert recommend_k(ks, sols, 0.01)[0] == 3
    assert recommend_k(ks, sols, 0.06)[0] == 2
    assert "Ktok/s" in recommend_k(ks, sols, 0.01)[1]
    # The padding criterion on the same solutions: within 1 pp of 10% is only k=4.
    assert recommend_k(ks, sols, 0.01, criterion="padding")[0] == 4
    with pytest.raises(BucketoptError):
        recommend_k(ks, [_sol(0.5, None)] * 4, 0.01, criterion="throughput")


def test_sweep_tolerance_validated():
    with pytest.raises(BucketoptError, match="tolerance"):
        bucketopt.sweep([1, 2, 3], 2, tolerance=-1)


def test_real_subprocess(lens_file):
    import subprocess
    import sys
    from pathlib import Path

    path, lengths = lens_file
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-m", "bucketopt", "sweep", "--lens", str(path),
                          "-k", "1:5", "--json", "-q"], capture_output=True, text=True,
                         cwd=root, check=False)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["recommended_k"] == bucketopt.sweep(lengths, 5).recommended_k
    bad = subprocess.run([sys.executable, "-m", "bucketopt", "sweep", "--lens", str(path),
                          "-k", "5:2"], capture_output=True, text=True, cwd=root, check=False)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_table_says_which_rows_are_not_proven(lens_file, capsys, monkeypatch):
    # every row proven: no column; a time DP stopped at its work limit at once: each row says
    # its certified gap (or that no bound was proven), as its JSON optimality does
    import bucketopt.objectives.certified as certified

    path, _ = lens_file
    argv = ["sweep", "--lens", str(path), "-k", "1:3", "--token-budget", "16384", "-q",
            "--profile", "rtx-pro-6000-blackwell", "--gpus", "8", "--pad", "batch"]
    assert main(argv) == 0
    assert "optimum" not in capsys.readouterr().out
    monkeypatch.setattr(certified, "WORK_LIMIT", -1)
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "optimum" in out.splitlines()[1]
    assert main([*argv, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    for k, row in zip((1, 2, 3), rows):
        cert = row["optimality"]
        assert not cert["exact"]
        line = next(x for x in out.splitlines() if x.lstrip().startswith(str(k)))
        assert ("no bound" if cert["gap"] is None else f"gap {cert['gap']:.1e}") in line
