"""Reading lengths where they live: every format yields the same lengths; every bad input is one
clean BucketoptError."""

from __future__ import annotations

import io
import json
import re
import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bucketopt
from bucketopt.data import io as bio
from bucketopt.data.histogram import Histogram, HistogramBuilder
from bucketopt.errors import BucketoptError
from bucketopt.progress import Progress

DOCS = Path(__file__).resolve().parent.parent / "docs" / "ingest.md"


@pytest.fixture(scope="module")
def lengths():
    rng = np.random.default_rng(11)
    return rng.integers(1, 400, size=3_000).astype(np.int64)


def _lists(lengths, large=False):
    """input_ids as a list<int32> column with exactly these lengths (values are arbitrary)."""
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    values = pa.array(np.arange(offsets[-1], dtype=np.int32) % 32000)
    if large:
        return pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()), values)
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values)


def _table(lengths):
    return pa.table({
        "id": np.arange(lengths.size),
        "text": ["x"] * lengths.size,
        "seq_len": pa.array(lengths, pa.int32()),
        "input_ids": _lists(lengths),
    })


def _write_stream(path, table, chunk=700):
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=chunk)


def _hf_layout(directory: Path, table, shards=2):
    """The save_to_disk layout written with pyarrow: state.json + Arrow streaming shards."""
    directory.mkdir(parents=True)
    bounds = np.linspace(0, table.num_rows, shards + 1).astype(int)
    files = []
    for i in range(shards):
        name = f"data-{i:05d}-of-{shards:05d}.arrow"
        _write_stream(directory / name, table.slice(bounds[i], bounds[i + 1] - bounds[i]))
        files.append({"filename": name})
    (directory / "state.json").write_text(json.dumps({"_data_files": files, "_split": None}))
    (directory / "dataset_info.json").write_text("{}")
    return directory


def _write_histogram_parquet(path, lengths):
    hist = Histogram.from_lengths(lengths)
    order = np.random.default_rng(0).permutation(hist.m)  # any row order
    pq.write_table(pa.table({"length": hist.values[order], "count": hist.counts[order]}), path)


def _build(kind, tmp_path, lengths):
    """(source, column) holding ``lengths`` in format ``kind``; column None = automatic choice."""
    table = _table(lengths)
    if kind == "npy":
        np.save(tmp_path / "l.npy", lengths)
        return tmp_path / "l.npy", None
    if kind == "npz":
        np.savez(tmp_path / "l.npz", seq_len=lengths, other=lengths * 2)
        return tmp_path / "l.npz", None
    if kind == "text":
        (tmp_path / "l.txt").write_text("\n".join(map(str, lengths)) + "\n")
        return tmp_path / "l.txt", None
    if kind == "csv-column":
        rows = "".join(f"{i},{x},{2 * x}\n" for i, x in enumerate(lengths))
        (tmp_path / "l.csv").write_text("id,n_tok,double\n" + rows)
        return tmp_path / "l.csv", "n_tok"
    if kind == "parquet":
        pq.write_table(table, tmp_path / "l.parquet", row_group_size=500)
        return tmp_path / "l.parquet", None
    if kind == "parquet-input_ids":
        pq.write_table(table, tmp_path / "l.parquet", row_group_size=500)
        return tmp_path / "l.parquet", "input_ids"
    if kind in ("parquet-dir", "parquet-glob"):
        shards = tmp_path / "shards"
        shards.mkdir()
        for i, part in enumerate(np.array_split(np.arange(lengths.size), 3)):
            pq.write_table(table.take(part), shards / f"part-{i}.parquet")
        (shards / "_SUCCESS").write_text("")
        return (shards if kind == "parquet-dir" else str(shards / "*.parquet")), None
    if kind == "feather":
        feather.write_feather(table, tmp_path / "l.feather", chunksize=800)  # lz4-compressed
        return tmp_path / "l.feather", None
    if kind == "arrow-stream-input_ids":
        _write_stream(tmp_path / "l.arrow", table.drop_columns(["seq_len"]))
        return tmp_path / "l.arrow", None  # the token list column is chosen
    if kind == "arrow-large-list":
        big = pa.table({"tokens": _lists(lengths, large=True)})
        with pa.OSFile(str(tmp_path / "l.arrow"), "wb") as sink, pa.ipc.new_file(
            sink, big.schema
        ) as writer:
            writer.write_table(big, max_chunksize=900)
        return tmp_path / "l.arrow", None
    if kind == "hf-pyarrow":
        return _hf_layout(tmp_path / "hf", table), None
    if kind == "hf-pyarrow-input_ids":
        return _hf_layout(tmp_path / "hf", table), "input_ids"
    if kind == "hf-datasetdict":
        root = tmp_path / "dd"
        _hf_layout(root / "train", table)
        _hf_layout(root / "test", table.slice(0, 10), shards=1)
        (root / "dataset_dict.json").write_text(json.dumps({"splits": ["train", "test"]}))
        return root, None
    raise AssertionError(kind)


