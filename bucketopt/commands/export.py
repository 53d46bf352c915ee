"""``bucketopt export``: boundaries as JSON for the sampler, Lhotse, NeMo or tf.data."""

from __future__ import annotations

import json
import sys

from ..errors import BucketoptError
from .common import _int, add_lens_args, add_plan_input, add_solver_args, note, read_lengths


def add_parser(sub) -> None:
    p = sub.add_parser(
        "export", help="boundaries in the form another tool takes",
        description="Solve (or take --boundaries) and write the boundaries in the form the "
                    "sampler, Lhotse, NeMo or tf.data takes, as one JSON object.")
    add_lens_args(p)
    p.add_argument("-k", type=_int, metavar="K", help="maximum number of buckets (solve)")
    p.add_argument("--boundaries", metavar="B1,B2,...",
                   help="export these inclusive upper edges instead of solving")
    add_solver_args(p, k_required=False)
    add_plan_input(p, "export this plan's boundaries and batch sizes (no solve; with --lens, "
                      "the lengths' fingerprint is checked against it)")
    p.add_argument("--format", "-f", dest="fmt", required=True,
                   choices=("sampler", "lhotse", "nemo", "tf"),
                   help="sampler: bucketopt's BucketBatchSampler; lhotse: DynamicBucketingSampler "
                        "duration_bins; nemo: bucket_duration_bins + bucket_batch_size; tf: "
                        "bucket_by_sequence_length arguments")
    p.add_argument("--pad-to-bucket-boundary", action="store_true",
                   help="tf only: boundaries for pad_to_bucket_boundary=True (static shapes)")
    p.add_argument("--lhotse-version", metavar="V",
                   help="lhotse and nemo only: the Lhotse release the bins are for (1.27 and "
                        "later: inclusive edges; 1.26 and older: edges + 1); default: the "
                        "installed Lhotse's, else 1.27 and later")
    p.add_argument("--grid", metavar="K1xK2",
                   help="pairs: at most K1 input buckets of at most K2 output sub-buckets")
    p.add_argument("--max-tps", action="store_true",
                   help="nemo on pairs: add max_tps=[...], each bin's largest output/input "
                        "ratio (NeMo's filter then drops no sample)")
    p.add_argument("--output", "-o", metavar="FILE", help="write the JSON here (default: stdout)")
    p.set_defaults(run=run)


def parse_boundaries(text: str) -> list[int]:
    try:
        return [int(part) for part in text.replace(" ", "").split(",") if part]
    except ValueError:
        raise BucketoptError(
            f"--boundaries must be comma-separated integers like 512,1024,8191; got {text!r}."
        ) from None


