"""compare's packed rows: packing efficiency beside the bound ceil(tokens / T), and the
attention balance across ranks (bucketopt.training.packing.attention_balance against
tests/naive.py)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bucketopt import BucketoptError
from bucketopt.cli import main
from bucketopt.cost.costmodel import CostModel, time_epoch
from bucketopt.training.compare import compare
from bucketopt.training.epoch import packed_epoch
from bucketopt.training.packed_rows import packed_rows
from bucketopt.training.packing import attention_balance

from . import naive

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.lists(st.lists(st.integers(1, 300), min_size=1, max_size=6), min_size=1, max_size=40),
       st.integers(1, 9))
def test_attention_balance_is_the_reference_and_one_minus_an_attention_only_wait(docs, world):
    tokens = np.array([sum(row) for row in docs], dtype=np.int64)
    att = np.array([float(sum(d * d for d in row)) for row in docs])
    got = attention_balance(att, world)
    assert got == pytest.approx(naive.attention_balance(list(att), world), rel=1e-12)
    assert 1.0 / world - 1e-12 <= got <= 1.0 + 1e-12
    # the wait of a cost model whose only cost is attention
    epoch = packed_epoch("packed", tokens, att, None)
    model = CostModel(alpha=0.0, beta=0.0, gamma=1.0, world_size=world)
    assert got == pytest.approx(1.0 - time_epoch(epoch, model).wait_fraction, rel=1e-9)


def test_attention_balance_extremes_and_bad_input():
    assert attention_balance([5.0, 5.0, 5.0, 5.0], 2) == 1.0
    assert attention_balance([8.0, 0.0, 0.0, 0.0], 4) == 0.25
    assert attention_balance([3.0], 2) == 0.5  # a rank without a row in the last step waits
    assert attention_balance([], 3) == 1.0
    for bad in ([-1.0], [np.nan], [[1.0]]):
        with pytest.raises(BucketoptError, match="`attention`"):
            attention_balance(bad, 2)
    with pytest.raises(BucketoptError, match="`world_size`"):
        attention_balance([1.0], 0)


@pytest.fixture(scope="module")
def documents():
    rng = np.random.default_rng(5)
    return np.r_[rng.integers(20, 700, 4_000), rng.integers(700, 4_000, 600)]


def test_packed_rows_report_efficiency_bound_and_balance(documents):
    budget, world = 8192, 4
    model = CostModel(alpha=0.0, beta=0.0, gamma=1e-9, world_size=world)  # weights d**2
    rows, epochs = packed_rows(documents, 3, token_budget=budget, cost_model=model,
                               simulations=2, diversity=False)
    tokens = int(documents.sum())
    for name, row in rows.items():
        eps = epochs[name]
        assert row["packer"] == "greedy"
        assert row["rows_lower_bound"] == math.ceil(tokens / budget) <= row["batches"]
        assert row["packing_efficiency"] == pytest.approx(
            np.mean([tokens / (e.n_batches * budget) for e in eps]), rel=1e-12)
        assert row["packing_efficiency"] == row["fill"] <= 1.0
        assert row["packing_efficiency"] <= row["rows_lower_bound"] * budget / tokens
        assert row["attention_balance"] == pytest.approx(
            np.mean([naive.attention_balance(list(e.attention), world) for e in eps]))
        assert row["attention_balance"] == pytest.approx(1.0 - row["wait_fraction"], rel=1e-9)
    # re-dealing every step by d**2 never makes a step's heaviest rank heavier
    assert rows["packed-balanced"]["attention_balance"] > rows["packed"]["attention_balance"]


def test_compare_json_and_table_show_the_packed_rows(documents, tmp_path, capsys):
    path = tmp_path / "lens.npy"
    np.save(path, documents)
    args = ["compare", "--lens", str(path), "-k", "3", "--profile", "rtx-pro-6000-blackwell",
            "--gpus", "4", "--token-budget", "8192", "--no-diversity"]
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    packed = {n: r for n, r in out["strategies"].items() if r["kind"] == "packed"}
    assert set(packed) == {"packed", "packed-balanced", "packed-bucketed"}
    for row in packed.values():
        assert row["rows_lower_bound"] == math.ceil(documents.sum() / 8192)
        assert 0.0 < row["packing_efficiency"] <= 1.0
        assert 0.25 <= row["attention_balance"] <= 1.0
    for name, row in out["strategies"].items():  # padded rows have no packing figures
        assert ("packing_efficiency" in row) == (name in packed)
    assert main(args) == 0
    text = capsys.readouterr().out
    lines = text[text.index("packed rows: padding-free"):].splitlines()
    assert lines[2].split() == ["strategy", "rows", "rows", "lower", "bound", "packing",
                                "efficiency", "attention", "balance"]
    for name, row in packed.items():
        cells = next(line for line in lines[4:] if line.split()[0] == name).split()
        assert cells[2] == f"{row['rows_lower_bound']:,}"
        assert cells[3] == f"{row['packing_efficiency'] * 100:.2f}%"
        assert cells[4] == f"{row['attention_balance']:.4f}"


def test_a_subsampled_compare_bounds_the_whole_datasets_rows(documents):
    c = compare(documents, 2, token_budget=8192, simulated_samples=1_000, diversity=False)
    row = c.strategies["packed"]
    assert c.simulation["subsampled"]
    assert row["rows_lower_bound"] == math.ceil(documents.sum() / 8192) <= row["batches"]
    # the efficiency is the subsample's: its tokens over its own rows
    sub = c.epochs["packed"][0]
    assert row["packing_efficiency"] == pytest.approx(
        sub.total_real_tokens / (sub.n_batches * 8192))
