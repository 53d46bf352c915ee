"""`bucketopt compare`: every strategy side by side, analytic and simulated; the rules."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import bucketopt
from bucketopt.cli import main
from bucketopt.heuristics import RULES, rule_of_thumb, t2t_boundaries

# with --pad batch (edge_optimal: the edge-padding optimum, trained with dynamic padding);
# compare's default padding is edge, as every command's (bucketopt.validate.DEFAULT_PAD)
NAMES = {"sorted", "shuffle", "bucketed", "packed", "edge_optimal", *RULES}


@pytest.fixture
def lens_file(tmp_path):
    rng = np.random.default_rng(3)
    lengths = np.r_[rng.integers(20, 400, 3_000), rng.integers(400, 3_000, 1_000)]
    path = tmp_path / "seq_len.npy"
    np.save(path, lengths)
    return path, lengths


def test_json_holds_every_strategy(lens_file, capsys):
    path, lengths = lens_file
    code = main(["compare", "--lens", str(path), "-k", "4", "--token-budget", "8192", "--json",
                 "--simulations", "2", "--pad", "batch"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    rows = out["strategies"]
    assert set(rows) == NAMES
    for name, row in rows.items():
        assert 0.0 <= row["padding_fraction"] < 1.0, name
        assert row["real_tokens"] == int(lengths.sum())
    # bucketed rows: analytic = evaluate(), simulated close to it; the optimum is the best of
    # the boundary sets drawn from the data's lengths (quantile and lhotse edges are lengths)
    best = bucketopt.solve(lengths, 4, token_budget=8192, pad="batch")
    assert rows["bucketed"]["boundaries"] == list(best.boundaries)
    assert rows["bucketed"]["padding_fraction"] == pytest.approx(best.padding_fraction)
    for name in ("bucketed", "edge_optimal", *RULES):
        row = rows[name]
        sol = bucketopt.evaluate(lengths, row["boundaries"], token_budget=8192, pad="batch")
        assert row["padding_fraction_analytic"] == pytest.approx(sol.padding_fraction)
        assert row["padding_fraction_simulated"] == pytest.approx(sol.padding_fraction, rel=0.05)
    for name in ("edge_optimal", "quantile", "lhotse"):
        assert rows["bucketed"]["padding_fraction"] <= rows[name]["padding_fraction"] + 1e-12
    assert rows["packed"]["padding_fraction"] < rows["shuffle"]["padding_fraction"]
    assert rows["sorted"]["padding_fraction"] < rows["shuffle"]["padding_fraction"]
    assert rows["packed"]["padding_fraction"] == 0.0  # padding-free rows
                                                      # (bucketopt.training.packed)
    for name in ("sorted", "shuffle"):
        assert rows[name]["padding_fraction_analytic"] is None
        sim = bucketopt.simulate(lengths, name, token_budget=8192)
        if name != "shuffle":  # deterministic padding: one epoch is the answer
            assert rows[name]["padding_fraction"] == pytest.approx(sim.padding_fraction)


def test_table_for_people(lens_file, capsys):
    path, _ = lens_file
    assert main(["compare", "--lens", str(path), "-k", "3", "--token-budget", "4096",
                 "--pad", "batch"]) == 0
    out = capsys.readouterr().out
    for name in NAMES:
        assert name in out
    assert "padding (simulated)" in out


@pytest.mark.parametrize("argv, words", [
    (["compare", "-k", "3"], "--token-budget"),
    (["compare", "-k", "0", "--token-budget", "4096"], "-k must be"),
    (["compare", "-k", "3", "--token-budget", "100"], "--token-budget 100 is"),
    (["compare", "-k", "3", "--token-budget", "4096", "--simulations", "0"], "simulations"),
    (["compare", "-k", "3", "--token-budget", "4096", "--simulations", "1000000000"],
     "simulations"),
    (["compare", "-k", "3", "--token-budget", "4096", "--grad-accum", "0"], "--grad-accum"),
    (["compare", "-k", "3", "--token-budget", "4096", "--grad-accum", "-2"], "--grad-accum"),
    (["compare", "-k", "3", "--token-budget", "4096", "--gpus", "-1"], "--gpus: must be an"),
])
def test_bad_input_is_one_line_and_exit_2(lens_file, capsys, argv, words):
    path, _ = lens_file
    assert main([*argv, "--lens", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0]


def test_huge_ranks_times_grad_accum_is_an_error_not_an_overflow():
    with pytest.raises(bucketopt.BucketoptError):
        bucketopt.compare([3, 5, 5, 9, 12, 40, 100], 2, token_budget=200, world_size=2**40,
                grad_accum=2**40)


def test_rules_of_thumb_follow_their_definitions():
    lengths = np.r_[np.arange(65, 8192), np.full(1_000, 700)]
    for k in (1, 3, 6, 12):
        for name in RULES:
            edges = rule_of_thumb(name, lengths, k, token_budget=65_536)
            assert 1 <= len(edges) <= k
            assert all(a < b for a, b in zip(edges, edges[1:]))
            assert edges[-1] >= lengths.max()
    assert rule_of_thumb("pow2", lengths, 5) == (512, 1024, 2048, 4096, 8192)
    assert rule_of_thumb("pow2", [3000, 5000], 3, token_budget=5000) == (4096, 5000)
    x = np.arange(1, 101)
    assert rule_of_thumb("quantile", x, 4) == (25, 50, 75, 100)
    assert rule_of_thumb("linspace", x, 3) == (34, 67, 100)
    # equal total length: cumulative tokens cross a quarter of 5050 at 50 (1275 >= 1262.5)
    assert rule_of_thumb("lhotse", x, 4)[0] == 50
    full = [b for b in t2t_boundaries(8191) if b >= 65]
    t2t = rule_of_thumb("t2t", lengths, 6)
    assert set(t2t[:-1]) <= set(full)
    assert full[-1] < 8191 and t2t_boundaries(100)[:4] == [8, 9, 10, 11]
    with pytest.raises(bucketopt.BucketoptError, match="name"):
        rule_of_thumb("fibonacci", x, 3)


def test_real_subprocess(lens_file):
    path, _ = lens_file
    done = subprocess.run(
        [sys.executable, "-m", "bucketopt", "compare", "--lens", str(path), "-k", "2",
         "--token-budget", "4096", "--json", "-q"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["pad"] == "edge"  # the default of every command
    assert set(out["strategies"]) == NAMES - {"edge_optimal"}
    bad = subprocess.run(
        [sys.executable, "-m", "bucketopt", "compare", "--lens", str(path), "-k", "2"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
