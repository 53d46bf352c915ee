"""``bucketopt verify``: train a short slice of a plan's batches, measured against predicted."""

from __future__ import annotations

from .common import _int, add_lens_args, add_output_args, add_plan_input, add_solver_args, note
from .probe import _seconds


def add_parser(sub) -> None:
    p = sub.add_parser(
        "verify", help="train a slice of a plan's batches: measured against predicted",
        description="Train the first micro-batches of an epoch of a plan (--plan, or -k with the "
                    "solver flags) with a model as probe takes it, on CPU or CUDA, and print "
                    "measured against predicted step time (mean, p50, p90), tokens/s and peak "
                    "memory where the device reports it, each with the prediction's interval "
                    "and a verdict. Needs torch.")
    add_lens_args(p)
    p.add_argument("-k", type=_int, metavar="K", help="solve K buckets first (without --plan)")
    add_solver_args(p, k_required=False)
    add_plan_input(p, "the plan whose batches to run")
    p.add_argument("--model", metavar="SPEC", required=True,
                   help="module:function or hf:CONFIG, as probe takes it")
    p.add_argument("--device", choices=("cpu", "cuda", "mps"), default="cpu")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    p.add_argument("--threads", type=_int, metavar="N", help="torch CPU threads while training")
    p.add_argument("--time-limit", type=_seconds, default=60.0, metavar="SECONDS",
                   help="seconds of training at most (default 60)")
    p.add_argument("--steps", type=_int, metavar="N", help="steps at most")
    p.add_argument("--packing", choices=("fixed", "greedy", "varlen", "varlen-balanced"),
                   help="replace the plan's packing (varlen: rows of documents)")
    p.add_argument("--rank", type=_int, default=None, metavar="R",
                   help="whose batches, with a plan over several GPUs (default 0)")
    p.add_argument("--seed", type=_int, default=0, help="the sampler's seed (default 0)")
    p.add_argument("--vocab-size", type=_int, metavar="V",
                   help="token ids are drawn below V (default: the model's)")
    add_output_args(p)
    p.set_defaults(run=run)


def _solver_kwargs(args) -> dict:
    """The solver flags given (with -k), as solve()'s keywords."""
    from .solve import solver_kwargs

    kwargs = solver_kwargs(args)
    kwargs.pop("profile")  # verify's own keyword: the profile to predict with
    return kwargs


def run(args) -> int:
    from ..errors import BucketoptError
    from ..training.verify import verify

    if (args.plan is None) == (args.k is None):
        raise BucketoptError("verify needs -k K (solve first) or --plan PLAN.json, one of them.")
    lengths, source = _lengths(args)
    kwargs = {} if args.plan is not None else _solver_kwargs(args)
    result = verify(lengths, model=args.model, plan=args.plan_data, k=args.k,
                    profile=args.profile, device=args.device, dtype=args.dtype,
                    threads=args.threads, time_limit=args.time_limit, steps=args.steps,
                    packing=args.packing, rank=args.rank or 0, seed=args.seed,
                    vocab_size=args.vocab_size,
                    allow_other_lengths=args.allow_other_lengths, **kwargs)
    for warning in result.warnings:
        note(args, "warning: " + warning)
    if args.json:
        from .common import emit_json

        emit_json({"source": source, **result.to_dict()})
        return 0
    print(f"source: {source}")
    print(verify_table(result))
    return 0


def _lengths(args):
    from .common import read_lengths

    return read_lengths(args, per_sample=True)


def verify_table(result) -> str:
    """Measured against predicted, one row a figure, for people."""
    from ..show.report import seconds_text, table

    def shown(key, value):
        if value is None:
            return "-"
        if key.startswith("step_time"):
            return seconds_text(value)
        if key == "tokens_per_s":
            return f"{value:,.0f}"
        return f"{value / 2**20:,.1f} MiB"

    rows = []
    for key in ("step_time_mean", "step_time_p50", "step_time_p90", "tokens_per_s",
                "peak_memory_bytes"):
        pred = result.predicted.get(key)
        verdict = result.verdicts.get(key)
        span = pred["interval"]
        if verdict is None:
            said = "not measured" if result.measured.get(key) is None else "not predicted"
        elif verdict["inside"]:
            said = "inside"
        else:
            said = f"outside, {verdict['off_by']:+.0%}"
        rows.append([key, shown(key, result.measured.get(key)),
                     shown(key, pred["value"]),
                     f"[{shown(key, span[0])}, {shown(key, span[1])}]" if span else "-", said])
    lines = [f"verified on {result.device_name}: {result.steps} steps of the plan's batches "
             f"({result.packing}), {result.elapsed_s:.1f} s"
             + (" (time limit reached)" if result.stopped_by == "time_limit" else ""),
             table(["figure", "measured", "predicted", "interval", "verdict"], rows,
                   align="lrrrl")]
    lines += [f"note: {n}" for n in result.notes]  # warnings: on stderr (run)
    return "\n".join(lines)
