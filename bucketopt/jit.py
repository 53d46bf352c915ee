"""numba's ``njit`` for bucketopt's kernels, and the one line the CLI prints when it compiles them.

Every kernel module imports ``njit`` from here, so the first import of a kernel also registers a
listener of numba's compile events. numba fires one only on a cache miss: a kernel compiled, not
loaded from its cache (``__pycache__`` next to the sources, or ``NUMBA_CACHE_DIR``). On the first
such event of a process, and while the CLI's notes are on (:data:`bucketopt.progress.STAGES`:
not with ``--quiet``), one line goes to stderr::

    bucketopt: compiling kernels, first run only (numba caches them for later runs)

The library itself stays silent, as it does for its progress lines. A warm cache fires no event:
nothing is printed and nothing is checked on the way.
"""

from __future__ import annotations

import sys
import threading

from numba import njit
from numba.core import event

__all__ = ["COMPILING", "njit"]

COMPILING = "bucketopt: compiling kernels, first run only (numba caches them for later runs)"
_STATE = {"announced": False}
_LOCK = threading.Lock()


def _is_ours(data) -> bool:
    func = getattr(data.get("dispatcher"), "py_func", None)
    return str(getattr(func, "__module__", "")).startswith("bucketopt.")


class _Announcer(event.Listener):
    """Prints :data:`COMPILING` once per process, at the first compile of a bucketopt kernel."""

    def on_start(self, ev):
        if _STATE["announced"]:
            return
        from .progress import STAGES, clear_stage_line

        if not STAGES["enabled"] or not _is_ours(ev.data or {}):
            return
        with _LOCK:
            if _STATE["announced"]:
                return
            _STATE["announced"] = True
            try:
                clear_stage_line()
                sys.stderr.write(COMPILING + "\n")
                sys.stderr.flush()
            except (OSError, ValueError):
                pass

    def on_end(self, ev):
        pass


event.register("numba:compile", _Announcer())
