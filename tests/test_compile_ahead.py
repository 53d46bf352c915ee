"""Compiling ahead (bucketopt.jit.compile_ahead): the placeholders a child process compiles for
have the types of the real calls, a child's compile lands in the cache the caller then loads,
and a child that is off, fails or is not needed changes nothing but who compiles."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import typeof

import bucketopt
from bucketopt import jit
from bucketopt.datasets import seed_like
from bucketopt.objectives.certified.protocol import Windows

ROOT = Path(__file__).resolve().parent.parent

DTYPES = [np.int64, np.int32, np.float64, np.float32, np.bool_, np.uint8]


@st.composite
def arrays(draw):
    dtype = draw(st.sampled_from(DTYPES))
    ndim = draw(st.integers(0, 3))
    shape = tuple(draw(st.integers(1, 4)) for _ in range(ndim))
    a = np.zeros(shape, dtype=dtype)
    view = draw(st.sampled_from(["C", "F", "strided"]))
    if view == "F":
        a = np.asfortranarray(a)
    elif view == "strided" and ndim:
        a = np.zeros((*shape[:-1], 2 * shape[-1]), dtype=dtype)[..., ::2]
    if draw(st.booleans()):
        a.setflags(write=False)
    return a


values = st.recursive(
    st.one_of(arrays(), st.integers(-5, 5), st.floats(-1, 1), st.booleans(),
              st.sampled_from([np.int64(3), np.int32(3), np.float64(1.5), np.float32(1.5),
                               np.bool_(True)])),
    lambda inner: st.one_of(st.tuples(inner, inner),
                            st.builds(Windows, inner, inner)), max_leaves=6)


@given(values)
@settings(max_examples=300, deadline=None)
def test_placeholder_has_the_type_of_what_was_described(value):
    desc = jit.describe(value)
    json.dumps(desc)  # what the child reads
    assert typeof(jit.placeholder(desc)) == typeof(value)


def test_what_has_no_placeholder_is_refused():
    for value in ("text", None, np.zeros(2, dtype=np.complex128), [1, 2], {"a": 1}):
        with pytest.raises(TypeError):
            jit.describe(value)


@pytest.mark.parametrize("kwargs", [
    {"profile": "rtx-pro-6000-blackwell", "world_size": 8},
    {"profile": "rtx-pro-6000-blackwell", "pad": "batch", "token_budget": 65_536},
    {"pad": "batch", "token_budget": 65_536},
])
def test_kernels_compiled_ahead_are_called_with_those_types(monkeypatch, kwargs):
    """Every (kernel, arguments) the certified DP would compile ahead: the solve then calls the
    kernel with exactly the arguments' types (else the child's compile would be wasted)."""
    asked = []

    def record(calls):
        asked.extend(calls)
        return jit.Ahead(None)

    monkeypatch.setattr(jit, "compile_ahead", record)
    assert bucketopt.solve(seed_like(), 6, **kwargs).optimality  # (read: certified lazily)
    names = {kernel.py_func.__name__ for kernel, _ in asked}
    assert names == {"forward_layer", "bucket_features"}  # the DP's and the cost's kernels
    for kernel, args in asked:
        assert jit._signature(kernel, args) in kernel.overloads, kernel.py_func.__name__


def _python(code, cache, **env):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), **env,
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


# A small kernel of the package (a few seconds to compile): compiled ahead by a child, then
# called here; numba's stats say whether this process compiled it or loaded it from the cache.
AHEAD = """
import json, os
import numpy as np
from bucketopt import jit
from bucketopt.objectives.synced import TimeArrays, kernel_args
from bucketopt.objectives._time_kernels import bucket_features
from bucketopt.datasets import seed_like
from bucketopt.data.histogram import Histogram
arrays = TimeArrays(Histogram.from_lengths(seed_like()), "batch")
args = kernel_args(arrays, 0, 5, int(arrays.values[4]), 4, 2)
ahead = jit.compile_ahead([(bucket_features, args)])
started = ahead._child is not None
ahead.wait()
out = list(bucket_features(*args))
again = jit.compile_ahead([(bucket_features, args)])._child is not None
print(json.dumps({"started": started, "again": again, "out": out,
                  "hits": sum(bucket_features.stats.cache_hits.values()),
                  "misses": sum(bucket_features.stats.cache_misses.values())}))
"""


def test_a_child_compiles_into_the_cache_the_caller_loads(tmp_path):
    ahead = _python(AHEAD, tmp_path / "a")
    off = _python(AHEAD, tmp_path / "b", BUCKETOPT_COMPILE_AHEAD="0")
    warm = _python(AHEAD, tmp_path / "a")
    assert ahead["started"] and (ahead["hits"], ahead["misses"]) == (1, 0)
    assert not ahead["again"]  # compiled here now: nothing left to do ahead
    assert not off["started"] and (off["hits"], off["misses"]) == (0, 1)
    assert not warm["started"] and (warm["hits"], warm["misses"]) == (1, 0)  # cached already
    assert ahead["out"] == off["out"] == warm["out"]


def test_a_child_that_fails_leaves_the_compile_to_the_caller():
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"])
    ahead = jit.Ahead(child)
    ahead.wait()  # returns; nothing raised
    assert child.returncode == 3
    ahead.wait()  # a second wait: nothing left


def test_nothing_starts_where_it_cannot_or_should_not(monkeypatch):
    """Off by the environment, one CPU, or an executable that is not Python (embedded, frozen):
    no child, and the kernel compiles when called, as always."""
    from bucketopt.objectives._time_kernels import bucket_features
    from bucketopt.objectives.synced import TimeArrays, kernel_args

    arrays = TimeArrays(bucketopt.Histogram.from_lengths([5, 7, 7, 9]), "batch")
    calls = [(bucket_features, kernel_args(arrays, 0, 2, 9, 2, 1))]
    started = []
    class Child:  # what Popen would start
        def __init__(self, *args, **kwargs):
            started.append(args)
            self.stdin = io.BytesIO()

        def poll(self):
            return 0

    monkeypatch.setattr(subprocess, "Popen", Child)
    monkeypatch.setattr(jit, "_cold", lambda kernel, sig: True)
    for name, value in (("env", "0"), ("exe", "/usr/bin/blender"), ("frozen", True)):
        with monkeypatch.context() as m:
            if name == "env":
                m.setenv("BUCKETOPT_COMPILE_AHEAD", "0")
            elif name == "exe":
                m.setattr(sys, "executable", value)
            else:
                m.setattr(sys, "frozen", value, raising=False)
            assert jit.compile_ahead(calls)._child is None, name
    assert jit.compile_ahead(calls)._child is not None and len(started) == 1  # (the control)
    started.clear()
    if hasattr(os, "sched_getaffinity"):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
        assert jit.compile_ahead(calls)._child is None
    assert not started
