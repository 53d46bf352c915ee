"""Probe, solve and verify a small model on one device, and write the figures (JSON + markdown).

The loop a user runs on their own GPU, end to end: ``probe`` a small llama built from its config
(random weights, nothing downloaded), ``solve`` the buckets of a log-normal length sample with
that profile, then ``verify`` the plan's first steps (a bucketed plan and the same plan packed)
and set measured against predicted. On CUDA verify reads ``max_memory_allocated``; the probe's
memory fit gives the plan its memory model, so peak memory is predicted and measured too.

    python benchmarks/gpu_check.py --device cuda --out gpu_check      # on a GPU
    python benchmarks/gpu_check.py --device cpu --out cpu_check --quick

Writes ``OUT.json`` (every figure) and ``OUT.md`` (tables for docs/cost_model.md). The
card's name is read from torch. ``--quick`` shortens every phase (the test suite runs it on the
CPU: tests/test_gpu_check.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CONFIG = {"model_type": "llama", "vocab_size": 32000, "hidden_size": 512,
          "intermediate_size": 1376, "num_hidden_layers": 4, "num_attention_heads": 8,
          "num_key_value_heads": 8, "max_position_embeddings": 4096,
          "tie_word_embeddings": True}
QUICK_CONFIG = {"model_type": "llama", "vocab_size": 256, "hidden_size": 32,
                "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
                "num_key_value_heads": 2, "max_position_embeddings": 1024,
                "tie_word_embeddings": True}


def lengths_sample(n, max_length, seed=0):
    rng = np.random.default_rng(seed)
    return np.clip(rng.lognormal(np.log(max_length / 6), 0.8, n), 8,
                   max_length).astype(np.int64)


def run(device, *, quick=False, budget=None, max_length=None, k=4, probe_time=None,
        verify_time=None, threads=None, dtype=None):
    """Every figure of the check as one dict."""
    import torch

    import bucketopt
    from bucketopt.cost.probe import probe

    gpu = device != "cpu"
    budget = budget or (256 if quick else (16_384 if gpu else 2048))
    max_length = max_length or (budget if quick else min(budget, 2048 if gpu else 512))
    probe_time = probe_time or (10.0 if quick else 180.0)
    verify_time = verify_time or (8.0 if quick else 60.0)
    dtype = dtype or ("bfloat16" if gpu and torch.cuda.is_bf16_supported() else "float32")
    work = Path(tempfile.mkdtemp(prefix="bucketopt-check-"))
    config = work / "config.json"
    config.write_text(json.dumps(QUICK_CONFIG if quick else CONFIG))
    spec = f"hf:{config}"
    started = time.monotonic()
    probed = probe(spec, token_budget=budget, max_length=max_length, device=device,
                   dtype=dtype, time_limit=probe_time, threads=threads, progress=False)
    profile_path = work / "profile.json"
    probed.profile.save(profile_path)
    lengths = lengths_sample(2000 if quick else 20_000, max_length)
    memory = None
    if probed.memory is not None:  # CUDA: the probe's memory fit gives the batch sizes
        fit = probed.memory["fit_bytes"]
        memory = {"m0": fit["m0"], "m1": fit["m1_per_token"],
                  "m2": fit["m2_per_token_x_length"], "capacity": probed.memory["total_bytes"]}
    sol = bucketopt.solve(lengths, k, token_budget=budget, profile=str(profile_path),
                          memory=memory)
    plan = sol.to_plan()
    out = {"device": device, "device_name": probed.device_name, "dtype": dtype,
           "torch": torch.__version__, "model": QUICK_CONFIG if quick else CONFIG,
           "token_budget": budget, "max_length": max_length, "k": k,
           "probe": {key: probed.to_dict()[key] for key in
                     ("alpha", "beta", "gamma", "heldout", "claimed_error", "scatter",
                      "warnings", "rounds", "elapsed_s", "n_measurements")},
           "solve": {"boundaries": list(sol.boundaries),
                     "batch_sizes": list(sol.batch_sizes), "ktok_per_s": sol.ktok_per_s,
                     **{key: sol.extra[key] for key in ("step_time_p50", "step_time_p90",
                                                        "rank_wait_s")}},
           "verify": {}}
    for name, packing in (("bucketed", None), ("packed", "varlen")):
        result = bucketopt.verify(lengths, plan=plan, model=spec, profile=str(profile_path),
                                  device=device, dtype=dtype, threads=threads,
                                  time_limit=verify_time, packing=packing)
        data = result.to_dict()
        for key in ("step_seconds", "step_predicted_seconds", "step_shapes", "plan"):
            data.pop(key)
        out["verify"][name] = data
    out["elapsed_s"] = time.monotonic() - started
    out["load_average"] = os.getloadavg()[0]
    return out


def markdown(out) -> str:
    """The figures as markdown tables."""
    p = out["probe"]
    lines = [f"**{out['device_name']}** ({out['device']}, {out['dtype']}, torch {out['torch']}), "
             f"token budget {out['token_budget']:,}, max length {out['max_length']:,}, "
             f"k = {out['k']}; load average {out['load_average']:.1f} at the end.", "",
             f"probe: alpha {p['alpha']:.4g} s, beta {p['beta']:.4g} s/token, gamma "
             f"{p['gamma']:.4g}; {p['n_measurements']} steps in {p['rounds']} rounds; held-out "
             f"error median {p['heldout']['median_rel_error']:.1%}, claimed error "
             f"{p['claimed_error']:.1%}; {len(p['warnings'])} warning(s).", ""]
    for name, v in out["verify"].items():
        lines += [f"verify, {name} plan ({v['steps']} steps, stopped by {v['stopped_by']}):", "",
                  "| figure | measured | predicted | interval | verdict |",
                  "|---|---|---|---|---|"]
        for key in ("step_time_mean", "step_time_p50", "step_time_p90", "tokens_per_s",
                    "peak_memory_bytes"):
            m = v["measured"].get(key)
            pr = v["predicted"].get(key)
            ver = v["verdicts"].get(key)
            scale, unit = (1e3, " ms") if key.startswith("step") else (
                (1.0, "") if key == "tokens_per_s" else (2**-20, " MiB"))

            def show(x, scale=scale, unit=unit):
                return "-" if x is None else f"{x * scale:,.3g}{unit}"

            said = "-" if ver is None else ("inside" if ver["inside"] else
                                            f"outside, {ver['off_by']:+.0%}")
            span = "-" if not pr["interval"] else \
                f"[{show(pr['interval'][0])}, {show(pr['interval'][1])}]"
            lines.append(f"| {key} | {show(m)} | {show(pr['value'])} | {span} "
                         f"| {said} |")
        lines += [""] + [f"- warning: {w}" for w in v["warnings"]] + [""]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu", "mps"))
    parser.add_argument("--out", default="gpu_check", help="writes OUT.json and OUT.md")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--budget", type=int)
    parser.add_argument("--max-length", type=int)
    parser.add_argument("-k", type=int, default=4)
    parser.add_argument("--probe-time", type=float)
    parser.add_argument("--verify-time", type=float)
    parser.add_argument("--threads", type=int)
    args = parser.parse_args(argv)

    from bucketopt.data.output import write_text

    out = run(args.device, quick=args.quick, budget=args.budget, max_length=args.max_length,
              k=args.k, probe_time=args.probe_time, verify_time=args.verify_time,
              threads=args.threads)
    write_text(Path(args.out + ".json"), json.dumps(out, indent=1) + "\n")
    write_text(Path(args.out + ".md"), markdown(out) + "\n")
    print(markdown(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
