"""Scale: every objective on millions of distinct lengths either solves in bounded memory or is
refused at once, before its DP allocates anything, with one line that says what to do."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import bucketopt
from bucketopt.errors import BucketoptError
from bucketopt.objectives import edge
from bucketopt.validate import MAX_DP_GROUPS

from .naive import textbook_dp_edge


@pytest.mark.parametrize("seed", range(6))
def test_the_bounded_memory_edge_layers_give_the_textbook_optimum(monkeypatch, seed):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 300, rng.integers(20, 400))
    k = int(rng.integers(1, 7))
    share = dict(min_share=0.05) if seed % 2 else {}
    hull = bucketopt.solve(lengths, k, **share)
    monkeypatch.setattr(edge, "HULL_BYTES", -1)  # every DP takes the divide-and-conquer layers
    low = bucketopt.solve(lengths, k, **share)
    assert low.boundaries == hull.boundaries
    assert low.padded_tokens == textbook_dp_edge(lengths, k, **share)


@pytest.mark.parametrize("seed", range(6))
def test_starts_kept_on_disk_give_the_same_solutions_and_sweeps(monkeypatch, tmp_path, seed):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 500, rng.integers(30, 600))
    share = dict(min_share=0.02, max_share=0.6) if seed % 2 else {}
    k = int(rng.integers(2, 9))
    table = bucketopt.solve(lengths, k, **share)
    rows = bucketopt.sweep(lengths, range(2, 9), **share)
    monkeypatch.setattr(edge, "TABLE_ENTRIES", 0)  # every DP keeps its starts on disk
    from bucketopt.objectives import _edge_numpy

    monkeypatch.setattr(_edge_numpy, "use_numpy", lambda g, kmax: False)  # not the numpy pass
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    from bucketopt.objectives import _edge_rows

    calls = []
    real = _edge_rows.edge_layers_rows
    monkeypatch.setattr(_edge_rows, "edge_layers_rows",
                        lambda *a, **kw: calls.append(1) or real(*a, **kw))
    disk = bucketopt.solve(lengths, k, **share)
    assert calls  # the starts went to disk
    assert disk.boundaries == table.boundaries and disk.padded_tokens == table.padded_tokens
    assert disk.padded_tokens == textbook_dp_edge(lengths, k, **share)
    again = bucketopt.sweep(lengths, range(2, 9), **share)
    assert [s.boundaries for s in again.solutions] == [s.boundaries for s in rows.solutions]
    assert list(tmp_path.iterdir()) == []  # the rows' file is unnamed: nothing stays


def test_the_hull_buffer_estimate_follows_the_lanes():
    assert edge.hull_bytes(10**7, 6) > edge.HULL_BYTES  # 3 lanes of 4 int64 a group
    assert edge.hull_bytes(10**4, 16) < edge.HULL_BYTES


@pytest.mark.parametrize("kw, what", [
    (dict(pad="batch", token_budget=4 * 10**6), 'pad="batch"'),
    (dict(profile="rtx-pro-6000-blackwell", token_budget=4 * 10**6), "the time objective"),
    (dict(pad="batch", memory={"m0": 1e9, "m1": 1.0, "m2": 0.0, "capacity": 8e12}),
     'pad="batch"'),
])
def test_dps_that_would_not_fit_are_refused_before_they_allocate(kw, what):
    lengths = np.arange(1, MAX_DP_GROUPS + 2)
    with pytest.raises(BucketoptError) as info:
        bucketopt.solve(lengths, 3, **kw)
    text = str(info.value)
    assert text.startswith(what) and "align=2" in text and "max_length=" in text
    # merged as the message says, the same input solves
    small = {**kw, "token_budget": 6000} if "token_budget" in kw else kw
    sol = bucketopt.solve(np.arange(1, 3001), 3, align=2, **small)
    assert sol.boundaries[-1] >= 3000


def test_the_cli_says_what_to_do_in_one_line(tmp_path):
    path = tmp_path / "wide.npy"
    np.save(path, np.arange(1, MAX_DP_GROUPS + 2))
    for argv in (["solve", "--lens", str(path), "-k", "4", "--pad", "batch",
                  "--token-budget", str(4 * 10**6)],
                 ["compare", "--lens", str(path), "-k", "4", "--pad", "batch", "--token-budget",
                  str(4 * 10**6)]):
        from .test_counts_and_values import one_line_error

        err = one_line_error(argv)
        assert "--align 2" in err and "--max-length" in err and "--pad edge" in err


@pytest.mark.skipif(os.environ.get("BUCKETOPT_SCALE_TESTS") != "1",
                    reason="10**7 distinct lengths: set BUCKETOPT_SCALE_TESTS=1 (15-45 s each)")
@pytest.mark.parametrize("k", ["6", "64"])
def test_ten_million_distinct_lengths_solve_edge_padding_under_1_5_gb(tmp_path, k):
    path = tmp_path / "d1e7.npy"
    np.save(path, np.arange(1, 10**7 + 1))
    code = ("import resource, sys, json\nfrom bucketopt.cli import main\n"
            f"rc = main(['solve', '--lens', {str(path)!r}, '-k', {k!r}, '--json', '-q'])\n"
            "print(json.dumps(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    *answer, peak = out.strip().splitlines()
    assert json.loads("\n".join(answer))["boundaries"][-1] == 10**7
    assert int(peak) * 1024 < 1.5e9
