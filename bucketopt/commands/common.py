"""Arguments and helpers shared by the subcommands."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

from ..data.guards import path_kind, path_size, short
from ..env import settle_numba_threads
from ..errors import BucketoptError


def add_lens_args(parser, *, required: bool = False) -> None:
    parser.add_argument("--lens", metavar="PATH", required=required,
                        help="lengths: .npy/.npz, text/CSV, Parquet, Arrow/Feather, a Hugging Face "
                             "save_to_disk dir, a dir or glob of shards, a length,count "
                             "histogram, or - (standard input: one per line, or .npy, .npz, "
                             "Parquet or Arrow bytes); "
                             "default: the embedded example")
    parser.add_argument("--column", metavar="NAME", help="column holding the lengths; A,B: two "
                        "columns of pairs (input, output) for 2-D bins; A,B,COUNT: a 2-D "
                        "histogram")
    parser.add_argument("--resolution", metavar="R[,R]",
                        help="pairs measured in a unit (seconds): take the input (and output) "
                             "in whole steps of R, e.g. 0.01; edges are reported in the unit")
    parser.add_argument("--quiet", "-q", action="store_true", help="no notes on stderr")


def add_solver_args(parser, *, k_required: bool = True) -> None:
    if k_required:
        parser.add_argument("-k", type=_int, required=True, metavar="K",
                            help="maximum number of buckets")
    parser.add_argument("--token-budget", type=_int, metavar="T",
                        help="most padded tokens per micro-batch (gives batch sizes)")
    from ..validate import DEFAULT_PAD

    # one set of defaults for every command (bucketopt.validate): pad edge; objective time with
    # --profile, else padding; the sampler's synced ranks; fixed batch sizes
    parser.add_argument("--pad", choices=("edge", "batch"), default=DEFAULT_PAD,
                        help="edge: pad to the bucket edge; batch: pad to each batch's longest "
                             f"(default {DEFAULT_PAD})")
    from ..objectives import names as objective_names

    parser.add_argument("--objective", choices=objective_names(), default=None,
                        help="what to minimise (default: time with --profile, else padding)")
    parser.add_argument("--min-fill", type=_float, default=0.0, metavar="F",
                        help="padding objective: every bucket's batch holds at least F x the "
                             "token budget (default 0)")
    parser.add_argument("--max-length", type=_count, default=None, metavar="N",
                        help="longest sample kept as it is (longer ones: --overflow)")
    parser.add_argument("--overflow", choices=("truncate", "drop", "split"),
                        default="truncate",
                        help="samples over --max-length: cut to N, left out, or split into "
                             "chunks of N (default truncate)")
    parser.add_argument("--min-share", type=_float, default=0.0, metavar="F",
                        help="least fraction of samples per bucket")
    parser.add_argument("--max-share", type=_float, default=1.0, metavar="F",
                        help="most fraction of samples per bucket")
    parser.add_argument("--align", type=_int, default=1, metavar="A",
                        help="edges are multiples of A")
    parser.add_argument("--profile", metavar="NAME|FILE", help="hardware profile (Ktok/s, ETA)")
    parser.add_argument("--gpus", type=_count, default=None, metavar="G",
                        help="data-parallel GPUs (with --profile; default: the profile's)")
    parser.add_argument("--epochs", type=_count, default=None, metavar="E",
                        help="epochs for the ETA (with --profile; default 1)")
    parser.add_argument("--memory", metavar="PROFILE_OR_JSON",
                        help="memory model: a JSON with m0, m1, m2 (bytes) and capacity, or a "
                             "profile holding a memory fit; each bucket's batch size is then the "
                             "largest whose peak m0 + m1 s b + m2 s b^2 fits")
    parser.add_argument("--gpu-memory", type=_float, default=None, metavar="GB",
                        help="the card's memory in GB (2**30 bytes): the memory model's capacity")
    parser.add_argument("--memory-headroom", type=_float, default=None, metavar="F",
                        help="share of the capacity a batch may fill (default 0.9)")
    parser.add_argument("--exact", action="store_true",
                        help="prove the optimum whatever it costs (the certified DP runs to the "
                             "end; --pad batch padding: instead of its grid search)")


def add_output_args(parser) -> None:
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")


def add_plan_output(parser, what: str) -> None:
    """``-o/--output PLAN.json``: write the plan (Solution.to_plan()) too."""
    parser.add_argument("--output", "-o", metavar="PLAN.json",
                        help=f"also write {what} as a plan file (JSON: boundaries, batch sizes, "
                             "settings, predictions, the lengths' fingerprint), read by compare "
                             "--plan, export --plan and BucketBatchSampler.from_plan")


def add_plan_input(parser, what: str) -> None:
    """``--plan PLAN.json`` and ``--allow-other-lengths``."""
    parser.add_argument("--plan", metavar="PLAN.json",
                        help=f"{what} (written by solve -o); its settings replace the solver "
                             "flags, which are refused beside it")
    parser.add_argument("--allow-other-lengths", action="store_true",
                        help="use --plan with lengths whose fingerprint differs from the plan's "
                             "(e.g. a later shard of the same data)")


# The flags a plan sets: given beside --plan they are refused (the plan carries them).
PLAN_FLAGS = {"k": "-k", "token_budget": "--token-budget", "pad": "--pad",
              "objective": "--objective", "min_fill": "--min-fill",
              "max_length": "--max-length", "overflow": "--overflow",
              "min_share": "--min-share", "max_share": "--max-share", "align": "--align",
              "profile": "--profile", "gpus": "--gpus", "epochs": "--epochs",
              "memory": "--memory", "gpu_memory": "--gpu-memory",
              "memory_headroom": "--memory-headroom", "exact": "--exact",
              "boundaries": "--boundaries", "grid": "--grid"}


# Flags of PLAN_FLAGS a command takes beside --plan: verify predicts with the --profile given.
PLAN_KEEPS = {"verify": ("profile",)}


def check_plan_flags(args) -> None:
    """--plan carries the solver settings: any of them given too is one clear error."""
    given = getattr(args, "given", frozenset())
    kept = PLAN_KEEPS.get(getattr(args, "command", None), ())
    clash = [flag for dest, flag in PLAN_FLAGS.items() if dest in given and dest not in kept]
    if clash:
        raise BucketoptError(f"--plan sets the solver settings; drop {', '.join(clash)} (or "
                             "drop --plan and give the flags).")


def read_plan_arg(args):
    """The validated plan of --plan (None without it)."""
    if getattr(args, "plan", None) is None:
        if getattr(args, "allow_other_lengths", False):
            raise BucketoptError("--allow-other-lengths applies to --plan only.")
        return None
    from ..plan import read_plan

    return read_plan(args.plan)


def write_plan_output(args, solution) -> None:
    """-o/--output: the plan of ``solution``, written atomically; a note on stderr."""
    if getattr(args, "output", None) is None:
        return
    from ..plan import write_plan

    write_plan(solution.to_plan(), args.output)
    note(args, f"wrote {args.output}")


def _int(text: str) -> int:
    try:
        if len(text.strip()) > 30:  # int() of a 5,000-digit flag value is no integer anyone means
            raise ValueError
        if not text.isascii():  # int() takes Arabic-Indic and other digits; people mean ASCII
            raise ValueError
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer; got {_shown(text)}") from None


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 40 else repr(text[:37] + "...")


def _count(text: str) -> int:
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1; got {value}")
    return value


def _float(text: str) -> float:
    try:
        if not text.isascii():
            raise ValueError
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number; got {_shown(text)}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number; got {_shown(text)}")
    return value


def note(args, message: str) -> None:
    """A line for people on stderr (silent with --quiet)."""
    if not getattr(args, "quiet", False):
        print(message, file=sys.stderr)


# The most padded tokens per batch, and the largest alignment, that int64 totals can carry.
_INT_LIMIT = 2**60
# The size past which a --profile file cannot be a profile (they are a few hundred bytes).
_PROFILE_BYTES = 1 << 20


def check_args(args) -> None:
    """Every check that needs no data, before any data is read: a bad -k, budget, share,
    alignment, tolerance, path or profile is reported at once, not after a long read.

    Also settles --gpus / --epochs: they shape the Ktok/s and ETA prediction, so without
    --profile they are refused (``compare`` keeps --gpus: its step mix gap counts ranks).
    """
    def bad(message):
        raise BucketoptError(message)

    settle_numba_threads()  # a bad value: one line (numba would refuse 0 on import)
    for flag, attr in (("--lens", "lens"), ("PATH", "path"), ("--measurements", "measurements"),
                       ("--output", "output"), ("--plot", "plot"), ("--plan", "plan"),
                       ("--column", "column"), ("--verify", "verify_json")):  # given, yet empty
        value = getattr(args, attr, None)
        if value is not None and not str(value).strip():
            bad(f"{flag} is empty: give a "
                f"{'column name' if flag == '--column' else 'file path'}.")
    outputs = output_flags(args)
    for flag, attr in outputs:
        value = getattr(args, attr, None)
        if value is not None and path_kind(value, flag) == "dir":
            bad(f"{flag} {short(value)} is a directory; give a file path.")
        if value is not None and str(value).endswith(("/", os.sep)):
            bad(f"{flag} {short(value)} ends in {os.sep}: it names a folder; give a file path.")
    _check_outputs_not_inputs(args, outputs)  # before any input is read
    k = getattr(args, "k", None)
    if isinstance(k, int) and k < 1:
        bad(f"-k must be an integer >= 1; got {k}.")
    for flag, attr, low, high in (("--token-budget", "token_budget", 1, _INT_LIMIT),
                                  ("--align", "align", 1, _INT_LIMIT),
                                  ("--simulations", "simulations", 1, None),
                                  ("--grad-accum", "grad_accum", 1, None)):
        value = getattr(args, attr, None)
        if value is None:
            continue
        if value < low:
            bad(f"{flag} must be an integer >= {low}; got {value}.")
        if high is not None and value > high:
            bad(f"{flag} must be at most 2**60; got {value}.")
    shares = [getattr(args, a, None) for a in ("min_share", "max_share")]
    for flag, value in zip(("--min-share", "--max-share"), shares):
        if value is not None and not 0.0 <= value <= 1.0:
            bad(f"{flag} must be a number in [0, 1]; got {value}.")
    if None not in shares and shares[0] > shares[1]:
        bad(f"--min-share ({shares[0]}) must not exceed --max-share ({shares[1]}).")
    tolerance = getattr(args, "tolerance", None)
    if tolerance is not None and tolerance < 0:
        bad(f"--tolerance must be a number >= 0; got {tolerance}.")
    if hasattr(args, "epochs") and hasattr(args, "profile"):
        if args.profile is None:
            given = [f for f, a in (("--gpus", "gpus"), ("--epochs", "epochs"))
                     if getattr(args, a) is not None and not (a == "gpus"
                                                              and args.command == "compare")]
            if given:
                bad(f"{' and '.join(given)} need{'s' if len(given) == 1 else ''} --profile: "
                    "they set the GPUs and epochs of the Ktok/s and ETA prediction, which only "
                    "a hardware profile gives.")
        if args.epochs is None:
            args.epochs = 1
    if getattr(args, "profile", None) is not None:
        _check_profile(args.profile)
    if getattr(args, "memory", None) is None:
        for flag, attr in (("--gpu-memory", "gpu_memory"),
                           ("--memory-headroom", "memory_headroom")):
            if getattr(args, attr, None) is not None:
                bad(f"{flag} needs --memory (a memory model: m0, m1, m2 in bytes).")
    else:
        from ..cost.memory import load_memory

        load_memory(args.memory, gpu_memory=args.gpu_memory, headroom=args.memory_headroom)
    for flag, attr in (("--measurements", "measurements"),):  # an input of calibrate only
        value = getattr(args, attr, None) if args.command == "calibrate" else None
        kind = None if value is None else path_kind(value, flag)
        if kind not in (None, "file"):
            bad(f"{flag} {short(value)} "
                f"{'does not exist' if kind == 'missing' else 'is not a regular file'}.")
    if getattr(args, "plan", None) is not None:  # read and validated at the entry
        check_plan_flags(args)
    args.plan_data = read_plan_arg(args)


# Every flag whose value names a file (or a list of files) some command reads, as (flag, the
# parser's dest). A command reads those of them it has, but for the ones it writes (probe writes
# --measurements, calibrate reads it); a new input flag is one more entry here.
INPUT_FLAGS = (("--lens", "lens"), ("--profile", "profile"), ("--memory", "memory"),
               ("--measurements", "measurements"), ("--model", "model"), ("--plan", "plan"),
               ("--verify", "verify_json"))
# Every flag whose value names a file some command writes; a command writes those it has.
OUTPUT_FLAGS = (("--output", "output"), ("--plot", "plot"))
# Input flags that name what a command writes instead.
WRITES_INSTEAD = {"probe": ("--measurements",)}


def output_flags(args) -> list[tuple[str, str]]:
    """(flag, dest) of the files ``args.command`` writes."""
    out = [(f, a) for f, a in OUTPUT_FLAGS if hasattr(args, a)]
    written = WRITES_INSTEAD.get(getattr(args, "command", None), ())
    return out + [(f, a) for f, a in INPUT_FLAGS if f in written and hasattr(args, a)]


def input_flags(args) -> list[tuple[str, str]]:
    """(flag, dest) of the files ``args.command`` reads."""
    written = WRITES_INSTEAD.get(getattr(args, "command", None), ())
    return [(f, a) for f, a in INPUT_FLAGS if f not in written and hasattr(args, a)]


def input_files(flag: str, value) -> list:
    """The files an input flag's value makes the command read, links unresolved: a --lens
    source's files (as its reader lists them), a --model's module or config file, a shipped
    profile's file for a --profile or --memory name, else the path (or paths) given."""
    if value is None:
        return []
    if flag == "--lens":
        from ..data.io import source_files

        return [value, *source_files(value)] if str(value) != "-" else []
    if flag == "--model":
        from ..cost.probe import model_files

        return model_files(value)
    if flag in ("--profile", "--memory") and isinstance(value, str):
        from ..cost.costmodel import available_profiles, profiles_dir

        if value in available_profiles():
            return [profiles_dir() / f"{value}.json"]
    if isinstance(value, (str, bytes, os.PathLike)):
        return [value]
    return list(value)