ROW_FORMATS = ["npy", "npz", "text", "csv-column", "parquet", "parquet-input_ids", "parquet-dir",
               "parquet-glob", "feather", "arrow-stream-input_ids", "arrow-large-list",
               "hf-pyarrow", "hf-pyarrow-input_ids", "hf-datasetdict"]


@pytest.mark.parametrize("kind", ROW_FORMATS)
def test_every_format_yields_the_same_lengths(kind, tmp_path, lengths):
    source, column = _build(kind, tmp_path, lengths)
    got = bucketopt.load_lengths(source, column=column)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, lengths)
    assert bio.load_histogram(source, column=column) == Histogram.from_lengths(lengths)


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_histogram_inputs(kind, tmp_path, lengths):
    hist = Histogram.from_lengths(lengths)
    if kind == "csv":
        path = tmp_path / "h.csv"
        rows = "".join(f"{v},{c}\n" for v, c in zip(hist.values[::-1], hist.counts[::-1]))
        path.write_text("length,count\n" + rows)
    else:
        path = tmp_path / "h.parquet"
        _write_histogram_parquet(path, lengths)
    source = bio.open_source(path)
    assert source.column.kind == "histogram" and source.column.count_column == "count"
    assert bio.load_histogram(path) == hist
    np.testing.assert_array_equal(bucketopt.load_lengths(path), np.sort(lengths))
    # the solver takes the histogram as is: same answer as from the raw lengths
    assert bucketopt.solve(bio.load_histogram(path), 4).boundaries == bucketopt.solve(
        lengths, 4).boundaries


def test_histogram_shards_merge_like_the_whole(tmp_path, lengths):
    parts = np.array_split(lengths, 3)
    for i, part in enumerate(parts):
        _write_histogram_parquet(tmp_path / f"h{i}.parquet", part)
    merged = bio.load_histogram(str(tmp_path / "h*.parquet"))
    assert merged == Histogram.from_lengths(lengths)
    singles = [bio.load_histogram(tmp_path / f"h{i}.parquet") for i in range(3)]
    assert singles[0].merge(*singles[1:]) == merged


def test_real_datasets_save_to_disk(tmp_path, lengths):
    datasets = pytest.importorskip("datasets")
    ids = _lists(lengths[:400]).to_pylist()
    ds = datasets.Dataset.from_dict({"seq_len": lengths[:400].tolist(), "input_ids": ids})
    ds.save_to_disk(str(tmp_path / "one"), num_shards=2)
    datasets.DatasetDict({"train": ds, "validation": ds.select(range(5))}).save_to_disk(
        str(tmp_path / "dict"))
    expected = lengths[:400]
    for column in (None, "input_ids"):
        np.testing.assert_array_equal(bucketopt.load_lengths(tmp_path / "one", column=column),
                                      expected)
        np.testing.assert_array_equal(bucketopt.load_lengths(tmp_path / "dict", column=column),
                                      expected)
    np.testing.assert_array_equal(
        bucketopt.load_lengths(tmp_path / "dict" / "validation"), expected[:5])
    source = bio.open_source(tmp_path / "one")
    assert source.format == "huggingface" and source.column.name == "seq_len"
    assert len(source.files) == 2


def test_list_lengths_from_offsets_match_python_len(tmp_path):
    rng = np.random.default_rng(5)
    rows = [list(range(int(n))) for n in rng.integers(1, 50, size=300)]
    table = pa.table({"input_ids": pa.array(rows, pa.list_(pa.int32()))})
    sliced = table.slice(17, 200)  # offsets that do not start at 0
    _write_stream(tmp_path / "s.arrow", sliced, chunk=33)
    pq.write_table(sliced, tmp_path / "s.parquet", row_group_size=50)
    expected = [len(x) for x in sliced.column("input_ids").to_pylist()]
    for name in ("s.arrow", "s.parquet"):
        assert bucketopt.load_lengths(tmp_path / name).tolist() == expected


