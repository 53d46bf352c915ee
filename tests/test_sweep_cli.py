"""`bucketopt sweep` and the recommended k."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bucketopt
from bucketopt.cli import main
from bucketopt.commands.sweep import parse_k_range
from bucketopt.errors import BucketoptError
from bucketopt.solution import Solution
from bucketopt.solver import recommend_k

from . import naive


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
    # The rule itself: the smallest k from which one more bucket saves at most 1 point.
    fractions = [r["padding_fraction"] for r in out["rows"]]
    expected_k = naive.recommended_k(out["ks"], fractions, 0.01, "padding")
    assert out["recommended_k"] == (out["ks"][-1] if expected_k is None else expected_k)
    assert out["range_too_short"] is (expected_k is None)
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
    # gains per bucket: +90%, +4.5%, +0.76%: k=3 is the first whose next bucket adds <= 1%
    assert recommend_k(ks, sols, 0.01)[0] == 3
    assert recommend_k(ks, sols, 0.05)[0] == 2
    assert "Ktok/s" in recommend_k(ks, sols, 0.01)[1]
    # The padding criterion on the same solutions: every bucket saves 10 points or more.
    k, reason = recommend_k(ks, sols, 0.01, criterion="padding")
    assert k == 4 and "still falls by 10.00 points per bucket at k=4" in reason
    assert "-k 1:8" in reason
    with pytest.raises(BucketoptError):
        recommend_k(ks, [_sol(0.5, None)] * 4, 0.01, criterion="throughput")


def test_recommend_k_counts_the_gain_per_added_bucket():
    # ks 2, 4, 8: padding falls 6 points from 2 to 4 (3 per bucket) then 2 points from 4 to 8
    # (0.5 per bucket): k=4 is the first from which one more bucket saves under 1 point
    sols = [_sol(0.20, None), _sol(0.14, None), _sol(0.12, None)]
    assert recommend_k([2, 4, 8], sols, 0.01)[0] == 4
    assert recommend_k([2, 4, 8], sols, 0.031)[0] == 2  # 3 points per bucket are within 3.1


@settings(max_examples=200, deadline=None)
@given(data=st.data(), criterion=st.sampled_from(["padding", "throughput"]),
       tolerance=st.sampled_from([0.0, 0.001, 0.01, 0.05, 0.2]))
def test_recommend_k_matches_the_rule_on_synthetic_curves(data, criterion, tolerance):
    ks = sorted(data.draw(st.sets(st.integers(1, 64), min_size=1, max_size=12)))
    if criterion == "padding":  # falling, flattening or not, sometimes with bumps
        values = data.draw(st.lists(st.floats(0.0, 1.0), min_size=len(ks), max_size=len(ks)))
        if data.draw(st.booleans()):
            values = sorted(values, reverse=True)
        sols = [_sol(v, None) for v in values]
    else:
        values = data.draw(st.lists(st.floats(0.5, 100.0), min_size=len(ks), max_size=len(ks)))
        if data.draw(st.booleans()):
            values = sorted(values)
        sols = [_sol(0.5, v) for v in values]
    expected = naive.recommended_k(ks, values, tolerance, criterion)
    k, reason = recommend_k(ks, sols, tolerance, criterion=criterion)
    assert k == (ks[-1] if expected is None else expected)
    assert ("sweep a wider range" in reason) is (expected is None)
    if expected is None:
        assert f"-k 1:{2 * ks[-1]}" in reason


def test_heavy_tail_is_not_the_top_of_the_range_and_a_short_range_says_so(capsys):
    # A lognormal capped at 32,768: the padding still falls at k=16, so "the smallest k within
    # 1 point of the best in the range" picked k=15 of 1:16; the rule asks what one more
    # bucket buys, so the answer does not move with the end of the range.
    rng = np.random.default_rng(46)
    lengths = np.clip(np.rint(np.exp(rng.normal(7.2, 1.3, 20_000))), 1, 32_768).astype(np.int64)
    wide = bucketopt.sweep(lengths, range(1, 25), token_budget=65536)
    assert not wide.range_too_short
    assert wide.recommended_k < 16
    fractions = [s.padding_fraction for s in wide.solutions]
    assert wide.recommended_k == naive.recommended_k(wide.ks, fractions, 0.01, "padding")
    narrow = bucketopt.sweep(lengths, range(1, 17), token_budget=65536)
    assert narrow.recommended_k == wide.recommended_k and not narrow.range_too_short
    # a range that ends while each bucket still saves several points: the top, and it says so
    short = bucketopt.sweep(lengths, range(1, 7), token_budget=65536)
    assert short.recommended_k == 6 and short.range_too_short
    assert short.to_dict()["range_too_short"] is True
    assert "still falls by" in short.reason and "-k 1:12" in short.reason


def test_cli_says_on_stderr_when_the_range_is_too_short(tmp_path, capsys):
    rng = np.random.default_rng(46)
    path = tmp_path / "heavy.npy"
    np.save(path, np.clip(np.rint(np.exp(rng.normal(7.2, 1.3, 20_000))), 1, 32_768)
            .astype(np.int64))
    assert main(["sweep", "--lens", str(path), "-k", "1:5", "--token-budget", "65536"]) == 0
    captured = capsys.readouterr()
    assert "sweep a wider range, e.g. -k 1:10" in captured.err
    assert "recommended: k=5" in captured.out
    assert main(["sweep", "--lens", str(path), "-k", "1:5", "--json", "-q"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["range_too_short"] is True and captured.err == ""


def test_embedded_example_flattens_inside_the_range(capsys):
    # the embedded example: one more bucket saves under a point from some k inside 1:16 on,
    # and that k stays the answer when the range grows
    assert main(["sweep", "-k", "1:16", "--token-budget", "65536", "--json", "-q"]) == 0
    out = json.loads(capsys.readouterr().out)
    fractions = [r["padding_fraction"] for r in out["rows"]]
    assert not out["range_too_short"]
    assert out["recommended_k"] == naive.recommended_k(out["ks"], fractions, 0.01, "padding")
    assert out["recommended_k"] < 16
    assert main(["sweep", "-k", "1:24", "--token-budget", "65536", "--json", "-q"]) == 0
    assert json.loads(capsys.readouterr().out)["recommended_k"] == out["recommended_k"]


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
    import bucketopt.objectives.certified.dp as certified

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
