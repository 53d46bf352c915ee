"""An objective registered from outside the package runs through solve(), sweep() and the CLI
without a line of the package changed: the registry is the only place that lists objectives."""

from __future__ import annotations

import json

import numpy as np
import pytest

import bucketopt
from bucketopt.cli import main
from bucketopt.errors import BucketoptError
from bucketopt.groups import INF
from bucketopt.objectives import _REGISTRY, Objective, names, register_objective, registration


class ToyPadding(Objective):
    """Edge padding by the textbook O(k g^2) DP in plain Python: a second, independent route to
    the optimum the package's edge objective finds."""

    name = "toy"
    pad = "edge"

    def __init__(self, **options):
        self.options = options

    def _bucket(self, i, j):
        g = self.groups
        return int(g.edges[j] * (g.prefix_count[j] - g.prefix_count[i])
                   - (g.prefix_tokens[j] - g.prefix_tokens[i]))

    def layers(self, kmax, ks=None):
        g = self.groups.g
        opt = np.full((kmax, g + 1), -1, dtype=np.int64)
        best = np.full(kmax, INF, dtype=np.int64)
        prev = [0] + [int(INF)] * g
        for k in range(kmax):
            cur = [0] + [int(INF)] * g
            for j in range(1, g + 1):
                for i in range(max(int(self.win_lo[j]), 0), min(int(self.win_hi[j]), j - 1) + 1):
                    if prev[i] < INF and prev[i] + self._bucket(i, j) < cur[j]:
                        cur[j] = prev[i] + self._bucket(i, j)
                        opt[k, j] = i
            best[k] = cur[g]
            prev = cur
        return opt, best

    def cost(self, edges):
        ends = np.searchsorted(self.groups.edges, edges)
        return float(sum(self._bucket(i, j) for i, j in zip([0, *ends[:-1]], ends)))


@pytest.fixture
def toy():
    saved = dict(_REGISTRY)
    register_objective("toy", "edge", ToyPadding)
    yield
    _REGISTRY.clear()
    _REGISTRY.update(saved)


LENGTHS = np.random.default_rng(7).integers(1, 400, size=300)


def test_builtin_names_are_the_public_registrations():
    """``packed`` (packing levels: a Solution describes padded batches) is registered but not
    offered: solve() refuses it, naming the objectives it offers."""
    assert names() == ("padding", "time")
    assert registration("packed", "varlen").public is False
    with pytest.raises(BucketoptError, match="`objective` must be one of padding, time; got "
                                             "'packed'"):
        bucketopt.solve(LENGTHS, 3, objective="packed")


def test_toy_objective_through_solve(toy):
    assert "toy" in names()
    for k in (1, 3, 6):
        mine = bucketopt.solve(LENGTHS, k, objective="toy", token_budget=4096)
        ref = bucketopt.solve(LENGTHS, k, objective="padding", pad="edge", token_budget=4096)
        assert mine.objective == "toy"
        assert mine.padded_tokens == ref.padded_tokens
        assert len(mine.boundaries) <= k


def test_toy_objective_through_sweep_with_shares(toy):
    mine = bucketopt.sweep(LENGTHS, [2, 4], objective="toy", min_share=0.1)
    ref = bucketopt.sweep(LENGTHS, [2, 4], objective="padding", min_share=0.1)
    assert [s.padded_tokens for s in mine.solutions] == [s.padded_tokens for s in ref.solutions]


def test_toy_objective_pads_it_was_not_registered_for(toy):
    with pytest.raises(BucketoptError, match='objective="toy" takes pad in edge'):
        bucketopt.solve(LENGTHS, 3, objective="toy", pad="batch", token_budget=4096)


def test_toy_objective_through_the_cli(toy, tmp_path, capsys):
    path = tmp_path / "lengths.npy"
    np.save(path, LENGTHS)
    assert main(["solve", "--lens", str(path), "-k", "4", "--objective", "toy", "--json",
                 "-q"]) == 0
    out = json.loads(capsys.readouterr().out)
    ref = bucketopt.solve(LENGTHS, 4)
    assert out["padded_tokens"] == ref.padded_tokens


def test_unregistered_objective_is_refused_by_the_cli(tmp_path, capsys):
    path = tmp_path / "lengths.npy"
    np.save(path, LENGTHS)
    assert main(["solve", "--lens", str(path), "-k", "4", "--objective", "toy"]) == 2
    assert "toy" in capsys.readouterr().err


# --- a compare strategy registered from outside the package ----------------------------------


@pytest.fixture
def toy_strategy():
    from bucketopt.training import strategies as registry

    saved = dict(registry._STRATEGIES)

    def one_bucket(context):
        edge = [int(context.hist.values[-1])]
        return [registry.Row("one-bucket", "toy", context.simulate(
            "bucketed", boundaries=edge, packing="fixed", pad=context.pad), edge)]

    registry.register_strategy("one-bucket", "after", one_bucket)
    yield
    registry._STRATEGIES.clear()
    registry._STRATEGIES.update(saved)


def test_toy_strategy_through_compare(toy_strategy):
    c = bucketopt.compare(LENGTHS, 3, token_budget=4096, seed=2, profile="rtx-pro-6000-blackwell",
                          world_size=2, pad="batch")
    row = c.strategies["one-bucket"]
    expected = bucketopt.simulate(LENGTHS, "bucketed", boundaries=[int(LENGTHS.max())],
                                  token_budget=4096, seed=2, epoch=0, packing="fixed",
                                  pad="batch")
    assert row["kind"] == "toy"
    assert row["boundaries"] == [int(LENGTHS.max())]
    assert row["padding_fraction_simulated"] == pytest.approx(expected.padding_fraction)
    assert row["ktok_per_s"] > 0  # timed like every other row
    names = list(c.strategies)
    assert names.index("bucketed") < names.index("one-bucket") < names.index("packed")


def test_toy_strategy_through_the_cli(toy_strategy, tmp_path, capsys):
    path = tmp_path / "lengths.npy"
    np.save(path, LENGTHS)
    assert main(["compare", "--lens", str(path), "-k", "3", "--token-budget", "4096", "--json",
                 "-q", "--no-diversity"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["strategies"]["one-bucket"]["kind"] == "toy"


def test_compare_rows_come_from_the_registry():
    from bucketopt.training.strategies import strategies

    c = bucketopt.compare(LENGTHS, 3, token_budget=4096, rules=(), diversity=False, pad="batch")
    registered = [s.name for s in strategies()]
    assert "one-bucket" not in c.strategies
    assert [n for n in c.strategies if n in registered] == ["sorted", "shuffle", "bucketed",
                                                            "edge_optimal"]