def _check_outputs_not_inputs(args, outputs) -> None:
    """An output path naming an input (or another output) would destroy what is read; one inside
    a --lens folder (or matching its glob) would be read as a shard next time."""
    from ..data.output import check_not_input, check_not_read_next, same_file

    inputs = [(f, getattr(args, a, None)) for f, a in input_flags(args)]
    files = None
    written = []
    for flag, attr in outputs:
        value = getattr(args, attr, None)
        if value is None:
            continue
        if files is None:  # listed once, and only when something is written
            files = [(f, input_files(f, v)) for f, v in inputs if v is not None]
        check_not_input(value, flag, files)
        for in_flag, source in inputs:
            if in_flag == "--lens":
                check_not_read_next(value, flag, in_flag, source)
        for other, path in written:
            if same_file(value, path) or str(value) == str(path):
                raise BucketoptError(f"{flag} and {other} name the same file {short(str(value))}; "
                                     "give each its own path.")
        written.append((flag, value))


def _check_profile(profile: str) -> None:
    from ..cost.costmodel import available_profiles, load_profile

    if profile in available_profiles():
        return
    kind = path_kind(profile, "--profile")
    if kind == "other":
        raise BucketoptError(f"--profile {short(profile)} is not a regular file (a pipe, a "
                             "socket or a device).")
    if kind != "file":
        names = ", ".join(available_profiles()) or "none"
        raise BucketoptError(f"--profile {short(profile)} is neither a shipped profile ({names}) "
                             "nor a JSON file.")
    if path_size(profile) > _PROFILE_BYTES:
        raise BucketoptError(f"--profile {short(profile)} is over 1 MB: not a profile JSON.")
    load_profile(profile)


