"""``bucketopt solve``: the optimal boundaries and their statistics."""

from __future__ import annotations

from ..errors import BucketoptError
from .common import (
    _int,
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
    p = sub.add_parser("solve", help="optimal bucket boundaries",
                       description="Exact optimal bucket boundaries for a length distribution.")
    add_lens_args(p)
    p.add_argument("-k", type=_int, metavar="K",
                   help="maximum number of buckets (with pairs: of 2-D bins in total)")
    add_solver_args(p, k_required=False)
    p.add_argument("--grid", metavar="K1xK2",
                   help="pairs (--column a,b or an (n, 2) source): at most K1 input buckets "
                        "with at most K2 output sub-buckets each, instead of -k bins in total")
    p.add_argument("--plot", metavar="FILE",
                   help="write the length histogram with the edges and batch sizes to FILE "
                        "(.png, .svg or .pdf)")
    add_plan_output(p, "the solution")
    add_output_args(p)
    p.set_defaults(run=run)


def solver_kwargs(args) -> dict:
    """The solve()/sweep() keyword arguments given on the command line."""
    kwargs = dict(token_budget=args.token_budget, pad=args.pad, objective=args.objective,
                  min_share=args.min_share, max_share=args.max_share, align=args.align,
                  profile=args.profile, epochs=args.epochs or 1, min_fill=args.min_fill,
                  max_length=args.max_length, overflow=args.overflow)
    # Without --gpus the profile's world size applies (world_size=None).
    kwargs["world_size"] = args.gpus
    if getattr(args, "grid", None) is not None:
        kwargs["grid"] = args.grid
    if getattr(args, "exact", False):
        kwargs["exact"] = True
    if getattr(args, "memory", None) is not None:
        kwargs.update(memory=args.memory, gpu_memory=args.gpu_memory,
                      memory_headroom=args.memory_headroom)
    return kwargs


def run(args) -> int:
    from ..show.report import solution_table
    from ..solver import solve

    check_plot_path(args)
    if args.k is None and args.grid is None:
        raise BucketoptError("-k K is required (or --grid K1xK2 with pairs).")
    lengths, source = read_lengths(args)
    from ..pairs.data import is_pairs

    if is_pairs(lengths) or args.grid is not None:
        from .pairs import run_pairs

        return run_pairs(args, lengths, source, solve(lengths, args.k, **solver_kwargs(args)))
    solution = solve(lengths, args.k, **solver_kwargs(args))
    for warning in solution.warnings:
        note(args, "note: " + warning)
    write_plan_output(args, solution)

    def figure():
        from ..show.plots import plot_histogram

        return plot_histogram(lengths, solution)

    return finish(args, source, solution.to_dict(), lambda: solution_table(solution),
                  figure=figure)
