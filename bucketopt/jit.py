"""numba's ``njit`` for bucketopt's kernels, the one line the CLI prints when it compiles them,
and compiling a later kernel ahead in a second process (:func:`compile_ahead`).

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

__all__ = ["COMPILING", "NO_REFCOUNTS", "njit"]

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


def _no_refcounts() -> dict:
    """numba's option that compiles a kernel without reference counting (``_nrt=False``: no
    atomic increment and decrement of every array passed or viewed), for the few small kernels
    that allocate nothing and run millions of times a solve (the walks of
    :mod:`bucketopt.orderstats`, the 2-D bins' costs). The option is numba's own and private: a
    numba without it gets ``{}``, and those kernels count references as every other does (the
    same results, slower)."""
    from numba.core.cpu import CPUTargetOptions

    return {"_nrt": False} if hasattr(CPUTargetOptions, "_nrt") else {}


NO_REFCOUNTS = _no_refcounts()


# Compiling ahead, in a second process. numba compiles one kernel at a time in a process (a
# global lock, and the GIL: its compiler is Python), so a first run pays every kernel's compile
# one after the other. Where a later kernel's argument types are known early, a child process
# can compile it into the shared cache while this one compiles the kernels it needs first; this
# one then loads it from the cache. On the 2-core machines the time objective's first solve
# compiles some 25 CPU seconds: forward_layer of the certified DP alone 9-10 s, after the
# relaxation's 9 s (benchmarks/compile_profile.py).
#
# The child gets JSON (nothing is unpickled): for each kernel its import path and a description
# of every argument's type (:func:`describe`), from which it builds small placeholder arguments
# of the same numba types (:func:`placeholder`) and compiles the kernel for them, without running
# it. A child that fails or is not needed costs nothing but its CPU: the kernel then compiles
# here, as it would have without it.

# The longest a caller waits for a child (seconds): past it the child is stopped and the kernel
# compiles here (a compile takes some 10 s on the machines measured).
AHEAD_WAIT = 300.0
_AHEAD = "BUCKETOPT_COMPILE_AHEAD"  # "0": never compile ahead (compile each kernel when called)


def describe(value):
    """A JSON description of the numba type of ``value`` as a kernel's argument: numbers, numpy
    arrays (dtype, dimensions, layout, read-only), tuples and named tuples of them. Raises
    TypeError for anything else."""
    import numpy as np

    if isinstance(value, (bool, np.bool_)):
        return {"bool": type(value).__module__ == "numpy"}
    if isinstance(value, (int, float, np.integer, np.floating)):
        kind = np.dtype(type(value)).name if isinstance(value, np.generic) else type(value).__name__
        return {"number": kind}
    if isinstance(value, np.ndarray):
        if value.dtype.fields is not None or value.dtype.kind not in "biuf":
            raise TypeError(f"no placeholder for arrays of {value.dtype}")
        layout = ("C" if value.flags.c_contiguous else "F" if value.flags.f_contiguous
                  else "A")
        return {"array": value.dtype.str, "ndim": value.ndim, "layout": layout,
                "readonly": not value.flags.writeable}
    if isinstance(value, tuple):
        items = [describe(v) for v in value]
        if hasattr(type(value), "_fields"):
            cls = type(value)
            return {"named": f"{cls.__module__}:{cls.__qualname__}", "items": items}
        return {"tuple": items}
    raise TypeError(f"no placeholder for {type(value).__name__}")


def _find(path: str):
    import importlib

    module, _, name = path.partition(":")
    found = importlib.import_module(module)
    for part in name.split("."):
        found = getattr(found, part)
    return found


def placeholder(desc):
    """A small value whose numba type is the one :func:`describe` described."""
    import numpy as np

    if "bool" in desc:
        return np.bool_(True) if desc["bool"] else True
    if "number" in desc:
        kind = desc["number"]
        python = {"int": 1, "float": 1.0}
        return python[kind] if kind in python else np.dtype(kind).type(1)
    if "array" in desc:
        ndim, layout = int(desc["ndim"]), desc["layout"]
        if layout == "C":
            out = np.zeros((1,) * ndim, dtype=desc["array"])
        elif layout == "F":
            out = np.zeros((2,) * ndim, dtype=desc["array"], order="F")
        else:  # strided: every other entry of the last axis
            out = np.zeros((3,) * ndim, dtype=desc["array"])[..., ::2]
        if desc["readonly"]:
            out.setflags(write=False)
        return out
    if "named" in desc:
        return _find(desc["named"])(*(placeholder(d) for d in desc["items"]))
    return tuple(placeholder(d) for d in desc["tuple"])


def _signature(kernel, args):
    return tuple(kernel.typeof_pyval(a) for a in args)


def _cold(kernel, sig) -> bool:
    """Whether ``kernel`` must compile ``sig``: not compiled in this process, not in numba's
    cache, and a cache to compile it into (no cache: a child's compile would be lost)."""
    from numba.core.caching import NullCache

    cache = getattr(kernel, "_cache", None)
    if sig in kernel.overloads or cache is None or isinstance(cache, NullCache):
        return False
    try:  # the cache's index alone (numba's own key of it): loading the code would cost as
        # much again when the kernel is called
        if not cache._enabled:
            return False
        key = cache._index_key(sig, kernel.targetctx.codegen())
        return key not in cache._cache_file._load_index()
    except Exception:  # a cache this numba reads otherwise: compile when called, as always
        return False


class Ahead:
    """Kernels compiling in a child process (:func:`compile_ahead`); :meth:`wait` before calling
    them, so that they load from the cache instead of compiling here too."""

    def __init__(self, child):
        self._child = child

    def __del__(self):  # never waited for (the caller raised): stop the child, if it runs
        child = getattr(self, "_child", None)
        if child is not None and child.poll() is None:
            child.kill()

    def wait(self) -> None:
        """Wait for the child (in short slices, so that Ctrl-C reaches this process at once;
        the child is stopped then, or past AHEAD_WAIT)."""
        import subprocess
        import time

        child, self._child = self._child, None
        if child is None:
            return
        deadline = time.monotonic() + AHEAD_WAIT
        try:
            while time.monotonic() < deadline:
                try:
                    child.wait(0.05)
                    return
                except subprocess.TimeoutExpired:
                    continue
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()


def compile_ahead(calls) -> Ahead:
    """Compile the kernels of ``calls`` ((kernel, args) pairs: a ``cache=True`` numba kernel and
    arguments of the types it will be called with) in a child process, now; returns the
    :class:`Ahead` to wait for. Nothing starts where nothing is cold (:func:`_cold`), with one
    CPU (the child would take this process's), with ``BUCKETOPT_COMPILE_AHEAD=0`` or
    ``NUMBA_DISABLE_JIT``, or where an argument has no placeholder."""
    import json
    import os
    import subprocess
    from pathlib import Path

    from numba.core import config

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if os.environ.get(_AHEAD) == "0" or config.DISABLE_JIT or (cpus or 1) < 2 \
            or not _python_executable():
        return Ahead(None)
    jobs = []
    for kernel, args in calls:
        try:  # (a warm kernel stops at _cold: nothing described on the solves that follow)
            sig = _signature(kernel, args)
            if not _cold(kernel, sig):
                continue
            descs = [describe(a) for a in args]
            same = _signature(kernel, [placeholder(d) for d in descs]) == sig
        except Exception:  # not a kernel, or an argument without a placeholder: compiling
            continue  # ahead is only ever a saving, never a reason for a call to fail
        if same:
            func = kernel.py_func
            jobs.append({"kernel": f"{func.__module__}:{func.__qualname__}", "args": descs})
    if not jobs:
        return Ahead(None)
    root = str(Path(__file__).resolve().parents[1])  # where this bucketopt is imported from:
    # the child imports the same one (its kernels' cache entries are those of its sources),
    # putting the folder first only when its own path lacks it (a checkout run from elsewhere;
    # never site-packages ahead of the standard library)
    code = ("import sys\nif sys.argv[1] not in sys.path: sys.path.insert(0, sys.argv[1])\n"
            "from bucketopt.jit import _compile_jobs\n_compile_jobs()\n")
    try:
        child = subprocess.Popen(
            [sys.executable, "-c", code, root], stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        child.stdin.write(json.dumps(jobs).encode())
        child.stdin.close()
    except OSError:
        return Ahead(None)
    return Ahead(child)


def _python_executable() -> bool:
    """Whether ``sys.executable`` runs Python scripts: not where Python is embedded in another
    program (which it then names) or frozen into an application."""
    from pathlib import Path

    name = Path(sys.executable or "").name.lower()
    return not getattr(sys, "frozen", False) and name.startswith(("python", "pypy"))


def _compile_jobs() -> None:
    """The child of :func:`compile_ahead`: compile every job read from stdin (JSON)."""
    import json

    for job in json.loads(sys.stdin.read()):
        kernel = _find(job["kernel"])
        kernel.compile(_signature(kernel, [placeholder(d) for d in job["args"]]))
