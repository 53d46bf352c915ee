"""Plots: what they draw, the files they write, and that they leave matplotlib's globals alone."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import bucketopt
from bucketopt.cli import main
from bucketopt.errors import BucketoptError
from bucketopt.show.plots import (
    plot_comparison,
    plot_histogram,
    plot_padding_vs_k,
    plot_strategies,
    plot_sweep,
    plot_throughput_vs_k,
    save_figure,
)

matplotlib = pytest.importorskip("matplotlib")


@pytest.fixture(scope="module")
def lengths():
    return np.random.default_rng(2).integers(16, 2048, size=5000)


@pytest.fixture(scope="module")
def sweep(lengths):
    return bucketopt.sweep(lengths, range(1, 9), token_budget=8192)


def test_padding_vs_k_draws_the_optimum_and_marks_the_recommendation(sweep):
    ax = plot_padding_vs_k(sweep)
    optimum = next(line for line in ax.get_lines() if line.get_label() == "bucketopt optimum")
    assert list(optimum.get_xdata()) == list(sweep.ks)
    assert np.allclose(optimum.get_ydata(), [100 * s.padding_fraction for s in sweep.solutions])
    vlines = [line for line in ax.get_lines() if len(set(line.get_xdata())) == 1]
    assert any(line.get_xdata()[0] == sweep.recommended_k for line in vlines)
    assert "K" in ax.get_xlabel() and "%" in ax.get_ylabel()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(label.startswith(f"recommended K = {sweep.recommended_k}") for label in labels)


def test_padding_vs_k_draws_rules_of_thumb(sweep, lengths):
    heuristics = pytest.importorskip("bucketopt.heuristics")
    ax = plot_padding_vs_k(sweep, lengths)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    rules = [label for label in labels if label.startswith("rule of thumb")]
    assert rules and len(rules) <= len(heuristics.RULES)
    # Every rule of thumb is at least as wasteful as the optimum at the same k.
    optimum = dict(zip(sweep.ks, (100 * s.padding_fraction for s in sweep.solutions)))
    for line in ax.get_lines():
        if line.get_label().startswith("rule of thumb"):
            for k, y in zip(line.get_xdata(), line.get_ydata()):
                assert y >= optimum[int(k)] - 1e-9


def test_no_rules_when_asked(sweep, lengths):
    ax = plot_padding_vs_k(sweep, lengths, rules=[])
    assert not any(line.get_label().startswith("rule") for line in ax.get_lines())


def test_histogram_draws_every_edge_and_batch_size(lengths):
    sol = bucketopt.solve(lengths, 5, token_budget=8192)
    ax = plot_histogram(lengths, sol, bins=64)
    edges = [line.get_xdata()[0] for line in ax.get_lines()]
    assert sorted(edges) == list(sol.boundaries)
    texts = " ".join(t.get_text() for t in ax.texts)
    for b in sol.batch_sizes:
        assert f"B={b}" in texts
    (stairs,) = [p for p in ax.patches if type(p).__name__ == "StepPatch"]
    assert stairs.get_data().values.sum() == len(lengths)
    assert "tokens" in ax.get_xlabel() and "samples" in ax.get_ylabel()


def test_histogram_without_solution(lengths):
    ax = plot_histogram(lengths)
    assert len(ax.get_lines()) == 0 and len(ax.texts) == 0


def test_throughput_plot_needs_a_profile(sweep):
    with pytest.raises(BucketoptError, match="profile"):
        plot_throughput_vs_k(sweep)


def test_sweep_figure_has_one_panel_without_profile(sweep, lengths):
    fig = plot_sweep(sweep, lengths)
    assert len(fig.axes) == 1


@pytest.mark.parametrize("suffix, magic", [(".png", b"\x89PNG"), (".pdf", b"%PDF"),
                                           (".svg", b"<?xml")])
def test_save_figure_by_extension(sweep, tmp_path, suffix, magic):
    path = save_figure(plot_padding_vs_k(sweep), tmp_path / f"plot{suffix}")
    assert path.read_bytes().startswith(magic)


def test_save_figure_rejects_bad_paths(sweep, tmp_path):
    ax = plot_padding_vs_k(sweep)
    with pytest.raises(BucketoptError, match=r"\.png"):
        save_figure(ax, tmp_path / "plot.jpg")
    with pytest.raises(BucketoptError, match="does not exist"):
        save_figure(ax, tmp_path / "missing" / "plot.png")


def test_strategies_bars():
    ax = plot_strategies({"sorted": {"padding_fraction": 0.01, "ktok_per_s": 32.0},
                          "shuffle": {"padding_fraction": 0.6, "ktok_per_s": 12.0},
                          "packed": {"padding_fraction": 0.0, "ktok_per_s": None}})
    assert [round(p.get_width(), 6) for p in ax.patches] == [32.0, 12.0, 0.0]
    assert "Ktok/s" in ax.get_xlabel()
    assert any(t.get_text().strip().startswith("not timed") for t in ax.texts)
    ax = plot_strategies({"a": {"padding_fraction": 0.25}, "b": {"padding_fraction": 0.5}})
    assert [round(p.get_width(), 6) for p in ax.patches] == [25.0, 50.0]
    with pytest.raises(BucketoptError, match="profile"):
        plot_strategies({"a": {"padding_fraction": 0.25}}, metric="throughput")


def test_comparison_figure_keeps_the_strategy_order_on_both_panels():
    rows = {"sorted": {"padding_fraction": 0.0, "ktok_per_s": 32.0},
            "shuffle": {"padding_fraction": 0.56, "ktok_per_s": 12.0},
            "bucketed": {"padding_fraction": 0.17, "ktok_per_s": 25.0}}
    fig = plot_comparison(rows, title="t")
    assert len(fig.axes) == 2
    pad_ax, rate_ax = fig.axes
    assert [t.get_text() for t in pad_ax.get_yticklabels()] == ["sorted", "shuffle", "bucketed"]
    for ax, widths in ((pad_ax, [0.0, 56.0, 17.0]), (rate_ax, [32.0, 12.0, 25.0])):
        assert ax.yaxis_inverted()  # the first strategy on top, on both panels
        top_down = sorted(ax.patches, key=lambda p: p.get_y())
        assert [round(p.get_width(), 6) for p in top_down] == widths


def test_compare_plot_cli(tmp_path):
    lengths = np.random.default_rng(9).integers(16, 1024, size=3000)
    path = tmp_path / "lens.npy"
    np.save(path, lengths)
    plot = tmp_path / "compare.pdf"
    assert main(["compare", "--lens", str(path), "-k", "3", "--token-budget", "4096",
                 "--plot", str(plot), "--json", "-q"]) == 0
    assert plot.read_bytes().startswith(b"%PDF")


def test_plots_leave_global_state_alone(sweep, lengths):
    before = dict(matplotlib.rcParams)
    plot_sweep(sweep, lengths)
    plot_histogram(lengths, sweep.solutions[-1])
    assert dict(matplotlib.rcParams) == before


def test_import_does_not_load_matplotlib():
    code = "import sys, bucketopt, bucketopt.show.plots; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_solve_plot_cli(tmp_path, lengths, capsys):
    path = tmp_path / "lens.npy"
    np.save(path, lengths)
    plot = tmp_path / "hist.png"
    assert main(["solve", "--lens", str(path), "-k", "4", "--token-budget", "8192",
                 "--plot", str(plot), "-q"]) == 0
    assert plot.read_bytes().startswith(b"\x89PNG")
    assert main(["solve", "--lens", str(path), "-k", "4", "--plot", str(tmp_path / "x.gif"),
                 "-q"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_rules_of_thumb_drawn_through_the_heuristics_interface(sweep, lengths, monkeypatch):
    """rule_of_thumb(name, hist, k) -> boundaries, RULES: the documented interface."""
    import types

    fake = types.ModuleType("bucketopt.heuristics")
    fake.RULES = ("equal_width",)

    def rule_of_thumb(name, hist, k, *, token_budget=None):
        top = int(hist.max_length)
        return sorted({max(1, round(top * (i + 1) / k)) for i in range(k)} | {top})

    fake.rule_of_thumb = rule_of_thumb
    monkeypatch.setitem(sys.modules, "bucketopt.heuristics", fake)
    ax = plot_padding_vs_k(sweep, lengths)
    (line,) = [ln for ln in ax.get_lines() if ln.get_label() == "rule of thumb: equal width"]
    from bucketopt.data.histogram import as_histogram

    hist = as_histogram(lengths)
    expected = [100 * bucketopt.evaluate(lengths, rule_of_thumb("equal_width", hist, k),
                                         token_budget=8192).padding_fraction
                for k in sweep.ks]
    assert np.allclose(line.get_ydata(), expected)


def test_histogram_switches_to_log_scale_for_heavy_tails():
    heavy = np.clip(np.random.default_rng(4).lognormal(6, 1.2, 20_000).astype(int), 1, None)
    sol = bucketopt.solve(heavy, 6, token_budget=int(heavy.max()) * 2)
    assert plot_histogram(heavy, sol).get_xscale() == "log"
    assert plot_histogram(heavy, sol, xscale="linear").get_xscale() == "linear"
    assert plot_histogram(np.arange(100, 200)).get_xscale() == "linear"
    with pytest.raises(BucketoptError, match="xscale"):
        plot_histogram(heavy, xscale="symlog")


@pytest.mark.parametrize("command", [["solve", "-k", "3"], ["sweep", "-k", "1:3"],
                                     ["compare", "-k", "3", "--token-budget", "4096"]])
def test_bad_plot_path_is_one_line_exit_2(command, tmp_path, capsys):
    path = tmp_path / "lens.npy"
    np.save(path, np.arange(1, 400))
    for plot in (tmp_path / "x.jpg", tmp_path / "no" / "x.png"):
        assert main([*command, "--lens", str(path), "--plot", str(plot), "-q"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and str(plot) in err[0]


def test_throughput_panel_draws_rules_at_the_sweeps_profile(lengths):
    pytest.importorskip("bucketopt.heuristics")
    from bucketopt.cost.costmodel import available_profiles

    profile = available_profiles()[0]
    swept = bucketopt.sweep(lengths, range(1, 6), token_budget=8192, profile=profile,
                            world_size=2, epochs=3)
    ax = plot_throughput_vs_k(swept, lengths, profile=profile, world_size=2, epochs=3,
                              rules=["quantile"])
    (line,) = [ln for ln in ax.get_lines() if ln.get_label() == "rule of thumb: quantile"]
    from bucketopt.data.histogram import as_histogram
    from bucketopt.heuristics import rule_of_thumb

    hist = as_histogram(lengths)
    expected = [bucketopt.evaluate(lengths, rule_of_thumb("quantile", hist, int(k),
                                                          token_budget=8192),
                                   token_budget=8192, profile=profile, world_size=2,
                                   epochs=3).ktok_per_s
                for k in line.get_xdata()]
    assert np.allclose(line.get_ydata(), expected)
    fig = plot_sweep(swept, lengths, profile=profile, world_size=2, epochs=3)
    assert len(fig.axes) == 2
    legend = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    assert not any(label.startswith("rule of") for label in legend)
