"""The environment variables bucketopt reads, each parsed in one place.

``NUMBA_NUM_THREADS``: numba's own knob for its threads; bucketopt reads it only as a cap on the
CPUs its certified DP runs on (at most 2). Unset or empty: no cap. A whole number >= 1: the cap
(above the CPUs free it changes nothing; any number of digits is read without converting it).
Anything else (``abc``, ``1.5``, ``0``, ``-1``): the CLI refuses it with one line and exit code 2
before any data is read; from Python it is ignored (numba itself warns and uses its default).
The CLI hands numba the value it read, before numba is imported: an empty one is unset, a
number of thousands of digits becomes 10**9 (numba would warn with a parse traceback).

``TMPDIR`` (and ``TEMP`` / ``TMP``): where ``--lens -`` spools standard input and where the
bounded-memory DP keeps its rows; Python's :mod:`tempfile` rules apply (a folder that is missing,
is a file or cannot be written is skipped for the next candidate, ``/tmp`` among them); none left
is one line naming the variable.

``NUMBA_CACHE_DIR``: numba's cache of compiled kernels; a value that is not a writable folder
makes numba fall back to its other cache places (``__pycache__`` beside the sources, then the
user's cache folder), as numba documents.
"""
from __future__ import annotations

import os

from .errors import BucketoptError

_MAX_DIGITS = 9  # a cap of 10**9 threads is no cap


def numba_threads(*, strict: bool = False) -> int | None:
    """The cap NUMBA_NUM_THREADS sets on the CPUs bucketopt uses: None if unset or empty, else a
    whole number >= 1. A bad value raises :class:`BucketoptError` when ``strict``, else is None.

    >>> import os
    >>> os.environ["NUMBA_NUM_THREADS"] = "3"
    >>> numba_threads()
    3
    >>> del os.environ["NUMBA_NUM_THREADS"]
    >>> numba_threads() is None
    True
    """
    raw = os.environ.get("NUMBA_NUM_THREADS")
    text = (raw or "").strip()
    if not text:
        return None
    digits = text[1:] if text.startswith("+") else text
    if digits.isascii() and digits.isdigit():
        digits = digits.lstrip("0")
        if digits:
            return int(digits) if len(digits) <= _MAX_DIGITS else 10 ** _MAX_DIGITS
    if not strict:
        return None
    shown = text if len(text) <= 40 else f"{text[:20]}...{text[-10:]} ({len(text):,} characters)"
    raise BucketoptError(f"the environment variable NUMBA_NUM_THREADS is {shown!r}: it must be a "
                         "whole number >= 1 (1 keeps the certified DP on one CPU), or unset.")


def settle_numba_threads() -> None:
    """The CLI's check of NUMBA_NUM_THREADS (a bad value: :class:`BucketoptError`), leaving in
    the environment the value read (unset when empty) for numba, which is not imported yet."""
    threads = numba_threads(strict=True)
    if threads is None:
        os.environ.pop("NUMBA_NUM_THREADS", None)
    else:
        os.environ["NUMBA_NUM_THREADS"] = str(threads)
