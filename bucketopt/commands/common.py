"""Arguments and helpers shared by the subcommands."""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import BucketoptError


def add_lens_args(parser, *, required: bool = False) -> None:
    parser.add_argument("--lens", metavar="PATH", required=required,
                        help="lengths: .npy/.npz, text/CSV, Parquet, Arrow/Feather, a Hugging Face "
                             "save_to_disk dir, a dir or glob of shards, or a length,count "
                             "histogram; default: the embedded example")
    parser.add_argument("--column", metavar="NAME", help="column holding the lengths")
    parser.add_argument("--quiet", "-q", action="store_true", help="no notes on stderr")


def add_solver_args(parser, *, k_required: bool = True) -> None:
    if k_required:
        parser.add_argument("-k", type=_int, required=True, metavar="K",
                            help="maximum number of buckets")
    parser.add_argument("--token-budget", type=_int, metavar="T",
                        help="most padded tokens per micro-batch (gives batch sizes)")
    parser.add_argument("--pad", choices=("edge", "batch"), default="edge",
                        help="edge: pad to the bucket edge; batch: pad to each batch's longest")
    parser.add_argument("--objective", choices=("padding", "time"), default="padding")
    parser.add_argument("--min-share", type=_float, default=0.0, metavar="F",
                        help="least fraction of samples per bucket")
    parser.add_argument("--max-share", type=_float, default=1.0, metavar="F",
                        help="most fraction of samples per bucket")
    parser.add_argument("--align", type=_int, default=1, metavar="A",
                        help="edges are multiples of A")
    parser.add_argument("--profile", metavar="NAME|FILE", help="hardware profile (Ktok/s, ETA)")
    parser.add_argument("--gpus", type=_count, default=None, metavar="G",
                        help="data-parallel GPUs (default: the profile's)")
    parser.add_argument("--epochs", type=_count, default=1, metavar="E",
                        help="epochs for the ETA")


def add_output_args(parser) -> None:
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer; got {text!r}") from None


def _count(text: str) -> int:
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1; got {value}")
    return value


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number; got {text!r}") from None


def note(args, message: str) -> None:
    """A line for people on stderr (silent with --quiet)."""
    if not getattr(args, "quiet", False):
        print(message, file=sys.stderr)


def read_lengths(args, *, per_sample: bool = False):
    """Lengths (or a Histogram) from --lens/--column, or the embedded example; and a label.

    Parquet / Arrow / Hugging Face / directory / glob sources and histogram tables are folded,
    streaming, into a Histogram (memory does not grow with the row count); .npy/.npz/text give
    the array. ``per_sample=True`` always gives one length per sample, in file order.
    """
    if args.lens is None:
        if args.column is not None:
            raise BucketoptError("--column needs --lens.")
        from ..datasets import seed_like

        note(args, "no --lens given: using the embedded example bucketopt.datasets.seed_like() "
                   "(902,087 lengths reconstructed from the published distribution).")
        return seed_like(), "embedded example (seed_like)"
    from ..io import open_source

    source = open_source(args.lens, column=args.column)
    if len(source.schema) > 1 or source.column.kind != "integer" or source.note:
        note(args, "reading " + source.describe())
    if per_sample:
        return source.lengths(), str(args.lens)
    if source.format in ("npy", "npz", "text") and source.column.kind != "histogram":
        return source.lengths(), str(args.lens)
    progress = False if getattr(args, "quiet", False) else None
    return source.histogram(progress=progress), str(args.lens)


def emit_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=2, allow_nan=False)
    sys.stdout.write("\n")


def check_plot_path(args) -> None:
    """Refuse a bad --plot path before any work is done, not after."""
    if getattr(args, "plot", None):
        from ..plots import check_figure_path

        check_figure_path(args.plot)


def finish(args, source: str, data: dict, table, *, figure=None) -> int:
    """The common ending of a command: save ``figure()`` to --plot (if asked), then print the
    result as one JSON object (--json) or as ``table()`` for people. Returns the exit code 0."""
    if getattr(args, "plot", None) and figure is not None:
        from ..plots import save_figure

        save_figure(figure(), args.plot)
        note(args, f"wrote {args.plot}")
    if args.json:
        emit_json({"source": source, **data})
    else:
        print(f"source: {source}")
        print(table())
    return 0
