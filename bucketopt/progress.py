"""A tiny progress line on stderr for long reads (no dependency).

It stays silent for the first ``delay`` seconds (so fast reads print nothing), when stderr is not a
terminal, and when disabled (``--quiet``). It redraws at most a few times per second.
"""

from __future__ import annotations

import sys
import time

# The stream on which a progress line is drawn and not yet ended (a terminal), so that a message
# printed in the middle of it (Ctrl-C) can start on a line of its own: see end_line().
_OPEN = {"stream": None}


def _drawn_on(stream) -> None:
    _OPEN["stream"] = stream


def _ended_on(stream) -> None:
    if _OPEN["stream"] is stream:
        _OPEN["stream"] = None


def end_line() -> None:
    """End a progress line left open on its terminal (write its newline), so that what is
    printed next starts on a line of its own; nothing when no line is open. Safe to call from
    a signal handler: a failed write is ignored."""
    stream, _OPEN["stream"] = _OPEN["stream"], None
    if stream is None:
        return
    try:
        stream.write("\n")
        stream.flush()
    except (OSError, ValueError):
        pass


class Progress:
    """Report ``done`` rows out of ``total`` (``None`` when unknown) on one redrawn stderr line.

    Parameters
    ----------
    label : str
        What is being read, shown first on the line.
    total : int, optional
        Rows expected; the line shows a percentage when known.
    enabled : bool or None
        ``None``: on when stderr is a terminal; ``False``: never; ``True``: always.
    delay : float
        Seconds of silence before the first draw.
    stream : file, optional
        Where to draw (default ``sys.stderr``).

    Examples
    --------
    >>> with Progress("lengths.parquet", total=10, enabled=False) as bar:
    ...     bar.update(10)
    """

    def __init__(self, label: str, total: int | None = None, *, enabled: bool | None = None,
                 delay: float = 2.0, stream=None):
        self.label = label
        self.total = total
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        self.delay = delay
        self._start = time.monotonic()
        self._last_draw = 0.0
        self._drawn = False
        self._width = 0

    def update(self, rows: int) -> None:
        """Count ``rows`` more rows and redraw if it is time to."""
        self.done += int(rows)
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._start < self.delay or now - self._last_draw < 0.2:
            return
        self._last_draw = now
        self._draw(now)

    def _draw(self, now: float) -> None:
        elapsed = now - self._start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        if self.total:
            share = min(self.done / self.total, 1.0)
            width = 24
            filled = int(share * width)
            bar = "#" * filled + "-" * (width - filled)
            text = (f"reading {self.label} [{bar}] {100 * share:5.1f}% "
                    f"{self.done:,}/{self.total:,} rows, {rate:,.0f} rows/s")
        else:
            text = f"reading {self.label}: {self.done:,} rows, {rate:,.0f} rows/s"
        self.redraw(text)

    def redraw(self, text: str) -> None:
        """Draw ``text`` over the line (covering a longer previous one)."""
        self.stream.write("\r" + text.ljust(self._width))
        self._width = len(text)
        self.stream.flush()
        self._drawn = True
        _drawn_on(self.stream)

    def close(self) -> None:
        """End the line (only if something was drawn)."""
        if self._drawn:
            self._draw(time.monotonic())
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False
            _ended_on(self.stream)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


# The CLI turns the step lines on (not with --quiet); the library stays silent.
STAGES = {"enabled": False}
_DRAWN = {"stage": None}  # the Stage whose line is drawn on a terminal now, if any


def clear_stage_line() -> None:
    """Blank a step line drawn on a terminal, so that a note printed now starts on a line of
    its own (the step redraws its line below it)."""
    stage = _DRAWN["stage"]
    if stage is not None and stage._width:
        stage.stream.write("\r" + " " * stage._width + "\r")
        stage.stream.flush()


class Stage:
    """A line on stderr while one long step runs (a solve, a DP): silent for ``delay`` seconds,
    then ``label: 3.1 s`` redrawn a few times a second on a terminal, or a plain line every
    ``every`` seconds elsewhere; the line is closed when the step ends. A background thread
    draws it, so the numba kernels that run long release the GIL (``nogil=True``). ``status``,
    a function returning text, adds what the step has done so far (``label: 3 s, round 2/3``).

    Examples
    --------
    >>> with Stage("solving", enabled=False):
    ...     pass
    """

    def __init__(self, label: str, *, enabled: bool | None = None, delay: float = 1.0,
                 every: float = 5.0, stream=None, status=None):
        import threading

        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = STAGES["enabled"] if enabled is None else enabled
        isatty = getattr(self.stream, "isatty", None)
        self.tty = bool(isatty and isatty())
        self.delay = delay
        self.every = every
        self.status = status
        self._width = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._drawn = False

    def _run(self) -> None:
        start = time.monotonic()
        if self._stop.wait(self.delay):
            return
        while True:
            elapsed = time.monotonic() - start
            text = f"{self.label}: {elapsed:.1f} s" if self.tty else \
                f"{self.label}: {elapsed:.0f} s"
            if self.status is not None:
                text += f", {self.status()}"
            try:
                if self.tty:
                    self.stream.write("\r" + text.ljust(self._width))  # cover a longer line
                    self._width = len(text)
                    _DRAWN["stage"] = self
                else:
                    self.stream.write(text + "\n")
                self.stream.flush()
            except (OSError, ValueError):
                return
            if self.tty:
                _drawn_on(self.stream)
            self._drawn = True
            if self._stop.wait(0.25 if self.tty else self.every):
                return

    def __enter__(self):
        if self.enabled:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        if self.enabled:
            self._stop.set()
            self._thread.join()
            if _DRAWN["stage"] is self:
                _DRAWN["stage"] = None
            if self._drawn and self.tty:
                try:
                    self.stream.write("\n")
                    self.stream.flush()
                except (OSError, ValueError):
                    pass
                _ended_on(self.stream)
        return False
