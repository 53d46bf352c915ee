"""Does the probe survive a busy machine, or say so? Quiet against loaded, one script.

``--busy N`` starts N processes that spin on the CPU for the whole run (on top of whatever
else runs). The probe times ``small_transformer()`` of ``benchmarks/probe_cpu.py`` (token
budget 1,024, max length 256, one torch thread) with held-out shapes timed in its own rounds
(``probe(holdout=...)``, never fitted), then a separate loop times the same held-out shapes
again (still under the same load). Printed, for the probe's pooling of repeats (their fast
quarter, ``pool="low"``) and for the median the probe pooled by before: the k-fold held-out
error, the error on the held-out shapes (interleaved, and the separate loop), the error the fit
claims (``claimed_error``), the scatter of repeats and the warnings.

    python benchmarks/probe_load.py --busy 0 --time-limit 60
    python benchmarks/probe_load.py --busy 3 --time-limit 60
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from probe_cpu import BUDGET, MAX_LENGTH, Trainer, heldout_shapes, small_transformer


def spin(stop_at):
    """Keep one CPU busy until ``stop_at`` (time.time())."""
    x = 0
    while time.time() < stop_at:
        x += 1


def start_busy(n, seconds):
    """``n`` spinning processes for ``seconds``; returns them (joined by the caller)."""
    stop_at = time.time() + seconds
    procs = [multiprocessing.Process(target=spin, args=(stop_at,), daemon=True) for _ in range(n)]
    for p in procs:
        p.start()
    return procs


def errors(cal, measured):
    """|predicted / measured - 1| of each (shape -> seconds)."""
    return np.abs([(cal.alpha + s * n * (cal.beta + cal.gamma * n)) / t - 1
                   for (s, n), t in measured.items()])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--busy", type=int, default=0, help="spinning processes (default 0)")
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the separate loop")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    import torch

    from bucketopt.cost.calibration import calibrate
    from bucketopt.cost.fitcheck import claimed_error
    from bucketopt.cost.probe import design_shapes, probe

    torch.set_num_threads(1)
    design = design_shapes(BUDGET, MAX_LENGTH)
    shapes = heldout_shapes(design)[::2]
    load_before = os.getloadavg()[0]
    procs = start_busy(args.busy, args.time_limit + 120)
    time.sleep(1.0 if args.busy else 0.0)
    try:
        result = probe(small_transformer, token_budget=BUDGET, max_length=MAX_LENGTH,
                       time_limit=args.time_limit, threads=1, progress=False, holdout=shapes)
        trainer = Trainer(small_transformer())
        for s in shapes:
            trainer.step(*s)
        loop = {s: [] for s in shapes}
        rng = np.random.default_rng(1)
        for _ in range(args.rounds):
            for i in rng.permutation(len(shapes)):
                loop[shapes[i]].append(trainer.step(*shapes[i]))
        load_after = os.getloadavg()[0]
    finally:
        for p in procs:
            p.terminate()
            p.join()
    rows = result.measurements
    median_fit = calibrate([r["batch_size"] for r in rows], [r["padded_len"] for r in rows],
                           [r["seconds"] for r in rows], pool="median", bootstrap=200)
    held = result.holdout["shapes"]
    out = {"busy_processes": args.busy, "load_average": [load_before, load_after],
           "cores": os.cpu_count(), "steps": len(rows), "rounds": result.rounds,
           "warnings": list(result.warnings), "scatter": result.scatter}
    for name, cal, inside, key in (
            ("low", result.calibration, {(e["batch_size"], e["padded_len"]): e["measured_s"]
                                         for e in held}, 0.25),
            ("median", median_fit, {(e["batch_size"], e["padded_len"]): e["measured_median_s"]
                                    for e in held}, 0.5)):
        separate = {s: float(np.quantile(t, key)) for s, t in loop.items()}
        e_in, e_sep = errors(cal, inside), errors(cal, separate)
        out[name] = {"alpha": cal.alpha, "beta": cal.beta, "gamma": cal.gamma,
                     "kfold_median": cal.heldout["median_rel_error"],
                     "kfold_max": cal.heldout["max_rel_error"],
                     "claimed_error": claimed_error(cal, design),
                     "heldout_interleaved_median": float(np.median(e_in)),
                     "heldout_interleaved_max": float(e_in.max()),
                     "heldout_separate_median": float(np.median(e_sep)),
                     "heldout_separate_max": float(e_sep.max())}
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    print(f"busy processes {args.busy}, load average {load_before:.1f} -> {load_after:.1f} on "
          f"{os.cpu_count()} cores; probe: {len(rows)} steps, {result.rounds} rounds, "
          f"{len(shapes)} held-out shapes")
    print(f"scatter of repeats: {json.dumps(result.scatter)}")
    for name in ("low", "median"):
        o = out[name]
        print(f"pool={name:6} k-fold {o['kfold_median']:.1%}/{o['kfold_max']:.1%}  claimed "
              f"{o['claimed_error']:.1%}  held-out interleaved "
              f"{o['heldout_interleaved_median']:.1%}"
              f"/{o['heldout_interleaved_max']:.1%}  separate loop "
              f"{o['heldout_separate_median']:.1%}/{o['heldout_separate_max']:.1%} (median/max)")
    for w in result.warnings:
        print("warning:", w)
    print("no warning" if not result.warnings else f"{len(result.warnings)} warning(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
