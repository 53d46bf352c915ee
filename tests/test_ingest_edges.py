"""Sources with links (loops, links to files outside, hard links) and histograms whose count
column is float."""
from __future__ import annotations

import glob
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bucketopt.data import io as bio
from bucketopt.errors import BucketoptError


def _two_shards(root):
    (root / "sub").mkdir(parents=True)
    a, b = np.arange(1, 41), np.arange(101, 141)
    np.save(root / "a.npy", a)
    np.save(root / "sub" / "b.npy", b)
    return np.sort(np.concatenate([a, b]))


def test_glob_through_a_link_loop_reads_each_file_once(tmp_path):
    expected = _two_shards(tmp_path / "d")
    os.symlink("..", tmp_path / "d" / "sub" / "loop")  # back to d
    os.symlink(".", tmp_path / "d" / "self")  # d itself, twice over: no 2**depth walk
    os.symlink(".", tmp_path / "d" / "sub" / "again")
    pattern = str(tmp_path / "d" / "**" / "*.npy")
    got = bio.load_lengths(pattern)
    assert np.array_equal(np.sort(got), expected)
    assert len(bio.source_files(pattern)) == 2
    assert bio.load_histogram(pattern).n == expected.size


def test_link_to_a_file_outside_is_read_once(tmp_path):
    expected = _two_shards(tmp_path / "d")
    outside = np.arange(500, 510)
    np.save(tmp_path / "outside.npy", outside)
    os.symlink(tmp_path / "outside.npy", tmp_path / "d" / "sub" / "c.npy")
    for source in (str(tmp_path / "d" / "**" / "*.npy"), str(tmp_path / "d")):
        got = bio.load_lengths(source)
        assert np.array_equal(np.sort(got), np.sort(np.concatenate([expected, outside])))
    # a second name for a file already read (a link or a hard link beside it) is not read again
    os.symlink(tmp_path / "d" / "a.npy", tmp_path / "d" / "a2.npy")
    os.link(tmp_path / "d" / "sub" / "b.npy", tmp_path / "d" / "sub" / "b2.npy")
    for source in (str(tmp_path / "d" / "**" / "*.npy"), str(tmp_path / "d")):
        assert bio.load_lengths(source).size == expected.size + outside.size
        assert len(bio.source_files(source)) == 3


@pytest.mark.parametrize("pattern", ["e/**/*.npy", "e/**", "e/*", "e/*/*", "*/x/*.npy",
                                     "e/.*", "e/**/.*", "e/*/", "e/[ax]*", "**/*.npy",
                                     "e//x/*", "./e/**/*.npy"])
def test_glob_without_loops_matches_python_glob(tmp_path, monkeypatch, pattern):
    monkeypatch.chdir(tmp_path)
    for folder in ("e/x/.h", "e/.hid", "e/y"):
        os.makedirs(folder)
    for name in ("e/a.npy", "e/x/b.npy", "e/x/.h/c.npy", "e/.hid/d.npy", "e/.e.npy",
                 "e/x/c.txt", "e/y/z.npy"):
        np.save(name, np.array([3]))
    os.symlink("y", "e/link")  # a link to a folder is followed, as glob follows it
    expected = sorted({os.path.realpath(p) for p in glob.glob(pattern, recursive=True)
                       if os.path.isfile(p)})
    got = sorted(os.path.realpath(p) for p in bio._glob_files(pattern))
    assert got == expected


@pytest.mark.parametrize("kind", ["float64", "float32"])
def test_float_count_column_of_whole_numbers_is_a_histogram(tmp_path, kind):
    path = tmp_path / "h.parquet"
    pq.write_table(pa.table({"length": [10, 20],
                             "count": pa.array([2.0, 3.0], type=getattr(pa, kind)())}), path)
    assert bio.load_lengths(path).tolist() == [10, 10, 20, 20, 20]
    assert bio.load_histogram(path).n == 5
    assert bio.open_source(path).column.kind == "histogram"


@pytest.mark.parametrize("bad", [2.5, float("nan"), -1.0, float("inf"), 1e300])
def test_float_count_column_with_a_bad_count_is_one_error(tmp_path, bad):
    path = tmp_path / "h.parquet"
    pq.write_table(pa.table({"length": [10, 20, 30], "count": [1.0, 2.0, bad]}), path)
    for read in (bio.load_lengths, bio.load_histogram):
        with pytest.raises(BucketoptError, match=r"count column 'count' .* row 2\b"):
            read(path)


@pytest.mark.parametrize("text", ["length,count\n10,2.0\n20,3.0\n", "length,count\n10,2\n20,3\n"])
def test_text_histogram_with_whole_float_counts(tmp_path, text):
    path = tmp_path / "h.csv"
    path.write_text(text)
    assert bio.load_histogram(path).n == 5


@pytest.mark.parametrize("bad", ["2.5", "nan", "-1", "inf"])
def test_text_histogram_with_a_bad_count_is_one_error(tmp_path, bad):
    path = tmp_path / "h.csv"
    path.write_text(f"length,count\n10,2\n20,{bad}\n")
    with pytest.raises(BucketoptError, match="count"):
        bio.load_lengths(path)
