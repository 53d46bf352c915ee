"""A tiny progress line on stderr for long reads (no dependency).

It stays silent for the first ``delay`` seconds (so fast reads print nothing), when stderr is not a
terminal, and when disabled (``--quiet``). It redraws at most a few times per second.
"""

from __future__ import annotations

import sys
import time


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
        self.stream.write("\r" + text.ljust(self._width))  # cover a longer previous line
        self._width = len(text)
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        """End the line (only if something was drawn)."""
        if self._drawn:
            self._draw(time.monotonic())
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
