"""``--lens -``: every format on standard input is named "standard input", never the temporary
copy's name, and the copy is removed on every way out (SIGTERM, SIGHUP and Ctrl-C included)."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import bucketopt
from bucketopt.cli import main
from bucketopt.commands.common import spool_stdin_lens, stdin_suffix

ROOT = Path(__file__).resolve().parents[1]
LENGTHS = np.random.default_rng(7).integers(5, 3000, size=400)


class FakeStdin:
    """Standard input as a pipe: bytes in .buffer, not a terminal; ``step`` bytes per read at
    most (a pipe may hand over fewer bytes than asked)."""

    def __init__(self, data: bytes, step: int | None = None):
        self.buffer = _Chunked(data, step)
        self.closed = False

    def isatty(self):
        return False


class _Chunked(io.BytesIO):
    def __init__(self, data, step):
        super().__init__(data)
        self.step = step

    def read(self, size=-1):
        if self.step is not None and (size is None or size < 0 or size > self.step):
            size = self.step
        return super().read(size)


def _encoded(kind: str, columns: int = 1) -> bytes:
    import pyarrow as pa

    table = pa.table({"seq_len": LENGTHS, **({"other": LENGTHS * 2} if columns > 1 else {})})
    out = io.BytesIO()
    if kind == "npy":
        np.save(out, LENGTHS)
    elif kind == "npz":
        np.savez(out, LENGTHS)
    elif kind == "text":
        out.write("\n".join(map(str, LENGTHS)).encode() + b"\n")
    elif kind == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, out)
    elif kind == "arrow":
        import pyarrow.feather as feather

        feather.write_feather(table, out)
    return out.getvalue()


@pytest.mark.parametrize("magic, suffix", [
    (b"\x93NUMPY\x01\x00", ".npy"), (b"PAR1\x15\x04", ".parquet"), (b"ARROW1\x00\x00", ".arrow"),
    (b"PK\x03\x04\x14\x00", ".npz"), (b"12\n34\n", ".txt"), (b"", ".txt")])
def test_stdin_suffix_from_magic_bytes(magic, suffix):
    assert stdin_suffix(magic) == suffix


@pytest.mark.parametrize("kind, suffix", [("npy", ".npy"), ("npz", ".npz"), ("text", ".txt"),
                                          ("parquet", ".parquet"), ("arrow", ".arrow")])
def test_the_spooled_copy_has_the_suffix_of_its_bytes(kind, suffix, monkeypatch):
    monkeypatch.setattr(sys, "stdin", FakeStdin(_encoded(kind), step=1))  # one byte a read
    args = SimpleNamespace(lens="-")
    path = spool_stdin_lens(args)
    try:
        assert path.suffix == suffix
        assert path.read_bytes() == _encoded(kind)
        assert args.lens_label == "standard input"
    finally:
        path.unlink()


@pytest.mark.parametrize("kind", ["npy", "npz", "text", "parquet", "arrow"])
def test_every_format_on_stdin_is_named_standard_input(kind, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    expected = bucketopt.solve(LENGTHS, 3)
    columns = 2 if kind in ("parquet", "arrow") else 1  # two columns: a note names the one used
    monkeypatch.setattr(sys, "stdin", FakeStdin(_encoded(kind, columns)))
    assert main(["solve", "--lens", "-", "-k", "3", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["source"] == "standard input"
    assert json.loads(out)["boundaries"] == list(expected.boundaries)
    assert "bucketopt-stdin" not in err
    if columns > 1:
        assert "reading standard input: column 'seq_len'" in err
    monkeypatch.setattr(sys, "stdin", FakeStdin(_encoded(kind, columns)))
    assert main(["solve", "--lens", "-", "-k", "3"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("source: standard input\n")
    assert "bucketopt-stdin" not in out + err
    assert not list(tmp_path.glob("bucketopt-stdin-*"))


@pytest.mark.parametrize("kind, argv, words", [
    ("parquet", ["--column", "nope"], "standard input: no column 'nope'"),
    ("arrow", ["--column", "nope"], "standard input: no column 'nope'"),
    ("npz", ["--column", "nope"], "standard input"),
])
def test_errors_about_stdin_name_it(kind, argv, words, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    monkeypatch.setattr(sys, "stdin", FakeStdin(_encoded(kind, 2)))
    assert main(["solve", "--lens", "-", "-k", "3", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0] and "bucketopt-stdin" not in err[0], err
    assert not list(tmp_path.glob("bucketopt-stdin-*"))


def test_bad_lengths_in_parquet_on_stdin_name_it(monkeypatch, capsys, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = io.BytesIO()
    pq.write_table(pa.table({"seq_len": np.array([4, -3, 9])}), out)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    monkeypatch.setattr(sys, "stdin", FakeStdin(out.getvalue()))
    assert main(["solve", "--lens", "-", "-k", "2"]) == 2
    err = capsys.readouterr().err
    assert "standard input" in err and "bucketopt-stdin" not in err and "-3" in err


# --- the copy goes on every way out --------------------------------------------------------

@pytest.mark.parametrize("number, code", [(signal.SIGTERM, 128 + signal.SIGTERM),
                                          (signal.SIGHUP, 128 + signal.SIGHUP),
                                          (signal.SIGINT, 130)])
def test_a_signal_while_stdin_is_read_removes_the_copy(number, code, tmp_path):
    """The process reads Parquet bytes from a pipe kept open; the copy exists; a signal ends
    the process with status 128 + its number (Ctrl-C: 130 and one line), nothing else on
    stderr, and the copy is gone."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "bucketopt", "solve", "--lens", "-", "-k",
                             "2"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    try:
        data = _encoded("parquet")
        proc.stdin.write(data[:len(data) // 2])
        proc.stdin.flush()
        deadline = time.monotonic() + 120
        copies = []
        while not copies and time.monotonic() < deadline and proc.poll() is None:
            copies = list(tmp_path.glob("bucketopt-stdin-*"))
            time.sleep(0.05)
        assert [p.suffix for p in copies] == [".parquet"], proc.poll()
        proc.send_signal(number)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()
    err = proc.stderr.read().decode()
    proc.stdout.close()
    proc.stderr.close()
    assert proc.returncode == code, err
    said = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated", signal.SIGHUP: "hung up"}
    assert err.strip().splitlines() == [f"bucketopt: {said[number]}"]
    assert not list(tmp_path.glob("bucketopt-stdin-*"))


def test_the_signal_endings_put_back_what_they_found(monkeypatch):
    # in-process runs with --lens - leave the handlers and the wakeup fd as they were
    names = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    before = [signal.getsignal(number) for number in names]
    monkeypatch.setattr(sys, "stdin", FakeStdin(_encoded("npy")))
    assert main(["solve", "--lens", "-", "-k", "2", "-q"]) == 0
    assert [signal.getsignal(number) for number in names] == before
    assert signal.set_wakeup_fd(-1) == -1


_BUSY = """
import sys, tempfile
from pathlib import Path
import numba
from bucketopt import cli
from bucketopt.data import output

@numba.njit(nogil=True, cache=False)
def spin(n):
    x = 1
    for _ in range(n):
        x = (x * 1103515245 + 12345) % 2147483648
    return x

spin(10)  # compiled before the copy exists
endings = cli._SignalEndings()  # what main() holds while a command runs
path = Path(tempfile.mkstemp(prefix="bucketopt-stdin-", suffix=".npy")[1])
output.list_temporary(path)
print("ready", flush=True)
print(spin(10**12))  # minutes in a kernel that never returns to the interpreter
"""


def test_sigterm_while_a_kernel_runs_ends_at_once(tmp_path):
    """The main thread inside a long compiled kernel runs no Python signal handler; the
    signal thread of the command line still removes the copy and ends the process (status 143)
    without waiting for it."""
    pytest.importorskip("numba")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-c", _BUSY], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        assert len(list(tmp_path.glob("bucketopt-stdin-*"))) == 1
        time.sleep(0.5)  # inside the kernel by now
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)  # the kernel alone would run for minutes
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        err = proc.stderr.read()
        proc.stderr.close()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert not list(tmp_path.glob("bucketopt-stdin-*"))
