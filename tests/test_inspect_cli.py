"""``bucketopt inspect`` and ``--lens`` on the new sources, in-process and once as a subprocess."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bucketopt.cli import main
from bucketopt.commands.common import read_lengths
from bucketopt.commands.inspect import PERCENTILES
from bucketopt.data.histogram import Histogram

from .test_io import ERRORS, _error, _hf_layout, _lists


@pytest.fixture()
def shards(tmp_path):
    rng = np.random.default_rng(21)
    lengths = rng.integers(3, 5000, size=2_500).astype(np.int64)
    table = pa.table({"id": np.arange(lengths.size), "seq_len": lengths,
                      "input_ids": _lists(lengths)})
    directory = tmp_path / "shards"
    directory.mkdir()
    for i, part in enumerate(np.array_split(np.arange(lengths.size), 3)):
        pq.write_table(table.take(part), directory / f"part-{i}.parquet")
    np.save(tmp_path / "lengths.npy", lengths)
    return directory, lengths


def _expected_bins(lengths):
    """(2^j, 2^(j+1)] bins, bucketopt's (a, b] convention, counted sample by sample."""
    low = 0
    while 2 ** (low + 1) < lengths.min():
        low += 1
    edges = [2**low]
    while edges[-1] < lengths.max():
        edges.append(edges[-1] * 2)
    counts = [int(((lengths > a) & (lengths <= b)).sum()) for a, b in zip(edges, edges[1:])]
    return edges, counts


@pytest.mark.parametrize("column", [None, "input_ids"])
def test_inspect_json_matches_numpy(shards, column, capsys):
    directory, lengths = shards
    argv = ["inspect", str(directory), "--json"] + (["--column", column] if column else [])
    assert main(argv) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["format"] == "parquet" and info["files"] == 3
    assert [f["name"] for f in info["schema"]] == ["id", "seq_len", "input_ids"]
    assert info["column"]["name"] == (column or "seq_len")
    assert info["column"]["kind"] == ("list" if column else "integer")
    assert info["n"] == lengths.size
    assert info["min"] == lengths.min() and info["max"] == lengths.max()
    assert info["mean"] == pytest.approx(lengths.mean())
    assert info["real_tokens"] == lengths.sum()
    got = [info["percentiles"][f"P{p}"] for p in PERCENTILES]
    # lengths that occur: the smallest with at least q% at or below it
    assert got == np.percentile(lengths, PERCENTILES, method="inverted_cdf").tolist()
    assert all(isinstance(v, int) for v in got)
    edges, counts = _expected_bins(lengths)
    assert [b["lo"] for b in info["histogram"]] == edges[:-1]
    assert [b["count"] for b in info["histogram"]] == counts
    assert sum(counts) == lengths.size


def test_inspect_table_for_people(shards, capsys):
    directory, lengths = shards
    assert main(["inspect", str(directory)]) == 0
    out = capsys.readouterr().out
    assert "seq_len" in out and "<- used" in out and "input_ids" in out
    assert f"n = {lengths.size:,}" in out and f"max = {lengths.max():,}" in out
    assert "P50" in out and "P100" in out
    edges, counts = _expected_bins(lengths)
    assert f"({edges[0]:,}, {edges[1]:,}]" in out
    assert f"{counts[-1]:,}" in out


def test_inspect_histogram_input(tmp_path, capsys):
    (tmp_path / "h.csv").write_text("length,count\n100,3\n300,1\n")
    assert main(["inspect", str(tmp_path / "h.csv"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["column"]["kind"] == "histogram" and info["n"] == 4 and info["max"] == 300
    assert info["percentiles"]["P0"] == 100


def test_solve_on_shards_equals_solve_on_npy(shards, tmp_path, capsys):
    directory, _ = shards
    assert main(["solve", "--lens", str(tmp_path / "lengths.npy"), "-k", "4", "--json"]) == 0
    from_npy = json.loads(capsys.readouterr().out)
    for lens, column in ((str(directory), None), (str(directory / "*.parquet"), "input_ids")):
        argv = ["solve", "--lens", lens, "-k", "4", "--json"]
        assert main(argv + (["--column", column] if column else [])) == 0
        captured = capsys.readouterr()
        out = json.loads(captured.out)
        assert out["boundaries"] == from_npy["boundaries"]
        assert out["padded_tokens"] == from_npy["padded_tokens"]
        assert (column or "seq_len") in captured.err  # which column was used
    assert main(["solve", "--lens", str(directory), "-k", "4", "--json", "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_read_lengths_streams_unless_per_sample(shards, tmp_path):
    directory, lengths = shards
    args = argparse.Namespace(lens=str(directory), column=None, quiet=True)
    data, label = read_lengths(args)
    assert isinstance(data, Histogram) and data == Histogram.from_lengths(lengths)
    assert label == str(directory)
    per_sample, _ = read_lengths(args, per_sample=True)
    np.testing.assert_array_equal(per_sample, lengths)  # file order kept
    hf = _hf_layout(tmp_path / "hf", pa.table({"input_ids": _lists(lengths)}))
    data, _ = read_lengths(argparse.Namespace(lens=str(hf), column=None, quiet=True))
    assert data == Histogram.from_lengths(lengths)


@pytest.mark.parametrize("kind", ERRORS)
def test_cli_errors_are_one_line_exit_2(kind, tmp_path, capsys):
    source, column, expected = _error(tmp_path, kind)
    argv = ["inspect", str(source)] + (["--column", column] if column else [])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("bucketopt: error: ") and err.count("\n") == 1
    assert expected in err and "Traceback" not in err


def test_real_subprocess(shards):
    directory, lengths = shards
    done = subprocess.run([sys.executable, "-m", "bucketopt", "inspect", str(directory), "--json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["n"] == lengths.size
    bad = subprocess.run([sys.executable, "-m", "bucketopt", "inspect", str(directory),
                          "--column", "nope"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1 and "columns are id (int64), seq_len (int64)" in bad.stderr
