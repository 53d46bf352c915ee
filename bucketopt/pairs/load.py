"""Reading pairs of lengths (input, output) from a source.

- a ``.npy`` file holding an ``(n, 2)`` integer array (never unpickled);
- a text file of two integers a line (space, tab or comma between them; ``#`` comments and
  blank lines skipped), standard input included (the CLI spools it to such a file);
- any table the 1-D reader takes (Parquet, Arrow / Feather, a Hugging Face ``save_to_disk``
  folder, shards, CSV with a header) with ``columns=(input_column, output_column)``: each column
  read as :func:`bucketopt.load_lengths` reads one (integer columns, or token lists whose
  lengths are taken); ``columns=(input, output, count)`` reads a 2-D histogram.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

from ..errors import BucketoptError
from .data import check_pairs

_SPLIT = re.compile(r"[,\t ]+")


def check_columns(columns):
    """``columns``: two column names (input, output), or three (input, output, count: a 2-D
    histogram, one row per distinct pair); a tuple/list, or one string "a,b[,count]"."""
    if isinstance(columns, str):
        columns = tuple(c.strip() for c in columns.split(","))
    if not isinstance(columns, (tuple, list)) or len(columns) not in (2, 3) or not all(
            isinstance(c, str) and c for c in columns):
        raise BucketoptError(f"columns must be two column names (input, output), e.g. "
                             f"('prompt_len', 'completion_len'), or three with a count column "
                             f"(a 2-D histogram); got {columns!r}.", param="columns")
    if len(set(columns)) != len(columns):
        raise BucketoptError(f"columns must be different columns; got {list(columns)!r}.",
                             param="columns")
    return tuple(columns)


def _first_row(path: Path):
    try:
        with open(path, "rb") as handle:
            head = handle.read(65536)
    except OSError:
        return None
    if b"\x00" in head:
        return None
    for line in head.decode("utf-8", "replace").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            return _SPLIT.split(line)
    return None


def _kind(source) -> str | None:
    """"npy" for a .npy file of shape (n, 2), "text" for a text file of two integers a line,
    else None (a 1-D source, or a table that needs ``columns``)."""
    if not isinstance(source, (str, os.PathLike)):
        return None
    path = Path(source)
    try:  # an over-long or unreadable path: the 1-D reader says what is wrong with it
        if not path.is_file():
            return None
        with open(path, "rb") as handle:
            magic = handle.read(6)
    except (OSError, ValueError):
        return None
    if magic == b"\x93NUMPY":
        try:
            arr = np.load(path, mmap_mode="r", allow_pickle=False)
        except Exception:  # the 1-D reader says what is wrong with it
            return None
        return "npy" if getattr(arr, "ndim", 0) == 2 and arr.shape[1] == 2 else None
    if magic[:4] in (b"PAR1", b"ARRO") or magic[:2] == b"PK":
        return None
    row = _first_row(path)
    if row is not None and len(row) == 2 and all(re.fullmatch(r"[+-]?\d+", c) for c in row):
        return "text"
    return None


def is_pair_source(source) -> bool:
    """True when ``source`` holds pairs on its own: a .npy of shape (n, 2) or a text file of
    two integers a line."""
    return _kind(source) is not None


def _text_rows(path: Path, number=int, name: str | None = None) -> list:
    """(input, output) of every line of a text file of two numbers a line (``number``: int, or
    float for a unit); ``#`` comments and blank lines skipped."""
    name = name or path.name
    kind = "integers" if number is int else "numbers"
    rows = []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for lineno, line in enumerate(handle, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            cells = _SPLIT.split(line)
            if len(cells) != 2:
                raise BucketoptError(f"{name}: line {lineno} has {len(cells)} values; pairs "
                                     f"are two {kind} a line (input, output).")
            try:
                rows.append((number(cells[0]), number(cells[1])))
            except ValueError:
                raise BucketoptError(f"{name}: line {lineno}: {line[:40]!r} is not two "
                                     f"{kind}.") from None
    if not rows:
        raise BucketoptError(f"{name} is empty: at least one pair is required.")
    return rows


def _read_text(path: Path) -> np.ndarray:
    return check_pairs(_text_rows(path), name=path.name, param=None)


def load_pairs(source, columns=None, *, label: str | None = None):
    """An ``(n, 2)`` int64 array of (input, output) lengths from ``source`` (see the module's
    list); ``columns`` names the two columns of a table, or three (input, output, count) of a
    2-D histogram (as Dask, DuckDB or Spark write one: a group-by on the two lengths), which
    gives a :class:`~bucketopt.pairs.data.PairHistogram` (solve, evaluate and compare take
    it; the sampler needs one pair per sample)."""
    kind = _kind(source)
    name = label or (Path(source).name if isinstance(source, (str, os.PathLike)) else "source")
    if columns is not None:
        columns = check_columns(columns)
    if kind == "npy":
        if columns is not None:
            raise BucketoptError(f"{name}: a .npy file of shape (n, 2) holds the pairs itself; "
                                 "columns= does not apply.", param="columns")
        arr = np.load(Path(source), allow_pickle=False)
        return check_pairs(arr, name=name, param=None)
    if kind == "text" and columns is None:
        return _read_text(Path(source))
    if columns is None:
        raise BucketoptError(f"{name}: give the two length columns of the pairs "
                             "(columns=('input_len', 'output_len') or --column a,b).",
                             param="columns")
    from ..data.io import load_lengths

    cols = [load_lengths(source, column=c) for c in columns]
    if len({c.size for c in cols}) > 1:
        raise BucketoptError(f"{name}: columns {', '.join(map(repr, columns))} hold "
                             f"{', '.join(f'{c.size:,}' for c in cols)} values; pairs need one "
                             "of each per row.", param="columns")
    if len(cols) == 3:  # a 2-D histogram: input, output, count per distinct pair
        from .data import PairHistogram

        return PairHistogram.from_counts(*cols)
    return np.stack(cols, axis=1)


# --- a dimension measured in a unit (seconds), taken at a stated resolution ------------------

def check_resolution(resolution):
    """``resolution``: one positive number (the input dimension's unit per integer step, e.g.
    0.01 for seconds in centiseconds) or a pair (input, output), None for a dimension that is
    already whole numbers; a string "0.01" or "0.01,1" is read too. Returns (r0, r1)."""
    if isinstance(resolution, str):
        parts = [p.strip() for p in resolution.split(",")]
        try:
            resolution = tuple(None if p in ("", "none", "1") and i else float(p)
                               for i, p in enumerate(parts))
        except ValueError:
            resolution = (resolution,)
    if not isinstance(resolution, (tuple, list)):
        resolution = (resolution, None)
    if len(resolution) == 1:
        resolution = (resolution[0], None)
    out = []
    for r in resolution:
        if r is not None and (isinstance(r, bool) or not isinstance(r, (int, float))
                              or not np.isfinite(r) or r <= 0):
            out = None
            break
        out.append(None if r is None else float(r))
    if out is None or len(out) != 2 or out == [None, None]:
        raise BucketoptError(f"resolution must be a positive number (the input dimension's "
                             f"unit per step, e.g. 0.01 for seconds) or a pair (input, output); "
                             f"got {resolution!r}.", param="resolution")
    return tuple(out)


def quantize(values, resolution, name: str):
    """Values in a unit to whole steps of ``resolution``, rounded up (an edge in steps, times
    the resolution, holds every value of its bin); a value within 1e-6 of a step is that step."""
    values = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(values)):
        raise BucketoptError(f"{name} holds a value that is not finite.", param="resolution")
    steps = np.ceil(values / resolution - 1e-6).astype(np.int64)
    if steps.size and steps.min() < 1:
        i = int(np.argmin(steps))
        raise BucketoptError(f"{name}: {values[i]!r} is below one step of the resolution "
                             f"({resolution}); lengths must be positive.", param="resolution")
    return steps


