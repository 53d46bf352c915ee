"""load_lengths(): read sequence lengths from where they live.

Supported here: .npy / .npz (never unpickled) and text/CSV with one length per line or a named
column. Every reader ends in :func:`bucketopt.histogram.validate_lengths`, the one choke point.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np

from .errors import BucketoptError
from .histogram import validate_lengths

LENGTH_COLUMN_NAMES = ("seq_len", "length", "lengths", "len", "num_tokens", "n_tokens",
                       "token_count", "seq_length", "sequence_length")


def load_lengths(source, *, column: str | None = None) -> np.ndarray:
    """Read one length per sample and return a validated int64 array.

    Parameters
    ----------
    source : str or path-like
        A ``.npy`` / ``.npz`` file, or a text / CSV file.
    column : str, optional
        Column (CSV header name, or array name inside a ``.npz``) to read.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "lens.npy")
    >>> np.save(path, np.array([5, 7, 9]))
    >>> load_lengths(path).tolist()
    [5, 7, 9]
    """
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
    else:
        raise BucketoptError(
            f"source must be a path; got {type(source).__name__} (pass arrays to solve() directly)."
        )
    if not path.exists():
        raise BucketoptError(f"no such file or directory: {str(path)!r}.")
    if path.is_dir():
        raise BucketoptError(f"{str(path)!r} is a directory; give a file of lengths.")
    suffix = path.suffix.lower()
    if suffix == ".npy":
        return _load_npy(path)
    if suffix == ".npz":
        return _load_npz(path, column)
    return _load_text(path, column)


def _load_npy(path: Path) -> np.ndarray:
    try:
        arr = np.load(path, allow_pickle=False)
    except ValueError as exc:
        if "pickle" in str(exc).lower() or "object" in str(exc).lower():
            raise BucketoptError(
                f"{path.name}: holds Python objects (a pickled array); bucketopt never unpickles "
                "data. Save an integer array instead."
            ) from None
        raise BucketoptError(f"{path.name}: not a valid .npy file ({exc}).") from None
    except (OSError, EOFError) as exc:
        raise BucketoptError(f"{path.name}: could not be read as .npy ({exc}).") from None
    return validate_lengths(arr, name=f"{path.name}")


def _load_npz(path: Path, column: str | None) -> np.ndarray:
    try:
        with np.load(path, allow_pickle=False) as archive:
            names = list(archive.files)
            if column is not None:
                if column not in names:
                    raise BucketoptError(
                        f"{path.name}: no array named {column!r}; it holds {', '.join(names)}."
                    )
                name = column
            elif len(names) == 1:
                name = names[0]
            else:
                preferred = [n for n in names if n in LENGTH_COLUMN_NAMES]
                if len(preferred) != 1:
                    raise BucketoptError(
                        f"{path.name}: holds several arrays ({', '.join(names)}); choose one "
                        "with column=/--column."
                    )
                name = preferred[0]
            arr = archive[name]
    except BucketoptError:
        raise
    except ValueError as exc:
        if "pickle" in str(exc).lower() or "object" in str(exc).lower():
            raise BucketoptError(
                f"{path.name}: holds Python objects (pickled); bucketopt never unpickles data."
            ) from None
        raise BucketoptError(f"{path.name}: not a valid .npz file ({exc}).") from None
    except (OSError, EOFError, zipfile.BadZipFile, KeyError) as exc:
        raise BucketoptError(f"{path.name}: not a valid .npz file ({exc}).") from None
    return validate_lengths(arr, name=f"{path.name}[{name}]")


def _load_text(path: Path, column: str | None) -> np.ndarray:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise BucketoptError(f"{path.name}: could not be read ({exc.strerror}).") from None
    if b"\x00" in raw[:4096]:
        raise BucketoptError(
            f"{path.name}: looks binary, not text; supported: .npy, .npz, text/CSV."
        )
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise BucketoptError(f"{path.name}: is not UTF-8 text.") from None
    lines = [line.strip() for line in text.splitlines()]
    lines = [line for line in lines if line and not line.startswith("#")]
    if not lines:
        raise BucketoptError(f"{path.name}: is empty: at least one length is required.")
    delimiter = "," if "," in lines[0] else ("\t" if "\t" in lines[0] else None)
    first = _split(lines[0], delimiter)
    has_header = not all(_is_number(cell) for cell in first)
    rows = lines[1:] if has_header else lines
    width = len(first)
    if has_header:
        header = [h.strip().strip('"') for h in first]
        if column is not None:
            if column not in header:
                raise BucketoptError(
                    f"{path.name}: no column {column!r}; columns are {', '.join(header)}."
                )
            col = header.index(column)
        elif width == 1:
            col = 0
        else:
            preferred = [i for i, h in enumerate(header) if h.lower() in LENGTH_COLUMN_NAMES]
            if len(preferred) != 1:
                raise BucketoptError(
                    f"{path.name}: several columns ({', '.join(header)}); choose one with "
                    "column=/--column."
                )
            col = preferred[0]
        name = f"{path.name}[{header[col]}]"
    else:
        if column is not None and width > 1:
            raise BucketoptError(f"{path.name}: has no header, so column={column!r} is unknown.")
        if width > 1:
            raise BucketoptError(
                f"{path.name}: {width} values per line and no header; give one length per line "
                "or a header row and column=/--column."
            )
        col = 0
        name = path.name
    values = []
    for lineno, line in enumerate(rows, start=2 if has_header else 1):
        cells = _split(line, delimiter)
        if len(cells) != width:
            raise BucketoptError(
                f"{path.name}: line {lineno} has {len(cells)} fields, expected {width}."
            )
        cell = cells[col].strip().strip('"')
        if not _is_number(cell):
            raise BucketoptError(f"{path.name}: line {lineno}: {cell!r} is not a number.")
        values.append(cell)
    try:
        arr = np.array(values, dtype=np.int64)
    except (ValueError, OverflowError):
        arr = np.array(values, dtype=np.float64)
    return validate_lengths(arr, name=name)


def _split(line: str, delimiter):
    return line.split(delimiter) if delimiter else [line]


def _is_number(cell: str) -> bool:
    try:
        float(cell.strip().strip('"'))
    except ValueError:
        return False
    return True
