"""bucketopt probe: the shape design, the memory fit, and the probe end to end on a tiny model."""

from __future__ import annotations

import csv
import json
import sys

import numpy as np
import pytest

from bucketopt import BucketoptError
from bucketopt.cli import main
from bucketopt.cost.probe import design_shapes, memory_budget

TINY = '''
import torch


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(50, 64)
        self.hidden = torch.nn.Linear(64, 768)
        self.head = torch.nn.Linear(768, 50)

    def forward(self, ids):  # logits: probe adds the loss
        return self.head(torch.tanh(self.hidden(self.embed(ids))))


def build():
    torch.manual_seed(0)
    return Tiny()


def scalar():
    class Loss(Tiny):
        def forward(self, ids):
            return super().forward(ids).pow(2).mean()
    return Loss()


def wrong_output():
    class Bad(Tiny):
        def forward(self, ids):
            return super().forward(ids)[..., :3]
    return Bad()


def nan_loss():
    class Nan(Tiny):
        def forward(self, ids):
            return super().forward(ids).mean() * float("nan")
    return Nan()


def flat():
    import time

    class Flat(Tiny):  # a step that never looks at its batch
        def forward(self, ids):
            time.sleep(0.004)
            return self.head.bias.pow(2).sum()
    return Flat()


def not_a_module():
    return 42


def broken():
    raise RuntimeError("no weights here")
'''


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tiny_model.py"
    path.write_text(TINY)
    return path


# --- the design and the memory fit (no torch needed) -----------------------------------------


@pytest.mark.parametrize("budget, max_length", [(4096, 512), (256, 32), (100, 100),
                                                (131_072, 8192), (10, 3)])
def test_design_is_on_and_under_the_budget_up_to_max_length(budget, max_length):
    shapes = design_shapes(budget, max_length)
    assert len(shapes) == len(set(shapes)) >= 3
    assert all(s >= 1 and s * length <= budget for s, length in shapes)
    lengths = sorted({length for _, length in shapes})
    assert lengths[-1] == max_length
    for length in lengths:  # every length: on the budget and a single row
        sizes = {s for s, size_len in shapes if size_len == length}
        assert budget // length in sizes and 1 in sizes


def test_design_refuses_a_length_above_the_budget():
    with pytest.raises(BucketoptError, match="max_length"):
        design_shapes(100, 200)
    with pytest.raises(BucketoptError, match="token_budget"):
        design_shapes(0, 1)


def test_memory_budget_recovers_the_budget_of_a_known_memory_law():
    rng = np.random.default_rng(0)
    s = rng.integers(1, 64, size=30)
    length = rng.choice([128, 256, 512, 1024], size=30)
    m0, m1, m2 = 2e9, 3e5, 50.0
    peak = m0 + m1 * s * length + m2 * s * length ** 2
    out = memory_budget(s, length, peak, total_bytes=80e9, fraction=0.9, max_length=1024)
    expected = (0.9 * 80e9 - m0) / (m1 + m2 * 1024)
    assert out["max_token_budget"] == pytest.approx(np.floor(expected), abs=2)
    # The budget it reports really fits: the fitted peak at that budget is at the fraction.
    t = out["max_token_budget"]
    assert m0 + m1 * t + m2 * t * 1024 <= 0.9 * 80e9 * (1 + 1e-9)