def test_column_choice_rules(tmp_path, lengths):
    n = 50
    ids = _lists(lengths[:n])
    cases = {
        # a length-named integer column wins over list columns
        "a": ({"input_ids": ids, "num_tokens": lengths[:n], "mask": ids}, "num_tokens"),
        # no length column: the token list column among several lists
        "b": ({"input_ids": ids, "attention_mask": ids, "id": np.arange(n)}, "input_ids"),
        # the only list column, whatever its name
        "c": ({"pieces": ids, "id": np.arange(n)}, "pieces"),
        # the only column
        "d": ({"whatever": lengths[:n]}, "whatever"),
    }
    for name, (columns, expected) in cases.items():
        pq.write_table(pa.table(columns), tmp_path / f"{name}.parquet")
        source = bio.open_source(tmp_path / f"{name}.parquet")
        assert source.column.name == expected
        np.testing.assert_array_equal(source.lengths(), lengths[:n])
        assert expected in source.describe()


def _error(tmp_path, kind):
    """A bad source and the text its one-line message must hold."""
    p = tmp_path
    n = np.arange(1, 6)
    if kind == "missing":
        return p / "nope.parquet", None, "no such file"
    if kind == "corrupt-parquet":
        pq.write_table(pa.table({"seq_len": n}), p / "ok.parquet")
        data = (p / "ok.parquet").read_bytes()
        (p / "bad.parquet").write_bytes(data[: len(data) // 2])
        return p / "bad.parquet", None, "Parquet"
    if kind == "garbage-parquet":
        (p / "bad.parquet").write_bytes(b"PAR1" + b"\x01" * 100)
        return p / "bad.parquet", None, "Parquet"
    if kind == "corrupt-arrow":
        _write_stream(p / "ok.arrow", pa.table({"seq_len": n}))
        data = (p / "ok.arrow").read_bytes()
        (p / "bad.arrow").write_bytes(data[: len(data) - 40])
        return p / "bad.arrow", None, "Arrow"
    if kind == "unknown-column":
        pq.write_table(pa.table({"seq_len": n, "input_ids": _lists(n)}), p / "t.parquet")
        return p / "t.parquet", "lens", "columns are seq_len (int64), input_ids"
    if kind == "float-column":
        pq.write_table(pa.table({"seq_len": n.astype(float)}), p / "t.parquet")
        return p / "t.parquet", "seq_len", "type double"
    if kind == "float-only-column":
        pq.write_table(pa.table({"x": n.astype(float)}), p / "t.parquet")
        return p / "t.parquet", None, "type double"
    if kind == "string-column":
        pq.write_table(pa.table({"text": ["a", "b"]}), p / "t.parquet")
        return p / "t.parquet", None, "type string"
    if kind == "null-int":
        pq.write_table(pa.table({"seq_len": pa.array([3, None, 4] * 400, pa.int64())}),
                       p / "t.parquet", row_group_size=100)
        return p / "t.parquet", None, "null value"
    if kind == "null-list":
        _write_stream(p / "t.arrow", pa.table({"input_ids": pa.array([[1], None, [2, 3]])}))
        return p / "t.arrow", None, "null value"
    if kind == "negative":
        pq.write_table(pa.table({"seq_len": pa.array([*range(1, 1000), -3], pa.int32())}),
                       p / "t.parquet", row_group_size=250)
        return p / "t.parquet", None, "got -3 at index 999"
    if kind == "empty-list":
        _write_stream(p / "t.arrow", pa.table({"input_ids": pa.array([[1], [], [2, 3]])}))
        return p / "t.arrow", None, "got 0 at index 1"
    if kind == "ambiguous-lists":
        pq.write_table(pa.table({"a": _lists(n), "b": _lists(n)}), p / "t.parquet")
        return p / "t.parquet", None, "several list columns (a, b)"
    if kind == "ambiguous-lengths":
        pq.write_table(pa.table({"length": n, "seq_len": n}), p / "t.parquet")
        return p / "t.parquet", None, "several length columns (length, seq_len)"
    if kind == "no-candidate":
        pq.write_table(pa.table({"id": n, "score": n * 1.5}), p / "t.parquet")
        return p / "t.parquet", None, "columns are id (int64), score (double)"
    if kind == "empty-parquet":
        pq.write_table(pa.table({"seq_len": pa.array([], pa.int64())}), p / "t.parquet")
        return p / "t.parquet", None, "empty"
    if kind == "negative-count":
        pq.write_table(pa.table({"length": [3, 4], "count": [2, -1]}), p / "h.parquet")
        return p / "h.parquet", None, "counts must be >= 0"
    if kind == "datasetdict-no-train":
        _hf_layout(p / "dd" / "test", pa.table({"seq_len": n}), shards=1)
        (p / "dd" / "dataset_dict.json").write_text(json.dumps({"splits": ["test", "dev"]}))
        return p / "dd", None, "splits test, dev"
    if kind == "hf-missing-shard":
        _hf_layout(p / "hf", pa.table({"seq_len": n}), shards=2)
        (p / "hf" / "data-00001-of-00002.arrow").unlink()
        return p / "hf", None, "missing"
    if kind == "hf-bad-state":
        (p / "hf").mkdir()
        (p / "hf" / "state.json").write_text("{not json")
        return p / "hf", None, "state.json"
    if kind == "hf-deep-state":
        (p / "hf").mkdir()
        (p / "hf" / "state.json").write_text("[" * 100_000 + "]" * 100_000)
        return p / "hf", None, "state.json"
    if kind == "glob-nothing":
        return str(p / "*.parquet"), None, "no files match"
    if kind == "empty-dir":
        (p / "empty").mkdir()
        return p / "empty", None, "empty directory"
    if kind == "mixed-dir":
        (p / "mix").mkdir()
        pq.write_table(pa.table({"seq_len": n}), p / "mix" / "a.parquet")
        np.save(p / "mix" / "b.npy", n)
        return p / "mix", None, "mixes file formats"
    if kind == "device":
        return "/dev/zero", None, "not a regular file"
    if kind == "npy-huge-header":  # claims 8 TB, holds 64 bytes: refused before any allocation
        np.save(p / "a.npy", np.zeros(8, np.int64))
        data = (p / "a.npy").read_bytes().replace(b"(8,), }" + b" " * 12,
                                                    b"(1000000000000,), }")
        (p / "a.npy").write_bytes(data)
        return p / "a.npy", None, "not a valid .npy file"
    if kind == "npz-huge-header":
        np.save(p / "a.npy", np.zeros(8, np.int64))
        data = (p / "a.npy").read_bytes().replace(b"(8,), }" + b" " * 12,
                                                    b"(1000000000000,), }")
        with zipfile.ZipFile(p / "a.npz", "w") as archive:
            archive.writestr("seq_len.npy", data)
        return p / "a.npz", None, "not a valid .npz file"
    if kind == "npy-with-column":
        np.save(p / "a.npy", n)
        return p / "a.npy", "seq_len", "does not apply"
    raise AssertionError(kind)


ERRORS = ["missing", "corrupt-parquet", "garbage-parquet", "corrupt-arrow", "unknown-column",
          "float-column", "float-only-column", "string-column", "null-int", "null-list",
          "negative", "empty-list", "ambiguous-lists", "ambiguous-lengths", "no-candidate",
          "empty-parquet", "negative-count", "datasetdict-no-train", "hf-missing-shard",
          "hf-bad-state", "glob-nothing", "empty-dir", "mixed-dir", "device", "npy-with-column",
          "npy-huge-header", "npz-huge-header", "hf-deep-state"]


@pytest.mark.parametrize("kind", ERRORS)
def test_bad_sources_raise_one_clean_line(kind, tmp_path):
    source, column, expected = _error(tmp_path, kind)
    for read in (bucketopt.load_lengths, bio.load_histogram):
        with pytest.raises(BucketoptError) as info:
            read(source, column=column)
        message = str(info.value)
        assert expected in message
        assert "\n" not in message and len(message) < 400


def test_null_message_gives_the_global_row(tmp_path):
    values = pa.array([5] * 1234 + [None] + [6] * 10, pa.int64())
    pq.write_table(pa.table({"seq_len": values}), tmp_path / "t.parquet", row_group_size=300)
    with pytest.raises(BucketoptError, match="first at row 1,234"):
        bio.load_histogram(tmp_path / "t.parquet")


def test_histogram_expansion_is_bounded(tmp_path, monkeypatch):
    (tmp_path / "h.csv").write_text("length,count\n100,7\n200,5\n")
    monkeypatch.setattr(bio, "EXPAND_LIMIT", 10)
    with pytest.raises(BucketoptError, match="load_histogram"):
        bucketopt.load_lengths(tmp_path / "h.csv")
    assert bio.load_histogram(tmp_path / "h.csv").n == 12


def test_count_column_given_reads_it_as_plain_lengths(tmp_path):
    (tmp_path / "h.csv").write_text("length,count\n100,7\n200,5\n")
    assert bucketopt.load_lengths(tmp_path / "h.csv", column="count").tolist() == [7, 5]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(1, 1 << 26), min_size=1, max_size=200),
    st.lists(st.integers(0, 200), max_size=6),
)
def test_builder_equals_from_lengths(values, cuts):
    lengths = np.array(values, dtype=np.int64)
    builder = HistogramBuilder()
    for chunk in np.split(lengths, sorted(set(c for c in cuts if c <= lengths.size))):
        builder.add(chunk)
    assert builder.rows == lengths.size
    assert builder.result() == Histogram.from_lengths(lengths)


