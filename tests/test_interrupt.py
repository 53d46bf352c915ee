"""Ctrl-C on a terminal: the message starts on a line of its own, after any progress line."""

from __future__ import annotations

import io
import signal
import threading
import time

import pytest

import bucketopt.cli as cli
from bucketopt import progress
from bucketopt.cli import main
from bucketopt.progress import Progress, Stage


class FakeTTY(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture
def tty(monkeypatch):
    """A terminal standing in for stderr (set in the test body: pytest's capture resets
    sys.stderr between a fixture's setup and the test)."""
    stream = FakeTTY()
    yield lambda: monkeypatch.setattr("sys.stderr", stream) or stream
    progress._OPEN["stream"] = None


def _exit(code):
    raise SystemExit(code)


def _to(stream):
    """os.write(2, ...) (the ending's line goes to the descriptor itself) onto ``stream``."""
    return lambda fd, data: stream.write(data.decode()) if fd == 2 else None


def test_the_signal_handler_ends_a_drawn_progress_line_first(tty, monkeypatch):
    tty = tty()
    monkeypatch.setattr(cli.os, "_exit", _exit)
    monkeypatch.setattr(cli.os, "write", _to(tty))
    monkeypatch.setattr(cli, "_ENDING", threading.Lock())  # a fresh ending for each test
    bar = Progress("lengths.parquet", total=100, enabled=True, delay=0.0)
    bar.update(40)  # drawn: "\rreading lengths.parquet [...] 40.0% ..." and no newline
    assert tty.getvalue().startswith("\rreading lengths.parquet")
    with pytest.raises(SystemExit) as exc:
        cli._interrupted(signal.SIGINT, None)
    assert exc.value.code == 130
    text = tty.getvalue()
    assert text.endswith("\nbucketopt: interrupted\n")
    assert text.split("\n")[-2] == "bucketopt: interrupted"  # the message's line is its own
    assert "40.0%" in text.split("\n")[0]  # the progress line is kept, ended


def test_no_line_drawn_no_blank_line(tty, monkeypatch):
    tty = tty()
    monkeypatch.setattr(cli.os, "_exit", _exit)
    monkeypatch.setattr(cli.os, "write", _to(tty))
    monkeypatch.setattr(cli, "_ENDING", threading.Lock())  # a fresh ending for each test
    with Progress("x", total=10, enabled=True, delay=0.0) as bar:
        bar.update(10)
    # closed: the line ended with its own newline; the message follows it directly
    assert tty.getvalue().endswith("\n") and progress._OPEN["stream"] is None
    drawn = tty.getvalue()
    with pytest.raises(SystemExit):
        cli._interrupted(signal.SIGINT, None)
    assert tty.getvalue() == drawn + "bucketopt: interrupted\n"


def test_interrupt_during_a_stage_line_in_main(tty, monkeypatch):
    tty = tty()
    # a step line redrawn by its thread on the terminal; Ctrl-C reaches Python as a
    # KeyboardInterrupt: exit 130 and the message on a line of its own
    from bucketopt.commands import solve as solve_command

    def run(args):
        with Stage("solving k=2", enabled=True, delay=0.0):
            deadline = time.monotonic() + 60
            while progress._OPEN["stream"] is None and time.monotonic() < deadline:
                time.sleep(0.01)
            assert progress._OPEN["stream"] is tty
            raise KeyboardInterrupt

    monkeypatch.setattr(solve_command, "run", run)
    assert main(["solve", "-k", "2"]) == 130
    text = tty.getvalue()
    assert "\rsolving k=2: " in text
    assert text.endswith("\nbucketopt: interrupted\n")
    assert text.split("\n")[-2] == "bucketopt: interrupted"
    assert progress._OPEN["stream"] is None


def test_compare_progress_line_is_tracked(tty):
    tty = tty()
    # compare() draws its own line through Progress.redraw: it is known to be open too
    from bucketopt.training.compare import _Stages

    stages = _Stages(3, True)
    stages.bar.delay = 0.0
    stages("sorted")
    stages.bar._last_draw = 0.0
    stages("shuffle")
    assert progress._OPEN["stream"] is tty
    progress.end_line()
    assert tty.getvalue().endswith("\n") and progress._OPEN["stream"] is None
    progress.end_line()  # nothing open: nothing written
    assert tty.getvalue().count("\n") == 1
