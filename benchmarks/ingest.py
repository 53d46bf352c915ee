"""Reading lengths: the story's fast way (a seq_len column, or list offsets) against the slow way
(``[len(x) for x in ds['input_ids']]``), side by side in one run; and the peak memory of folding a
100M-row Parquet length column into a histogram.

    python benchmarks/ingest.py compare [--rows 902087] [--token-scale 1] [--baseline-rows 5000]
    python benchmarks/ingest.py memory  [--rows 100000000]

``compare`` writes a Hugging Face ``save_to_disk``-style directory (state.json + Arrow streaming
shards) with ``seq_len`` (the story's lengths, ``bucketopt.datasets.seed_like()``) and
``input_ids`` (a list<int32> column with exactly those lengths: 1.9e9 tokens, 7.5 GB at
``--token-scale 1``), plus a Parquet copy of ``seq_len``. The Python-list baseline cannot run on all
rows (it would need ~70 GB of Python ints: the story's run was killed), so it is timed on a block of
``--baseline-rows`` rows at a random start (the rows are in random order) and scaled linearly to all
rows by token count: its cost is proportional to the tokens it converts. Files go to a temporary
directory that is deleted at the end.

``memory`` writes the Parquet file in chunks with ``ParquetWriter`` and folds it into a histogram in
a fresh subprocess, reporting its peak RSS (VmHWM) next to that of a process that only imports the
same modules, and the peak RSS of ``bucketopt inspect`` on the file under ``/usr/bin/time -v``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from _timing import best_of

from bucketopt.datasets import seed_like


def write_hf_dir(directory: Path, seq_len: np.ndarray, token_lengths: np.ndarray,
                 shards: int = 4, batch_rows: int = 4096) -> int:
    """The save_to_disk layout, written batch by batch (never the whole column in memory)."""
    directory.mkdir(parents=True)
    schema = pa.schema([("seq_len", pa.int64()), ("input_ids", pa.list_(pa.int32()))])
    # one buffer of token ids, sliced (zero-copy) for every batch: the values do not matter here
    longest_batch = batch_rows * int(token_lengths.max())
    token_pool = pa.array(np.arange(longest_batch, dtype=np.int32) % 32000)
    bounds = np.linspace(0, seq_len.size, shards + 1).astype(np.int64)
    files, written = [], 0
    for s in range(shards):
        name = f"data-{s:05d}-of-{shards:05d}.arrow"
        files.append({"filename": name})
        with pa.OSFile(str(directory / name), "wb") as sink, pa.ipc.new_stream(
            sink, schema
        ) as writer:
            for lo in range(bounds[s], bounds[s + 1], batch_rows):
                hi = min(lo + batch_rows, bounds[s + 1])
                lens = token_lengths[lo:hi]
                offsets = np.zeros(lens.size + 1, dtype=np.int32)
                np.cumsum(lens, out=offsets[1:])
                ids = pa.ListArray.from_arrays(pa.array(offsets),
                                               token_pool.slice(0, int(offsets[-1])))
                writer.write_batch(pa.record_batch([pa.array(seq_len[lo:hi]), ids],
                                                   schema=schema))
                written += int(offsets[-1])
    (directory / "state.json").write_text(json.dumps({
        "_data_files": files, "_fingerprint": "bucketopt-benchmark", "_format_columns": None,
        "_format_kwargs": {}, "_format_type": None, "_output_all_columns": False, "_split": None,
    }))
    (directory / "dataset_info.json").write_text("{}")
    return written


def compare(args) -> None:
    import bucketopt
    from bucketopt.data.io import load_histogram

    seq_len = seed_like()[: args.rows].astype(np.int64)
    token_lengths = np.maximum(seq_len // args.token_scale, 1).astype(np.int64)
    root = Path(tempfile.mkdtemp(prefix="bucketopt-ingest-", dir=args.tmp))
    try:
        start = time.perf_counter()
        hf_dir = root / "hf"
        tokens = write_hf_dir(hf_dir, seq_len, token_lengths)
        pq.write_table(pa.table({"seq_len": seq_len}), root / "seq_len.parquet")
        size = sum(f.stat().st_size for f in hf_dir.iterdir())
        print(f"dataset: {seq_len.size:,} rows, input_ids {tokens:,} int32 tokens "
              f"(token scale 1/{args.token_scale}), {size / 2**30:.2f} GiB on disk, written in "
              f"{time.perf_counter() - start:.1f} s")

        t_seq, got = best_of(lambda: bucketopt.load_lengths(hf_dir, column="seq_len"), 3)
        assert np.array_equal(got, seq_len)
        t_seq_pq, got = best_of(lambda: bucketopt.load_lengths(root / "seq_len.parquet"), 3)
        assert np.array_equal(got, seq_len)
        t_hist, hist = best_of(lambda: load_histogram(hf_dir, column="seq_len"), 3)
        assert hist.n == seq_len.size
        t_ids, got = best_of(lambda: bucketopt.load_lengths(hf_dir, column="input_ids"), 3)
        assert np.array_equal(got, token_lengths)

        # the slow way, on a block of rows at a random start (the rows are in random order, so the
        # block is a random sample), scaled to all rows by token count
        count = min(args.baseline_rows, seq_len.size)
        first = int(np.random.default_rng(0).integers(0, seq_len.size - count + 1))
        rows = np.arange(first, first + count)
        table = pa.concat_tables(  # memory-mapped: zero-copy
            pa.ipc.open_stream(pa.memory_map(str(hf_dir / f["filename"]))).read_all()
            for f in json.loads((hf_dir / "state.json").read_text())["_data_files"]
        )
        subset = table.slice(first, count)
        start = time.perf_counter()
        slow = [len(x) for x in subset.column("input_ids").to_pylist()]
        t_slow_sample = time.perf_counter() - start
        assert slow == token_lengths[rows].tolist()
        del slow, subset
        scale = tokens / float(token_lengths[rows].sum())
        t_slow = t_slow_sample * scale
        print(f"seq_len column, HF dir (Arrow) -> int64 array : {t_seq:8.3f} s")
        print(f"seq_len column, Parquet        -> int64 array : {t_seq_pq:8.3f} s")
        print(f"seq_len column, HF dir -> Histogram (streamed): {t_hist:8.3f} s")
        print(f"input_ids offsets, HF dir      -> int64 array : {t_ids:8.3f} s")
        print(f"[len(x) for x in input_ids.to_pylist()]       : {t_slow_sample:8.3f} s on "
              f"{rows.size:,} rows; x{scale:,.0f} for all rows = {t_slow:8.1f} s (estimated)")
        try:
            import datasets
        except ImportError:
            t_ds = None
        else:
            ds = datasets.load_from_disk(str(hf_dir)).select(range(first, first + count))
            start = time.perf_counter()
            slow = [len(x) for x in ds["input_ids"]]
            t_ds_sample = time.perf_counter() - start
            assert slow == token_lengths[rows].tolist()
            t_ds = t_ds_sample * scale
            print(f"datasets: [len(x) for x in ds['input_ids']]   : {t_ds_sample:8.3f} s on "
                  f"{rows.size:,} rows; all rows = {t_ds:8.1f} s (estimated)")
        if args.parquet_input_ids:  # Parquet has no offsets-only read: the values are decoded
            start = time.perf_counter()
            with pq.ParquetWriter(str(root / "ids.parquet"), table.schema) as writer:
                for batch in table.to_batches(max_chunksize=65536):
                    writer.write_batch(batch)
            written = time.perf_counter() - start
            t_pq_ids, got = best_of(
                lambda: bucketopt.load_lengths(root / "ids.parquet", column="input_ids"), 1)
            assert np.array_equal(got, token_lengths)
            print(f"input_ids, Parquet (decoded)   -> int64 array : {t_pq_ids:8.3f} s "
                  f"(file written in {written:.1f} s)")
        print(f"ratio: Python-list baseline / offsets = {t_slow / t_ids:,.0f}x"
              + ("" if t_ds is None else f"; datasets baseline / offsets = {t_ds / t_ids:,.0f}x"))
        print(f"seq_len read under 0.5 s: {'yes' if max(t_seq, t_seq_pq) < 0.5 else 'NO'}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


_PEAK = """
def peak_mib():
    # VmHWM: this process image's own peak RSS. ru_maxrss is not used: Linux carries it over from
    # the (large) parent across fork + exec, which would inflate a child's figure.
    import resource
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
"""
_FOLD = _PEAK + """
import json, sys, time
from bucketopt.data.io import load_histogram
start = time.perf_counter()
hist = load_histogram(sys.argv[1], progress=False)
print(json.dumps({"n": hist.n, "distinct": hist.m, "seconds": time.perf_counter() - start,
                  "maxrss_mib": peak_mib()}))