def test_memory_fit_reports_per_shape_error_and_the_largest_batch_per_length():
    from bucketopt.cost.memory import load_memory

    rng = np.random.default_rng(1)
    s = rng.integers(1, 64, size=30)
    length = rng.choice([128, 256, 512, 1024], size=30)
    m0, m1, m2 = 2e9, 3e5, 50.0
    peak = (m0 + m1 * s * length + m2 * s * length ** 2) * rng.uniform(0.99, 1.01, size=30)
    out = memory_budget(s, length, peak, total_bytes=80e9, fraction=0.9, max_length=1024)
    assert {(e["batch_size"], e["padded_len"]) for e in out["shapes"]} == set(zip(s, length))
    assert out["max_rel_error"] < 0.05
    for e in out["shapes"]:
        fit = out["fit_bytes"]
        want = fit["m0"] + (fit["m1_per_token"] + fit["m2_per_token_x_length"]
                            * e["padded_len"]) * e["batch_size"] * e["padded_len"]
        assert e["predicted_peak_bytes"] == pytest.approx(want)
    # the largest batch per probed length is the memory model's rule on the fit, and the
    # profile a CUDA probe writes (the fit under provenance.probe.memory) loads as that model
    model = load_memory({"provenance": {"probe": {"memory": out}}, "alpha": 1.0})
    lengths = sorted(int(x) for x in out["largest_batch_per_length"])
    assert [out["largest_batch_per_length"][str(b)] for b in lengths] == \
        model.batch_size(lengths).tolist()
    true = [int((0.9 * 80e9 - m0) // (m1 * b + m2 * b * b)) for b in lengths]
    assert np.allclose(model.batch_size(lengths), true, rtol=0.05, atol=1)


def test_probe_verify_needs_cuda(tiny):
    pytest.importorskip("torch")
    from bucketopt.cost.probe import probe

    with pytest.raises(BucketoptError, match="not measured"):
        probe(f"{tiny}:build", token_budget=64, max_length=8, device="cpu", verify=True)


# --- the probe itself --------------------------------------------------------------------------


def test_probe_cli_end_to_end(tiny, tmp_path, capsys):
    pytest.importorskip("torch")
    profile, measurements = tmp_path / "p.json", tmp_path / "m.csv"
    code = main(["probe", "--model", f"{tiny}:build", "--token-budget", "256", "--max-length",
                 "32", "--repeats", "2", "--threads", "1", "-o", str(profile),
                 "--measurements", str(measurements), "--json", "-q"])
    assert code == 0, capsys.readouterr().err
    out = json.loads(capsys.readouterr().out)
    shapes = design_shapes(256, 32)
    assert out["n_measurements"] == 2 * len(shapes) and out["rounds"] == 2
    assert {"alpha", "beta", "gamma", "heldout"} <= set(out)
    assert out["heldout"]["folds"] >= 2
    assert min(out["alpha"], out["beta"], out["gamma"]) >= 0
    # The CSV is what calibrate reads; refitting it as probe pools repeats (their fast
    # quarter) gives the probe's coefficients.
    assert out["pool"] == "low" and out["calibration"]["pool"] == "low"
    with measurements.open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == out["n_measurements"]
    assert {(int(r["batch_size"]), int(r["padded_len"])) for r in rows} == set(shapes)
    assert all(float(r["seconds"]) > 0 for r in rows)
    assert main(["calibrate", "--measurements", str(measurements), "--pool", "low", "--json",
                 "-q"]) == 0
    refit = json.loads(capsys.readouterr().out)
    for key in ("alpha", "beta", "gamma"):
        assert refit[key] == pytest.approx(out[key], rel=1e-9, abs=1e-15)
    # --pool median: the same steps pooled by their median, as calibrate does by default
    median = tmp_path / "median.csv"
    assert main(["probe", "--model", f"{tiny}:build", "--token-budget", "256", "--max-length",
                 "32", "--repeats", "3", "--threads", "1", "--pool", "median",
                 "--measurements", str(median), "--json", "-q"]) == 0
    by_median = json.loads(capsys.readouterr().out)
    assert by_median["pool"] == "median"
    assert main(["calibrate", "--measurements", str(median), "--json", "-q"]) == 0
    assert json.loads(capsys.readouterr().out)["beta"] == pytest.approx(by_median["beta"],
                                                                        rel=1e-9, abs=1e-15)
    # The profile carries its uncertainty, so predictions with it carry an interval.
    data = json.loads(profile.read_text())
    assert data["token_budget"] == 256 and data["provenance"]["probe"]["device"] == "cpu"
    assert len(data["uncertainty"]["coefficient_sets"]) > 10
    lens = tmp_path / "lens.txt"
    lens.write_text("\n".join(str(x) for x in range(1, 33)) + "\n")
    assert main(["solve", "--lens", str(lens), "-k", "3", "--profile", str(profile), "--json",
                 "-q"]) == 0
    solved = json.loads(capsys.readouterr().out)
    low, high = solved["ktok_per_s_interval"]
    assert low <= solved["ktok_per_s"] <= high


def test_probe_python_api_with_a_module_and_a_scalar_loss(tiny):
    pytest.importorskip("torch")
    import importlib.util

    spec = importlib.util.spec_from_file_location("tiny_model_api", tiny)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    from bucketopt.cost.probe import probe

    result = probe(mod.scalar(), token_budget=128, max_length=16, repeats=1, warmup=0,
                   bootstrap=0, progress=False)
    assert len(result.measurements) == len(result.shapes) == len(design_shapes(128, 16))
    assert result.calibration.intervals == {}
    assert result.profile.uncertainty is None


def test_holdout_shapes_are_timed_alongside_but_never_fitted(tiny):
    pytest.importorskip("torch")
    from bucketopt.cost.probe import probe

    design = design_shapes(256, 32)
    holdout = [(7, 16), (5, 8), design[0]]  # a design shape is fitted, not held out
    result = probe(f"{tiny}:build", token_budget=256, max_length=32, repeats=2, threads=1,
                   bootstrap=0, progress=False, holdout=holdout)
    assert {(r["batch_size"], r["padded_len"]) for r in result.measurements} == set(design)
    entries = result.holdout["shapes"]
    assert [(e["batch_size"], e["padded_len"]) for e in entries] == [(7, 16), (5, 8)]
    cal = result.calibration
    for e in entries:
        assert e["repeats"] == 2 and e["measured_s"] > 0
        predicted = cal.alpha + e["batch_size"] * e["padded_len"] * (
            cal.beta + cal.gamma * e["padded_len"])
        assert e["predicted_s"] == pytest.approx(predicted)
        assert e["rel_error"] == pytest.approx(predicted / e["measured_s"] - 1)
    assert result.holdout["median_rel_error"] == pytest.approx(
        np.median([abs(e["rel_error"]) for e in entries]))


def test_probe_stops_at_the_time_limit(tiny):
    pytest.importorskip("torch")
    from bucketopt.cost.probe import MAX_ROUNDS, probe

    result = probe(f"{tiny}:build", token_budget=256, max_length=32, time_limit=5.0,
                   threads=1, progress=False, bootstrap=20)
    assert result.stopped_by_time_limit and result.rounds < MAX_ROUNDS
    assert len(result.measurements) > len(result.shapes)  # more than one round fits
    assert result.elapsed_s <= 5.0 + 1.0


def test_probe_progress_line_without_a_terminal(tiny, capsys, monkeypatch):
    pytest.importorskip("torch")
    import bucketopt.cost.probe as probe_module

    # The line every PROGRESS_EVERY_S seconds (10 s) comes at once and often here.
    monkeypatch.setattr(probe_module, "PROGRESS_DELAY_S", 0.0)
    monkeypatch.setattr(probe_module, "PROGRESS_EVERY_S", 0.01)
    probe_module.probe(f"{tiny}:build", token_budget=128, max_length=16, repeats=1,
                       bootstrap=0, progress=True)
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert "\r" not in err and all(line.startswith("probe: ") for line in lines)  # plain lines
    assert len(lines) >= 2  # at least one while it ran, and the last
    assert lines[-1].endswith(f"1 round(s), {len(design_shapes(128, 16))} steps timed")


def test_probe_cli_shows_progress_off_a_terminal_and_none_with_q(tiny, capsys, monkeypatch):
    pytest.importorskip("torch")
    import bucketopt.cost.probe as probe_module

    monkeypatch.setattr(probe_module, "PROGRESS_DELAY_S", 0.0)
    monkeypatch.setattr(probe_module, "PROGRESS_EVERY_S", 0.01)
    argv = ["probe", "--model", f"{tiny}:build", "--token-budget", "128", "--max-length", "16",
            "--repeats", "2", "--threads", "1", "--json"]
    assert main(argv) == 0
    err = capsys.readouterr().err  # pytest's stderr is no terminal
    progress = [line for line in err.splitlines() if line.startswith("probe: ")]
    assert len(progress) >= 2 and "\r" not in err
    assert any("round" in line and "steps timed" in line for line in progress[:-1]) or \
        any("warming up" in line or "fitting" in line for line in progress[:-1])
    assert main([*argv, "-q"]) == 0
    assert "probe: " not in capsys.readouterr().err


def test_probe_reports_the_thread_count_it_ran_with(tiny):
    torch = pytest.importorskip("torch")
    from bucketopt.cost.probe import probe

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        result = probe(f"{tiny}:build", token_budget=128, max_length=16, repeats=1, warmup=0,
                       bootstrap=0, progress=False, threads=1)
        assert result.device_name.endswith(", 1 thread")
        assert result.profile.provenance["probe"]["threads"] == 1
        assert torch.get_num_threads() == 2  # restored after the probe
        result = probe(f"{tiny}:build", token_budget=128, max_length=16, repeats=1, warmup=0,
                       bootstrap=0, progress=False)
        assert result.device_name.endswith(", 2 threads")
        assert result.profile.provenance["probe"]["threads"] == 2
    finally:
        torch.set_num_threads(before)


# --- a poor fit warns (measurements given by hand: no timing) --------------------------------


def _steps(law, repeats=3, noise=0.0, seed=0):
    """Rows of (batch_size, padded_len, seconds) over the probe's design, timed by ``law``."""
    rng = np.random.default_rng(seed)
    rows = [(s, length, law(s, length) * (1 + noise * rng.standard_normal()))
            for _ in range(repeats) for s, length in design_shapes(4096, 512)]
    return [np.array(col) for col in zip(*rows)]


def _model_law(s, length):
    return 0.01 + 2e-6 * s * length + 1e-9 * s * length ** 2


def test_a_sound_fit_gives_no_warning():
    from bucketopt.cost.calibration import calibrate
    from bucketopt.cost.fitcheck import fit_warnings

    cal = calibrate(*_steps(_model_law, noise=0.02), bootstrap=0)
    assert cal.heldout["max_rel_error"] < 0.2 and cal.r2 > 0.99
    assert fit_warnings(cal, device="cpu", threads=2, load=3.0, cores=2, rounds=3) == []


@pytest.mark.parametrize("law, problem", [
    # a kernel that slows down 4x from length 128 on (the model's form does not hold)
    (lambda s, length: _model_law(s, length) * (4.0 if length >= 128 else 1.0), "held-out"),
    # the machine's speed swinging 3x from step to step (another job)
    (None, "R^2"),
])
def test_a_poor_fit_warns_with_its_figures_and_a_cause(law, problem):
    from bucketopt.cost.calibration import calibrate
    from bucketopt.cost.fitcheck import HELDOUT_MAX, MIN_R2, fit_warnings

    if law is None:
        rng = np.random.default_rng(1)
        s, length, t = _steps(_model_law, repeats=1)
        t = t * rng.choice([1 / 3, 1.0, 3.0], size=t.size)
    else:
        s, length, t = _steps(law)
    cal = calibrate(s, length, t, bootstrap=0)
    assert cal.heldout["max_rel_error"] > HELDOUT_MAX or cal.r2 < MIN_R2
    loaded = fit_warnings(cal, device="cpu", threads=2, load=3.4, cores=2, rounds=4)
    assert len(loaded) == 1 and problem in loaded[0]
    assert "2 torch threads" in loaded[0] and "load average 3.4 on 2 cores" in loaded[0]
    quiet = fit_warnings(cal, device="cuda", threads=8, load=0.9, cores=16, rounds=1)
    assert "only 1 round(s)" in quiet[0] and "threads" not in quiet[0]
    unexplained = fit_warnings(cal, device="cuda", threads=8, load=1.0, cores=16, rounds=9)
    assert "changed speed" in unexplained[0]


@pytest.mark.parametrize("r2, heldout, warns", [
    (0.96, {"median_rel_error": 0.14, "max_rel_error": 0.49}, False),  # just inside
    (0.94, {"median_rel_error": 0.05, "max_rel_error": 0.10}, True),
    (0.99, {"median_rel_error": 0.16, "max_rel_error": 0.20}, True),
    (0.99, {"median_rel_error": 0.05, "max_rel_error": 0.51}, True),
    (0.90, {"median_rel_error": 0.35, "max_rel_error": 1.68}, True),  # the profile written silently
    (0.99, None, False),  # too few shapes for folds: R^2 alone
])
def test_the_thresholds(r2, heldout, warns):
    from types import SimpleNamespace

    from bucketopt.cost.fitcheck import fit_problems

    assert bool(fit_problems(SimpleNamespace(r2=r2, heldout=heldout))) is warns


def test_probe_cli_warns_on_stderr_and_in_json_and_profile(tiny, tmp_path, capsys,
                                                          monkeypatch):
    pytest.importorskip("torch")
    import bucketopt.cost.fitcheck as fitcheck

    monkeypatch.setattr(fitcheck, "MIN_R2", 1.5)  # every fit now reads as poor
    profile = tmp_path / "p.json"
    argv = ["probe", "--model", f"{tiny}:build", "--token-budget", "128", "--max-length", "16",
            "--repeats", "1", "--threads", "1", "-o", str(profile), "--json"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    warnings = json.loads(captured.out)["warnings"]
    assert len(warnings) == 1 and "the fit is poor" in warnings[0] and "R^2" in warnings[0]
    assert "Likely cause" in warnings[0]
    assert f"warning: {warnings[0]}" in captured.err.splitlines()
    assert json.loads(profile.read_text())["provenance"]["probe"]["warnings"] == warnings
    monkeypatch.setattr(fitcheck, "MIN_R2", -1.0)
    monkeypatch.setattr(fitcheck, "HELDOUT_MEDIAN", 1e9)
    monkeypatch.setattr(fitcheck, "HELDOUT_MAX", 1e9)
    assert main([*argv, "-q"]) == 0
    assert json.loads(capsys.readouterr().out)["warnings"] == []


@pytest.mark.parametrize("spec, match", [
    ("no-colon-here", "module:function"),
    ("no_such_module_xyz:build", "importing"),
    ("{tiny}:missing", "no function"),
    ("{tiny}:not_a_module", "torch.nn.Module"),
    ("{tiny}:broken", "no weights here"),
    ("{tiny}:wrong_output", "scalar loss"),
    ("hf:/no/such/config", "config"),
])
def test_bad_model_specs_exit_2_with_one_line(tiny, capsys, spec, match):
    pytest.importorskip("torch")
    code = main(["probe", "--model", spec.format(tiny=tiny), "--token-budget", "64",
                 "--max-length", "8", "--repeats", "1", "-q"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "Traceback" not in err
    assert match in err


@pytest.mark.parametrize("args, match", [
    (["--token-budget", "16", "--max-length", "32"], "exceeds"),
    (["--token-budget", "64", "--max-length", "8", "--time-limit", "0.05"], "time-limit"),
    (["--token-budget", "64", "--max-length", "8", "--time-limit", "-3"], "seconds"),
    (["--token-budget", "64", "--max-length", "8", "--device", "tpu"], "device"),
    (["--token-budget", "64", "--max-length", "8", "--memory-fraction", "1.5"], "memory"),
    (["--token-budget", "64", "--max-length", "8", "-o", "/no/such/dir/p.json"], "-o"),
])
def test_bad_probe_arguments_exit_2(tiny, capsys, args, match):
    pytest.importorskip("torch")
    code = main(["probe", "--model", f"{tiny}:build", *args, "-q"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and match in err


def test_without_torch_one_clear_line(tiny, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    code = main(["probe", "--model", f"{tiny}:build", "--token-budget", "64",
                 "--max-length", "8"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "pip install torch" in err


def test_probe_hf_config(tmp_path):
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=64,
                                     n_positions=32)
    config.save_pretrained(tmp_path / "cfg")
    from bucketopt.cost.probe import probe

    result = probe(f"hf:{tmp_path / 'cfg'}", token_budget=64, max_length=16, repeats=1,
                   warmup=0, bootstrap=0, progress=False)
    assert result.model.startswith("hf:") and len(result.measurements) == len(result.shapes)
    assert result.calibration.beta + result.calibration.alpha > 0


# --- refusals: a non-finite loss, step times that do not grow with the batch ------------------


@pytest.mark.parametrize("factory, match", [("nan_loss", "loss is nan"),
                                            ("flat", "do not grow with the batch")])
def test_a_model_whose_steps_say_nothing_is_refused_with_one_line(tiny, capsys, factory, match):
    pytest.importorskip("torch")
    code = main(["probe", "--model", f"{tiny}:{factory}", "--token-budget", "256",
                 "--max-length", "32", "--repeats", "3", "--threads", "1", "-q"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "Traceback" not in err
    assert match in err and "--model" in err


def test_a_loss_is_checked_for_every_shape_and_a_length_one_row_has_one():
    torch = pytest.importorskip("torch")
    from bucketopt.cost.probe import _generic_loss, check_loss

    net = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 10))
    loss = _generic_loss(net, torch.zeros((3, 1), dtype=torch.long))
    assert torch.isfinite(loss)  # one-token rows predict themselves, no empty mean
    check_loss(loss, 3, 1)
    with pytest.raises(BucketoptError, match="inf at batch_size=2, padded_len=5"):
        check_loss(torch.tensor(float("inf")), 2, 5)


def test_growth_check_reads_the_fastest_of_each_group():
    from bucketopt.cost.fitcheck import growth_problem

    def rows(law, slow=()):
        return [{"batch_size": s, "padded_len": n, "round": r,
                 "seconds": law(s, n) * (10.0 if (s, n) in slow else 1.0)}
                for r in range(3) for s, n in design_shapes(256, 32)]

    assert growth_problem(rows(_model_law)) is None
    assert "do not grow" in growth_problem(rows(lambda s, n: 0.004))
    # one fewest-token shape slowed by another process decides nothing
    assert growth_problem(rows(lambda s, n: 0.004 + 1e-5 * s * n, slow={(1, 1)})) is None


# --- a busy machine: the scatter of repeats, the claimed error, the warnings -----------------


def test_scatter_and_drift_of_rounds():
    from bucketopt.cost.fitcheck import scatter, timing_warnings

    shapes = design_shapes(4096, 512)
    steady = [{"batch_size": s, "padded_len": n, "round": r, "seconds": _model_law(s, n)}
              for r in range(4) for s, n in shapes]
    quiet = scatter(steady)
    assert quiet["spread_median"] == pytest.approx(0) and quiet["drift"] == pytest.approx(1)
    assert timing_warnings(quiet, 0.05) == []
    # round 2 ran at half speed (another job): the drift says so
    slowed = [dict(row, seconds=row["seconds"] * (2.0 if row["round"] == 2 else 1.0))
              for row in steady]
    busy = scatter(slowed)
    assert busy["drift"] == pytest.approx(2.0)
    (line,) = timing_warnings(busy, 0.05)
    assert "not steady" in line and "2.00x between rounds" in line
    # held-out shapes missing by more than the claim
    (line,) = timing_warnings(quiet, 0.05, {"median_rel_error": 0.29, "max_rel_error": 0.49})
    assert "29%" in line and "beyond the 5% error the fit claims" in line
    assert timing_warnings(quiet, 0.30, {"median_rel_error": 0.29, "max_rel_error": 0.49}) == []
    assert scatter(steady[: len(shapes)]) is None  # one repeat a shape: no spread to read


def test_claimed_error_is_the_larger_of_heldout_and_interval_width():
    from bucketopt.cost.calibration import calibrate
    from bucketopt.cost.fitcheck import CLAIM_FLOOR, claimed_error

    shapes = design_shapes(4096, 512)
    exact = calibrate(*_steps(_model_law), bootstrap=20)
    assert claimed_error(exact, shapes) == CLAIM_FLOOR
    noisy = calibrate(*_steps(_model_law, noise=0.2, seed=3), bootstrap=50)
    assert claimed_error(noisy, shapes) >= noisy.heldout["p90_rel_error"] > CLAIM_FLOOR




def test_fit_timings_fits_a_table_of_timed_steps_as_the_probe_does():
    """The seam for steps timed by other means (a multi-process training step): the same
    calibration, claimed error, scatter and warnings the probe computes from its rows."""
    from bucketopt.cost.calibration import calibrate
    from bucketopt.cost.fitcheck import claimed_error, scatter
    from bucketopt.cost.probe import fit_timings
    from bucketopt.training.verify import claimed_error_of

    shapes = design_shapes(4096, 512)
    rng = np.random.default_rng(7)
    rows = [{"batch_size": s, "padded_len": n, "round": r,
             "seconds": _model_law(s, n) * (1 + 0.02 * rng.standard_normal())}
            for r in range(4) for s, n in shapes]
    fit = fit_timings(rows, shapes, bootstrap=30)
    cal = calibrate(*[[row[k] for row in rows] for k in ("batch_size", "padded_len", "seconds")],
                    bootstrap=30, pool="low")
    assert (fit.calibration.alpha, fit.calibration.beta, fit.calibration.gamma) == \
        (cal.alpha, cal.beta, cal.gamma)
    assert fit.calibration.coefficient_sets == cal.coefficient_sets
    assert fit.claimed_error == claimed_error(cal, shapes)
    assert fit.scatter == scatter(rows, 0.25) and fit.warnings == ()
    assert fit.calibration.beta == pytest.approx(2e-6, rel=0.1)
    profile = fit.profile(name="lockstep", world_size=3, token_budget=4096,
                          provenance={"ranks": 3})
    assert profile.world_size == 3 and profile.uncertainty
    assert claimed_error_of(profile) == fit.claimed_error
    assert profile.provenance["probe"]["ranks"] == 3
    # steps whose time does not grow with the batch: refused, as the probe refuses them
    flat = [dict(row, seconds=0.004) for row in rows]
    with pytest.raises(BucketoptError, match="do not grow"):
        fit_timings(flat, shapes)
    # one round at half speed: the drift warns
    slowed = [dict(row, seconds=row["seconds"] * (2.0 if row["round"] == 1 else 1.0))
              for row in rows]
    (line,) = fit_timings(slowed, shapes, bootstrap=0).warnings
    assert "between rounds" in line
    with pytest.raises(BucketoptError, match="pool="):
        fit_timings(rows, pool="mean")


def test_a_probe_on_a_machine_loaded_on_purpose_stays_within_its_claim_or_warns(tiny, tmp_path):
    """Busy processes spin while the probe runs and while shapes it never fitted are timed
    again by a separate loop: the probe's claimed error holds for them, or it warned."""
    pytest.importorskip("torch")
    import time

    import torch

    from bucketopt.cost.probe import load_model, probe

    from .busy import spinning

    budget, max_length = 512, 64
    holdout = [(3, 40), (12, 24), (10, 48), (7, 56)]
    with spinning():
        result = probe(f"{tiny}:build", token_budget=budget, max_length=max_length,
                       time_limit=12.0, threads=1, progress=False, holdout=holdout,
                       bootstrap=50)
        # the same held-out shapes timed again, after the probe, under the same load
        net, loss_fn, _, vocab = load_model(f"{tiny}:build")
        opt = torch.optim.AdamW(net.parameters(), lr=1e-5)
        old = torch.get_num_threads()
        torch.set_num_threads(1)
        times = {s: [] for s in holdout}
        try:
            for _ in range(8):
                for s, n in holdout:
                    ids = torch.randint(0, vocab, (s, n))
                    t0 = time.perf_counter()
                    opt.zero_grad()
                    loss_fn(net, ids).backward()
                    opt.step()
                    times[(s, n)].append(time.perf_counter() - t0)
        finally:
            torch.set_num_threads(old)
    cal = result.calibration
    errors = [abs((cal.alpha + s * n * (cal.beta + cal.gamma * n)) / np.quantile(t, 0.25) - 1)
              for (s, n), t in times.items()]
    inside = [abs(e["rel_error"]) for e in result.holdout["shapes"]]
    claim = result.claimed_error
    assert claim is not None and claim > 0
    assert result.to_dict()["claimed_error"] == claim and "scatter" in result.to_dict()
    within = np.median(errors) <= claim and np.median(inside) <= claim
    assert within or result.warnings, (claim, errors, inside, result.scatter)
