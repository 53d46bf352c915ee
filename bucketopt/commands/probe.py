"""``bucketopt probe``: time real training steps of a model, fit and write a profile."""

from __future__ import annotations

import argparse

from .common import _float, _int, add_output_args, emit_json, note


def _seconds(text: str) -> float:
    value = _float(text)
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0; got {text!r}")
    return value


def add_parser(sub) -> None:
    p = sub.add_parser(
        "probe", help="time your model's training steps and fit a profile",
        description="Time real training steps (forward, backward, optimizer step; device "
                    "synchronised) of a model over a designed set of shapes up to --max-length "
                    "on and under --token-budget, in random interleaved rounds after a "
                    "warm-up; fit the cost model robustly and write the measurements CSV and a "
                    "profile for --profile. Needs torch.")
    p.add_argument("--model", metavar="SPEC", required=True,
                   help="module:function (or path/to/file.py:function) returning a torch module "
                        "whose forward(input_ids) gives a loss (or .loss, or logits), or "
                        "hf:CONFIG (a local transformers config; random weights)")
    p.add_argument("--token-budget", type=_int, metavar="T", required=True,
                   help="most padded tokens per micro-batch")
    p.add_argument("--max-length", type=_int, metavar="L", required=True,
                   help="longest padded length to time")
    p.add_argument("--device", choices=("cpu", "cuda", "mps"), default="cpu")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    p.add_argument("--time-limit", type=_seconds, metavar="SECONDS",
                   help="bound on the whole probe; rounds continue until it is reached")
    p.add_argument("--repeats", type=_int, metavar="N",
                   help="rounds over all shapes (default: 3, or as many as --time-limit allows)")
    p.add_argument("--warmup", type=_int, default=2, metavar="N",
                   help="untimed steps on the largest shape first (default: 2)")
    p.add_argument("--threads", type=_int, metavar="N", help="torch CPU threads while probing")
    p.add_argument("--vocab-size", type=_int, metavar="V",
                   help="token ids are drawn below V (default: the model's)")
    p.add_argument("--memory-fraction", type=_float, default=0.9, metavar="F",
                   help="CUDA: report the largest token budget whose peak memory fits this "
                        "share of the card (default: 0.9)")
    p.add_argument("--verify", action="store_true",
                   help="CUDA: run each probed length's largest predicted batch once and report "
                        "its real peak memory (CPU memory is not measured)")
    p.add_argument("--pool", choices=("low", "median"), default="low",
                   help="how repeats of a shape are pooled: their 25th percentile (default; the "
                        "figure other processes' load inflates least) or their median")
    p.add_argument("--seed", type=_int, default=0, help="seed of the shape order and token ids")
    p.add_argument("--name", help="profile name (default: probe-DEVICE)")
    p.add_argument("-o", "--output", metavar="FILE", help="write the profile JSON to FILE")
    p.add_argument("--measurements", metavar="CSV",
                   help="write the timed steps to CSV (the format calibrate reads)")
    p.add_argument("--quiet", "-q", action="store_true",
                   help="no progress line, notes or warnings on stderr (--json keeps warnings)")
    add_output_args(p)
    p.set_defaults(run=run)