"""
_IMPORT_ONLY = _PEAK + """
import json
import numpy, pyarrow, pyarrow.parquet, bucketopt.data.io, bucketopt.data.arrow_tables
print(json.dumps({"maxrss_mib": peak_mib()}))
"""


def memory(args) -> None:
    root = Path(tempfile.mkdtemp(prefix="bucketopt-rss-", dir=args.tmp))
    try:
        path = root / "lengths.parquet"
        pool = seed_like().astype(np.int32)
        rng = np.random.default_rng(0)
        start = time.perf_counter()
        schema = pa.schema([("seq_len", pa.int32())])
        with pq.ParquetWriter(str(path), schema) as writer:
            for lo in range(0, args.rows, 5_000_000):
                chunk = rng.choice(pool, size=min(5_000_000, args.rows - lo))
                writer.write_table(pa.table({"seq_len": chunk}, schema=schema))
        print(f"wrote {args.rows:,} rows, {path.stat().st_size / 2**20:,.0f} MiB, in "
              f"{time.perf_counter() - start:.1f} s")
        env = dict(os.environ)
        base = json.loads(subprocess.check_output([sys.executable, "-c", _IMPORT_ONLY], env=env))
        fold = json.loads(subprocess.check_output([sys.executable, "-c", _FOLD, str(path)],
                                                  env=env))
        assert fold["n"] == args.rows
        print(f"imports only: peak RSS {base['maxrss_mib']:,.0f} MiB")
        print(f"fold {fold['n']:,} rows -> {fold['distinct']:,} distinct lengths in "
              f"{fold['seconds']:.1f} s: peak RSS {fold['maxrss_mib']:,.0f} MiB "
              f"({'under' if fold['maxrss_mib'] < 500 else 'OVER'} 500 MB)")
        if shutil.which("time") or Path("/usr/bin/time").exists():
            done = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-m", "bucketopt",
                                   "inspect", str(path), "--json", "--quiet"],
                                  capture_output=True, text=True, env=env, check=True)
            peak = [ln for ln in done.stderr.splitlines() if "Maximum resident" in ln]
            print(f"/usr/bin/time -v bucketopt inspect: {peak[0].strip() if peak else '?'}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    c = sub.add_parser("compare")
    c.add_argument("--rows", type=int, default=902_087)
    c.add_argument("--token-scale", type=int, default=1,
                   help="divide every input_ids length by this (smaller files)")
    c.add_argument("--baseline-rows", type=int, default=5_000)
    c.add_argument("--parquet-input-ids", action="store_true",
                   help="also time input_ids lengths from a Parquet copy")
    c.add_argument("--tmp", default=None, help="where to write (default: the system temp dir)")
    m = sub.add_parser("memory")
    m.add_argument("--rows", type=int, default=100_000_000)
    m.add_argument("--tmp", default=None)
    args = parser.parse_args()
    compare(args) if args.mode == "compare" else memory(args)


if __name__ == "__main__":
    main()
