"""`bucketopt solve`: the table, --json, and one line + exit 2 on bad input."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import bucketopt
from bucketopt.cli import main


@pytest.fixture
def lens_file(tmp_path):
    rng = np.random.default_rng(0)
    lengths = rng.integers(10, 3000, size=2000)
    path = tmp_path / "seq_len.npy"
    np.save(path, lengths)
    return path, lengths


def test_json_equals_python(lens_file, capsys):
    path, lengths = lens_file
    assert main(["solve", "--lens", str(path), "-k", "4", "--token-budget", "8192", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    sol = bucketopt.solve(lengths, 4, token_budget=8192)
    assert out["boundaries"] == list(sol.boundaries)
    assert out["counts"] == list(sol.counts)
    assert out["padded_tokens"] == sol.padded_tokens
    assert out["real_tokens"] == sol.real_tokens
    assert out["batch_sizes"] == list(sol.batch_sizes)
    assert out["padding_fraction"] == pytest.approx(sol.padding_fraction)


def test_table_for_people(lens_file, capsys):
    path, lengths = lens_file
    assert main(["solve", "--lens", str(path), "-k", "3", "--token-budget", "8192"]) == 0
    out = capsys.readouterr().out
    sol = bucketopt.solve(lengths, 3, token_budget=8192)
    for header in ("bucket", "samples", "share", "tokens", "batch size", "padded tokens",
                   "padding"):
        assert header in out
    assert f"({sol.boundaries[0]}, {sol.boundaries[1]}]" in out
    assert f"{sol.padding_fraction * 100:.2f}%" in out


def test_text_and_csv_inputs(tmp_path, capsys):
    (tmp_path / "a.txt").write_text("5\n7\n\n9\n12\n")
    (tmp_path / "b.csv").write_text("id,seq_len\n1,5\n2,7\n3,9\n4,12\n")
    for name in ("a.txt", "b.csv"):
        assert main(["solve", "--lens", str(tmp_path / name), "-k", "2", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["real_tokens"] == 33


def test_embedded_example_is_the_default(capsys):
    assert main(["solve", "-k", "6", "--json"]) == 0
    captured = capsys.readouterr()
    assert "embedded example" in captured.err
    out = json.loads(captured.out)
    assert len(out["boundaries"]) == 6
    assert 0.17 < out["padding_fraction"] < 0.19


def _write(tmp_path, name, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


@pytest.mark.parametrize(
    ("make_args", "message"),
    [
        (lambda p: ["solve", "--lens", str(p / "missing.npy"), "-k", "3"], "no such file"),
        (lambda p: ["solve", "--lens", _write(p, "bad.npy", b"\x93NUMPY garbage"), "-k", "3"],
         "bad.npy"),
        (lambda p: ["solve", "--lens", _write(p, "e.txt", b""), "-k", "3"], "empty"),
        (lambda p: ["solve", "--lens", _write(p, "n.txt", b"3\nnan\n"), "-k", "3"], "finite"),
        (lambda p: ["solve", "--lens", _write(p, "z.txt", b"3\n0\n"), "-k", "3"], "positive"),
        (lambda p: ["solve", "--lens", _write(p, "f.txt", b"3\n2.5\n"), "-k", "3"], "integers"),
        (lambda p: ["solve", "--lens", _write(p, "w.txt", b"3\nabc\n"), "-k", "3"],
         "not a number"),
        (lambda p: ["solve", "-k", "0"], "-k must be an integer >= 1"),
        (lambda p: ["solve", "-k", "x"], "expected an integer"),
        (lambda p: ["solve", "-k", "3", "--align", "0"], "--align must be"),
        (lambda p: ["solve", "-k", "3", "--gpus", "0"], "--gpus: must be an integer >= 1"),
        (lambda p: ["solve", "-k", "3", "--epochs", "-1"], "--epochs: must be an integer >= 1"),
        (lambda p: ["solve", "-k", "3", "--min-share", "2"], "--min-share must be"),
        (lambda p: ["solve", "-k", "3", "--min-share", "0.5", "--max-share", "0.2"],
         "must not exceed"),
        (lambda p: ["solve", "-k", "3", "--max-share", "0.1"], "infeasible"),
        (lambda p: ["solve", "-k", "3", "--token-budget", "4096"], "smaller than the longest"),
        (lambda p: ["solve"], "required"),
        (lambda p: ["nonsense"], "invalid choice"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, make_args, message):
    assert main(make_args(tmp_path)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    err = [line for line in err if not line.startswith("no --lens given")]
    assert len(err) == 1, err
    assert message in err[0]
    assert "Traceback" not in err[0]


def test_pickled_npy_via_cli(tmp_path, capsys):
    path = tmp_path / "obj.npy"
    np.save(path, np.array([1, "x"], dtype=object), allow_pickle=True)
    assert main(["solve", "--lens", str(path), "-k", "2"]) == 2
    assert "never unpickles" in capsys.readouterr().err


def test_real_subprocess(lens_file):
    path, lengths = lens_file
    done = subprocess.run(
        [sys.executable, "-m", "bucketopt", "solve", "--lens", str(path), "-k", "3", "--json"],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["boundaries"] == list(bucketopt.solve(lengths, 3).boundaries)
    bad = subprocess.run(
        [sys.executable, "-m", "bucketopt", "solve", "--lens", str(path) + "x", "-k", "3"],
        capture_output=True, text=True, timeout=300,
    )
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr
