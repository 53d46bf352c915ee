"""bucketopt verify: a slice of a plan's real batches trained on CPU, measured against predicted."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import bucketopt  # noqa: E402
from bucketopt import BucketoptError  # noqa: E402
from bucketopt.cli import main  # noqa: E402
from bucketopt.training.verify import KEYS, verdict  # noqa: E402

CONFIG = {"model_type": "llama", "vocab_size": 128, "hidden_size": 32, "intermediate_size": 64,
          "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2,
          "max_position_embeddings": 512, "tie_word_embeddings": True}
BUDGET = 512


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A tiny llama built from its config, lengths, and a profile probed on this machine."""
    root = tmp_path_factory.mktemp("verify")
    config = root / "tiny.json"
    config.write_text(json.dumps(CONFIG))
    rng = np.random.default_rng(0)
    lengths = np.clip(rng.lognormal(3.6, 0.6, 600).astype(np.int64), 4, 128)
    lens = root / "lens.npy"
    np.save(lens, lengths)
    from bucketopt.cost.probe import probe

    result = probe(f"hf:{config}", token_budget=BUDGET, max_length=BUDGET, repeats=3,
                   threads=1, progress=False, bootstrap=50)
    profile = root / "profile.json"
    result.profile.save(profile)
    return {"root": root, "config": config, "lengths": lengths, "lens": lens,
            "profile": profile}


def _reference(lengths, plan, profile, n, packing=None):
    """The cost model on the rank-0 batches the sampler gives first (the prediction's source)."""
    over = {} if packing is None else {"packing": packing, "batch_sizes": None}
    sampler = bucketopt.BucketBatchSampler.from_plan(plan, lengths, **over)
    epoch = sampler.epoch_view(0, pad="varlen" if packing else plan["pad"])
    feats = epoch.features()[:n].copy()
    if packing:
        feats[:, 2] = feats[:, 1] ** 2  # run as one row through dense attention
    model = bucketopt.load_profile(str(profile)).cost_model(world_size=1)
    return feats @ [model.alpha, model.beta, model.gamma], epoch.real_tokens[:n]


def test_verdicts_measure_how_far_outside():
    assert verdict(1.0, [0.5, 1.0]) == {"inside": True, "off_by": 0}
    assert verdict(0.4, [0.5, 1.0]) == {"inside": False, "off_by": -0.2}
    assert verdict(1.5, [0.5, 1.0])["off_by"] == pytest.approx(0.5)


@pytest.mark.parametrize("packing", [None, "varlen"])
def test_verify_runs_the_plans_batches_and_predicts_those_very_batches(setup, packing):
    lengths = setup["lengths"]
    plan = bucketopt.solve(lengths, 3, token_budget=BUDGET, profile=str(setup["profile"]),
                           pad="batch").to_plan()
    result = bucketopt.verify(lengths, plan=plan, model=f"hf:{setup['config']}",
                              profile=str(setup["profile"]), threads=1, steps=30,
                              time_limit=30, packing=packing)
    out = result.to_dict()
    assert out["device"] == "cpu" and out["steps"] == len(out["step_seconds"]) > 0
    assert set(KEYS) <= set(out["measured"]) and set(KEYS) <= set(out["predicted"])
    assert out["measured"]["peak_memory_bytes"] is None  # CPU: not measurable, and said
    assert any("not measured on cpu" in n for n in out["notes"])
    # the plan has no memory model: nothing predicted, no verdict
    assert out["predicted"]["peak_memory_bytes"] == {"value": None, "interval": None}
    assert "peak_memory_bytes" not in out["verdicts"]
    step_pred, real = _reference(lengths, plan, setup["profile"], out["steps"], packing)
    assert out["step_predicted_seconds"] == pytest.approx(step_pred.tolist())
    assert out["predicted"]["step_time_mean"]["value"] == pytest.approx(step_pred.mean())
    assert out["predicted"]["tokens_per_s"]["value"] == pytest.approx(real.sum() / step_pred.sum())
    seconds = np.array(out["step_seconds"])
    assert out["measured"]["step_time_mean"] == pytest.approx(seconds.mean())
    assert out["measured"]["step_time_p90"] == pytest.approx(np.quantile(seconds, 0.9))
    assert out["measured"]["tokens_per_s"] == pytest.approx(real.sum() / seconds.sum())
    for key in ("step_time_mean", "step_time_p50", "step_time_p90", "tokens_per_s"):
        pred = out["predicted"][key]
        low, high = pred["interval"]
        assert low <= pred["value"] <= high
        assert out["verdicts"][key] == verdict(out["measured"][key], [low, high])
    shapes = out["step_shapes"]
    if packing:  # rows of documents: one row, at most the budget's tokens
        assert all(s == 1 and n <= BUDGET for s, n in shapes)
        assert out["plan"]["packing"] == "varlen"
    else:
        assert all(s * n <= BUDGET for s, n in shapes)
    # (whether the steps land inside depends on what else the machine runs: no timing is
    # asserted here; test_verify_on_a_machine_loaded_on_purpose_says_so loads it on purpose)


def test_cli_verify_json_and_table(setup, capsys):
    base = ["verify", "--lens", str(setup["lens"]), "-k", "3", "--token-budget", str(BUDGET),
            "--profile", str(setup["profile"]), "--model", f"hf:{setup['config']}",
            "--threads", "1", "--steps", "6"]
    assert main([*base, "--json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["steps"] == 6 and out["source"] == str(setup["lens"])
    for key in ("device", "measured", "predicted", "verdicts", "warnings"):
        assert key in out
    # six steps: too short, and it says so on stderr and in the JSON
    assert any("too short" in w for w in out["warnings"])
    assert any(line.startswith("warning: the slice is too short")
               for line in captured.err.splitlines())
    plan = setup["root"] / "plan.json"
    assert main(["solve", "--lens", str(setup["lens"]), "-k", "3", "--token-budget",
                 str(BUDGET), "--profile", str(setup["profile"]), "-o", str(plan), "-q"]) == 0
    capsys.readouterr()
    assert main(["verify", "--lens", str(setup["lens"]), "--plan", str(plan), "--model",
                 f"hf:{setup['config']}", "--threads", "1", "--steps", "4", "-q"]) == 0
    table = capsys.readouterr().out
    assert "step_time_p90" in table and "verdict" in table and "not measured" in table


@pytest.mark.parametrize("argv, match", [
    ([], "-k K"),
    (["-k", "3"], "--token-budget"),
    (["-k", "3", "--token-budget", "512", "--time-limit", "0"], "seconds"),
    (["-k", "3", "--token-budget", "512", "--steps", "0"], "steps"),
    (["-k", "3", "--token-budget", "512", "--model", "nope:x"], "model"),
])
def test_bad_verify_input_is_one_line_and_exit_2(setup, capsys, argv, match):
    base = ["verify", "--lens", str(setup["lens"]), "--profile", str(setup["profile"])]
    if "--model" not in argv:
        argv = [*argv, "--model", f"hf:{setup['config']}"]
    code = main([*base, *argv, "-q"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "Traceback" not in err and match in err, err


def test_verify_refuses_a_nan_model_and_other_lengths(setup, tmp_path):
    mod = tmp_path / "nanmodel.py"
    mod.write_text("import torch\n\nclass M(torch.nn.Module):\n    def __init__(self):\n"
                   "        super().__init__()\n        self.e = torch.nn.Embedding(64, 8)\n"
                   "    def forward(self, ids):\n        return self.e(ids).mean() * float('nan')"
                   "\n\ndef build():\n    return M()\n")
    lengths = setup["lengths"]
    with pytest.raises(BucketoptError, match="loss is nan"):
        bucketopt.verify(lengths, k=2, token_budget=BUDGET, model=f"{mod}:build",
                         profile=str(setup["profile"]), steps=3)
    plan = bucketopt.solve(lengths, 2, token_budget=BUDGET).to_plan()
    with pytest.raises(BucketoptError, match="fingerprint|lengths"):
        bucketopt.verify(lengths[:-1], plan=plan, model=f"{mod}:build",
                         profile=str(setup["profile"]), steps=3)
    with pytest.raises(BucketoptError, match="profile"):
        bucketopt.verify(lengths, plan=plan, model=f"{mod}:build", steps=3)


def test_peak_memory_is_predicted_from_the_plans_memory_model(setup):
    lengths = setup["lengths"]
    memory = {"m0": 1e6, "m1": 1e3, "m2": 2.0, "capacity": 1e12}
    plan = bucketopt.solve(lengths, 3, token_budget=BUDGET, memory=memory).to_plan()
    result = bucketopt.verify(lengths, plan=plan, model=f"hf:{setup['config']}",
                              profile=str(setup["profile"]), threads=1, steps=5)
    out = result.to_dict()
    expected = max(1e6 + 1e3 * s * n + 2.0 * s * n * n for s, n in out["step_shapes"])
    assert out["predicted"]["peak_memory_bytes"]["value"] == pytest.approx(expected)
    assert out["measured"]["peak_memory_bytes"] is None  # CPU: no verdict to give
    assert "peak_memory_bytes" not in out["verdicts"]
    assert not any("no memory model" in n for n in out["notes"])



def test_verify_on_a_machine_loaded_on_purpose_says_so(setup):
    """Busy processes (two per core) spin while verify times its slice: the steps get a share
    of their thread well below a quiet machine's, and verify says the machine was busy (the
    one-minute load average lags a slice this short; the CPU share does not)."""
    import time

    from bucketopt.training.verify import MIN_CPU_SHARE

    from .busy import spinning

    lengths = setup["lengths"]
    plan = bucketopt.solve(lengths, 3, token_budget=BUDGET, profile=str(setup["profile"]),
                           pad="batch").to_plan()
    with spinning():
        time.sleep(0.5)
        out = bucketopt.verify(lengths, plan=plan, model=f"hf:{setup['config']}",
                               profile=str(setup["profile"]), threads=1, steps=30,
                               time_limit=30).to_dict()
    (share,) = [n for n in out["notes"] if n.startswith("the timed steps got")]
    assert int(share.split("got ")[1].split("%")[0]) < MIN_CPU_SHARE * 100
    assert any(w.startswith("the machine was busy: the steps got") for w in out["warnings"])
