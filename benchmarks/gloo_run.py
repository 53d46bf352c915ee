"""A real data-parallel run on CPU (torch.distributed, gloo): step times and rank waits of a
bucketed and a packed plan, measured against the predictions of a profile probed here, under
the run's own conditions.

1. **The lockstep probe** (the headline): the same ``--ranks`` gloo processes the run uses (one
   torch thread each) train the probe's shapes (:func:`bucketopt.cost.probe.design_shapes` at
   token budget = max length = ``--budget``), all ranks the same shape each step, in
   ``--lockstep-rounds`` interleaved rounds (each a fresh random order), every step a full
   training step as the run's: forward + backward, a barrier, the gradients' all-reduce, AdamW.
   A rank's time for a step less the time it spent in the barrier is its busy time; alpha,
   beta, gamma are fitted to it as ``probe`` fits (:func:`bucketopt.cost.probe.fit_timings`:
   alpha carries the all-reduce and the optimizer, beta and gamma the compute on cores the ranks
   share), with the error the fit claims. What the fit cannot hold, how the ranks scatter when
   they all run the same shape (the scheduler), is kept as the probe measured it
   (:func:`bucketopt.cost.steps.scatter_rows`, from the on-budget shapes, those training runs):
   per step, the ranks' busy times over the fitted time, one row of factors a step, and the
   seconds the ranks waited beyond the slowest busy time (the barrier's latency, a sleeping
   rank woken late). The prediction draws a row for every step
   (:func:`bucketopt.cost.steps.noisy_step_stats`): a step lasts as long as its slowest rank
   plus the row's extra, the wait is the step less the ranks' mean, and the intervals hold what
   runs of as many steps measure (:func:`bucketopt.cost.steps.sampled_step_stats`, over the
   fit's coefficient sets), widened by the claimed error.
2. A bucketed plan (``solve -k`` with the single-process profile below, batches of T // edge
   rows padded to the edge) and a packed plan (the same boundaries, ``packing="varlen"``: rows
   of documents up to T tokens, run as one row through the model's attention): the ranks train
   the first ``--steps`` steps of epoch 0, each its own batches of the plan's sampler, timing
   every phase as in the probe. The probe's rounds and the plans' steps run in one spawn,
   interleaved (each round: the probe's round and the next slice of each plan's steps, the three
   in a random order), so that a machine whose speed changes (other jobs) changes it for the
   probe and the plans alike. The step time is the time from one step's start to the next (the
   mean over ranks of their own), the rank wait the mean over ranks of their barrier time (the
   barrier's own latency included, as in the probe).
3. Measured against predicted (:func:`bucketopt.training.verify.predict_ranked_steps` with the
   probe's scatter): p50, p90 and mean step time and rank wait, each with its interval and
   verdict. The second table predicts the same steps from a single-process profile (``probe``,
   one process, one thread; or ``--profile``): it knows neither the all-reduce nor the cores'
   sharing, so the measured step is compared whole and less its all-reduce, as predicted and
   scaled by how much slower forward + backward ran than it says.

Run (about 80 seconds on 2 cores):

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


def run_ranks(spec, shapes, world, port):
    """Spawn ``world`` gloo ranks, rank r training ``shapes[r]`` (a list of [rows, length]) in
    order: ((world, steps, 5) seconds of [compute, wait, comm, optimizer, total] per step, the
    barrier's latency with every rank present)."""
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as out_dir:
        mp.spawn(_rank, args=(world, port, spec, shapes, out_dir), nprocs=world, join=True)
        ranks = [json.loads(Path(out_dir, f"rank{r}.json").read_text()) for r in range(world)]
    table = np.array([r["rows"] for r in ranks], dtype=np.float64).reshape(world, -1, 5)
    return table, float(np.median([r["barrier_latency"] for r in ranks]))


class LoadSampler:
    """The 1-minute load average every ``every`` seconds while the block runs (``loads``)."""

    def __init__(self, every=5.0):
        import threading

        self.every, self.loads, self._stop = every, [], threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while True:
            self.loads.append(os.getloadavg()[0])
            if self._stop.wait(self.every):
                break

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def plan_figures(table, latency):
    """Per-step measured figures (seconds) of one plan's steps: ``table`` (world, steps, 5)."""
    compute, wait, comm, _opt, total = (table[:, :, j] for j in range(5))
    step = total.mean(axis=0)
    return {"steps": int(table.shape[1]), "step_seconds": step.tolist(),
            "compute": compute.T.reshape(-1).tolist(),  # step order, as the batches
            "step_less_comm": (step - comm.mean(axis=0)).tolist(),
            "rank_wait": wait.mean(axis=0).tolist(), "comm": comm.mean(axis=0).tolist(),
            "compute_max": compute.max(axis=0).tolist(), "barrier_latency": latency}


def interleaved_run(spec, world, budget, rounds, plans, port, *, seed=0):
    """One spawn of ``world`` gloo ranks: ``rounds`` rounds, each the lockstep probe's round
    (every design shape once, all ranks the same shape, a fresh random order) and the next
    slice of every plan's steps (``plans``: name -> (PlanBatches, steps)), the three in a
    fresh random order, so that the probe and the plans run under the same machine conditions.
    ((world, steps, 5) table, barrier latency, a tag per step: ("probe", round, shape) or
    (plan name, step))."""
    from bucketopt.cost.probe import design_shapes

    shapes = design_shapes(budget, budget)
    rng = np.random.default_rng(seed)
    sequences, tags = [[] for _ in range(world)], []
    counts = {name: min(steps, b.sizes.size // world) for name, (b, steps) in plans.items()}
    for r in range(rounds):
        segments = ["probe", *plans]
        for segment in (segments[i] for i in rng.permutation(len(segments))):
            if segment == "probe":
                for i in rng.permutation(len(shapes)):
                    for seq in sequences:
                        seq.append(list(shapes[i]))
                    tags.append(("probe", r + 1, tuple(shapes[i])))
                continue
            batches, n = plans[segment][0], counts[segment]
            for i in range(r * n // rounds, (r + 1) * n // rounds):
                for q, seq in enumerate(sequences):
                    seq.append(list(batches.shape(i * world + q)))
                tags.append((segment, i))
    table, latency = run_ranks(spec, sequences, world, port)
    return table, latency, tags


def fit_lockstep(table, order, budget, latency, *, rounds, load=None, bootstrap=None):
    """The lockstep probe's steps (``table`` (world, steps, 5), ``order`` their (round, shape))
    fitted as the probe fits: (the fit (:class:`bucketopt.cost.probe.TimingFit`), the scatter's
    rows (noise (K, world), extra (K,); :func:`bucketopt.cost.steps.scatter_rows`), what was
    measured)."""
    from bucketopt.cost.probe import fit_timings
    from bucketopt.cost.steps import noisy_step_stats, scatter_rows

    world = table.shape[0]
    wait = table[:, :, 1]
    busy = table[:, :, 4] - wait  # (world, steps): each rank's step less its barrier wait
    rows = [{"batch_size": size, "padded_len": length, "round": r, "seconds": float(t)}
            for k, (r, (size, length)) in enumerate(order) for t in busy[:, k]]
    shapes = sorted({shape for _, shape in order})
    fit = fit_timings(rows, shapes, rounds=rounds, bootstrap=bootstrap, device="cpu",
                      threads=1, load=load, cores=os.cpu_count())
    cal = fit.calibration
    coef = np.array([cal.alpha, cal.beta, cal.gamma])
    features = np.array([[1.0, s * n, s * n * n] for _, (s, n) in order])
    on_budget = np.array([s == budget // n for _, (s, n) in order])
    noise, extra = scatter_rows(busy[:, on_budget].T, wait[:, on_budget].T,
                                features[on_budget] @ coef)
    scattered = noisy_step_stats(np.repeat(features[on_budget], world, axis=0), world, coef,
                                 noise)[3]
    return fit, (noise, extra), {
        "shapes": len(shapes), "rounds": rounds, "steps": len(order),
        "barrier_latency": latency,
        "comm_median": float(np.median(table[:, :, 2])),
        "scatter_rows": int(noise.shape[0]),
        "noise_quantiles": np.quantile(noise, [0.1, 0.5, 0.9]).tolist(),
        "extra_mean": float(extra.mean()),
        # the rank wait of the on-budget steps, and the part of it the ranks' scatter explains
        "equal_shape_wait": float(wait[:, on_budget].mean()),
        "equal_shape_wait_from_scatter": float(scattered)}


def summary(measured, predicted, scale=1.0, series=("step", "step_less_comm")):
    """Measured p50 / p90 / mean step time (of each of ``series``: the whole step, and less its
    all-reduce) and mean rank wait against the prediction (times ``scale``), with verdicts
    (bucketopt.training.verify.verdict)."""
    from bucketopt.training.verify import verdict

    predicted = {key: {"value": v["value"] * scale,
                       "interval": [x * scale for x in v["interval"]]}
                 for key, v in predicted.items()}
    out = {}
    named = {"step": measured["step_seconds"], "step_less_comm": measured["step_less_comm"]}
    for label in series:
        t = np.asarray(named[label])
        for key, value in (("step_time_p50", np.quantile(t, 0.5)),
                           ("step_time_p90", np.quantile(t, 0.9)),
                           ("step_time_mean", t.mean())):
            pred = predicted[key]
            out[f"{label}:{key}"] = {"measured": float(value), "predicted": pred["value"],
                                     "interval": pred["interval"],
                                     **verdict(float(value), pred["interval"])}
    wait = float(np.mean(measured["rank_wait"]))  # the barrier's own latency included
    pred = predicted["rank_wait_s"]
    out["rank_wait_s"] = {"measured": wait, "predicted": pred["value"],
                          "interval": pred["interval"], **verdict(wait, pred["interval"])}
    return out


def _print_figures(figures, indent="  "):
    for key, f in figures.items():
        f = {**f, "predicted": max(f["predicted"], 0.0)}  # a wait of -1e-19 s reads 0
        lo, hi = f["interval"]
        said = "inside" if f["inside"] else f"outside, {f['off_by']:+.0%}"
        print(f"{indent}{key:30} measured {f['measured'] * 1e3:8.2f} ms  predicted "
              f"{f['predicted'] * 1e3:8.2f} ms [{lo * 1e3:.2f}, {hi * 1e3:.2f}]  {said}")


def print_report(report):
    """The report as text: the lockstep profile's table first, the single-process one second."""
    lock, single, load = report["lockstep"], report["single_process"], report["load_average"]
    print(f"{report['ranks']} gloo ranks, 1 thread each, on {report['cores']} cores; load "
          f"average {load[0]:.1f}-{load[1]:.1f}; {report['elapsed_s']:.0f} s")
    print(f"lockstep profile ({lock['rounds']} rounds over {lock['shapes']} shapes, "
          f"{lock['steps']} steps): alpha {lock['alpha'] * 1e3:.3g} ms, beta "
          f"{lock['beta']:.3g}, gamma {lock['gamma']:.3g}, claimed error "
          f"{lock['claimed_error']:.1%}; all-reduce median {lock['comm_median'] * 1e3:.2f} ms, "
          f"barrier latency {lock['barrier_latency'] * 1e3:.2f} ms; scatter "
          f"({lock['scatter_rows']} on-budget steps): busy / fitted p10/p50/p90 "
          f"{'/'.join(f'{q:.2f}' for q in lock['noise_quantiles'])}; rank wait at equal shapes "
          f"{lock['equal_shape_wait'] * 1e3:.2f} ms, "
          f"{lock['equal_shape_wait_from_scatter'] * 1e3:.2f} ms of it the ranks' scatter, "
          f"{lock['extra_mean'] * 1e3:.2f} ms beyond the slowest rank")
    for w in lock["warnings"]:
        print("lockstep probe warning:", w)
    plan = report["plan"]
    print(f"plan: boundaries {plan['boundaries']}, batch sizes {plan['batch_sizes']} (solved "
          "with the single-process profile; with the lockstep profile: boundaries "
          f"{plan.get('lockstep_profile_boundaries')})")
    for name, entry in report["plans"].items():
        print(f"\n{name}: {entry['steps']} steps; all-reduce median "
              f"{entry['comm_median'] * 1e3:.2f} ms, barrier latency "
              f"{entry['barrier_latency'] * 1e3:.2f} ms; predicted by the lockstep profile:")
        _print_figures(entry["figures"])
    print(f"\nthe same steps predicted by a single-process profile (alpha "
          f"{single['alpha'] * 1e3:.3g} ms, beta {single['beta']:.3g}, gamma "
          f"{single['gamma']:.3g}, claimed error {single['claimed_error']:.1%}):")
    for w in single["probe_warnings"]:
        print("probe warning:", w)
    for name, entry in report["plans"].items():
        sp = entry["single_process"]
        print(f"\n{name}: forward + backward ran {sp['compute_speed_factor']:.2f}x the "
              "single-process profile's time (median)")
        for title, figures in (("as predicted", sp["figures"]),
                               ("predicted x that factor", sp["figures_at_measured_speed"])):
            print(f" {title}:")
            _print_figures(figures)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=3)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--budget", type=int, default=512)
    parser.add_argument("-k", type=int, default=3)
    parser.add_argument("--lockstep-rounds", type=int, default=40,
                        help="interleaved rounds of the lockstep probe over its shapes")
    parser.add_argument("--profile", help="a single-process profile JSON for the second table "
                                          "(default: probe here first)")
    parser.add_argument("--probe-time", type=float, default=30.0,
                        help="seconds of the single-process probe")
    parser.add_argument("--port", type=int, default=29533)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--save", help="also write the report's JSON to this file")
    parser.add_argument("--show", help="print an earlier --save'd report and exit")
    args = parser.parse_args(argv)
    if args.show:
        print_report(json.loads(Path(args.show).read_text()))
        return 0

    import torch

    import bucketopt
    from bucketopt.training.verify import claimed_error_of, plan_batches, predict_ranked_steps

    started = time.monotonic()
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
        single = result.profile
        single_warnings = list(result.warnings)
    else:
        single, single_warnings = bucketopt.load_profile(args.profile), []
    load.append(os.getloadavg()[0])
    lengths = tiny_lengths(max_length=args.budget)
    plan = bucketopt.solve(lengths, args.k, token_budget=args.budget, profile=single,
                           world_size=args.ranks).to_plan()
    plans = {name: (plan_batches(plan, lengths, packing=packing), args.steps)
             for name, packing in (("bucketed", None), ("packed", "varlen"))}
    with LoadSampler() as sampled:
        table, latency, tags = interleaved_run(spec, args.ranks, args.budget,
                                               args.lockstep_rounds, plans, args.port)
    load.extend(sampled.loads)
    probe_steps = [k for k, tag in enumerate(tags) if tag[0] == "probe"]
    fit, (noise, extra), lock = fit_lockstep(
        table[:, probe_steps], [(tags[k][1], tags[k][2]) for k in probe_steps], args.budget,
        latency, rounds=args.lockstep_rounds, load=max(load))
    profile = fit.profile(name="lockstep-gloo", world_size=args.ranks, token_budget=args.budget,
                          description=f"the tiny llama, {args.ranks} gloo ranks of 1 thread on "
                                      f"{os.cpu_count()} cores, measured in lockstep",
                          provenance={"ranks": args.ranks, **lock})
    model = profile.cost_model(world_size=args.ranks)
    single_model = single.cost_model(world_size=args.ranks)
    claim, single_claim = fit.claimed_error, claimed_error_of(single)
    cal = fit.calibration
    # the plan the lockstep profile solves for: the same boundaries, or say so
    again = bucketopt.solve(lengths, args.k, token_budget=args.budget, profile=profile,
                            world_size=args.ranks).to_plan()
    report = {"ranks": args.ranks, "cores": os.cpu_count(), "budget": args.budget,
              "lockstep": {"alpha": cal.alpha, "beta": cal.beta, "gamma": cal.gamma,
                           "claimed_error": claim, "warnings": list(fit.warnings),
                           "heldout": cal.heldout, **lock},
              "single_process": {"alpha": single.alpha, "beta": single.beta,
                                 "gamma": single.gamma, "claimed_error": single_claim,
                                 "probe_warnings": single_warnings},
              "plan": {"boundaries": list(plan["boundaries"]),
                       "batch_sizes": list(plan["batch_sizes"]),
                       "lockstep_profile_boundaries": list(again["boundaries"])},
              "plans": {}}
    for name, (batches, _steps) in plans.items():
        mine = [k for k, tag in enumerate(tags) if tag[0] == name]
        measured = plan_figures(table[:, mine], latency)
        n = measured["steps"] * args.ranks
        features = batches.features[:n]
        predicted = predict_ranked_steps(features, args.ranks, model, claim, noise=noise,
                                         extra=extra)
        single_predicted = predict_ranked_steps(features, args.ranks, single_model,
                                                single_claim)
        # how much slower each rank's forward + backward ran than the single-process profile
        # says (ranks sharing cores, other processes): one factor, the median over every batch
        per_batch = features @ [single_model.alpha, single_model.beta, single_model.gamma]
        factor = float(np.median(np.asarray(measured["compute"]) / per_batch))
        report["plans"][name] = {
            "steps": measured["steps"], "barrier_latency": measured["barrier_latency"],
            "comm_median": float(np.median(measured["comm"])),
            "figures": summary(measured, predicted, series=("step",)),
            "single_process": {"compute_speed_factor": factor,
                               "figures": summary(measured, single_predicted),
                               "figures_at_measured_speed": summary(measured, single_predicted,
                                                                    factor)}}
    report["load_average"] = [min(load), max(load)]
    report["load_samples"] = load
    report["elapsed_s"] = time.monotonic() - started
    if args.save:
        from bucketopt.data.output import write_text

        write_text(args.save, json.dumps(report, indent=1) + "\n", what="the report")
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print_report(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
