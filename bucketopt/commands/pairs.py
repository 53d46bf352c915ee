"""The command line on pairs of lengths: the end of ``solve`` (a table for people, the JSON, the
plan) and ``compare`` (NeMo's grids beside bucketopt's plans)."""

from __future__ import annotations

from ..errors import BucketoptError


def pair_table(sol) -> str:
    """One row per bin: its edges, samples, batch size and padding."""
    sizes = sol.batch_sizes or [None] * len(sol.bins)
    lines = [f"{'bin':>4} {'input<=':>9} {'output<=':>9} {'samples':>10} {'batch':>7} "
             f"{'padded':>14} {'padding':>8}"]
    for t, ((e0, e1), n, size, real, pad) in enumerate(zip(
            sol.bins, sol.counts, sizes, sol.bucket_real_tokens, sol.bucket_padded_tokens)):
        frac = pad / (real + pad) if real + pad else 0.0
        lines.append(f"{t:>4} {e0:>9,} {e1:>9,} {n:>10,} {'-' if size is None else size:>7} "
                     f"{pad:>14,.0f} {frac:>8.1%}")
    by_dim = sol.extra["padding_fraction_by_dim"]
    lines.append(f"padding: {sol.padding_fraction:.2%} of computed tokens (input {by_dim[0]:.2%}, "
                 f"output {by_dim[1]:.2%}); {len(sol.bins)} bins, "
                 f"{sol.unassigned:,} samples without a bin")
    opt = sol.optimality
    if opt is not None:
        lines.append("optimality: exact" if opt["exact"] else
                     f"optimality: gap {opt['gap']}")
    if sol.ktok_per_s is not None:
        lines.append(f"predicted: {sol.ktok_per_s:,.1f} Ktok/s, "
                     f"{sol.extra['predicted_seconds_per_epoch']:,.1f} s per epoch")
    return "\n".join(lines)


def run_pairs(args, lengths, source, solution) -> int:
    """The end of ``bucketopt solve`` on pairs."""
    from .common import finish, note, write_plan_output

    if getattr(args, "plot", None):
        raise BucketoptError("--plot draws 1-D histograms; it does not take pairs yet.")
    for warning in solution.warnings:
        note(args, "note: " + warning)
    write_plan_output(args, solution)
    data = solution.to_dict()
    table = pair_table(solution)
    if getattr(args, "resolution", None) is not None:  # edges back in the unit
        from ..pairs.load import check_resolution, in_unit

        res = check_resolution(args.resolution)
        data.update(resolution=list(res), bins_in_unit=in_unit(solution.bins, res))
        table += ("\nbins in the unit (edges x resolution " + ",".join(
            "1" if r is None else f"{r:g}" for r in res) + "): " + ", ".join(
            f"[{a:g}, {b:g}]" for a, b in data["bins_in_unit"]))
    return finish(args, source, data, lambda: table)


def run_compare_pairs(args, lengths, source) -> int:
    """``bucketopt compare`` on pairs."""
    from ..pairs.compare import compare_pairs, comparison_table
    from .common import finish

    if getattr(args, "plot", None) or getattr(args, "output", None) is not None:
        raise BucketoptError("compare on pairs writes no --plot or -o plan yet; use solve -o.")
    comp = compare_pairs(lengths, args.k, token_budget=args.token_budget, pad=args.pad,
                         profile=args.profile, world_size=args.gpus,
                         epochs=args.epochs or 1, objective=args.objective)
    return finish(args, source, comp.to_dict(), lambda: comparison_table(comp))