def test_builder_counts_and_errors():
    builder = HistogramBuilder(name="shard")
    builder.add([4, 4, 9])
    builder.add_counts([9, 2], [3, 0])
    hist = builder.result()
    assert hist.values.tolist() == [4, 9] and hist.counts.tolist() == [2, 4]
    with pytest.raises(BucketoptError, match="shard is empty"):
        HistogramBuilder(name="shard").result()
    builder = HistogramBuilder()
    builder.add([3] * 10)
    with pytest.raises(BucketoptError, match="at index 11"):
        builder.add([1, 0])
    builder = HistogramBuilder()  # counts that would overflow int64 when summed
    with pytest.raises(BucketoptError, match="2\\*\\*60"):
        builder.add_counts([5, 5, 5, 5], [2**62] * 4)


def test_progress_line_only_when_enabled():
    stream = io.StringIO()
    with Progress("x.parquet", 100, enabled=True, delay=0.0, stream=stream) as bar:
        bar.update(50)
    assert "x.parquet" in stream.getvalue() and "50/100" in stream.getvalue()
    quiet = io.StringIO()  # not a terminal: auto mode stays silent
    with Progress("x.parquet", 100, enabled=None, delay=0.0, stream=quiet) as bar:
        bar.update(50)
    assert quiet.getvalue() == ""
    early = io.StringIO()  # a fast read never draws
    with Progress("x.parquet", 100, enabled=True, delay=60.0, stream=early) as bar:
        bar.update(100)
    assert early.getvalue() == ""


