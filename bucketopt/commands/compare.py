"""``bucketopt compare``: sorted, shuffle, bucketed (bucketopt and rules of thumb) and packing,
side by side on one dataset."""

from __future__ import annotations

from ..errors import BucketoptError
from .common import (
    _int,
    add_lens_args,
    add_output_args,
    add_plan_input,
    add_plan_output,
    add_solver_args,
    check_plot_path,
    finish,
    read_lengths,
    write_plan_output,
)


def add_parser(sub) -> None:
    p = sub.add_parser(
        "compare", help="padding of every batching strategy side by side",
        description="Padding fraction of sorted, shuffled, bucketed (bucketopt's boundaries and "
                    "the rules of thumb) and packed batches: analytic where it exists, and "
                    "simulated epochs.")
    add_lens_args(p)
    p.add_argument("-k", type=_int, metavar="K", help="maximum number of buckets (required "
                                                      "without --plan)")
    add_solver_args(p, k_required=False)  # the defaults every command shares (bucketopt.validate)
    add_plan_input(p, "score this plan: its boundaries are the bucketed row")
    add_plan_output(p, "the plan of the row named by --strategy")
    p.add_argument("--strategy", metavar="NAME",
                   help="with -o: the row whose plan to write: bucketed, bucketed-padding (with "
                        "--profile) or a rule of thumb (" + ", ".join(_rules()) + ")")
    p.add_argument("--seed", type=_int, default=0, metavar="S", help="seed of the simulations")
    p.add_argument("--simulations", type=_int, default=1, metavar="N",
                   help="simulated epochs per strategy (default 1)")
    p.add_argument("--plot", metavar="FILE",
                   help="write padding (and Ktok/s, ETA) per strategy to FILE (.png, .svg or .pdf)")
    p.add_argument("--grad-accum", type=_int, default=1, metavar="A",
                   help="micro-steps per optimizer step, for the step mix gap (default 1)")
    p.add_argument("--no-diversity", dest="diversity", action="store_false",
                   help="skip the step mix gap and epoch churn of sorted, shuffle and bucketed")
    p.add_argument("--sampler", action="store_true",
                   help="add BucketBatchSampler's real batch order (one bucket per micro-step)")
    add_output_args(p)
    p.set_defaults(run=run)


def _rules():
    from ..heuristics import RULES

    return RULES


def plan_strategies(args) -> tuple:
    """The rows whose plan ``--strategy NAME -o`` writes."""
    names = ["bucketed"]
    if args.profile is not None and args.objective != "padding":
        names.append("bucketed-padding")
    return (*names, *_rules())


def check_plan_args(args) -> None:
    """--plan, -o and --strategy: one clear line for a combination that cannot work."""
    if args.plan is None and args.k is None:
        raise BucketoptError("compare needs -k K (the most buckets) or --plan PLAN.json.")
    if args.strategy is not None and args.output is None:
        raise BucketoptError(f"--strategy {args.strategy} names the row whose plan -o writes; "
                             "give -o PLAN.json too.")
    if args.output is None:
        return
    if args.plan is not None:
        raise BucketoptError("-o writes the plan of a row solved from the flags; with --plan "
                             "the bucketed row is that plan already (drop -o or --plan).")
    names = plan_strategies(args)
    if args.strategy is None:
        raise BucketoptError("-o writes the plan of one row: name it with --strategy NAME (one "
                             f"of {', '.join(names)}).")
    if args.strategy not in names:
        raise BucketoptError(f"--strategy {args.strategy!r:.60}: a plan can be written for "
                             f"{', '.join(names)}" + (
                                 "" if args.profile is not None else
                                 " (bucketed-padding needs --profile)") + ".")


def row_solution(args, lengths, comparison, name):
    """The Solution behind row ``name`` of ``comparison``: the very one ``solve`` returned for
    bucketopt's rows (compare solved it), evaluate() of the row's boundaries, scored as ``solve``
    scores them (the comparison's profile, GPUs and epochs), for a rule of thumb."""
    from ..solver import evaluate

    if name in comparison.solutions:
        return comparison.solutions[name]
    common = dict(token_budget=comparison.token_budget, pad=comparison.pad,
                  max_length=args.max_length, overflow=args.overflow)
    if comparison.timing:
        common.update(profile=args.profile, world_size=comparison.timing["world_size"],
                      epochs=comparison.timing["epochs"])
    return evaluate(lengths, comparison.strategies[name]["boundaries"], **common)


