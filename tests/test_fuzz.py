"""Fuzzing the inputs: hypothesis over the bytes of files of every supported format (and their
mutations), over command-line argument vectors, and over the Python API's arguments.

The contract checked on every example: the reader returns a clean 1-D int64 array of positive
lengths or raises one ``BucketoptError`` of one line; the CLI exits 0 or 2, and with 2 prints one
line ``bucketopt: error: ...``; nothing raises anything else, and nothing runs past a time limit
(``signal.setitimer``). Memory is bounded in-process by ``tracemalloc`` for the readers (numpy's
allocations are traced); tests/test_robustness.py measures the peak RSS of real processes.
docs/robustness.md lists the input classes covered.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import os
import shutil
import signal
import tempfile
import tracemalloc
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bucketopt
from bucketopt.cli import build_parser, main
from bucketopt.errors import BucketoptError

SECONDS = 20  # per example; a hang fails the test instead of stalling the suite
READ_PEAK_MB = 200  # traced allocations of one read of a (small) fuzzed file
EXTENSIONS = (".npy", ".npz", ".txt", ".csv", ".tsv", "", ".parquet", ".arrow", ".feather",
              ".json")
# BUCKETOPT_FUZZ=10 runs ten times the examples (and new ones: not derandomized), for a hunt.
SCALE = int(os.environ.get("BUCKETOPT_FUZZ", "1"))
FUZZ = settings(max_examples=60 * SCALE, deadline=None, derandomize=SCALE == 1,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.function_scoped_fixture])


class Hang(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds=SECONDS):
    def alarm(signum, frame):
        raise Hang(f"ran past {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _seeds() -> dict[str, bytes]:
    """Small valid files of every format, the starting points of the mutations."""
    lengths = np.array([5, 9, 9, 300, 17], dtype=np.int64)
    table = pa.table({"seq_len": lengths, "input_ids": [[1] * int(x) for x in lengths]})
    out = {}
    buf = io.BytesIO()
    np.save(buf, lengths)
    out[".npy"] = buf.getvalue()
    buf = io.BytesIO()
    np.savez(buf, lengths=lengths, other=lengths * 2)
    out[".npz"] = buf.getvalue()
    out[".txt"] = b"5\n9\n9\n300\n17\n"
    out[".csv"] = b"length,count\n5,1\n9,2\n300,1\n"
    out[".tsv"] = b"id\tseq_len\n0\t5\n1\t9\n"
    out[""] = b"# lengths\n5\n9\n"
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    out[".parquet"] = sink.getvalue().to_pybytes()
    sink = pa.BufferOutputStream()
    feather.write_feather(table, sink)
    out[".feather"] = sink.getvalue().to_pybytes()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    out[".arrow"] = sink.getvalue().to_pybytes()
    out[".json"] = json.dumps({"format": "bucketopt.training.sampler/1", "boundaries": [9, 300],
                               "token_budget": 600}).encode()
    return out


SEEDS = _seeds()


@st.composite
def mutated(draw):
    """A valid file of some format with bytes flipped, cut, spliced or repeated."""
    ext = draw(st.sampled_from(sorted(SEEDS)))
    data = bytearray(SEEDS[ext])
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["flip", "cut", "insert", "repeat"]))
        pos = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "flip" and data:
            data[pos] = draw(st.integers(0, 255))
        elif op == "cut":
            del data[pos:pos + draw(st.integers(1, 64))]
        elif op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=16))
        else:
            data += data[pos:pos + draw(st.integers(1, 256))] * draw(st.integers(1, 8))
    return draw(st.sampled_from([ext, ".npy", ".parquet", ".txt"])), bytes(data)


TEXTY = st.text(alphabet="0123456789,.-+eExa_ \t\n\"#\r;:x", max_size=200).map(str.encode)
RAW = st.binary(max_size=512)
FILES = st.one_of(mutated(), st.tuples(st.sampled_from(EXTENSIONS), st.one_of(TEXTY, RAW)))


def _check_lengths(arr) -> None:
    # one length per sample, or (n, 2) pairs (a .npy of that shape, two integers a line)
    assert isinstance(arr, np.ndarray) and arr.dtype == np.int64
    assert arr.ndim == 1 or (arr.ndim == 2 and arr.shape[1] == 2)
    assert arr.size >= 1 and int(arr.min()) >= 1


def _check_error(exc: BaseException) -> None:
    assert isinstance(exc, BucketoptError), repr(exc)
    text = str(exc)
    assert text and "\n" not in text and len(text) < 2000, text


def _cli(argv, capsys) -> int:
    with time_limit():
        code = main(argv)
    captured = capsys.readouterr()
    assert code in (0, 2), (argv, code, captured.err)
    if code == 2:
        lines = captured.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("bucketopt: error: "), (argv, lines)
    return code


@FUZZ
@given(FILES)
def test_fuzzed_files_read_or_fail_in_one_line(tmp_path_factory, capsys, case):
    ext, data = case
    path = tmp_path_factory.mktemp("fuzz") / f"data{ext}"
    path.write_bytes(data)
    for read in (bucketopt.load_lengths, bucketopt.load_histogram):
        tracemalloc.start()
        try:
            with time_limit():
                result = read(path)
        except Exception as exc:  # the point: which exceptions escape
            _check_error(exc)
        else:
            _check_lengths(result if isinstance(result, np.ndarray) else result.to_lengths())
        finally:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        assert peak < READ_PEAK_MB * 2**20, (ext, peak)
    _cli(["inspect", str(path), "-q"], capsys)
    _cli(["solve", "--lens", str(path), "-k", "2", "-q", "--json"], capsys)
    if ext == ".json":
        from bucketopt.show.export import sampler_kwargs

        try:
            sampler_kwargs(path)
        except Exception as exc:
            _check_error(exc)


@FUZZ
@given(st.one_of(TEXTY, mutated().map(lambda c: c[1])))
def test_fuzzed_measurement_csv(tmp_path_factory, capsys, data):
    path = tmp_path_factory.mktemp("fuzz") / "m.csv"
    path.write_bytes(b"batch_size,padded_len,seconds\n" + data)
    _cli(["calibrate", "--measurements", str(path), "--bootstrap", "0", "--folds", "0"],
         capsys)


# --- argument vectors ----------------------------------------------------------------------------

_WORK = Path(tempfile.mkdtemp(prefix="bucketopt-fuzz-"))
atexit.register(shutil.rmtree, _WORK, ignore_errors=True)
np.save(_WORK / "lens.npy", np.random.default_rng(3).integers(1, 3000, size=400))
(_WORK / "m.csv").write_text("batch_size,padded_len,seconds\n" + "\n".join(
    f"{s},{p},{1e-3 + 1e-7 * s * p + 1e-11 * s * p * p}"
    for s in (1, 2, 4, 8) for p in (256, 512, 1024)) + "\n")
(_WORK / "profile.json").write_text(json.dumps({"name": "fuzz", "alpha": 0.01, "beta": 1e-7,
                                                "gamma": 1e-11, "world_size": 2,
                                                "token_budget": 8192}))
(_WORK / "dir").mkdir()

VALUES = ["", " ", "0", "1", "2", "3", "8", "-1", "3", "8192", "2048", "0.1", "1:8", "4",
          "1e12", "nan", "inf", "-inf", "0.5", "1.5", "1:3", "3:1", "0:2", "x", "9" * 30,
          "1000000000000000000", "4096", "100000000",
          "edge", "batch", "time", "padding", "sampler", "lhotse", "nemo", "tf", "1.26",
          "5,9,3000", "3000,5", str(_WORK / "lens.npy"), str(_WORK / "m.csv"),
          str(_WORK / "profile.json"), str(_WORK / "dir"), str(_WORK / "missing.npy"),
          "x" * 300, "rtx-pro-6000-blackwell", "seq_len", "out.json"]
SKIP_FLAGS = {"-h", "--help", "--version", "--plot", "--model", "--device", "--dtype",
              "--time-limit"}  # figures and model runs: slow, covered elsewhere


INTS = ["1", "2", "3", "4", "8", "64", "4096", "8192", "100000", "0", "-1", "1e12", "9" * 30]
FLOATS = ["0", "0.01", "0.1", "0.3", "0.5", "1", "1.5", "-0.1", "nan", "1e308"]


def _flag_values(action) -> list:
    """Values worth trying for one option: its choices, numbers of its type, or VALUES."""
    if action.nargs == 0:
        return [None]
    if action.choices:
        return [*action.choices, "nope"]
    name = getattr(action.type, "__name__", "")
    if name in ("_int", "_count", "int"):
        return INTS
    if name in ("_float", "float"):
        return FLOATS
    return VALUES


def _command_flags() -> dict[str, dict[str, list]]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    out = {}
    for name, command in sub.choices.items():
        if name in ("probe", "verify"):  # run models: tests/test_probe.py, test_verify.py
            continue
        out[name] = {a.option_strings[0]: _flag_values(a) for a in command._actions
                     if a.option_strings and not set(a.option_strings) & SKIP_FLAGS}
    return out


FLAGS = _command_flags()


LENS = str(_WORK / "lens.npy")
BASES = {  # one valid call per command; the fuzzing bends it
    "solve": ["solve", "--lens", LENS, "-k", "3"],
    "sweep": ["sweep", "--lens", LENS, "-k", "1:4"],
    "compare": ["compare", "--lens", LENS, "-k", "3", "--token-budget", "8192"],
    "export": ["export", "--lens", LENS, "-k", "3", "--token-budget", "8192", "-f", "nemo"],
    "inspect": ["inspect", LENS],
    "calibrate": ["calibrate", "--measurements", str(_WORK / "m.csv"), "--bootstrap", "0"],
    "report": ["report", "--lens", LENS, "-k", "3", "--token-budget", "8192", "--json"],
}


@st.composite
def argv(draw):
    """A valid call with some values replaced, some parts dropped and flags appended."""
    command = draw(st.sampled_from(sorted(BASES)))
    out = list(BASES[command])
    values = [i for i in range(1, len(out)) if not out[i].startswith("-")]
    if draw(st.integers(0, 2)) == 0:  # replace a value (never the command or a flag)
        out[draw(st.sampled_from(values))] = draw(st.sampled_from(VALUES))
    if draw(st.integers(0, 9)) == 0:  # drop a part
        del out[draw(st.integers(1, len(out) - 1))]
    for _ in range(draw(st.integers(0, 4))):
        flag = draw(st.sampled_from(sorted(FLAGS[command])))
        value = draw(st.sampled_from(FLAGS[command][flag] if draw(st.integers(0, 5))
                                     else VALUES))
        out += [flag] if value is None else [flag, value]
    return out


@settings(max_examples=150 * SCALE, deadline=None, derandomize=SCALE == 1,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(argv())
def test_fuzzed_argument_vectors_exit_0_or_2(capsys, args):
    here = os.getcwd()
    os.chdir(_WORK / "dir")  # any output file lands here
    try:
        _cli([*args, "-q"] if "-q" in FLAGS[args[0]] or "--quiet" in FLAGS[args[0]] else args,
             capsys)
    finally:
        os.chdir(here)


# --- the Python API ------------------------------------------------------------------------------

ODD = st.one_of(st.none(), st.booleans(), st.integers(-3, 10), st.integers(2**62, 2**70),
                st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=5),
                st.lists(st.integers(-2, 50), max_size=4))
LENGTHS = st.one_of(st.lists(st.integers(1, 5000), min_size=1, max_size=60),
                    st.lists(st.one_of(st.integers(-5, 2**64), st.floats(), st.text(max_size=2),
                                       st.none()), max_size=8),
                    ODD, st.lists(st.lists(st.integers(1, 9), max_size=3), max_size=3))


@settings(max_examples=120 * SCALE, deadline=None, derandomize=SCALE == 1)
@given(LENGTHS, ODD, st.one_of(st.none(), st.integers(1, 20_000), ODD),
       st.sampled_from(["edge", "batch", "nope", None]), st.one_of(st.just(1), ODD))
def test_fuzzed_api_arguments(lengths, k, token_budget, pad, align):
    kwargs = {"token_budget": token_budget, "align": align}
    if pad is not None:
        kwargs["pad"] = pad
    for call in (lambda: bucketopt.solve(lengths, k, **kwargs),
                 lambda: bucketopt.evaluate(lengths, [5000], token_budget=token_budget),
                 lambda: bucketopt.sweep(lengths, k, token_budget=token_budget)):
        try:
            with time_limit():
                call()
        except Exception as exc:
            _check_error(exc)


@pytest.mark.parametrize("seed", range(3))
def test_every_format_seed_is_valid(seed, tmp_path):
    """The mutation seeds themselves read (else the fuzzing starts from garbage)."""
    for ext, data in SEEDS.items():
        if ext == ".json":
            continue
        path = tmp_path / f"s{seed}{ext}"
        path.write_bytes(data)
        _check_lengths(bucketopt.load_lengths(path))
