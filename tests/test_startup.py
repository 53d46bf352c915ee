"""Start-up: ``bucketopt solve`` on the embedded example loads neither numba nor scipy, and the
numpy pieces that make that possible give exactly what the libraries give."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bucketopt.data.pchip import pchip
from bucketopt.datasets import N_SAMPLES, published_knots

ROOT = Path(__file__).resolve().parent.parent


def test_pchip_is_scipy_bit_for_bit():
    interpolate = pytest.importorskip("scipy.interpolate")
    ranks, lengths = published_knots(N_SAMPLES)
    xi = np.arange(N_SAMPLES, dtype=np.float64)
    assert np.array_equal(pchip(ranks, lengths, xi),
                          interpolate.PchipInterpolator(ranks, lengths)(xi))
    rng = np.random.default_rng(0)
    for trial in range(200):
        n = int(rng.integers(3, 30))
        x = np.sort(rng.choice(10_000, n, replace=False)).astype(float) * rng.random()
        y = rng.normal(size=n).cumsum() if trial % 2 else np.sort(rng.normal(size=n))
        q = np.r_[x, rng.uniform(x[0], x[-1], 300)]
        assert np.array_equal(pchip(x, y, q), interpolate.PchipInterpolator(x, y)(q)), trial


def test_solve_embedded_loads_neither_numba_nor_scipy():
    code = ("import sys, json\n"
            "from bucketopt.cli import main\n"
            "rc = main(['solve', '-k', '6', '--json', '-q'])\n"
            "heavy = sorted({m.split('.')[0] for m in sys.modules}\n"
            "               & {'numba', 'scipy', 'matplotlib', 'pyarrow'})\n"
            "print(json.dumps(heavy), file=sys.stderr)\n"
            "sys.exit(rc)\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stderr.strip().splitlines()[-1]) == []
    out = json.loads(run.stdout)
    assert out["boundaries"] == [1013, 1628, 2340, 3170, 4632, 8191]


def test_numpy_pass_gives_the_kernels_solution(monkeypatch):
    """The same solves through the numpy pass and through the compiled kernel."""
    import bucketopt
    from bucketopt.datasets import seed_like
    from bucketopt.objectives import _edge_numpy

    lengths = seed_like()
    for kw in ({}, {"min_share": 0.05, "max_share": 0.4}, {"align": 64}, {"token_budget": 65536}):
        monkeypatch.setattr(_edge_numpy, "use_numpy", lambda g, kmax: True)
        first = bucketopt.sweep(lengths, range(1, 9), **kw)
        monkeypatch.setattr(_edge_numpy, "use_numpy", lambda g, kmax: False)
        second = bucketopt.sweep(lengths, range(1, 9), **kw)
        assert [s.to_dict() for s in first.solutions] == [s.to_dict() for s in second.solutions]


def test_numpy_pass_only_until_the_kernel_is_loaded():
    code = ("import numpy as np\n"
            "from bucketopt.objectives._edge_numpy import use_numpy\n"
            "before = use_numpy(8127, 6), use_numpy(1 << 20, 64)\n"
            "from bucketopt.objectives._edge_kernels import edge_layers\n"
            "z = np.zeros(2, dtype=np.int64)\n"
            "edge_layers(np.arange(2), np.arange(2), np.arange(2), z, z - 1, 1)\n"
            "print(before, use_numpy(8127, 6))\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert run.stdout.split() == ["(True,", "False)", "False"], run.stderr
