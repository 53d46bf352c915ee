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
    if not path.is_file():
        return None
    try:
        with open(path, "rb") as handle:
            magic = handle.read(6)
    except OSError:
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


def _read_text(path: Path) -> np.ndarray:
    rows = []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for lineno, line in enumerate(handle, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            cells = _SPLIT.split(line)
            if len(cells) != 2:
                raise BucketoptError(f"{path.name}: line {lineno} has {len(cells)} values; pairs "
                                     "are two integers a line (input, output).")
            try:
                rows.append((int(cells[0]), int(cells[1])))
            except ValueError:
                raise BucketoptError(f"{path.name}: line {lineno}: {line[:40]!r} is not two "
                                     "integers.") from None
    if not rows:
        raise BucketoptError(f"{path.name} is empty: at least one pair is required.")
    return check_pairs(rows, name=path.name, param=None)


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
