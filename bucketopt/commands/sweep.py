"""``bucketopt sweep``: the optimum for every k in a range, and the recommended k."""

from __future__ import annotations

import re

from ..errors import BucketoptError
from .common import (
    _count,
    _float,
    add_lens_args,
    add_output_args,
    add_plan_output,
    add_solver_args,
    check_plot_path,
    finish,
    note,
    read_lengths,
    write_plan_output,
)


def add_parser(sub) -> None:
    p = sub.add_parser(
        "sweep", help="padding (and Ktok/s, ETA) for every k, and the recommended k",
        description="Solve for every k in a range from one DP run and recommend the smallest k "
                    "from which one more bucket buys at most a tolerance.")
    add_lens_args(p)
    p.add_argument("-k", dest="k_range", required=True, metavar="A:B",
                   help="range of k, inclusive (e.g. 1:32); a single K means 1:K")
    add_solver_args(p, k_required=False)
    p.add_argument("--tolerance", type=_float, default=0.01, metavar="F",
                   help="recommend the smallest k from which one more bucket buys at most F: "
                        "padding fraction saved, absolute (0.01 = 1 percentage point), or Ktok/s "
                        "gained, relative, with --profile (0.01 = 1%%); default 0.01")
    p.add_argument("--plot", metavar="FILE", help="write padding (and Ktok/s) vs K to FILE "
                                                  "(.png, .svg or .pdf)")
    add_plan_output(p, "the solution of one k (--k K; default: the recommended k)")
    p.add_argument("--k", dest="plan_k", type=_count, metavar="K",
                   help="with -o: write the plan of this k (one of the swept ks)")
    add_output_args(p)
    p.set_defaults(run=run)


def parse_k_range(text: str) -> list[int]:
    """'A:B' -> [A..B] (inclusive); 'K' -> [1..K]. One clear error for anything else."""
    text = str(text).strip()
    m = re.fullmatch(r"(\d+)\s*:\s*(\d+)", text)
    if m:
        lo, hi = int(m.group(1)), int(m.group(2))
    elif re.fullmatch(r"\d+", text):
        lo, hi = 1, int(text)
    else:
        raise BucketoptError(f"-k must be a range A:B of integers like 1:32 (or one K for 1:K); "
                             f"got {text!r}.")
    if lo < 1 or hi < 1:
        raise BucketoptError(f"-k range must start at 1 or more; got {text!r}.")
    if lo > hi:
        raise BucketoptError(f"-k range {text!r} is empty: A must be <= B (e.g. {hi}:{lo}).")
    if hi - lo > 4096:
        raise BucketoptError(f"-k range {text!r} spans more than 4,097 values.")
    return list(range(lo, hi + 1))


def sweep_table(result) -> str:
    from ..show.report import rate_header, table

    has_rate = all(s.ktok_per_s is not None for s in result.solutions)
    has_eta = all(s.eta_days is not None for s in result.solutions)
    headers = ["k", "buckets", "padding"]
    if has_rate:
        headers.append(rate_header(result.solutions[0].extra.get("world_size")))
    if has_eta:
        headers.append("ETA days")
    # what is proven of each row, shown when some row is not a proven optimum
    proofs = [_proof(s.optimality) for s in result.solutions]
    has_proof = any(p != "exact" for p in proofs)
    if has_proof:
        headers.append("optimum")
    headers.append("boundaries")
    rows = []
    for k, s, proof in zip(result.ks, result.solutions, proofs):
        edges = ", ".join(map(str, s.boundaries)) if s.bins is None else \
            " ".join(f"{a}x{b}" for a, b in s.bins)  # 2-D: bins as input x output edges
        row = [f"{k}{'*' if k == result.recommended_k else ' '}",
               str(len(s.boundaries if s.bins is None else s.bins)),
               f"{100 * s.padding_fraction:.2f}%"]
        if has_rate:
            row.append(f"{s.ktok_per_s:.1f}")
        if has_eta:
            row.append(f"{s.eta_days:.2f}")
        if has_proof:
            row.append(proof)
        row.append(edges if len(edges) <= 60 else edges[:57] + "...")
        rows.append(row)
    align = "rrr" + "r" * (has_rate + has_eta + has_proof) + "l"
    return table(headers, rows, align)


def _proof(optimality) -> str:
    """'exact', 'gap 2.3e-04' (certified within that of the optimum) or 'no bound'."""
    if optimality is None:
        return "no bound"
    if optimality["exact"]:
        return "exact"
    return "no bound" if optimality["gap"] is None else f"gap {optimality['gap']:.1e}"


def run(args) -> int:
    from ..solver import sweep
    from .solve import solver_kwargs

    ks = parse_k_range(args.k_range)
    if args.plan_k is not None:
        if args.output is None:
            raise BucketoptError(f"--k {args.plan_k} picks the k whose plan -o writes; give "
                                 "-o PLAN.json too.")
        if args.plan_k not in ks:
            raise BucketoptError(f"--k {args.plan_k} is not one of the swept ks (-k "
                                 f"{args.k_range}: {ks[0]} to {ks[-1]}).")
    check_plot_path(args)
    lengths, source = read_lengths(args)
    result = sweep(lengths, ks, tolerance=args.tolerance, **solver_kwargs(args))
    if result.range_too_short:
        note(args, f"note: the range is too short to recommend a k. {result.reason}")
    if args.output is not None:
        k = result.recommended_k if args.plan_k is None else args.plan_k
        if k not in result.ks:
            raise BucketoptError(f"--k {k}: the constraints leave no feasible solution with at "
                                 f"most {k} buckets (feasible: {', '.join(map(str, result.ks))}).")
        write_plan_output(args, result[k])

    def figure():
        from ..show.plots import plot_sweep

        return plot_sweep(result, lengths, profile=args.profile, world_size=args.gpus,
                          epochs=args.epochs)

    def table():
        return (f"{sweep_table(result)}\n"
                f"recommended: k={result.recommended_k} (* above). {result.reason}")

    return finish(args, source, result.to_dict(), table, figure=figure)
