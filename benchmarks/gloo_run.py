"""A real data-parallel run on CPU (torch.distributed, gloo): step times and rank waits of a
bucketed and a packed plan, measured against the predictions of a profile probed here.

1. A tiny llama built from its config (no weights downloaded) is probed on this machine (one
   torch thread, token budget = max length = ``--budget``) unless ``--profile`` is given.
2. For a bucketed plan (``solve -k``, batches of T // edge rows padded to the edge) and a
   packed plan (the same boundaries, ``packing="varlen"``: rows of documents up to T tokens,
   run as one row through the model's attention), ``--ranks`` processes (gloo, one torch thread
   each) train the first ``--steps`` steps of epoch 0, each rank its own batches of the plan's
   sampler. Every step on every rank: forward + backward (``compute``), a barrier (``wait``:
   the time this rank waits for the slowest), the gradients' all-reduce (``comm``) and the
   AdamW step. The step time is the time from one step's start to the next (the mean over ranks
   of their own), the rank wait the mean over ranks of their barrier time.
3. The prediction for the same steps (:func:`bucketopt.training.verify.predict_ranked_steps`): the
   profile's cost model on each rank's batches, a step as long as its slowest rank, intervals
   from the profile's coefficient sets widened by the error it claims. A single-process profile
   knows no all-reduce, so the measured step is compared twice: whole, and less its
   ``comm`` (what the cost model's step is).

Run (about 3 minutes):

    python benchmarks/gloo_run.py [--ranks 3] [--steps 60] [--budget 512] [--json]

The test suite runs a short version when ``BUCKETOPT_GLOO=1`` (tests/test_gloo.py).
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

CONFIG = {"model_type": "llama", "vocab_size": 256, "hidden_size": 64, "intermediate_size": 128,
          "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4,
          "max_position_embeddings": 2048, "tie_word_embeddings": True}


def tiny_lengths(n=4000, max_length=512, seed=0):
    """Log-normal lengths, 8 to ``max_length`` tokens."""
    rng = np.random.default_rng(seed)
    return np.clip(rng.lognormal(4.4, 0.7, n), 8, max_length).astype(np.int64)


def _rank(rank, world, port, spec, shapes, out_dir):
    """One rank: train its shapes, time each phase of every step, write them as JSON."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1")
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    from bucketopt.cost.probe import Trainer

    trainer = Trainer(spec, seed=rank)
    torch.manual_seed(0)
    for p in trainer.net.parameters():  # one set of weights on every rank
        dist.broadcast(p.data, 0)
    params = [p for p in trainer.net.parameters() if p.requires_grad]
    mine = shapes[rank]
    seen = set()
    for shape in mine:  # untimed first step of each shape (allocations)
        if tuple(shape) not in seen:
            seen.add(tuple(shape))
            ids = torch.randint(0, trainer.vocab, tuple(shape), generator=trainer.gen)
            trainer.loss_fn(trainer.net, ids).backward()
            trainer.optimizer.zero_grad(set_to_none=True)
    latency = []
    for _ in range(20):  # the barrier's own cost when every rank is there at once
        dist.barrier()
        t0 = time.perf_counter()
        dist.barrier()
        latency.append(time.perf_counter() - t0)
    dist.barrier()
    rows = []
    for size, length in mine:
        ids = torch.randint(0, trainer.vocab, (size, length), generator=trainer.gen)
        t0 = time.perf_counter()
        trainer.optimizer.zero_grad(set_to_none=True)
        loss = trainer.loss_fn(trainer.net, ids)
        loss.backward()
        t1 = time.perf_counter()
        dist.barrier()
        t2 = time.perf_counter()
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        dist.all_reduce(flat)
        flat /= world
        at = 0
        for p in params:
            p.grad.copy_(flat[at:at + p.numel()].view_as(p))
            at += p.numel()
        t3 = time.perf_counter()
        trainer.optimizer.step()
        t4 = time.perf_counter()
        rows.append([t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0])
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(
        {"rows": rows, "barrier_latency": float(np.median(latency))}))
    dist.destroy_process_group()


