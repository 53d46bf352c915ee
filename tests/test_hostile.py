"""Hostile inputs, one class at a time: numbers given as strings, booleans or thousands of digits,
nesting deeper than Python's recursion limit, int64 overflow where counts and edges multiply,
files too big to read whole, FIFOs, corrupt Arrow offsets, failed writes, an output naming an
input, closed or full standard output, Ctrl-C. Each gives one clear line (exit 2 /
BucketoptError) or, for the valid inputs in the list, the right answer. Properties run over
generated cases (hypothesis) against exact Python-integer arithmetic. The full harness, each
input in its own process under a memory limit, is benchmarks/hostile.py.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bucketopt
from bucketopt.cli import cli_message, main
from bucketopt.data.histogram import TOKEN_LIMIT, Histogram
from bucketopt.data.output import atomic_writer
from bucketopt.errors import BucketoptError
from bucketopt.validate import check_int, check_number, shown

from .test_robustness import one_line

ROOT = Path(__file__).resolve().parent.parent
PROFILE = {"alpha": 0.01, "beta": 1e-6, "gamma": 1e-10}




def nested(depth: int):
    top = inner = []
    for _ in range(depth):
        inner.append([])
        inner = inner[0]
    return top


# --- numbers: strings, booleans, thousands of digits; bounded messages -----------------------

@pytest.mark.parametrize("value", ["0.5", b"1", True, np.bool_(False), None, [0.5], "nan"])
def test_numbers_are_never_coerced(value):
    with pytest.raises(BucketoptError, match="max_share"):
        check_number(value, "max_share", low=0, high=1)
    with pytest.raises(BucketoptError, match="`k`"):
        check_int(value, "k", low=1)


def test_strings_for_numbers_refused_by_the_api():
    for kwargs in ({"max_share": "0.5"}, {"min_share": "0"}, {"min_fill": "0.1"}):
        with pytest.raises(BucketoptError, match="must be a number"):
            bucketopt.solve([3, 4, 10], 2, token_budget=100, **kwargs)


@settings(max_examples=60, deadline=None)
@given(st.recursive(st.integers() | st.text() | st.floats() | st.booleans(),
                    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
                    max_leaves=200))
def test_shown_is_bounded(value):
    assert len(shown(value)) <= 60


def test_shown_survives_huge_and_deep_values():
    assert "5,001 digits" in shown(10**5000)
    assert len(shown(nested(100_000))) <= 60
    with pytest.raises(BucketoptError) as info:
        check_int(nested(100_000), "k", low=1)
    assert len(str(info.value)) < 200


def test_deep_state_gives_a_bounded_message():
    sampler = bucketopt.BucketBatchSampler(list(range(1, 50)), (25, 49), token_budget=100)
    for key in ("seed", "version", "epoch"):
        state = sampler.state_dict()
        state[key] = nested(100_000)
        with pytest.raises(BucketoptError) as info:
            sampler.load_state_dict(state)
        assert len(str(info.value)) < 400


# --- profiles -----------------------------------------------------------------------------------

def _profile(tmp_path, text: str | bytes) -> str:
    path = tmp_path / "profile.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return str(path)


def test_profile_hostile_numbers(tmp_path):
    cases = {
        '{"alpha": 1' + "0" * 5000 + ', "beta": 1e-6, "gamma": 1e-10}': "not valid JSON",
        json.dumps({**PROFILE, "alpha": "0.1"}): "`alpha`",
        json.dumps({**PROFILE, "beta": True}): "`beta`",
        json.dumps({**PROFILE, "alpha": 1e308}): "at most",
        '{"alpha": NaN, "beta": 1e-6, "gamma": 1e-10}': "not valid JSON",
        json.dumps({**PROFILE, "world_size": "8"}): "world_size",
    }
    for text, word in cases.items():
        with pytest.raises(BucketoptError, match=word):
            bucketopt.solve([5, 7, 9], 2, profile=_profile(tmp_path, text), token_budget=100)


def test_profile_with_bom_is_accepted(tmp_path):
    path = _profile(tmp_path, b"\xef\xbb\xbf" + json.dumps(PROFILE).encode())
    assert bucketopt.solve([5, 7, 9], 2, profile=path, token_budget=100).ktok_per_s > 0


def test_profile_coefficients_of_1e308_name_the_coefficient(capsys, tmp_path):
    path = _profile(tmp_path, json.dumps({"alpha": 1e308, "beta": 1e308, "gamma": 1e308}))
    line = one_line(capsys, ["solve", "-k", "2", "--profile", path, "-q"], "alpha", "at most")
    assert "infeasible" not in line


# --- int64 overflow where counts and edges multiply --------------------------------------------

def test_histogram_totals_cannot_wrap():
    with pytest.raises(BucketoptError, match="2\\*\\*60"):
        Histogram(values=[1, 2], counts=[2**62, 2**62])


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 2**40), st.integers(0, 2**62)), min_size=1,
                max_size=6))
def test_histogram_accepts_exactly_what_int64_carries(pairs):
    values = [v for v, _ in pairs]
    counts = [c for _, c in pairs]
    n = sum(counts)
    try:
        hist = Histogram(values=values, counts=counts)
    except BucketoptError:
        assert n == 0 or n * max(v for v, c in pairs if c) >= TOKEN_LIMIT * 0.999
        return
    assert hist.n == n and n * hist.max_length < TOKEN_LIMIT
    assert hist.real_tokens == sum(v * c for v, c in pairs)


def test_evaluate_refuses_edges_that_overflow():
    for lengths, edges in (([100, 200], (2**62,)), ([100] * 8, (2**61,))):
        with pytest.raises(BucketoptError, match="2\\*\\*60"):
            bucketopt.evaluate(lengths, edges)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(1, 1000), min_size=1, max_size=20), st.integers(0, 62))
def test_evaluate_is_exact_or_refuses(lengths, power):
    edge = max(max(lengths), 2**power)
    try:
        sol = bucketopt.evaluate(lengths, (edge,))
    except BucketoptError:
        assert edge * len(lengths) >= TOKEN_LIMIT
        return
    assert sol.padded_tokens == sum(edge - x for x in lengths)  # Python integers: exact


def test_mapping_is_a_histogram():
    sol = bucketopt.solve({512: 3, 1024: 2}, 2)
    assert sol.counts == (3, 2) and sol.boundaries == (512, 1024)
    assert bucketopt.solve(Histogram([512, 1024], [3, 2]), 2).counts == sol.counts
    with pytest.raises(BucketoptError, match="one length per sample"):
        bucketopt.BucketBatchSampler({5: 2}, (5,), token_budget=10)


# --- API bounds the CLI has ----------------------------------------------------------------------

def test_plan_batches_rank_range():
    sampler = bucketopt.BucketBatchSampler(list(range(1, 200)), (100, 199), token_budget=400,
                                           world_size=4)
    plan = sampler.plan()
    for rank in (-1, 4, "0", 1.5, True):
        with pytest.raises(BucketoptError, match="rank"):
            plan.batches(rank)
    every = plan.batches()
    assert sum(len(plan.batches(r)) for r in range(4)) == len(every)


def test_calibrate_bounds_from_python():
    s = [1, 2, 4, 8, 16, 4, 2, 1]
    lens = [512, 512, 1024, 1024, 2048, 4096, 8192, 8192]
    t = [0.01 + 1e-5 * a * b + 1e-9 * a * b * b for a, b in zip(s, lens)]
    with pytest.raises(BucketoptError, match="folds"):
        bucketopt.calibrate(s, lens, t, folds=1)
    for bootstrap in (10**8, "3", True):
        with pytest.raises(BucketoptError, match="bootstrap"):
            bucketopt.calibrate(s, lens, t, bootstrap=bootstrap)


def test_calibrate_folds_1_refused_by_the_cli(capsys, tmp_path):
    csv = tmp_path / "m.csv"
    csv.write_text("batch_size,padded_len,seconds\n1,512,0.01\n")
    one_line(capsys, ["calibrate", "--measurements", str(csv), "--folds", "1"], "--folds")


def test_time_epoch_type_checked():
    from bucketopt.cost.costmodel import load_profile, time_epoch

    model = load_profile("rtx-pro-6000-blackwell").cost_model()
    with pytest.raises(BucketoptError, match="Epoch"):
        time_epoch("x", model)
    epoch = bucketopt.simulate([5, 7, 9], "sorted", token_budget=20)
    with pytest.raises(BucketoptError, match="CostModel"):
        time_epoch(epoch, "x")


def test_split_overflow_counts_chunks_before_allocating():
    from bucketopt.data.overflow import SPLIT_ITEMS_LIMIT, overflow_items

    with pytest.raises(BucketoptError, match="chunks"):
        overflow_items(np.array([2**40, 5]), 1, "split")
    lengths, _, _ = overflow_items(np.array([10, 3]), 4, "split")
    assert lengths.tolist() == [4, 4, 2, 3] and lengths.size < SPLIT_ITEMS_LIMIT


# --- files: sizes, FIFOs, .npy streaming, Arrow -------------------------------------------------

def test_sparse_npy_of_zeros_refused_without_reading_it(tmp_path):
    path = tmp_path / "lens.npy"
    header = np.lib.format.header_data_from_array_1_0(np.zeros(1, dtype=np.int64))
    header["shape"] = (150_000_000,)
    with open(path, "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, header)
        fh.truncate(fh.tell() + 150_000_000 * 8)  # 1.2 GB, sparse
    from bucketopt.data.io import open_source

    with pytest.raises(BucketoptError, match="positive"):  # the first chunk is checked at once
        open_source(path)
    with pytest.raises(BucketoptError, match="positive"):
        bucketopt.load_lengths(path)


def test_npy_streams_in_chunks(tmp_path, monkeypatch):
    from bucketopt.data import io

    monkeypatch.setattr(io, "NPY_CHUNK", 7)
    values = np.random.default_rng(0).integers(1, 50, 100)
    np.save(tmp_path / "lens.npy", values)
    source = io.open_source(tmp_path / "lens.npy")
    assert len(list(source._chunks())) == 15
    assert source.lengths().tolist() == values.tolist()
    assert source.histogram(progress=False) == Histogram.from_lengths(values)
    bad = values.copy()
    bad[50] = 0
    np.save(tmp_path / "bad.npy", bad)
    with pytest.raises(BucketoptError, match="index 50"):
        io.load_lengths(tmp_path / "bad.npy")


def test_empty_npz_says_so(tmp_path):
    np.savez(tmp_path / "e.npz")
    with pytest.raises(BucketoptError, match="holds no arrays"):
        bucketopt.load_lengths(tmp_path / "e.npz")


def test_json_and_csv_size_limits(tmp_path, monkeypatch):
    from bucketopt.data import guards
    from bucketopt.show.export import sampler_kwargs

    big = tmp_path / "state.json"
    with open(big, "wb") as fh:
        fh.write(b"{")
        fh.truncate(1 << 30)
    with pytest.raises(BucketoptError, match="bytes"):
        guards.read_json(big, "state")
    with pytest.raises(BucketoptError, match="bytes"):
        sampler_kwargs(big)
    csv = tmp_path / "m.csv"
    with open(csv, "wb") as fh:
        fh.write(b"batch_size,padded_len,seconds\n")
        fh.truncate(1 << 30)
    with pytest.raises(BucketoptError, match="bytes"):
        bucketopt.cost.calibration.read_measurements(csv)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifos_are_refused_not_opened(tmp_path, capsys):
    from bucketopt.show.export import sampler_kwargs

    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    with pytest.raises(BucketoptError, match="not a regular file"):
        sampler_kwargs(fifo)  # opening it would block forever
    with pytest.raises(BucketoptError, match="not a regular file"):
        bucketopt.solve([5, 7], 2, profile=str(fifo), token_budget=100)
    one_line(capsys, ["solve", "-k", "2", "--lens", str(fifo)], "not a regular file")
    one_line(capsys, ["calibrate", "--measurements", str(fifo)], "not a regular file")


def test_unlistable_folder_is_one_line(tmp_path, monkeypatch):
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "a.txt").write_text("5\n")
    real = os.scandir

    def denied(path="."):
        if os.fspath(path) == str(folder):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", denied)
    with pytest.raises(BucketoptError, match="cannot be listed"):
        bucketopt.load_lengths(folder)


def test_arrow_valid_inputs_accepted(tmp_path):
    values = [5, 7, 5, 9]
    dictionary = pa.table({"length": pa.array(values).dictionary_encode()})
    with pa.ipc.new_file(tmp_path / "d.arrow", dictionary.schema) as writer:
        writer.write_table(dictionary)
    pq.write_table(dictionary, tmp_path / "d.parquet")
    with warnings.catch_warnings():  # Feather V1 is deprecated for writing, still read
        warnings.simplefilter("ignore")
        feather.write_feather(pa.table({"length": values}), tmp_path / "v1.feather", version=1)
    pq.write_table(pa.table({"länge": values, "other": values}), tmp_path / "u.parquet")
    (tmp_path / "u.csv").write_text("länge\n5\n7\n5\n9\n", encoding="utf-8")
    for name, column in (("d.arrow", None), ("d.parquet", None), ("v1.feather", None),
                         ("u.parquet", "länge"), ("u.csv", None)):
        got = bucketopt.load_lengths(tmp_path / name, column=column)
        assert sorted(got.tolist()) == sorted(values), name


def test_corrupt_arrow_offsets_refused(tmp_path):
    import struct

    table = pa.table({"input_ids": pa.array([[1, 2], [3]], type=pa.list_(pa.int32()))})
    path = tmp_path / "bad.arrow"
    with pa.ipc.new_file(path, table.schema) as writer:
        writer.write_table(table)
    data = bytearray(path.read_bytes())
    at = data.find(struct.pack("<3i", 0, 2, 3))
    data[at:at + 12] = struct.pack("<3i", 0, 2, 1 << 30)
    path.write_bytes(bytes(data))
    with pytest.raises(BucketoptError, match="corrupt"):
        bucketopt.load_lengths(path)


def test_huggingface_folder_without_state_json(tmp_path):
    folder = tmp_path / "hf"
    folder.mkdir()
    table = pa.table({"input_ids": pa.array([[1, 2], [3]])})
    with pa.ipc.new_stream(folder / "data-00000-of-00001.arrow", table.schema) as writer:
        writer.write_table(table)
    (folder / "dataset_info.json").write_text("{}")
    with pytest.raises(BucketoptError, match="lacks its state.json") as info:
        bucketopt.load_lengths(folder)
    assert "mixes" not in str(info.value)


# --- outputs ------------------------------------------------------------------------------------

def test_atomic_writer_keeps_the_old_file(tmp_path):
    target = tmp_path / "out.json"
    target.write_text("OLD")
    with pytest.raises(RuntimeError), atomic_writer(target) as handle:
        handle.write("half")
        raise RuntimeError("the write fails half-way")
    assert target.read_text() == "OLD" and os.listdir(tmp_path) == ["out.json"]


def test_full_device_is_one_line(capsys, tmp_path):
    np.save(tmp_path / "lens.npy", np.arange(1, 100))
    one_line(capsys, ["export", "--lens", str(tmp_path / "lens.npy"), "-k", "2", "--format",
                      "sampler", "-o", "/dev/full", "-q"], "No space left")


@pytest.mark.parametrize("argv, keep", [
    (["export", "-k", "2", "--format", "sampler", "--lens", "{d}/lens.npy", "-o",
      "{d}/./lens.npy"], "lens.npy"),
    (["calibrate", "--measurements", "{d}/m.csv", "-o", "{d}/m.csv"], "m.csv"),
    (["probe", "--model", "x:y", "--token-budget", "4096", "--max-length", "512", "-o",
      "{d}/x.json", "--measurements", "{d}/x.json"], None),
])
def test_output_naming_an_input_is_refused(capsys, tmp_path, argv, keep):
    np.save(tmp_path / "lens.npy", np.arange(1, 100))
    (tmp_path / "m.csv").write_text("batch_size,padded_len,seconds\n1,512,0.01\n")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    one_line(capsys, [a.format(d=tmp_path) for a in argv], "same file" if keep is None
             else "destroy the input")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


class _FullStdout:
    def write(self, text):
        raise OSError(28, "No space left on device")

    def flush(self):
        pass


def test_stdout_failures_are_one_line(capsys, monkeypatch):
    for stream in (_FullStdout(), None):
        monkeypatch.setattr(sys, "stdout", stream)
        code = main(["solve", "-k", "2", "-q"])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and "standard output" in err[0], err


def test_failed_write_under_a_file_size_limit_leaves_nothing_half_written(tmp_path):
    """The real thing, once: a subprocess under ulimit -f writes export -o and stdout."""
    import resource

    np.save(tmp_path / "lens.npy", np.arange(1, 100))
    out = tmp_path / "out.json"
    out.write_text("OLD")

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (50, 50))

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "bucketopt", "export", "--lens", "lens.npy", "-k", "2",
         "--format", "sampler", "-o", "out.json", "-q"], cwd=tmp_path, env=env,
        capture_output=True, text=True, preexec_fn=limit, timeout=300)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(err) == 1 and "File too large" in err[0], err
    assert out.read_text() == "OLD" and sorted(os.listdir(tmp_path)) == ["lens.npy", "out.json"]


# --- the CLI's error path -------------------------------------------------------------------------

def test_argument_errors_have_one_prefix(capsys):
    line = one_line(capsys, ["solve", "-k", "x"], "solve: argument -k")
    assert line.count("bucketopt") == 1


def test_unknown_flag_names_the_subcommand_and_its_usage(capsys):
    line = one_line(capsys, ["sweep", "-k", "1:2", "--bogus"], "sweep:", "--bogus")
    assert "usage: bucketopt sweep" in line


def test_flags_are_named_once():
    text = cli_message("max_length=5000 (--max-length) exceeds token_budget=4096 "
                       "(--token-budget): no batch", {"--max-length", "--token-budget"})
    assert text == "--max-length 5000 exceeds --token-budget 4096: no batch"


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), "system"])
def test_interrupt_is_exit_130(capsys, monkeypatch, exc):
    from bucketopt.commands import solve as solve_command

    def interrupted(args):
        if exc == "system":
            try:
                raise KeyboardInterrupt
            except KeyboardInterrupt as inner:
                raise SystemError("returned a result with an exception set") from inner
        raise exc

    monkeypatch.setattr(solve_command, "run", interrupted)
    assert main(["solve", "-k", "2", "-q"]) == 130
    assert capsys.readouterr().err.strip().splitlines() == ["bucketopt: interrupted"]


def test_no_command_and_non_ascii_digits_are_one_line(capsys):
    one_line(capsys, [], "a command is required", "usage: bucketopt")
    one_line(capsys, ["solve", "-k", "\u0663"], "expected an integer")  # Arabic-Indic 3
    one_line(capsys, ["solve", "-k", "2", "--min-share", "\u0660.\u0661"], "expected a")


@pytest.mark.parametrize("call", [
    lambda v: bucketopt.solve([5, 7], v),
    lambda v: bucketopt.solve([5, 7], 2, token_budget=v),
    lambda v: bucketopt.BucketBatchSampler([5, 7], (7,), token_budget=14, seed=v),
    lambda v: bucketopt.BucketBatchSampler([5, 7], (7,), token_budget=14, grad_accum=v),
    lambda v: bucketopt.simulate([5, 7], "shuffle", token_budget=14, seed=v),
])
def test_integers_of_thousands_of_digits_are_one_bounded_line(call):
    with pytest.raises(BucketoptError) as info:
        call(10**5000)
    assert len(str(info.value)) < 200 and "digits" in str(info.value)


# --- --lens -: lengths from standard input --------------------------------------------------------

def _stdin_run(data: bytes, *argv):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    return subprocess.run([sys.executable, "-m", "bucketopt", *argv], input=data,
                          capture_output=True, env=env, timeout=120)


def test_lens_dash_reads_text_and_npy_from_stdin(tmp_path):
    import io

    lengths = np.array([5, 6, 7, 100, 120, 121])
    expected = bucketopt.solve(lengths, 2).boundaries
    buffer = io.BytesIO()
    np.save(buffer, lengths)
    for data in ("\n".join(map(str, lengths)).encode() + b"\n", buffer.getvalue()):
        done = _stdin_run(data, "solve", "-k", "2", "--lens", "-", "--json", "-q")
        assert done.returncode == 0, done.stderr
        out = json.loads(done.stdout)
        assert out["source"] == "standard input"
        assert tuple(out["boundaries"]) == expected
    assert not list(Path(os.environ.get("TMPDIR", "/tmp")).glob("bucketopt-stdin-*"))


@pytest.mark.parametrize("data, words", [(b"", "empty"), (b"12\nx\n", "standard input: line 2")])
def test_lens_dash_bad_stdin_is_one_line(data, words):
    done = _stdin_run(data, "solve", "-k", "2", "--lens", "-")
    assert done.returncode == 2
    lines = done.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and "bucketopt-stdin" not in lines[0]


@pytest.mark.parametrize("threads", ["0", "-1", "+0", "abc", "1.5", "\u00b2", "3 4"])
def test_numba_threads_of_zero_or_less_is_one_line(threads):
    """numba refuses NUMBA_NUM_THREADS below 1 when it is imported (a ValueError traceback) and
    ignores one that is not a number; the CLI refuses both in one line, exit 2, before anything
    compiles. A valid value runs."""
    env = {**os.environ, "NUMBA_NUM_THREADS": threads}
    done = subprocess.run([sys.executable, "-m", "bucketopt", "solve", "-k", "2", "-q"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines == ["bucketopt: error: the environment variable NUMBA_NUM_THREADS is "
                     f"{threads!r}: it must be a whole number >= 1 (1 keeps the certified DP on "
                     "one CPU), or unset."]
    env["NUMBA_NUM_THREADS"] = "1"
    assert subprocess.run([sys.executable, "-m", "bucketopt", "solve", "-k", "2", "-q"],
                          capture_output=True, text=True, env=env,
                          timeout=300).returncode == 0


@pytest.mark.parametrize("threads", ["", " ", "+3", "007", "99999",
                                     pytest.param("9" * 5000, id="5000-digits")])
def test_numba_threads_unset_or_huge_runs(threads):
    """Empty is unset; a whole number >= 1 of any size is a cap on bucketopt's CPUs (at most
    2 are used), read without converting thousands of digits."""
    env = {**os.environ, "NUMBA_NUM_THREADS": threads,
           "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    done = subprocess.run([sys.executable, "-m", "bucketopt", "solve", "-k", "2", "--lens", "-",
                           "--profile", "rtx-pro-6000-blackwell", "--token-budget", "4096",
                           "-q"], input="5\n7\n9\n12\n30\n", capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "Environment variable" not in done.stderr


def test_numba_threads_from_python_is_read_in_one_place(monkeypatch):
    from bucketopt.env import numba_threads

    for value, expected in (("", None), ("4", 4), ("+2", 2), ("9" * 5000, 10 ** 9), ("abc", None),
                            ("0", None), ("-3", None)):
        monkeypatch.setenv("NUMBA_NUM_THREADS", value)
        assert numba_threads() == expected
        if expected is None and value:
            with pytest.raises(BucketoptError, match="NUMBA_NUM_THREADS"):
                numba_threads(strict=True)


@pytest.mark.parametrize("tmpdir", ["missing", "a-file", ""])
def test_tmpdir_that_is_no_folder_falls_back(tmp_path, tmpdir):
    """TMPDIR missing, a file or empty: Python's next temporary folder takes the spooled copy of
    standard input (documented in bucketopt/env.py), and nothing is left behind in TMPDIR."""
    (tmp_path / "a-file").write_text("x")
    env_tmp = str(tmp_path / tmpdir) if tmpdir else ""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent),
           "TMPDIR": env_tmp}
    done = subprocess.run([sys.executable, "-m", "bucketopt", "solve", "-k", "2", "--lens", "-",
                           "-q"], input=b"5\n6\n7\n100\n", capture_output=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_no_usable_temporary_folder_is_one_line(monkeypatch, capsys):
    import tempfile

    monkeypatch.setenv("TMPDIR", "/nonexistent-bucketopt/x")
    monkeypatch.setattr(tempfile, "tempdir", "/nonexistent-bucketopt/x")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"5\n6\n7\n100\n")))
    one_line(capsys, ["solve", "-k", "2", "--lens", "-", "-q"], "TMPDIR",
             "/nonexistent-bucketopt/x", "writable folder")


@pytest.mark.parametrize("where", ["a-file", "a-file/below"])
def test_numba_cache_dir_that_is_no_folder_runs(tmp_path, where):
    """numba falls back to its other cache places (beside the sources, the user's cache)."""
    (tmp_path / "a-file").write_text("x")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent),
           "NUMBA_CACHE_DIR": str(tmp_path / where)}
    done = subprocess.run([sys.executable, "-m", "bucketopt", "solve", "-k", "2", "--lens", "-",
                           "-q"], input=b"5\n6\n7\n100\n", capture_output=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert b"Traceback" not in done.stderr
    assert (tmp_path / "a-file").read_text() == "x"