def comparison_kwargs(args) -> dict:
    """The compare() keyword arguments given on the command line."""
    return dict(token_budget=args.token_budget, pad=args.pad, seed=args.seed,
                simulations=args.simulations, min_share=args.min_share,
                max_share=args.max_share, align=args.align, min_fill=args.min_fill,
                profile=args.profile,
                world_size=args.gpus, epochs=args.epochs, objective=args.objective,
                grad_accum=args.grad_accum, diversity=args.diversity, sampler=args.sampler,
                max_length=args.max_length, overflow=args.overflow,
                memory=getattr(args, "memory", None),
                gpu_memory=getattr(args, "gpu_memory", None),
                memory_headroom=getattr(args, "memory_headroom", None),
                progress=False if getattr(args, "quiet", False) else None)


def _pct(x) -> str:
    return "-" if x is None else f"{x * 100:.2f}%"


def comparison_table(comparison) -> str:
    from ..show.report import rate_header, table

    headers = ["strategy", "assumes", "boundaries", "padding (analytic)", "padding (simulated)",
               "batches"]
    timed = bool(comparison.timing)
    if timed:
        headers += [rate_header(comparison.timing.get("world_size")), "ETA (days)", "wait"]
    diverse = any("step_mix_gap" in row for row in comparison.strategies.values())
    if diverse:
        headers += ["step mix gap", "epoch churn"]
    rows = []
    for name, row in comparison.strategies.items():
        edges = "-" if row["boundaries"] is None else ",".join(map(str, row["boundaries"]))
        mark = ("=> " if row.get("recommended") else "   ") + name + (
            " +" if row.get("bucketopt") else "")
        rows.append([mark, assumes(row.get("settings")), edges,
                     _pct(row["padding_fraction_analytic"]),
                     _pct(row["padding_fraction_simulated"]), f"{row['batches']:,.0f}"])
        if timed:
            rate, eta = row.get("ktok_per_s"), row.get("eta_days")
            rows[-1] += ["-" if rate is None else f"{rate:.1f}",
                         "-" if eta is None else f"{eta:.2f}", _pct(row.get("wait_fraction"))]
        if diverse:
            gap = row.get("step_mix_gap")
            rows[-1] += ["-" if gap is None else f"{gap:.3f}", _pct(row.get("epoch_churn"))]
    head = (f"k={comparison.k}, token budget {comparison.token_budget:,}, pad={comparison.pad}, "
            f"objective={getattr(comparison, 'objective', 'padding')}, "
            f"{comparison.simulations} simulated epoch(s) per strategy (seed {comparison.seed})"
            "\n+: bucketopt's plans (bucketed: the plan `bucketopt solve` gives for these "
            "flags); =>: the recommended strategy; assumes: padding/objective/rank order/"
            "batch sizes (synced: every rank the same bucket each micro-step, as the sampler "
            "runs; random: batches of all buckets in random order; fixed: floor(T / edge) "
            "samples; greedy: filled up to T)")
    if timed:
        t = comparison.timing
        head += (f"\nprofile {t['profile']}, {t['world_size']} GPU(s), ETA for {t['epochs']} "
                 "epoch(s); each step waits for the slowest rank (wait: the share of GPU time "
                 "spent waiting for it, simulated); Ktok/s and ETA of bucketopt's bucketed "
                 "plans: solve's prediction (synced ranks), of the other rows: their simulated "
                 "epochs")
    planned = comparison.strategies.get("bucketed", {}).get("plan")
    if planned:  # compare --plan: the plan's own figures, as it was scored
        rate = planned.get("ktok_per_s")
        sizes = planned["batch_sizes"]
        head += ("\nbucketed: the plan's boundaries; as planned (batch sizes "
                 f"{'-' if sizes is None else ','.join(map(str, sizes))}, "
                 f"sync_buckets={planned['sync_buckets']}, {planned['world_size']} GPU(s)): "
                 f"padding {_pct(planned['padding_fraction'])}"
                 + ("" if rate is None else f", {rate:.1f} Ktok/s"))
    if getattr(comparison, "simulation_line", ""):  # which figures are simulated, on what
        head += "\n" + comparison.simulation_line
    if diverse:
        row = next(r for r in comparison.strategies.values() if "step_mix_gap" in r)
        head += (f"\nstep mix gap: optimizer steps of {row['diversity_ranks']} rank(s) x "
                 f"{row['grad_accum']} micro-step(s) (--gpus, --grad-accum); epoch churn: "
                 "batches of epoch 1 repeating one of epoch 0")
    out = head + "\n" + table(headers, rows, align="lllrrr" + "rrr" * timed + "rr" * diverse)
    out += packed_table(comparison.strategies, comparison.token_budget)
    mem = getattr(comparison, "memory", None)
    if mem:
        model = mem["model"]
        out += (f"\nmemory: m0 {model['m0']:.4g}, m1 {model['m1']:.4g}, m2 {model['m2']:.4g} "
                f"bytes within {model['headroom']:g} x {model['capacity'] / 2**30:.1f} GB: "
                f"bucketed-memory {mem['ktok_per_s_memory']:.1f} Ktok/s vs "
                f"bucketed-budget-fit {mem['ktok_per_s_budget_fit']:.1f} Ktok/s (token budget "
                f"{mem['budget_fit_token_budget']:,}, the best of "
                f"{len(mem['budgets_searched'])} budgets whose every batch fits): "
                f"x{mem['ratio']:.3f} ({mem['note']})")
    out += "\n" + recommendation_line(comparison)
    return out


