"""``bucketopt report``: one self-contained HTML page of a plan, to look at and share."""

from __future__ import annotations

import os

from ..data.guards import short
from ..errors import BucketoptError
from .common import (
    _int,
    add_lens_args,
    add_plan_input,
    add_solver_args,
    emit_json,
    note,
    read_lengths,
)

REPORT_SUFFIXES = (".html", ".htm")


def add_parser(sub) -> None:
    p = sub.add_parser(
        "report", help="one self-contained HTML page: distribution, plan, K, strategies, "
                       "certificate, measured against predicted",
        description="Write one HTML file that needs no network to view: the length "
                    "distribution with the bucket edges, the plan's buckets, padding and "
                    "Ktok/s against K, every strategy compared with the recommended one "
                    "marked, the certificate of optimality, and (--verify) measured against "
                    "predicted. Takes what solve and compare take, or a plan.")
    add_lens_args(p)
    p.add_argument("-k", type=_int, metavar="K", help="maximum number of buckets (required "
                                                      "without --plan)")
    add_solver_args(p, k_required=False)
    add_plan_input(p, "report this plan")
    p.add_argument("--verify", dest="verify_json", metavar="VERIFY.json",
                   help="a `bucketopt verify --json` result: measured against predicted")
    p.add_argument("--sweep", dest="sweep_range", metavar="A:B",
                   help="the ks of the padding and Ktok/s against K section (default 1 to "
                        "max(8, 2K), at most 32 unless K is more)")
    p.add_argument("--seed", type=_int, default=0, metavar="S", help="seed of the simulations")
    p.add_argument("--simulations", type=_int, default=1, metavar="N",
                   help="simulated epochs per strategy (default 1)")
    p.add_argument("--output", "-o", metavar="REPORT.html",
                   help="the HTML file to write (.html or .htm); required without --json")
    p.add_argument("--json", action="store_true",
                   help="print the report's data (the JSON the page holds) on stdout")
    p.set_defaults(run=run)


def check_report_args(args) -> None:
    """-o, --json, -k, --plan and --exact: one line for what cannot work, before any read."""
    if args.output is None and not args.json:
        raise BucketoptError("report writes an HTML file: give -o REPORT.html (or --json for "
                             "its data).")
    if args.output is not None and not str(args.output).lower().endswith(REPORT_SUFFIXES):
        raise BucketoptError(f"-o {short(str(args.output))}: a report is an HTML file; give a "
                             "path ending in .html or .htm.")
    if args.output is not None:
        folder = os.path.dirname(os.path.abspath(str(args.output)))
        if not os.path.isdir(folder):
            raise BucketoptError(f"-o {short(str(args.output))}: folder {short(folder)} does "
                                 "not exist.")
    if args.plan is None and args.k is None:
        raise BucketoptError("report needs -k K (the most buckets) or --plan PLAN.json.")
    if args.exact:
        raise BucketoptError("--exact applies to solve, sweep and export -k (a report shows "
                             "compare's plans, certified as solve's defaults are).")
    if args.plan is None and args.token_budget is None and args.profile is None:
        raise BucketoptError("report needs --token-budget T (or a --profile, whose calibrated "
                             "budget is the default): its strategies are batched under it.")


def solver_options(args) -> dict:
    """The solver options given on the command line, as :func:`report` takes them."""
    names = ("token_budget", "pad", "objective", "min_share", "max_share", "align", "min_fill",
             "profile", "epochs", "max_length", "overflow", "memory", "gpu_memory",
             "memory_headroom")
    return {"world_size": args.gpus, **{name: getattr(args, name) for name in names}}


def run(args) -> int:
    from ..show.html_report import report
    from ..show.verify_result import load_verify
    from .compare import _beyond_simulation
    from .sweep import parse_k_range

    check_report_args(args)
    ks = None if args.sweep_range is None else parse_k_range(args.sweep_range)
    verify = None if args.verify_json is None else load_verify(args.verify_json)  # first
    lengths, source = read_lengths(args, per_sample=not _beyond_simulation(args))
    options = dict(ks=ks, verify=verify, seed=args.seed, simulations=args.simulations,
                   source=source, figures=args.output is not None)
    if args.plan_data is not None:
        result = report(lengths, plan=args.plan_data,
                        allow_other_lengths=args.allow_other_lengths, **options)
    else:
        result = report(lengths, args.k, **solver_options(args), **options)
    if args.output is not None:
        result.write(args.output)
        note(args, f"wrote {args.output} ({os.path.getsize(args.output) / 1024:,.0f} KiB)")
    if args.json:
        emit_json(result.data)
    return 0