def check_against_data(args, data) -> None:
    """Checks that need only the longest length: --align far above it is refused (every edge a
    multiple of A would pad every sample to A or more)."""
    align = getattr(args, "align", None)
    if align is None or align <= 1:
        return
    longest = data.max_length if hasattr(data, "max_length") else int(data.max())
    if align > 2 * longest:
        raise BucketoptError(
            f"--align {align} is more than twice the longest length ({longest:,}): every edge "
            f"must be a multiple of {align}, so every sample would be padded to {align} or more "
            "(over 50% padding); use an --align at most the longest length.")


# --lens - reads standard input; more than this many bytes is refused (2**28 lengths as .npy).
STDIN_LIMIT = 2 << 30
# what standard input is called in every message, note and JSON ``source``
STDIN_NAME = "standard input"
# magic bytes -> the suffix the spooled copy of standard input gets (text otherwise)
_STDIN_MAGIC = ((b"\x93NUMPY", ".npy"), (b"PAR1", ".parquet"), (b"ARROW1", ".arrow"),
                (b"FEA1", ".feather"), (b"\xff\xff\xff\xff", ".arrows"), (b"PK\x03\x04", ".npz"),
                (b"PK\x05\x06", ".npz"))


def stdin_suffix(head: bytes) -> str:
    """The file suffix for standard input starting with ``head``: .npy, .parquet, .arrow,
    .feather, .arrows (Arrow IPC stream), .npz, or .txt (one length per line)."""
    return next((suffix for magic, suffix in _STDIN_MAGIC if head.startswith(magic)), ".txt")


