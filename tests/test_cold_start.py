"""The first run: the CLI says once that it compiles its kernels (only when numba really
compiles one: an empty cache; never with --quiet, never from the library), and a process of
small edge solves takes one path for all of them (the second solve costs what the third does)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from bucketopt import jit
from bucketopt.progress import STAGES

ROOT = Path(__file__).resolve().parent.parent
# k = 40 on the embedded example: past the numpy pass's size, so the edge kernel runs (the
# only kernel this command needs: a few seconds to compile)
SOLVE = [sys.executable, "-m", "bucketopt", "solve", "-k", "40", "--token-budget", "65536"]


def _run(argv, cache):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_compiling_line_cold_once_warm_never_quiet_never(tmp_path):
    quiet_cold = _run([*SOLVE, "-q"], tmp_path / "a")  # compiles into a, silently
    warm = _run(SOLVE, tmp_path / "a")  # loads from a: nothing to say
    cold = _run(SOLVE, tmp_path / "b")
    assert jit.COMPILING not in quiet_cold
    assert jit.COMPILING not in warm
    assert cold.count(jit.COMPILING) == 1, cold
    assert any((tmp_path / "a").rglob("*.nbi"))  # the cache the warm run read


def _event(module):
    func = types.SimpleNamespace(__module__=module)
    return types.SimpleNamespace(data={"dispatcher": types.SimpleNamespace(py_func=func)})


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setitem(jit._STATE, "announced", False)
    monkeypatch.setitem(STAGES, "enabled", STAGES["enabled"])


def test_line_only_for_our_kernels_once_and_only_with_the_cli_notes(fresh, capsys):
    listener = jit._Announcer()
    STAGES["enabled"] = False  # the library: silent
    listener.on_start(_event("bucketopt.objectives._edge_kernels"))
    assert capsys.readouterr().err == ""
    STAGES["enabled"] = True
    listener.on_start(_event("numba.np.arrayobj"))  # numba's own helpers: not ours to announce
    assert capsys.readouterr().err == ""
    listener.on_start(_event("bucketopt.objectives._edge_kernels"))
    listener.on_start(_event("bucketopt.training._packing_kernels"))
    assert capsys.readouterr().err == jit.COMPILING + "\n"


def test_small_edge_solves_take_one_path():
    """Three small solves in one process: the numpy pass each time (the kernel never loads,
    numba never imports), not numpy once and then the kernel's load; once the kernel is loaded
    (here by a direct call), small solves run it."""
    code = ("import json, sys\n"
            "import numpy as np\n"
            "import bucketopt\n"
            "from bucketopt.datasets import seed_like\n"
            "from bucketopt.objectives._edge_numpy import RAN\n"
            "lengths = seed_like()\n"
            "sols = [bucketopt.solve(lengths, k=6).boundaries for _ in range(3)]\n"
            "first = dict(RAN, numba='numba' in sys.modules)\n"
            "from bucketopt.objectives._edge_kernels import edge_layers\n"
            "z = np.zeros(2, dtype=np.int64)\n"
            "edge_layers(np.arange(2), np.arange(2), np.arange(2), z, z - 1, 1)\n"
            "sols.append(bucketopt.solve(lengths, k=6).boundaries)\n"
            "print(json.dumps([first, RAN, len(set(sols))]))\n")
    env = dict(os.environ,
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    first, after, distinct = json.loads(run.stdout.strip().splitlines()[-1])
    assert first == {"numpy": 3, "kernel": 0, "numba": False}
    assert after == {"numpy": 3, "kernel": 1}
    assert distinct == 1  # the same boundaries by both paths


def test_small_sorts_give_numpys_results():
    """The kernels' own sorts (smaller to compile than numba's) against numpy: values, distinct
    values, and the stable order of floats with ties, infinities and NaN."""
    import numpy as np

    from bucketopt.sorting import argsort_stable, sort_ints, unique_ints

    rng = np.random.default_rng(0)
    for trial in range(400):
        n = int(rng.integers(0, 80))
        ints = rng.integers(-6, 9 if trial % 2 else 10**6, n).astype(np.int64)
        assert np.array_equal(sort_ints(ints.copy()), np.sort(ints))
        assert np.array_equal(unique_ints(ints), np.unique(ints))
        assert np.array_equal(argsort_stable(ints), np.argsort(ints, kind="mergesort"))
        floats = rng.choice([0.0, 0.5, 1.0, 2.0, np.inf, -np.inf, np.nan], n)
        assert np.array_equal(argsort_stable(floats), np.argsort(floats, kind="mergesort"))


def test_small_searches_give_numpys_results():
    """The kernels' searches against ``np.searchsorted``, both sides, on increasing ints and
    floats with repeats, below, between, on and above every entry (and an empty array)."""
    import numpy as np

    from bucketopt.sorting import search_left, search_right

    rng = np.random.default_rng(1)
    for trial in range(300):
        n = int(rng.integers(0, 40))
        a = np.sort(rng.integers(-5, 6, n)).astype(np.int64)
        if trial % 2:
            a = np.cumsum(rng.choice([0.0, 0.5, 1.0], n)) - 3.0
        for v in (*np.unique(a), *(rng.uniform(-8, 8, 6))):
            v = a.dtype.type(v) if trial % 2 == 0 and float(v).is_integer() else float(v)
            assert search_left(a, v) == np.searchsorted(a, v, side="left")
            assert search_right(a, v) == np.searchsorted(a, v, side="right")


def test_no_refcounts_is_numbas_option_where_it_has_one():
    """The walks and 2-D bin costs compile without reference counting where this numba offers
    it (its private ``_nrt`` option), and the kernels carry the setting."""
    from numba.core.cpu import CPUTargetOptions

    from bucketopt.orderstats import expected_max

    expected = {"_nrt": False} if hasattr(CPUTargetOptions, "_nrt") else {}
    assert expected == jit.NO_REFCOUNTS
    assert all(expected_max.targetoptions.get(key) == value
               for key, value in jit.NO_REFCOUNTS.items())


def test_group_indices_by_its_search_give_numpys_grouping():
    """The simulator's grouping without a lookup table (a binary search per sample, by
    ``sorting.search_left``) against numpy's stable sort by ``searchsorted``, lengths up to the
    last edge, and every length above it in the last group."""
    import numpy as np

    from bucketopt.training._sim_kernels import group_indices

    rng = np.random.default_rng(3)
    empty = np.zeros(0, dtype=np.int64)
    for _ in range(200):
        edges = np.unique(rng.integers(1, 60, int(rng.integers(1, 8)))).astype(np.int64)
        lengths = rng.integers(1, edges[-1] + 1, int(rng.integers(0, 50))).astype(np.int64)
        idx = rng.permutation(lengths.size).astype(np.int64)
        keys = np.searchsorted(edges, lengths[idx])
        out, counts = group_indices(idx, lengths, edges, empty)
        assert np.array_equal(out, idx[np.argsort(keys, kind="stable")])
        assert np.array_equal(counts, np.bincount(keys, minlength=edges.size))
        over = lengths + edges[-1]  # above every edge: the last group, in order
        out, counts = group_indices(idx, over, edges, empty)
        assert np.array_equal(out, idx) and counts[-1] == idx.size