def _float_columns(source, columns, name):
    from ..data.guards import path_kind

    if path_kind(source, name) in ("missing", "other"):  # over-long, unreadable: one line too
        raise BucketoptError(f"{name}: no such file or folder (or not a regular file).",
                             param="source")
    path = Path(source)
    magic = b""
    if path.is_file():
        with open(path, "rb") as handle:
            magic = handle.read(6)
    if magic == b"\x93NUMPY":
        if columns is not None:
            raise BucketoptError(f"{name}: a .npy file of shape (n, 2) holds the pairs itself; "
                                 "columns= does not apply.", param="columns")
        arr = np.load(path, allow_pickle=False)
        if arr.ndim != 2 or arr.shape[1] != 2 or arr.dtype.kind not in "iuf":
            raise BucketoptError(f"{name} must hold numbers of shape (n, 2); got "
                                 f"{arr.dtype} of shape {arr.shape}.", param="source")
        return arr[:, 0], arr[:, 1]
    if columns is None:
        arr = np.asarray(_text_rows(path, float, name))
        return arr[:, 0], arr[:, 1]
    import pyarrow.dataset as ds

    fmt = "parquet" if magic[:4] == b"PAR1" or path.is_dir() else "arrow"
    try:
        table = ds.dataset(str(path), format=fmt).to_table(columns=list(columns[:2]))
    except Exception as exc:  # pyarrow's own errors: missing column, not a table
        raise BucketoptError(f"{name}: could not read columns {list(columns[:2])!r} as "
                             f"{fmt} ({type(exc).__name__}: {str(exc)[:120]}).",
                             param="columns") from None
    return (table.column(0).to_numpy(zero_copy_only=False),
            table.column(1).to_numpy(zero_copy_only=False))


def load_pairs_at(source, columns=None, resolution=0.01, *, label: str | None = None):
    """Pairs whose dimension(s) are measured in a unit (seconds of audio): each read as numbers
    from a .npy of shape (n, 2), a text file of two numbers a line, or two columns of a Parquet
    or Arrow file, and taken in whole steps of ``resolution`` (rounded up). Returns the
    ``(n, 2)`` int64 pairs; multiply the plan's edges by the resolution to read them back in
    the unit (:func:`in_unit`)."""
    name = label or (Path(source).name if isinstance(source, (str, os.PathLike)) else "source")
    res = check_resolution(resolution)
    if columns is not None:
        columns = check_columns(columns)
        if len(columns) == 3:
            raise BucketoptError("a resolution takes the pairs themselves, not a histogram "
                                 "(its counts would be summed after rounding: give the rows).",
                                 param="columns")
    dims = _float_columns(source, columns, name)
    out = []
    for d, (values, r) in enumerate(zip(dims, res)):
        what = f"{name} ({'input' if d == 0 else 'output'} column)"
        out.append(quantize(values, r, what) if r is not None else values)
    return check_pairs(np.stack([np.asarray(v) for v in out], axis=1), name=name, param=None)


def in_unit(bins, resolution):
    """Bins in whole steps back in the unit: each edge times its dimension's resolution
    (rounded to 9 significant digits, so 0.01 x 123 prints 1.23)."""
    res = check_resolution(resolution)
    return [[float(f"{e * r:.9g}") if r is not None else int(e)
             for e, r in zip(b, res)] for b in bins]