def run(args) -> int:
    from ..solver import evaluate, solve
    from .solve import solver_kwargs

    if args.plan is None and args.grid is not None and args.k is None \
            and args.boundaries is None:
        return _write_pairs(args, read_lengths(args)[0], solver_kwargs(args))
    if args.plan is None and (args.k is None) == (args.boundaries is None):
        raise BucketoptError("give exactly one of -k K (solve), --boundaries B1,B2,... (export "
                             "given edges) or --plan PLAN.json.")
    if args.pad_to_bucket_boundary and args.fmt != "tf":
        raise BucketoptError("--pad-to-bucket-boundary applies to --format tf only.")
    if args.lhotse_version is not None and args.fmt not in ("lhotse", "nemo"):
        raise BucketoptError("--lhotse-version applies to --format lhotse or nemo only.")
    options = {"pad_to_bucket_boundary": True} if args.pad_to_bucket_boundary else {}
    if args.fmt in ("lhotse", "nemo"):
        from ..show.export import lhotse_release as _lhotse_release

        if args.lhotse_version is not None:
            try:
                _lhotse_release(args.lhotse_version)
            except BucketoptError:
                raise BucketoptError("--lhotse-version must be a version like 1.33.0; got "
                                     f"{args.lhotse_version!r}.") from None
        options["lhotse_version"] = args.lhotse_version
    if args.plan is not None:  # no solve: the plan's boundaries and batch sizes
        from ..plan import check_lengths
        from ..solution import solution_from_plan

        if args.lens is not None:  # the lengths are checked against the plan's fingerprint
            lengths, _source = read_lengths(args)
            check_lengths(args.plan_data, lengths,
                          allow_other_lengths=args.allow_other_lengths)
        elif args.column is not None:
            raise BucketoptError("--column needs --lens.")
        solution = solution_from_plan(args.plan_data)
        return _write(args, solution, options)
    lengths, _source = read_lengths(args)
    kwargs = solver_kwargs(args)
    from ..pairs.data import is_pairs

    if is_pairs(lengths) or args.grid is not None:  # 2-D bins: NeMo's lines
        return _write_pairs(args, lengths, kwargs)
    if args.max_tps:
        raise BucketoptError("--max-tps applies to pairs (2-D bins) with --format nemo.")
    if args.boundaries is not None:
        if kwargs.pop("exact", False):
            raise BucketoptError("--exact applies to -k (an optimum to prove), not to "
                                 "--boundaries.")
        for key in ("objective", "min_share", "max_share", "align", "min_fill"):
            kwargs.pop(key)
        solution = evaluate(lengths, parse_boundaries(args.boundaries), **kwargs)
    else:
        solution = solve(lengths, args.k, **kwargs)
    return _write(args, solution, options)


def _write_pairs(args, lengths, kwargs) -> int:
    """``export --format nemo`` of a 2-D plan: the lines NeMo's dataloader config reads."""
    from ..pairs.nemo import nemo_lines, to_nemo_pairs
    from ..solver import solve

    if args.fmt != "nemo":
        raise BucketoptError(f"--format {args.fmt} takes 1-D boundaries; 2-D bins (pairs) export "
                             "to --format nemo.")
    if args.boundaries is not None:
        raise BucketoptError("--boundaries gives 1-D edges; pairs are solved with -k or --grid.")
    if args.lhotse_version is not None:
        raise BucketoptError("--lhotse-version applies to 1-D bins; NeMo selects 2-D bins "
                             "itself (find_smallest_bucket).")
    if args.k is None and args.grid is None:
        raise BucketoptError("give -k K or --grid K1xK2 for the 2-D bins.")
    if args.max_tps and args.resolution is not None:
        raise BucketoptError("--max-tps with --resolution: the ratios of the rounded lengths "
                             "are not the data's (NeMo's filter would drop samples); export "
                             "without --max-tps.")
    if args.grid is not None:
        kwargs["grid"] = args.grid
    solution = solve(lengths, args.k, **kwargs)
    keys = to_nemo_pairs(solution, pairs=lengths, max_tps=args.max_tps)
    if args.resolution is not None:  # NeMo's bins in the unit (seconds of audio)
        from ..pairs.load import check_resolution, in_unit

        keys["bucket_duration_bins"] = in_unit(keys["bucket_duration_bins"],
                                               check_resolution(args.resolution))
    text = nemo_lines(keys["bucket_duration_bins"], keys["bucket_batch_size"],
                      keys.get("max_tps"))
    if args.output:
        from ..data.output import write_text

        write_text(args.output, text, what="--output")
        note(args, f"wrote nemo export of {len(solution.bins)} 2-D bins to {args.output}")
    else:
        sys.stdout.write(text)
    return 0


def _write(args, solution, options) -> int:
    from ..show.export import export

    text = json.dumps(export(solution, args.fmt, **options), indent=2) + "\n"
    if args.fmt in ("lhotse", "nemo"):
        from ..show.export import lhotse_target

        note(args, lhotse_target(args.lhotse_version))
    if args.output:
        from ..data.output import write_text

        write_text(args.output, text, what="--output")
        note(args, f"wrote {args.fmt} export of boundaries {list(solution.boundaries)} to "
                   f"{args.output}")
    else:
        sys.stdout.write(text)
    return 0