def assumes(settings) -> str:
    """A row's settings in a few characters: pad/objective/rank order/batch sizes."""
    if not settings:
        return "-"
    order = {True: "synced", False: "random", "step": "step", None: "-"}[
        settings.get("sync_buckets")]
    parts = [settings.get("pad") or "no pad", settings.get("objective") or "-", order,
             settings.get("packing") or "-"]
    return "/".join(parts)


def recommendation_line(comparison) -> str:
    """The recommended row and the rule that chose it
    (:func:`bucketopt.training.packed_rows.recommended_row`)."""
    rows = comparison.strategies
    best = getattr(comparison, "recommended", None)
    if best is None:
        return "recommended: none (no row qualifies)"
    row, shuffle = rows[best], rows.get("shuffle", {}).get("step_mix_gap")
    if shuffle is None:
        what = ("the fastest" if comparison.timing else "the least padding") + \
            " of every row but sorted (--no-diversity: no step mix figures)"
    elif comparison.timing:
        what = (f"the fastest with a step mix at least as diverse as the full shuffle "
                f"({row['ktok_per_s']:.1f} Ktok/s, step mix gap {row['step_mix_gap']:.3f} <= "
                f"{shuffle:.3f})")
    else:
        what = (f"the least padding with a step mix at least as diverse as the full shuffle "
                f"({row['padding_fraction'] * 100:.2f}%, step mix gap "
                f"{row['step_mix_gap']:.3f} <= {shuffle:.3f})")
    return f"recommended: {best}, {what}"


def packed_table(strategies, token_budget) -> str:
    """The packed rows' packing: rows against ceil(tokens / T), packing efficiency, attention
    balance across ranks ("" when there is no packed row)."""
    from ..show.report import table

    packed = {name: row for name, row in strategies.items() if row.get("kind") == "packed"}
    if not packed:
        return ""
    rows = [[name, f"{row['batches']:,.0f}", f"{row['rows_lower_bound']:,}",
             _pct(row["packing_efficiency"]), f"{row['attention_balance']:.4f}"]
            for name, row in packed.items()]
    ranks = next(iter(packed.values()))["world_size"]
    return (f"\n\npacked rows: padding-free, at most {token_budget:,} tokens each; packed = greedy "
            "packing of the shuffle (the naive baseline)\npacking efficiency = tokens / (rows x "
            f"{token_budget:,}); attention balance = sum over steps of the mean over the heaviest "
            f"of {ranks} rank(s)' attention (1: even)\n"
            + table(["strategy", "rows", "rows lower bound", "packing efficiency",
                     "attention balance"], rows, align="lrrrr"))