def run_plan(spec, batches, world, steps, port):
    """Spawn ``world`` gloo ranks on the first ``steps`` steps of ``batches``; per-step
    measured figures (seconds)."""
    import torch.multiprocessing as mp

    n = min(steps, batches.sizes.size // world)
    shapes = [[list(batches.shape(i * world + r)) for i in range(n)] for r in range(world)]
    with tempfile.TemporaryDirectory() as out_dir:
        mp.spawn(_rank, args=(world, port, spec, shapes, out_dir), nprocs=world, join=True)
        ranks = [json.loads(Path(out_dir, f"rank{r}.json").read_text()) for r in range(world)]
    table = np.array([r["rows"] for r in ranks])  # (world, steps, 5)
    compute, wait, comm, _opt, total = (table[:, :, j] for j in range(5))
    step = total.mean(axis=0)
    return {"steps": n, "step_seconds": step.tolist(),
            "compute": compute.T.reshape(-1).tolist(),  # step order, as the batches
            "step_less_comm": (step - comm.mean(axis=0)).tolist(),
            "rank_wait": wait.mean(axis=0).tolist(), "comm": comm.mean(axis=0).tolist(),
            "compute_max": compute.max(axis=0).tolist(),
            "barrier_latency": float(np.median([r["barrier_latency"] for r in ranks]))}


def summary(measured, predicted, scale=1.0):
    """Measured p50 / p90 / mean step time and mean rank wait against the prediction (times
    ``scale``), with verdicts (bucketopt.training.verify.verdict)."""
    from bucketopt.training.verify import verdict

    predicted = {key: {"value": v["value"] * scale,
                       "interval": [x * scale for x in v["interval"]]}
                 for key, v in predicted.items()}
    out = {}
    for label, series in (("step", measured["step_seconds"]),
                          ("step_less_comm", measured["step_less_comm"])):
        t = np.asarray(series)
        for key, value in (("step_time_p50", np.quantile(t, 0.5)),
                           ("step_time_p90", np.quantile(t, 0.9)),
                           ("step_time_mean", t.mean())):
            pred = predicted[key]
            out[f"{label}:{key}"] = {"measured": float(value), "predicted": pred["value"],
                                     "interval": pred["interval"],
                                     **verdict(float(value), pred["interval"])}
    wait = float(np.mean(measured["rank_wait"]) - measured["barrier_latency"])
    pred = predicted["rank_wait_s"]
    out["rank_wait_s"] = {"measured": max(wait, 0.0), "predicted": pred["value"],
                          "interval": pred["interval"], **verdict(max(wait, 0.0),
                                                                  pred["interval"])}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=3)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--budget", type=int, default=512)
    parser.add_argument("-k", type=int, default=3)
    parser.add_argument("--profile", help="a profile JSON (default: probe here first)")
    parser.add_argument("--probe-time", type=float, default=60.0)
    parser.add_argument("--port", type=int, default=29533)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    import torch

    import bucketopt
    from bucketopt.training.verify import claimed_error_of, plan_batches, predict_ranked_steps

    torch.set_num_threads(1)
    work = Path(tempfile.mkdtemp(prefix="bucketopt-gloo-"))
    config = work / "tiny.json"
    config.write_text(json.dumps(CONFIG))
    spec = f"hf:{config}"
    load = [os.getloadavg()[0]]
    if args.profile is None:
        from bucketopt.cost.probe import probe

        result = probe(spec, token_budget=args.budget, max_length=args.budget, threads=1,
                       time_limit=args.probe_time, progress=False)
        profile = result.profile
        probe_warnings = list(result.warnings)
    else:
        profile, probe_warnings = bucketopt.load_profile(args.profile), []
    lengths = tiny_lengths(max_length=args.budget)
    plan = bucketopt.solve(lengths, args.k, token_budget=args.budget, profile=profile,
                           world_size=args.ranks).to_plan()
    model = profile.cost_model(world_size=args.ranks)
    claim = claimed_error_of(profile)
    report = {"ranks": args.ranks, "cores": os.cpu_count(), "budget": args.budget,
              "profile": {"alpha": profile.alpha, "beta": profile.beta, "gamma": profile.gamma,
                          "claimed_error": claim, "probe_warnings": probe_warnings},
              "plans": {}}
    for i, (name, packing) in enumerate((("bucketed", None), ("packed", "varlen"))):
        batches = plan_batches(plan, lengths, packing=packing)
        measured = run_plan(spec, batches, args.ranks, args.steps, args.port + i)
        n = measured["steps"] * args.ranks
        predicted = predict_ranked_steps(batches.features[:n], args.ranks, model, claim)
        # how much slower each rank's forward + backward ran than the profile says (ranks
        # sharing cores, other processes): one factor, the median over every micro-batch
        per_batch = batches.features[:n] @ [model.alpha, model.beta, model.gamma]
        factor = float(np.median(np.asarray(measured["compute"]) / per_batch))
        report["plans"][name] = {"steps": measured["steps"],
                                 "barrier_latency": measured["barrier_latency"],
                                 "comm_median": float(np.median(measured["comm"])),
                                 "compute_speed_factor": factor,
                                 "figures": summary(measured, predicted),
                                 "figures_at_measured_speed": summary(measured, predicted,
                                                                      factor)}
        load.append(os.getloadavg()[0])
    report["load_average"] = [min(load), max(load)]
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"{args.ranks} gloo ranks, 1 thread each, on {os.cpu_count()} cores; load average "
          f"{min(load):.1f}-{max(load):.1f}; profile alpha {profile.alpha:.3g} s, beta "
          f"{profile.beta:.3g}, gamma {profile.gamma:.3g}, claimed error {claim:.1%}")
    for w in probe_warnings:
        print("probe warning:", w)
    for name, entry in report["plans"].items():
        print(f"\n{name}: {entry['steps']} steps; all-reduce median "
              f"{entry['comm_median'] * 1e3:.2f} ms, barrier latency "
              f"{entry['barrier_latency'] * 1e3:.2f} ms; forward + backward ran "
              f"{entry['compute_speed_factor']:.2f}x the profile's time (median)")
        for title, figures in (("as predicted", entry["figures"]),
                               ("predicted x that factor", entry["figures_at_measured_speed"])):
            print(f" {title}:")
            for key, f in figures.items():
                lo, hi = f["interval"]
                said = "inside" if f["inside"] else f"outside, {f['off_by']:+.0%}"
                print(f"  {key:30} measured {f['measured'] * 1e3:8.2f} ms  predicted "
                      f"{f['predicted'] * 1e3:8.2f} ms [{lo * 1e3:.2f}, {hi * 1e3:.2f}]  {said}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
