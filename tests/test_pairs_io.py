"""Pairs from every source (npy (n, 2), text, standard input, Parquet / Arrow / Hugging Face
columns) and the command line on pairs: solve, export, compare."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

import bucketopt
import bucketopt.pairs.load
from bucketopt.cli import main
from bucketopt.errors import BucketoptError
from bucketopt.pairs import assign_bins

from . import naive
from .test_stdin import FakeStdin

PAIRS = np.stack([np.arange(1, 41) * 3 % 97 + 1, np.arange(1, 41) * 7 % 53 + 1], axis=1)


def _sources(tmp_path):
    import pyarrow as pa
    import pyarrow.feather as feather
    import pyarrow.parquet as pq

    np.save(tmp_path / "p.npy", PAIRS)
    (tmp_path / "p.txt").write_text("# input output\n" + "\n".join(
        f"{a}{sep}{b}" for (a, b), sep in zip(PAIRS, [" ", "\t", ","] * 20)) + "\n")
    table = pa.table({"prompt_len": PAIRS[:, 0], "completion_len": PAIRS[:, 1],
                      "ids": [[0] * int(b) for b in PAIRS[:, 1]]})
    pq.write_table(table, tmp_path / "p.parquet")
    feather.write_feather(table, tmp_path / "p.arrow")
    (tmp_path / "p.csv").write_text("prompt_len,completion_len\n" + "\n".join(
        f"{a},{b}" for a, b in PAIRS) + "\n")
    return tmp_path


def test_every_source_gives_the_pairs(tmp_path):
    d = _sources(tmp_path)
    assert (bucketopt.load_lengths(d / "p.npy") == PAIRS).all()
    assert (bucketopt.load_lengths(d / "p.txt") == PAIRS).all()
    cols = ("prompt_len", "completion_len")
    for name in ("p.parquet", "p.arrow", "p.csv"):
        assert (bucketopt.load_lengths(d / name, columns=cols) == PAIRS).all()
    # a token-list column gives its lengths, as in 1-D
    got = bucketopt.load_lengths(d / "p.parquet", columns=("prompt_len", "ids"))
    assert (got == PAIRS).all()


def test_hugging_face_dataset_columns(tmp_path):
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({"src": PAIRS[:, 0].tolist(), "tgt": PAIRS[:, 1].tolist()})
    ds.save_to_disk(str(tmp_path / "hf"))
    assert (bucketopt.load_lengths(tmp_path / "hf", columns="src,tgt") == PAIRS).all()


@pytest.mark.parametrize("bad, match", [
    (dict(columns=("a",)), "two column names"),
    (dict(columns=("a", "a")), "different columns"),
    (dict(columns=("prompt_len", "nope")), "no column"),
    (dict(column="prompt_len", columns=("prompt_len", "completion_len")), "not both"),
])
def test_bad_columns_are_one_line(tmp_path, bad, match):
    d = _sources(tmp_path)
    with pytest.raises(BucketoptError, match=match) as err:
        bucketopt.load_lengths(d / "p.parquet", **bad)
    assert "\n" not in str(err.value)


def test_text_pairs_errors(tmp_path):
    (tmp_path / "bad.txt").write_text("3 4\n5 6 7\n")
    with pytest.raises(BucketoptError, match="line 2 has 3 values"):
        bucketopt.load_lengths(tmp_path / "bad.txt")
    (tmp_path / "zero.txt").write_text("3 4\n0 6\n")
    with pytest.raises(BucketoptError, match="input column"):
        bucketopt.load_lengths(tmp_path / "zero.txt")


def test_cli_solve_on_pairs_from_every_source(tmp_path, capsys, monkeypatch):
    d = _sources(tmp_path)
    expected = bucketopt.solve(PAIRS, 5)
    runs = [["--lens", str(d / "p.npy")], ["--lens", str(d / "p.txt")],
            ["--lens", str(d / "p.parquet"), "--column", "prompt_len,completion_len"]]
    for lens in runs:
        assert main(["solve", *lens, "-k", "5", "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["bins"] == [list(b) for b in expected.bins]
        assert data["padded_tokens"] == expected.padded_tokens
        assert data["unassigned"] == 0 and data["optimality"]["exact"] is True
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    text = "\n".join(f"{a} {b}" for a, b in PAIRS).encode() + b"\n"
    monkeypatch.setattr(sys, "stdin", FakeStdin(text))
    assert main(["solve", "--lens", "-", "-k", "5", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["bins"] == [list(b) for b in expected.bins]
    assert data["source"] == "standard input"


def test_cli_grid_and_table(tmp_path, capsys):
    d = _sources(tmp_path)
    assert main(["solve", "--lens", str(d / "p.npy"), "--grid", "3x2"]) == 0
    out = capsys.readouterr().out
    assert "samples without a bin" in out and "optimality: exact" in out
    sol = bucketopt.solve(PAIRS, None, grid=(3, 2))
    assert f"{sol.padding_fraction:.2%}" in out
    assert main(["solve", "--lens", str(d / "p.npy"), "--grid", "3by2"]) == 2
    assert "grid" in capsys.readouterr().err
    assert main(["solve", "--lens", str(d / "p.npy")]) == 2
    assert "-k K is required" in capsys.readouterr().err


def test_cli_compare_on_pairs(tmp_path, capsys):
    d = _sources(tmp_path)
    assert main(["compare", "--lens", str(d / "p.npy"), "--token-budget", "400", "-k", "7",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = data["strategies"]
    assert {"nemo-30x2", "nemo-6x2", "bucketopt-6x2", "bucketopt-30x2", "bucketopt-k7"} <= set(rows)
    assert sum(row["recommended"] for row in rows.values()) == 1
    assert rows[data["recommended"]]["bucketopt"]
    for row in rows.values():
        if "error" in row:
            continue
        lost = naive.pair_bin_members(PAIRS.tolist(), [tuple(b) for b in row["bins"]])[1]
        assert row["unassigned"] == lost
        if row["bucketopt"]:
            assert lost == 0
    assert rows["bucketopt-k7"]["bins"] == [list(b) for b in bucketopt.solve(PAIRS, 7).bins]


def test_export_other_formats_refuse_pairs(tmp_path, capsys):
    d = _sources(tmp_path)
    assert main(["export", "--lens", str(d / "p.npy"), "--format", "lhotse", "-k", "4"]) == 2
    assert "nemo" in capsys.readouterr().err
    assert main(["export", "--lens", str(d / "p.npy"), "--format", "nemo", "-k", "4"]) == 2
    assert "token" in capsys.readouterr().err
    assert main(["export", "--lens", str(d / "p.npy"), "--format", "nemo", "-k", "4",
                 "--token-budget", "400"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("bucket_duration_bins=[[") and out[1].startswith("bucket_batch_size=")


def test_a_2d_histogram_is_the_pairs(tmp_path, capsys):
    """input, output, count rows (a group-by of an engine) plan as the pairs they count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pairs_, counts = np.unique(PAIRS // 3 + 1, axis=0, return_counts=True)
    pq.write_table(pa.table({"src": pairs_[:, 0], "tgt": pairs_[:, 1], "n": counts}),
                   tmp_path / "hist.parquet")
    hist = bucketopt.load_lengths(tmp_path / "hist.parquet", columns=("src", "tgt", "n"))
    expanded = PAIRS // 3 + 1
    assert hist.n == len(expanded)
    assert bucketopt.solve(hist, 4).bins == bucketopt.solve(expanded, 4).bins
    assert bucketopt.solve(hist, 4).fingerprint == bucketopt.solve(expanded, 4).fingerprint
    assert main(["solve", "--lens", str(tmp_path / "hist.parquet"), "--column", "src,tgt,n",
                 "-k", "4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bins"] == [
        list(b) for b in bucketopt.solve(expanded, 4).bins]


def test_seconds_at_a_resolution(tmp_path, capsys):
    """A duration in seconds taken in whole steps of 0.01 s, rounded up: the bins, times the
    resolution, hold every sample's true duration, and come back in seconds."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(3)
    seconds = np.round(rng.uniform(0.5, 20.0, 600), 2)
    seconds[:3] = [0.07, 1.23, 20.0]  # steps that floats do not hold exactly
    tokens = np.maximum(1, (seconds * 3 + rng.normal(0, 2, 600)).round()).astype(int)
    pq.write_table(pa.table({"duration": seconds, "tokens": tokens}), tmp_path / "s.parquet")
    np.save(tmp_path / "s.npy", np.stack([seconds, tokens], axis=1))
    (tmp_path / "s.txt").write_text("\n".join(f"{d} {t}" for d, t in zip(seconds, tokens)))
    expected = np.stack([np.rint(seconds * 100).astype(int), tokens], axis=1)
    for source, cols in (("s.parquet", ("duration", "tokens")), ("s.npy", None),
                         ("s.txt", None)):
        got = bucketopt.load_lengths(tmp_path / source, columns=cols, resolution=0.01)
        assert (got == expected).all()
    sol = bucketopt.solve(expected, None, grid=(4, 2), token_budget=4000)
    unit = bucketopt.pairs.load.in_unit(sol.bins, 0.01)
    edges = np.array(unit)
    idx = assign_bins(seconds, tokens, edges)  # the true durations, in seconds
    assert (idx >= 0).all()
    assert (idx == assign_bins(expected[:, 0], expected[:, 1], np.array(sol.bins))).all()
    assert main(["solve", "--lens", str(tmp_path / "s.parquet"), "--column", "duration,tokens",
                 "--resolution", "0.01", "--grid", "4x2", "--token-budget", "4000",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["bins_in_unit"] == unit and data["resolution"] == [0.01, None]
    assert main(["export", "--lens", str(tmp_path / "s.npy"), "--resolution", "0.01",
                 "--format", "nemo", "--grid", "4x2", "--token-budget", "4000"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert json.loads(first.split("=", 1)[1]) == unit
    with pytest.raises(BucketoptError, match="resolution"):
        bucketopt.load_lengths(tmp_path / "s.npy", resolution=-1)
    np.save(tmp_path / "zero.npy", np.array([[0.0, 3], [1.5, 4]]))
    with pytest.raises(BucketoptError, match="below one step"):
        bucketopt.load_lengths(tmp_path / "zero.npy", resolution=0.01)
    assert main(["export", "--lens", str(tmp_path / "s.npy"), "--resolution", "0.01",
                 "--format", "nemo", "-k", "4", "--token-budget", "4000", "--max-tps"]) == 2
    assert "--max-tps with --resolution" in capsys.readouterr().err


def test_sweep_on_pairs_is_every_k_solved(tmp_path, capsys):
    sweep = bucketopt.sweep(PAIRS, [1, 2, 4, 8])
    for k, sol in zip(sweep.ks, sweep.solutions):
        assert sol.bins == bucketopt.solve(PAIRS, k).bins
    values = [s.padding_fraction for s in sweep.solutions]
    assert values == sorted(values, reverse=True)
    assert sweep.recommended_k in sweep.ks
    np.save(tmp_path / "p.npy", PAIRS)
    assert main(["sweep", "--lens", str(tmp_path / "p.npy"), "-k", "1:3", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [r["bins"] for r in rows] == [[list(b) for b in bucketopt.solve(PAIRS, k).bins]
                                         for k in (1, 2, 3)]
    with pytest.raises(BucketoptError, match="pairs of lengths take solve"):
        bucketopt.simulate(PAIRS, "sorted", token_budget=1000)


def test_compare_beyond_the_dynamic_dp_says_what_it_scored(monkeypatch):
    """Dynamic padding beyond the exact DP's reach: compare scores the edge optimum under
    dynamic padding, says so in the row, and never calls it exact."""
    from bucketopt.pairs import plans
    from bucketopt.pairs.compare import compare_pairs

    monkeypatch.setattr(plans, "GENERAL_WORK_LIMIT", -1)
    comp = compare_pairs(PAIRS, 4, grids=[(2, 2)], token_budget=600, pad="batch")
    row = comp.strategies["bucketopt-k4"]
    assert "edge-padding optimum" in row["note"] and row["optimality"] is None
    edge = bucketopt.solve(PAIRS, 4)
    assert row["bins"] == [list(b) for b in edge.bins]
    scored = bucketopt.evaluate(PAIRS, edge.bins, pad="batch", token_budget=600)
    assert row["padded_tokens"] == pytest.approx(scored.padded_tokens)
    with pytest.raises(BucketoptError, match="work limit"):
        bucketopt.solve(PAIRS, 4, pad="batch", token_budget=600)