def _doc_sql_blocks() -> list[str]:
    return re.findall(r"```sql\n(.*?)```", DOCS.read_text(), flags=re.S)


def test_duckdb_recipe_in_docs(tmp_path, lengths, monkeypatch):
    duckdb = pytest.importorskip("duckdb")
    blocks = _doc_sql_blocks()
    assert len(blocks) >= 2
    shards = tmp_path / "shards"
    shards.mkdir()
    table = _table(lengths)
    for i, part in enumerate(np.array_split(np.arange(lengths.size), 4)):
        pq.write_table(table.take(part), shards / f"part-{i}.parquet")
    monkeypatch.chdir(tmp_path)
    for sql in blocks:
        (tmp_path / "lengths_hist.parquet").unlink(missing_ok=True)
        duckdb.connect().execute(sql)
        hist = bio.load_histogram("lengths_hist.parquet")
        assert hist == Histogram.from_lengths(lengths)


def test_dask_helper_on_a_local_cluster(tmp_path, lengths):
    pytest.importorskip("dask.dataframe")
    distributed = pytest.importorskip("distributed")
    import dask.dataframe as dd
    import pandas as pd

    from bucketopt.data.dask_hist import histogram_from_dask

    shards = tmp_path / "shards"
    shards.mkdir()
    table = _table(lengths)
    for i, part in enumerate(np.array_split(np.arange(lengths.size), 4)):
        pq.write_table(table.take(part), shards / f"part-{i}.parquet")
    expected = Histogram.from_lengths(lengths)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster):
        assert histogram_from_dask(str(shards)) == expected
        assert histogram_from_dask(str(shards / "*.parquet"), column="input_ids") == expected
        frame = dd.from_pandas(pd.DataFrame({"seq_len": lengths, "id": np.arange(lengths.size)}),
                               npartitions=3)
        assert histogram_from_dask(frame) == expected
        with pytest.raises(BucketoptError, match="integer"):
            histogram_from_dask(frame.assign(seq_len=frame.seq_len * 1.5))