def run(args) -> int:
    from ..cost.probe import probe
    from ..show.report import table

    if args.output:
        _check_writable(args.output, "-o")
    if args.measurements:
        _check_writable(args.measurements, "--measurements")
    result = probe(args.model, token_budget=args.token_budget, max_length=args.max_length,
                   device=args.device, dtype=args.dtype, time_limit=args.time_limit,
                   repeats=args.repeats, warmup=args.warmup, seed=args.seed,
                   vocab_size=args.vocab_size, memory_fraction=args.memory_fraction,
                   name=args.name, threads=args.threads, verify=args.verify, pool=args.pool,
                   progress=not args.quiet)  # on a terminal redrawn, elsewhere every 10 s
    out = result.to_dict()
    for warning in result.warnings:
        note(args, "warning: " + warning)
    if args.measurements:
        out["measurements_csv"] = str(result.write_measurements(args.measurements))
        note(args, f"wrote {args.measurements} (bucketopt calibrate --measurements "
                   f"{args.measurements} --pool {args.pool} refits it)")
    if args.output:
        profile = result.profile
        if args.measurements:
            from dataclasses import replace

            profile = replace(profile, provenance={**profile.provenance,
                                                   "measurements": str(args.measurements)})
        out["profile"] = str(profile.save(args.output))
        note(args, f"wrote profile {args.output} (use it with --profile {args.output})")
    if args.json:
        emit_json(out)
        return 0
    cal = result.calibration
    print(f"probed {result.model} on {result.device_name} ({result.dtype}): "
          f"{len(result.measurements)} steps over {len(result.shapes)} shapes, "
          f"{result.rounds} round(s), {result.elapsed_s:.1f} s"
          + (" (time limit reached)" if result.stopped_by_time_limit else ""))
    rows = []
    for key, unit in (("alpha", "s per micro-batch"), ("beta", "s per padded token"),
                      ("gamma", "s per padded token x padded length")):
        span = cal.intervals.get(key)
        rows.append([key, f"{getattr(cal, key):.6g}",
                     f"[{span[0]:.4g}, {span[1]:.4g}]" if span else "-", unit])
    print(table(["coefficient", "value", "95% interval", "unit"], rows, align="lrrl"))
    print(f"in-sample relative error: median {cal.median_rel_error * 100:.1f}%, "
          f"max {cal.max_rel_error * 100:.1f}%")
    if cal.heldout:
        h = cal.heldout
        print(f"held-out ({h['folds']}-fold over shapes): median "
              f"{h['median_rel_error'] * 100:.1f}%, 90th percentile "
              f"{h['p90_rel_error'] * 100:.1f}%, max {h['max_rel_error'] * 100:.1f}%")
    if cal.outliers:
        print(f"{len(cal.outliers)} outlier step(s) discounted by the robust fit")
    if result.memory:
        m = result.memory
        budget = m["max_token_budget"]
        print(f"memory: largest token budget within {m['fraction'] * 100:.0f}% of "
              f"{m['total_bytes'] / 2**30:.1f} GiB at length {m['at_length']}: "
              + ("not bounded by the fit" if budget is None else f"{budget:,} tokens"))
        fit = m["fit_bytes"]
        print(f"memory fit: m0 {fit['m0']:.4g} + m1 {fit['m1_per_token']:.4g} s L + m2 "
              f"{fit['m2_per_token_x_length']:.4g} s L^2 bytes; largest per-shape error "
              + ("-" if m.get("max_rel_error") is None else f"{m['max_rel_error'] * 100:.1f}%"))
        if m.get("largest_batch_per_length"):
            print("largest batch per length: " + ", ".join(
                f"{b}: {x}" for b, x in m["largest_batch_per_length"].items()))
        for v in m.get("verify", []):
            real = "out of memory" if v["oom"] else f"{v['measured_peak_bytes'] / 2**30:.2f} GiB"
            print(f"verify L={v['padded_len']} batch {v['batch_size']}: predicted "
                  f"{v['predicted_peak_bytes'] / 2**30:.2f} GiB, measured {real}")
    else:
        print(f"memory: not measured on {result.device} (peak memory is read on CUDA only); "
              "give a memory model by hand with --memory (docs/cost_model.md)")
    for key in ("measurements_csv", "profile"):
        if key in out:
            print(f"{key.replace('_', ' ')}: {out[key]}")
    return 0


def _check_writable(path, flag):
    """Refuse an output path in a missing directory before minutes of timing, not after."""
    from pathlib import Path

    from ..errors import BucketoptError

    parent = Path(path).expanduser().resolve().parent
    if not parent.is_dir():
        raise BucketoptError(f"{flag} {path}: directory {parent} does not exist.")
