"""Every predicted Ktok/s shown to people says it is the total over the GPUs."""

from __future__ import annotations

import numpy as np
import pytest

import bucketopt
from bucketopt.cli import main
from bucketopt.show.report import rate_header, rate_scope

PROFILE = "rtx-pro-6000-blackwell"


@pytest.fixture(scope="module")
def lens_file(tmp_path_factory):
    lengths = np.random.default_rng(3).integers(20, 4000, size=3000)
    path = tmp_path_factory.mktemp("units") / "lens.npy"
    np.save(path, lengths)
    return path, lengths


def test_the_words():
    assert rate_header(8) == "Ktok/s (total, 8 GPUs)"
    assert rate_header(1) == "Ktok/s (total, 1 GPU)"
    assert rate_scope(4) == "total over 4 GPUs"


def _header(out: str, first: str) -> str:
    return next(line for line in out.splitlines() if line.lstrip().startswith(first))


@pytest.mark.parametrize("gpus", [1, 8])
def test_solve_sweep_compare_tables_name_the_total(gpus, lens_file, capsys):
    path, _ = lens_file
    common = ["--lens", str(path), "--token-budget", "16384", "--profile", PROFILE,
              "--gpus", str(gpus), "-q"]
    where = "1 GPU" if gpus == 1 else f"{gpus} GPUs"
    assert main(["solve", "-k", "3", *common]) == 0
    line = _header(capsys.readouterr().out, "predicted throughput:")
    assert "Ktok/s" in line and f"(real tokens, total over {where})" in line
    assert main(["sweep", "-k", "1:3", *common]) == 0
    assert f"Ktok/s (total, {where})" in _header(capsys.readouterr().out, "k ")
    assert main(["compare", "-k", "3", *common]) == 0
    assert f"Ktok/s (total, {where})" in _header(capsys.readouterr().out, "strategy ")


def test_no_profile_no_throughput_words(lens_file, capsys):
    path, _ = lens_file
    assert main(["sweep", "--lens", str(path), "-k", "1:3", "-q"]) == 0
    assert "Ktok/s" not in capsys.readouterr().out


def test_plot_axes_name_the_total(lens_file):
    pytest.importorskip("matplotlib")
    from bucketopt.show.plots import plot_comparison, plot_sweep
    from bucketopt.training.compare import compare

    _, lengths = lens_file
    sweep = bucketopt.sweep(lengths, [1, 2, 3], token_budget=16384, profile=PROFILE,
                            world_size=8)
    fig = plot_sweep(sweep)
    labels = [ax.get_ylabel() for ax in fig.axes]
    assert any("Ktok/s of real tokens, total over 8 GPUs" in label for label in labels), labels
    c = compare(lengths, 3, token_budget=16384, profile=PROFILE, world_size=8, simulations=1)
    fig = plot_comparison(c.strategies, world_size=8)
    labels = [ax.get_xlabel() for ax in fig.axes]
    assert any("total over 8 GPUs" in label for label in labels), labels
