"""A machine loaded on purpose: processes that spin on every core while a timing runs."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import time


def _spin(stop_at):
    while time.time() < stop_at:
        pass


@contextlib.contextmanager
def spinning(seconds=60.0, per_core=2):
    """``per_core`` busy processes per core for at most ``seconds``, stopped on exit."""
    stop_at = time.time() + seconds
    busy = [multiprocessing.Process(target=_spin, args=(stop_at,), daemon=True)
            for _ in range(per_core * (os.cpu_count() or 1))]
    for p in busy:
        p.start()
    try:
        yield busy
    finally:
        for p in busy:
            p.terminate()
            p.join()
