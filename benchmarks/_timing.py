"""Shared timing helper for the benchmark scripts (run them as `python benchmarks/NAME.py`)."""

from __future__ import annotations

import time


def best_of(fn, repeat: int):
    """(best wall time, last result) of ``repeat`` calls: the least disturbed run counts."""
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result