def _spool_file(suffix: str) -> tuple[int, str]:
    """A new file for standard input's copy in the temporary folder (TMPDIR, else Python's
    fallbacks): one line naming TMPDIR when none can take it."""
    import tempfile

    try:
        return tempfile.mkstemp(prefix="bucketopt-stdin-", suffix=suffix)
    except OSError as exc:
        where = os.environ.get("TMPDIR")
        told = f" (TMPDIR is {short(where)})" if where is not None else ""
        raise BucketoptError(
            f"--lens - : standard input cannot be copied to a temporary folder{told}: "
            f"{exc.strerror or exc}; set TMPDIR to a writable folder, or give a file path."
        ) from None


def name_stdin(text: str, spooled) -> str:
    """``text`` with the spooled copy's path (quoted, shortened, bare, or its file name alone)
    said as standard input."""
    if spooled is None:
        return text
    from ..data.guards import short

    full = str(spooled)
    for said in (short(full), repr(full), full, repr(spooled.name), spooled.name):
        text = text.replace(said, STDIN_NAME)
    return text


def spool_stdin_lens(args):
    """``--lens -``: copy standard input (one length per line, or .npy, .npz, Parquet or Arrow
    IPC bytes, told apart by their magic bytes) to a temporary file with the matching suffix that
    every reader opens as it would the file; returns its path, or None when --lens is not ``-``.
    The caller removes and unlists it; meanwhile it is among the temporaries the command line's
    signal endings remove (:func:`bucketopt.data.output.list_temporary`). At most STDIN_LIMIT
    bytes; a terminal is refused (it would wait for typing)."""
    if getattr(args, "lens", None) != "-":
        return None
    from pathlib import Path

    stream = sys.stdin
    if stream is None or stream.closed:
        raise BucketoptError("--lens - reads standard input, which is closed.")
    if stream.isatty():
        raise BucketoptError("--lens - reads lengths from standard input, which is a terminal: "
                             "pipe them in (one per line, or .npy, .npz, Parquet or Arrow "
                             "bytes).")
    source = getattr(stream, "buffer", stream)
    head = b""
    while len(head) < 6:  # enough for every magic; a pipe may hand over fewer bytes at a time
        more = source.read(6 - len(head))
        if not more:
            break
        head += more.encode() if isinstance(more, str) else more
    fd, name = _spool_file(stdin_suffix(head))
    path = Path(name)
    from ..data.output import list_temporary, unlist_temporary

    list_temporary(path)
    total = len(head)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(head)
            while True:
                chunk = source.read(1 << 20)
                if not chunk:
                    break
                chunk = chunk.encode() if isinstance(chunk, str) else chunk
                total += len(chunk)
                if total > STDIN_LIMIT:
                    raise BucketoptError(f"--lens - : standard input holds more than "
                                         f"{STDIN_LIMIT >> 30} GiB; write it to a file (.npy or "
                                         "Parquet) and give its path.")
                out.write(chunk)
        if total == 0:
            raise BucketoptError("--lens - : standard input is empty: pipe in one length per "
                                 "line, or .npy, .npz, Parquet or Arrow bytes.")
    except BaseException:
        path.unlink(missing_ok=True)
        unlist_temporary(path)
        raise
    args.lens_label = STDIN_NAME
    args.lens = str(path)
    return path


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
    from ..pairs.load import is_pair_source

    if getattr(args, "resolution", None) is not None:  # pairs in a unit (seconds)
        from ..pairs.load import load_pairs_at

        label = getattr(args, "lens_label", str(args.lens))
        return load_pairs_at(args.lens, args.column, args.resolution, label=label), label
    if (args.column is not None and "," in args.column) or (
            args.column is None and is_pair_source(args.lens)):  # pairs: (n, 2)
        from ..pairs.load import load_pairs

        label = getattr(args, "lens_label", str(args.lens))
        return load_pairs(args.lens, args.column, label=label), label
    from ..data.io import open_source

    source = open_source(args.lens, column=args.column)
    if getattr(args, "lens_label", None) == STDIN_NAME:  # --lens -: not the spooled copy's name
        import dataclasses

        source = dataclasses.replace(source, label=STDIN_NAME)
    if len(source.schema) > 1 or source.column.kind != "integer" or source.note:
        note(args, "reading " + source.describe())
    if per_sample or (source.format in ("npz", "text")
                      and source.column.kind != "histogram"):
        data = source.lengths()
    else:
        data = source.histogram(progress=False if getattr(args, "quiet", False) else None)
    check_against_data(args, data)
    return data, getattr(args, "lens_label", str(args.lens))


def emit_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=2, allow_nan=False)
    sys.stdout.write("\n")


def check_plot_path(args) -> None:
    """Refuse a bad --plot path before any work is done, not after."""
    if getattr(args, "plot", None):
        from ..show.plots import check_figure_path

        check_figure_path(args.plot)


def finish(args, source: str, data: dict, table, *, figure=None) -> int:
    """The common ending of a command: save ``figure()`` to --plot (if asked), then print the
    result as one JSON object (--json) or as ``table()`` for people. Returns the exit code 0."""
    if getattr(args, "plot", None) and figure is not None:
        from ..show.plots import save_figure

        save_figure(figure(), args.plot)
        note(args, f"wrote {args.plot}")
    if args.json:
        emit_json({"source": source, **data})
    else:
        print(f"source: {source}")
        print(table())
    return 0