def fastest_diverse_name(comparison):
    """The fastest row whose step mix gap is at most the shuffle's (None without a profile or
    without the diversity figures)."""
    from ..training.packed_rows import fastest_diverse

    return fastest_diverse(comparison.strategies) if comparison.timing else None


def _beyond_simulation(args) -> bool:
    """True when --lens holds more rows than compare simulates one by one."""
    if args.lens is None:
        return False
    from ..data.io import open_source
    from ..training.compare import SIMULATED_SAMPLES

    rows = open_source(args.lens, column=args.column).num_rows
    return rows is not None and rows > SIMULATED_SAMPLES


def run(args) -> int:
    from ..training.compare import compare

    if args.plan_data is None and _pairs_given(args):  # 2-D: NeMo's grids beside bucketopt's
        from .pairs import run_compare_pairs

        lengths, source = read_lengths(args)
        return run_compare_pairs(args, lengths, source)
    check_plan_args(args)
    plan = args.plan_data
    if plan is not None:
        return run_plan(args, plan)
    if args.token_budget is None and args.profile is None:
        raise BucketoptError("compare needs --token-budget T (or a --profile, whose calibrated "
                             "budget is the default): batches are built under it.")
    if args.exact:
        raise BucketoptError("--exact applies to solve, sweep and export -k (compare scores "
                             "strategies; its solves are certified as solve's defaults are).")
    check_plot_path(args)
    # beyond compare's simulated_samples only the histogram is needed: read it, streaming
    lengths, source = read_lengths(args, per_sample=not _beyond_simulation(args))
    comparison = compare(lengths, args.k, **comparison_kwargs(args))
    if args.output is not None:
        write_plan_output(args, row_solution(args, lengths, comparison, args.strategy))
    return _finish(args, source, comparison)


def _pairs_given(args) -> bool:
    from ..pairs.load import is_pair_source

    column = getattr(args, "column", None)
    return (column is not None and "," in column) or (
        column is None and args.lens is not None and is_pair_source(args.lens))


def run_plan(args, plan) -> int:
    """compare --plan: the plan's settings replace the solver flags (given beside it, they are
    refused at the entry); its boundaries are the bucketed row."""
    from ..training.compare import compare

    check_plot_path(args)
    lengths, source = read_lengths(args, per_sample=not _beyond_simulation(args))
    kwargs = dict(seed=args.seed, simulations=args.simulations, grad_accum=args.grad_accum,
                  diversity=args.diversity, sampler=args.sampler,
                  progress=False if getattr(args, "quiet", False) else None)
    comparison = compare(lengths, None, plan=plan,
                         allow_other_lengths=args.allow_other_lengths, **kwargs)
    return _finish(args, source, comparison)


def _finish(args, source, comparison) -> int:
    def figure():
        from ..show.plots import plot_comparison

        title = (f"k={comparison.k}, token budget {comparison.token_budget:,}, "
                 f"pad={comparison.pad}, objective={comparison.objective}")
        if comparison.timing:
            title += (f"; profile {comparison.timing['profile']}, "
                      f"{comparison.timing['world_size']} GPU(s), ETA for "
                      f"{comparison.timing['epochs']} epoch(s)")
        title += ("\nblue: bucketopt's plans (bucketed: what `bucketopt solve` gives for "
                  "these flags); grey: the others; hatched: recommended")
        if comparison.timing:
            title += ("\nKtok/s of bucketopt's bucketed plans: solve's prediction for the "
                      "synced sampler; of the others: their simulated epochs")
        return plot_comparison(comparison.strategies, title=title,
                               world_size=(comparison.timing or {}).get("world_size"))

    payload = comparison.to_dict()  # "recommended" and each row's "settings", "bucketopt"
    if comparison.timing:
        payload["fastest_diverse"] = fastest_diverse_name(comparison)
    return finish(args, source, payload, lambda: comparison_table(comparison),
                  figure=figure)
