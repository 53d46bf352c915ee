"""Read sequence lengths where they live.

Sources: ``.npy`` / ``.npz`` (never unpickled), text / CSV (one length per line or a named column),
Parquet files, Arrow IPC / Feather files, Hugging Face ``save_to_disk`` directories (read with
pyarrow; ``datasets`` is not needed), and directories or globs of shards. A table may also be a
*histogram* (columns ``length,count``): the sufficient statistic any engine can produce with
``SELECT len, count(*) ... GROUP BY len``.

:func:`load_lengths` returns one length per sample; :func:`load_histogram` folds the source batch by
batch into a :class:`~bucketopt.data.histogram.Histogram`, so its memory does not grow with the row
count. :func:`open_source` resolves a source and its column without reading the data, for callers
that want to say which column was used. Every path ends in the one choke point of
:mod:`bucketopt.data.histogram`.
"""

from __future__ import annotations

import glob
import math
import os
import re
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import BucketoptError
from .guards import compressed_kind, path_kind, short
from .guards import name as file_name
from .histogram import EXPAND_LIMIT, Histogram, HistogramBuilder, validate_lengths

LENGTH_COLUMN_NAMES = ("seq_len", "length", "lengths", "len", "num_tokens", "n_tokens",
                       "token_count", "seq_length", "sequence_length")
COUNT_COLUMN_NAMES = ("count", "counts", "count_star()", "frequency", "freq", "n_samples",
                      "num_samples")
TOKEN_LIST_NAMES = ("input_ids", "token_ids", "tokens")
# load_lengths() expands a histogram input to one length per sample only up to EXPAND_LIMIT
# samples (a tiny file of counts must not allocate gigabytes); load_histogram() has no such limit.

_TABLE_FORMATS = ("parquet", "arrow")
# A directory or glob of more files than this is refused (a glob like '/**' must not walk the
# whole file system, nor a message list a million files).
MAX_FILES = 100_000
_GLOB_CHARS = set("*?[")


@dataclass(frozen=True)
class Column:
    """The column a source's lengths come from, and why it was chosen."""

    name: str
    kind: str  # "integer" | "list" | "histogram"
    type: str
    reason: str
    count_column: str | None = None

    def describe(self) -> str:
        if not self.name:
            return f"one length per {'line' if self.type == 'text' else 'element'}"
        if self.kind == "histogram":
            return (f"histogram: lengths in {self.name!r}, counts in {self.count_column!r} "
                    f"({self.reason})")
        what = "list lengths of" if self.kind == "list" else "column"
        return f"{what} {self.name!r} ({self.type}; {self.reason})"


@dataclass(frozen=True)
class Source:
    """A resolved source of lengths: where it is, its schema and the column used.

    Build it with :func:`open_source`; read it with :meth:`histogram` (streaming) or
    :meth:`lengths` (one length per sample).
    """

    label: str
    format: str  # "npy" | "npz" | "text" | "parquet" | "arrow" | "huggingface"
    files: tuple[Path, ...]
    schema: tuple[tuple[str, str], ...]  # (column name, type) pairs
    column: Column
    num_rows: int | None
    note: str | None
    _chunks: Callable[[], Iterator[tuple[np.ndarray, np.ndarray | None]]] = field(repr=False)

    @property
    def _name(self) -> str:
        return f"{self.label}[{self.column.name}]" if self.column.name else self.label

    def describe(self) -> str:
        """One line: which column was used and why (for a note on stderr)."""
        text = f"{self.label}: {self.column.describe()}"
        return text + (f"; {self.note}" if self.note else "")

    def histogram(self, *, progress: bool | None = None) -> Histogram:
        """Fold the source into a histogram, batch by batch."""
        from ..progress import Progress

        builder = HistogramBuilder(name=self._name)
        with Progress(self.label, self.num_rows, enabled=progress) as bar:
            for values, counts, where in self._chunks():
                name, start = where or (None, None)
                if counts is None:
                    builder.add(values, name=name, start=start)
                else:
                    builder.add_counts(values, counts, name=name, start=start)
                bar.update(len(values))
        return builder.result()

    def lengths(self) -> np.ndarray:
        """One validated int64 length per sample, in the source's row order."""
        name = self._name
        if self.column.kind == "histogram":
            hist = self.histogram(progress=False)
            if hist.n > EXPAND_LIMIT:
                raise BucketoptError(
                    f"{self.label}: a histogram of {hist.n:,} samples is too large to expand to "
                    "one length per sample; use load_histogram() (the solver only needs that)."
                )
            return hist.to_lengths()
        parts, rows = [], 0
        whole = None
        if self.format == "npy" and self.num_rows is not None:
            whole = np.empty(self.num_rows, dtype=np.int64)
        for values, _, where in self._chunks():
            chunk_name, start = where or (name, rows)
            values = validate_lengths(values, name=chunk_name, start=start)
            if whole is not None:  # filled in place: no list of parts and no second copy
                whole[rows:rows + values.size] = values
            else:
                parts.append(values)
            rows += len(values)
        if whole is not None:
            return whole
        if not parts:
            raise BucketoptError(f"{name} is empty: at least one length is required.")
        return np.concatenate(parts) if len(parts) > 1 else parts[0]


def load_lengths(source, *, column: str | None = None) -> np.ndarray:
    """Read one length per sample and return a validated int64 array.

    Parameters
    ----------
    source : str or path-like
        A ``.npy`` / ``.npz`` file, a text / CSV file, a Parquet or Arrow IPC / Feather file, a
        Hugging Face ``save_to_disk`` directory, or a directory or glob of Parquet / Arrow shards.
    column : str, optional
        The column to read. An integer column is used as is; a list column (``input_ids``) gives
        the length of each list. Without it: an integer column named like ``seq_len`` / ``length``
        / ``num_tokens``, else the one list column; ambiguity is an error listing the candidates.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "lens.npy")
    >>> np.save(path, np.array([5, 7, 9]))
    >>> load_lengths(path).tolist()
    [5, 7, 9]
    """
    return open_source(source, column=column).lengths()


def load_histogram(source, *, column: str | None = None,
                   progress: bool | None = None) -> Histogram:
    """Read a source's length histogram, streaming: memory does not grow with the row count.

    Takes everything :func:`load_lengths` takes, plus histogram tables (``length,count``).
    ``progress``: ``None`` shows a progress line on stderr for reads over about 2 s when stderr is
    a terminal; ``False`` never; ``True`` always (after the same delay).

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "hist.csv")
    >>> _ = open(path, "w").write("length,count\\n512,3\\n1024,2\\n")
    >>> load_histogram(path).counts.tolist()
    [3, 2]
    """
    return open_source(source, column=column).histogram(progress=progress)


# --- resolving a source -------------------------------------------------------------------------

def open_source(source, *, column: str | None = None) -> Source:
    """Resolve ``source`` (file, directory or glob) and choose its column; reads no rows of
    Parquet / Arrow data (``.npy`` / ``.npz`` / text are read here: they are loaded whole)."""
    if not isinstance(source, (str, os.PathLike)):
        raise BucketoptError(
            f"source must be a path; got {type(source).__name__} (pass arrays to solve() "
            "directly).",
            param="source",
        )
    if column is not None and (not isinstance(column, str) or not column):
        raise BucketoptError(f"column must be a non-empty string; got {column!r}.", param="column")
    text = _source_text(source)
    kind, files = _resolve(text)
    if kind == "huggingface":
        from .arrow_tables import open_huggingface

        return _table_source(open_huggingface(files[0], text), column)
    if kind == "file":
        return _file_source(files[0], column)
    return _multi_source(files, text, column)


def _source_text(source) -> str:
    text = os.fspath(source)
    return os.fsdecode(text) if isinstance(text, bytes) else text


def _resolve(text: str) -> tuple[str, list[Path]]:
    """What a source names, with no data read: ("file", [path]), ("folder", its shards),
    ("glob", its matches) or ("huggingface", [the save_to_disk folder])."""
    kind = path_kind(text, "source")
    path = Path(text)
    if kind == "dir":
        from .arrow_tables import is_huggingface_dir

        _check_listable(text)
        if is_huggingface_dir(path):
            return "huggingface", [path]
        files = _files_under(path)
        if _is_file(path / "dataset_info.json") and len(files) > 1:
            raise BucketoptError(
                f"{short(text)} looks like a Hugging Face save_to_disk folder (it has "
                "dataset_info.json) but lacks its state.json; point at its shards "
                f"({short(os.path.join(text, '*.arrow'))}) or save the dataset again.")
        return "folder", files
    if kind == "file":
        return "file", [path]
    if kind == "other":
        raise BucketoptError(f"{short(text)} is not a regular file (a device or a pipe?).")
    if _GLOB_CHARS & set(text):
        files = _glob_files(text)
        if not files:
            raise BucketoptError(f"no files match {short(text)}.")
        return "glob", files
    raise BucketoptError(f"no such file or directory: {short(text)}.")


def source_files(source) -> list[Path]:
    """The files a read of ``source`` opens, resolved as :func:`open_source` resolves them (a
    file; a folder's shards; a glob's matches; a Hugging Face folder's JSON files and shards),
    with no data read. A source that cannot be resolved gives [] (reading it says why).

    Examples
    --------
    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> for name in ("a.txt", "b.txt", "_SUCCESS"):
    ...     _ = open(os.path.join(folder, name), "w").write("5\\n")
    >>> [p.name for p in source_files(folder)]
    ['a.txt', 'b.txt']
    """
    try:
        kind, files = _resolve(_source_text(source))
        if kind == "huggingface":
            from .arrow_tables import huggingface_files

            return huggingface_files(files[0], _source_text(source))
    except (BucketoptError, OSError, TypeError, ValueError):
        return []
    return files


def reads_new_file(source, path) -> str | None:
    """Whether a file written at ``path`` (one the source does not hold yet) would be read by the
    next read of ``source``: "folder" (it lies in the source's folder of shards, under a name
    the folder's read takes), "glob" (it matches the source's glob), else None."""
    try:
        text = _source_text(source)
        kind = path_kind(text, "source")
        target = os.path.realpath(os.fspath(path))
        if kind == "dir":
            from .arrow_tables import is_huggingface_dir

            if is_huggingface_dir(Path(text)):  # reads the shards its state.json lists only
                return None
            parts = _relative_parts(target, text)
            if parts and not any(p.startswith((".", "_")) for p in parts):
                return "folder"
            return None
        if kind == "missing" and _GLOB_CHARS & set(text):
            return "glob" if _glob_matches(text, target) else None
    except (BucketoptError, OSError, TypeError, ValueError):
        return None
    return None


def _file_id(path) -> tuple[int, int] | None:
    """(device, inode) of the file or folder ``path`` names, links followed; None if unreadable."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def _once(files: list[Path]) -> list[Path]:
    """``files`` in their order with each real file kept once: a link, a hard link or a second
    path through a linked folder to a file already listed is dropped."""
    seen, out = set(), []
    for f in files:
        key = _file_id(f)
        if key is None or key not in seen:
            seen.add(key)
            out.append(f)
    return out


def _glob_files(pattern: str) -> list[Path]:
    """The files ``pattern`` matches, by the rules of ``glob.glob(pattern, recursive=True)``
    (``**`` is zero or more folders; ``*``, ``?``, ``[..]`` and ``**`` skip hidden names unless
    the pattern part starts with a dot; links to folders are followed), except that each folder
    is entered once at each step of the pattern (a link back to a parent is not a loop of reads)
    and each real file is listed once (by device and inode). Sorted; unreadable folders are
    skipped, as glob skips them."""
    names = pattern.split(os.sep)
    fixed = next((i for i, p in enumerate(names) if glob.has_magic(p)), len(names))
    base = os.sep.join(names[:fixed]) or (os.sep if pattern.startswith(os.sep) else "")
    # the names left to match ("a//b" is "a/b"; a final "/" stays: folders only)
    parts = [p for p in names[fixed:-1] if p] + names[-1:] if fixed < len(names) else []
    found: list[Path] = []
    seen: set = set()

    def listing(folder: str) -> list[tuple[str, bool]]:
        try:
            with os.scandir(folder or os.curdir) as it:
                entries = []
                for e in it:
                    try:
                        is_dir = e.is_dir()  # follows links, as glob does
                    except OSError:
                        is_dir = False
                    entries.append((e.name, is_dir))
        except (OSError, ValueError):
            return []
        return sorted(entries)

    def add(path: str) -> None:
        if _is_file(path):
            found.append(Path(path))
            if len(found) > MAX_FILES:
                raise BucketoptError(
                    f"{short(pattern)} matches more than {MAX_FILES:,} files; point at the "
                    "shards of one data set.")

    def walk(folder: str, i: int) -> None:
        key = (_file_id(folder or os.curdir), i)
        if key[0] is None or key in seen:
            return
        seen.add(key)
        if i == len(parts):
            return
        part, last = parts[i], i == len(parts) - 1
        if part == "**":
            if last:  # anything below, files and folders alike
                for name, is_dir in listing(folder):
                    if name.startswith("."):
                        continue
                    path = os.path.join(folder, name)
                    add(path)
                    if is_dir:
                        walk(path, i)
                return
            walk(folder, i + 1)  # zero folders
            for name, is_dir in listing(folder):
                if is_dir and not name.startswith("."):
                    walk(os.path.join(folder, name), i)
            return
        if not glob.has_magic(part):
            path = os.path.join(folder, part)
            if last:
                if part:
                    add(path)
            elif os.path.isdir(path):
                walk(path, i + 1)
            return
        import fnmatch

        for name, is_dir in listing(folder):
            if name.startswith(".") and not part.startswith("."):
                continue
            if not fnmatch.fnmatchcase(name, part):
                continue
            path = os.path.join(folder, name)
            if last:
                add(path)
            elif is_dir:
                walk(path, i + 1)

    try:
        if parts:
            walk(base, 0)
        else:
            add(base)
    except RecursionError:
        raise BucketoptError(f"{short(pattern)} reaches folders nested too deep to walk; point "
                             "at the shards of one data set.") from None
    return _once(sorted(found))


def _relative_parts(target: str, folder: str) -> list[str] | None:
    """The names leading from ``folder`` (links resolved) down to ``target``; None outside."""
    base = os.path.realpath(folder)
    if os.path.commonpath([base, target]) != base or target == base:
        return None
    return os.path.relpath(target, base).split(os.sep)


def _glob_matches(pattern: str, target: str) -> bool:
    """Whether ``glob.iglob(pattern, recursive=True)`` would yield ``target`` (links in the
    pattern's fixed folders resolved): its rules for ``**`` and for hidden names."""
    parts = os.path.abspath(pattern).split(os.sep)
    fixed = next(i for i, p in enumerate(parts) if glob.has_magic(p))
    parts_left = parts[fixed:]
    names = _relative_parts(target, os.sep.join(parts[:fixed]) or os.sep)
    return names is not None and _match_parts(parts_left, names)


def _match_parts(patterns: list[str], names: list[str]) -> bool:
    import fnmatch

    if not patterns:
        return not names
    first, rest = patterns[0], patterns[1:]
    if first == "**":  # zero or more folders (or, last, anything below), none of them hidden
        for i in range(len(names) + 1):
            if i and names[i - 1].startswith("."):
                break
            if _match_parts(rest, names[i:]):
                return True
        return False
    if not names:
        return False
    name = names[0]
    if name.startswith(".") and glob.has_magic(first) and not first.startswith("."):
        return False
    return fnmatch.fnmatchcase(name, first) and _match_parts(rest, names[1:])


def _is_file(text) -> bool:
    try:
        return path_kind(text) == "file"
    except BucketoptError:  # a broken link, a loop or an unreadable entry in a directory or glob
        return False


def sniff_format(path: Path) -> str:
    """'npy', 'npz', 'parquet', 'arrow' or 'text', from the magic bytes, else the suffix."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(8)
    except OSError as exc:
        raise BucketoptError(f"{file_name(path.name)}: could not be read "
                             f"({exc.strerror}).") from None
    from .arrow_tables import IPC_SUFFIXES, PARQUET_SUFFIXES

    if head.startswith(b"\x93NUMPY"):
        return "npy"
    if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
        return "npz"
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.startswith((b"ARROW1", b"\xff\xff\xff\xff", b"FEA1")):
        return "arrow"
    packed = compressed_kind(head)
    if packed is not None:
        raise BucketoptError(
            f"{file_name(path.name)}: is {packed}-compressed; decompress it first (supported: "
            ".npy, .npz, Parquet, Arrow IPC / Feather, text/CSV)."
        )
    suffix = path.suffix.lower()
    if suffix in (".npy", ".npz"):
        what = "a Python pickle" if head[:1] == b"\x80" else "no NumPy header"
        raise BucketoptError(
            f"{file_name(path.name)}: is not a {suffix} file ({what}; a {suffix} file starts with "
            f"{'the NUMPY magic' if suffix == '.npy' else 'a zip header'}). bucketopt never "
            "unpickles data."
        )
    if suffix in PARQUET_SUFFIXES:
        return "parquet"
    if suffix in IPC_SUFFIXES:
        return "arrow"
    return "text"


def _file_source(path: Path, column: str | None) -> Source:
    fmt = sniff_format(path)
    if fmt == "npy":
        return _npy_source(path, column)
    if fmt == "npz":
        return _npz_source(path, column)
    if fmt == "text":
        return _text_source(path, column)
    return _table_source(_open_tables([path], fmt, file_name(path.name)), column)


def _check_listable(folder) -> None:
    """A folder that cannot be listed is one clear line (not an empty folder, not a traceback)."""
    try:
        with os.scandir(folder):
            pass
    except OSError as exc:
        raise BucketoptError(f"folder {short(os.fspath(folder))} cannot be listed "
                             f"({exc.strerror or exc}).") from None


def _walk_error(exc: OSError):
    raise BucketoptError(f"folder {short(os.fsdecode(exc.filename or ''))} cannot be listed "
                         f"({exc.strerror or exc}).")


def _files_under(directory: Path) -> list[Path]:
    files = []
    for root, dirs, names in os.walk(directory, onerror=_walk_error):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        files.extend(Path(root) / n for n in sorted(names)
                     if not n.startswith((".", "_")) and _is_file(Path(root) / n))
        if len(files) > MAX_FILES:
            raise BucketoptError(
                f"{short(str(directory))} holds more than {MAX_FILES:,} files; point at the "
                "shards of one data set.")
    if not files:
        raise BucketoptError(f"{short(str(directory))} is an empty directory: no files to read.")
    return _once(files)


def _multi_source(files: list[Path], label: str, column: str | None) -> Source:
    if len(files) == 1:
        return _file_source(files[0], column)
    formats = {f: sniff_format(f) for f in files}
    kinds = set(formats.values())
    if len(kinds) > 1:
        listing = ", ".join(f"{f.name} ({k})" for f, k in list(formats.items())[:6])
        raise BucketoptError(
            f"{label}: mixes file formats ({listing}); point at files of one format."
        )
    fmt = kinds.pop()
    if fmt in _TABLE_FORMATS:
        return _table_source(_open_tables(files, fmt, label), column)
    parts = [_file_source(f, column) for f in files]
    first = parts[0]

    def chunks():
        for part in parts:
            yield from part._chunks()

    return Source(label, first.format, tuple(files), first.schema, first.column, None,
                  f"{len(files)} files", chunks)


def _open_tables(files: list[Path], fmt: str, label: str):
    from .arrow_tables import open_ipc, open_parquet

    return open_parquet(files, label) if fmt == "parquet" else open_ipc(files, label)


def _table_source(table, column: str | None) -> Source:
    from .arrow_tables import (
        BATCH_ROWS,
        LIST_BATCH_ROWS,
        arrow_errors,
        column_values,
        field_kind,
        nested_list,
    )

    fields = [(f.name, field_kind(f.type), str(f.type), nested_list(f.type))
              for f in table.schema]
    chosen = choose_column(fields, column, table.label)
    names = [chosen.name] + ([chosen.count_column] if chosen.count_column else [])
    kind = "integer" if chosen.kind == "histogram" else chosen.kind

    batch_rows = LIST_BATCH_ROWS if kind == "list" else BATCH_ROWS

    def chunks():
        rows, current = 0, None
        with arrow_errors(table.label, table.what):
            for path, batch in table.file_batches(names, batch_rows=batch_rows):
                if path != current:  # rows count within each file, as messages name the file
                    rows, current = 0, path
                label = table.file_label(path)
                values = column_values(batch.column(chosen.name), kind=kind, label=label,
                                       column=chosen.name, start=rows)
                counts = None
                if chosen.count_column:
                    counts = column_values(batch.column(chosen.count_column), kind="integer",
                                           label=label, column=chosen.count_column,
                                           start=rows)
                    if counts.dtype.kind != "i" and counts.dtype.kind != "u":
                        counts = _whole_counts(counts, label, chosen.count_column, rows)
                rows += len(values)
                where = (f"{label}[{chosen.name}]", rows - len(values))
                yield values, counts, where

    schema = tuple((name, type_) for name, _, type_, _ in fields)
    note = table.note
    if len(table.files) > 1:
        note = f"{len(table.files)} files" + (f", {note}" if note else "")
    return Source(table.label, table.format, table.files, schema, chosen, table.num_rows, note,
                  chunks)


# --- choosing the column ------------------------------------------------------------------------

def choose_column(fields, column: str | None, label: str) -> Column:
    """Pick the lengths column from ``fields`` = [(name, kind, type, nested_list), ...].

    Rules: a given ``column`` must exist and be an integer or list column. Without one: a table of
    exactly two columns, one named like a count (``count``, integer or float), the other integer
    lengths, is a histogram; else an
    integer column named like a length (``seq_len``, ``length``, ``num_tokens``, ...); else the
    token list column (``input_ids`` / ``token_ids`` / ``tokens``, or the only list column); else
    the table's only column. Anything else is an error that lists the candidates.
    """
    by_name = {name: (kind, type_, nested) for name, kind, type_, nested in fields}
    listing = ", ".join(f"{name} ({type_})" for name, _, type_, _ in fields[:20])
    if len(fields) > 20:
        listing += f" and {len(fields) - 20:,} more"
    hist = _histogram_layout(fields)
    if column is not None:
        if column not in by_name:
            raise BucketoptError(f"{label}: no column {column!r}; columns are {listing}.",
                                 param="column")
        kind, type_, nested = by_name[column]
        if hist and column == hist[0]:
            return Column(column, "histogram", type_, "given; the table is a histogram",
                          hist[1])
        _check_usable(label, column, kind, type_, nested)
        return Column(column, kind, type_, "given")
    if hist:
        return Column(hist[0], "histogram", by_name[hist[0]][1],
                      "a table of length,count pairs", hist[1])
    named = [n for n, k, _, _ in fields if k == "integer" and n.lower() in LENGTH_COLUMN_NAMES]
    if len(named) == 1:
        return Column(named[0], "integer", by_name[named[0]][1], "named like a length column")
    if len(named) > 1:
        raise BucketoptError(
            f"{label}: several length columns ({', '.join(named)}); choose one with "
            "column=/--column.",
            param="column",
        )
    lists = [n for n, k, _, nested in fields if k == "list" and not nested]
    tokens = [n for n in lists if n.lower() in TOKEN_LIST_NAMES]
    if len(tokens) == 1:
        reason = "the only list column" if len(lists) == 1 else "the token list column"
        return Column(tokens[0], "list", by_name[tokens[0]][1], reason)
    if len(lists) == 1:
        return Column(lists[0], "list", by_name[lists[0]][1], "the only list column")
    if len(lists) > 1:
        raise BucketoptError(
            f"{label}: no length column and several list columns ({', '.join(lists)}); choose "
            "one with column=/--column.",
            param="column",
        )
    if len(fields) == 1:
        name, kind, type_, nested = fields[0]
        _check_usable(label, name, kind, type_, nested)
        return Column(name, kind, type_, "the only column")
    raise BucketoptError(
        f"{label}: no column named like a length ({', '.join(LENGTH_COLUMN_NAMES[:4])}, ...) and "
        f"no list column; columns are {listing}; choose one with column=/--column.",
        param="column",
    )


def _histogram_layout(fields) -> tuple[str, str] | None:
    """(length column, count column) if the table is a histogram, else None: two columns, one
    named like a count, the lengths integers; the counts integers or floats (a float count
    column must hold whole numbers, checked as it is read: :func:`_whole_counts`)."""
    if len(fields) != 2:
        return None
    (a, a_kind, *_), (b, b_kind, *_) = fields
    a_count, b_count = a.lower() in COUNT_COLUMN_NAMES, b.lower() in COUNT_COLUMN_NAMES
    if a_count == b_count:
        return None
    (length, length_kind), (count, count_kind) = (((b, b_kind), (a, a_kind)) if a_count
                                                  else ((a, a_kind), (b, b_kind)))
    if length_kind != "integer" or count_kind not in ("integer", "float"):
        return None
    return length, count


def _whole_counts(counts: np.ndarray, label: str, column: str, start: int) -> np.ndarray:
    """A chunk of a float count column as int64: whole, finite and >= 0, else one line that
    names the column and the row (never one sample a length)."""
    where = f"{label}: count column {column!r}"
    try:
        arr = np.asarray(counts, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise BucketoptError(f"{where} must hold whole numbers.") from None
    bad = ~np.isfinite(arr) | (arr < 0) | (arr != np.floor(arr)) | (arr >= 2.0 ** 62)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise BucketoptError(f"{where} must hold whole counts >= 0; got {float(arr[i])!r} at row "
                             f"{start + i:,}.")
    return arr.astype(np.int64)


def _check_usable(label: str, name: str, kind: str, type_: str, nested: bool = False) -> None:
    if nested:
        raise BucketoptError(
            f"{label}: column {name!r} has type {type_}, a list of lists (e.g. chat turns): its "
            "length counts the inner lists, not tokens; store the token count per sample (an "
            "integer column) or the flat token list."
        )
    if kind in ("integer", "list"):
        return
    hint = {
        "float": "lengths must be integers; cast the column to an integer type",
        "string": "lengths must be integers (a string's character count is not a token count)",
    }.get(kind, "lengths must be an integer column or a list column")
    raise BucketoptError(f"{label}: column {name!r} has type {type_}; {hint}.")


# --- in-memory formats: .npy, .npz, text / CSV --------------------------------------------------

def _array_source(path, fmt, schema, data, *, column, given=None, reason="the only array",
                  count_column=None, counts=None) -> Source:
    if given is not None:
        raise BucketoptError(f"{path.name}: a .npy file holds one array; column={given!r} "
                             "does not apply.", param="column")
    kind = "histogram" if counts is not None else "integer"
    chosen = Column(column or "", kind, schema[0][1] if schema else "", reason, count_column)

    def chunks():
        yield data, counts, None

    return Source(path.name, fmt, (path,), tuple(schema), chosen, len(data), None, chunks)


def _reason(exc: BaseException) -> str:
    """An exception's text on one short line (numpy quotes whole headers)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def _load_npy(path: Path) -> np.ndarray:
    try:
        # mmap first: a header claiming more data than the file holds fails here, not in malloc.
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except ValueError as exc:
        if "pickle" in str(exc).lower() or "object" in str(exc).lower():
            raise BucketoptError(
                f"{path.name}: holds Python objects (a pickled array); bucketopt never unpickles "
                "data. Save an integer array instead."
            ) from None
        raise BucketoptError(f"{path.name}: not a valid .npy file ({_reason(exc)}).") from None
    except (OSError, EOFError) as exc:
        raise BucketoptError(f"{path.name}: could not be read as .npy ({_reason(exc)}).") \
            from None
    except Exception as exc:  # a mangled header reaches numpy's parser (tokenize errors)
        raise BucketoptError(f"{path.name}: not a valid .npy file (bad header: "
                             f"{type(exc).__name__}).") from None
    if not isinstance(arr, np.ndarray) or arr.dtype.hasobject:
        raise BucketoptError(f"{path.name}: holds Python objects; bucketopt never unpickles "
                             "data. Save an integer array instead.")
    if arr.ndim != 1:
        raise BucketoptError(f"{path.name} must be 1-D; got an array of shape {arr.shape}.")
    if arr.size == 0:
        raise BucketoptError(f"{path.name} is empty: at least one length is required.")
    return arr


# Elements of a memory-mapped .npy validated and counted at a time: a huge file (or a sparse
# one, all zeros) never becomes one array in memory, and a bad value stops the read at once.
NPY_CHUNK = 1 << 22


def _npy_source(path: Path, given: str | None) -> Source:
    if given is not None:
        raise BucketoptError(f"{path.name}: a .npy file holds one array; column={given!r} "
                             "does not apply.", param="column")
    mapped = _load_npy(path)
    # the first chunk is checked now: a file of zeros or of floats fails before any reading
    validate_lengths(np.array(mapped[:NPY_CHUNK]), name=path.name)

    def chunks():
        for start in range(0, mapped.size, NPY_CHUNK):
            yield np.array(mapped[start:start + NPY_CHUNK]), None, (path.name, start)

    chosen = Column("", "integer", "array", "the only array")
    return Source(path.name, "npy", (path,), (("", "array"),), chosen, int(mapped.size), None,
                  chunks)


# An .npz member that inflates more than this many times, to more than NPZ_INFLATE_BYTES, is
# refused before it is read: a few kilobytes of zeros must not become gigabytes (a zip bomb).
NPZ_INFLATE_RATIO = 64
NPZ_INFLATE_BYTES = 256 << 20


def _check_inflation(path: Path, archive: zipfile.ZipFile, name: str) -> None:
    try:
        info = archive.getinfo(name if name.endswith(".npy") else f"{name}.npy")
    except KeyError:
        return
    if (info.file_size > NPZ_INFLATE_BYTES
            and info.file_size > NPZ_INFLATE_RATIO * max(info.compress_size, 1)):
        raise BucketoptError(
            f"{path.name}: array {name!r} inflates from {info.compress_size:,} to "
            f"{info.file_size:,} bytes (over {NPZ_INFLATE_RATIO}x): refused as a zip bomb; save "
            "it uncompressed (np.savez) or as .npy."
        )


def _npz_source(path: Path, column: str | None) -> Source:
    try:
        with np.load(path, allow_pickle=False) as archive:
            names = list(archive.files)
            if not names:
                raise BucketoptError(f"{path.name}: holds no arrays (an empty .npz).")
            if column is not None:
                if column not in names:
                    raise BucketoptError(
                        f"{path.name}: no array named {column!r}; it holds {', '.join(names)}."
                    )
                name, reason = column, "given"
            elif len(names) == 1:
                name, reason = names[0], "the only array"
            else:
                preferred = [n for n in names if n.lower() in LENGTH_COLUMN_NAMES]
                if len(preferred) != 1:
                    raise BucketoptError(
                        f"{path.name}: holds several arrays ({', '.join(names)}); choose one "
                        "with column=/--column.",
                        param="column",
                    )
                name, reason = preferred[0], "named like a length column"
            _check_inflation(path, archive.zip, name)
            arr = archive[name]
    except BucketoptError:
        raise
    except ValueError as exc:
        if "pickle" in str(exc).lower() or "object" in str(exc).lower():
            raise BucketoptError(
                f"{path.name}: holds Python objects (pickled); bucketopt never unpickles data."
            ) from None
        raise BucketoptError(f"{path.name}: not a valid .npz file ({_reason(exc)}).") from None
    except (OSError, EOFError, zipfile.BadZipFile, KeyError, MemoryError) as exc:
        # MemoryError: a member header claiming more data than any machine holds
        raise BucketoptError(f"{path.name}: not a valid .npz file ({_reason(exc)}).") from None
    except Exception as exc:  # a mangled member header (tokenize, zlib errors)
        raise BucketoptError(f"{path.name}: not a valid .npz file ({type(exc).__name__}).") \
            from None
    data = validate_lengths(arr, name=f"{path.name}[{name}]")
    schema = [(n, "array") for n in names]
    return _array_source(path, "npz", schema, data, column=name, reason=reason)


# Rows of a text file converted at a time: memory stays flat in the line count (a 48 MB file of
# 10M lines once took 3.5 GB as Python objects before a bad last line was found).
TEXT_CHUNK_ROWS = 1 << 16


def _text_source(path: Path, column: str | None) -> Source:
    lines = _text_lines(path)
    first = next(lines, None)
    if first is None:
        raise BucketoptError(f"{path.name}: is empty: at least one length is required.")
    delimiter = "," if "," in first[1] else ("\t" if "\t" in first[1] else None)
    first_row = _cells(first[1], delimiter)
    width = len(first_row)
    header = _header(path, first[0], first_row)
    if header is None:
        if column is not None and width > 1:
            raise BucketoptError(f"{path.name}: has no header, so column={column!r} is unknown.",
                                 param="column")
        if width > 1:
            raise BucketoptError(
                f"{path.name}: {width} values per line and no header; give one length "
                "per line or a header row and column=/--column.",
                param="column",
            )
        chosen, wanted = None, [(0, path.name, True)]
    else:
        fields = [(h, "integer", "text", False) for h in header]
        chosen = choose_column(fields, column, path.name)
        wanted = [(header.index(chosen.name), f"{path.name}[{chosen.name}]", True)]
        if chosen.count_column:
            wanted.append((header.index(chosen.count_column),
                           f"{path.name}[{chosen.count_column}]", False))
    fast = _one_column_fast(path, first[0] if header is not None else 0, wanted[0][1]) \
        if delimiter is None else None
    if fast is not None:
        return _array_source(path, "text", [("", "text")] if chosen is None else
                             [(h, "text") for h in header], fast,
                             column=None if chosen is None else chosen.name,
                             reason="one length per line" if chosen is None else chosen.reason)
    parts: list[list[np.ndarray]] = [[] for _ in wanted]
    chunk = [] if header is not None else [(first[0], first_row)]
    rows = 0

    def flush():
        for part, (col, name, positive) in zip(parts, wanted):
            part.append(_text_column(path, chunk, col, name, positive=positive, start=rows))

    for lineno, line in lines:
        row = _cells(line, delimiter)
        if len(row) != width:
            raise BucketoptError(
                f"{path.name}: line {lineno} has {len(row)} fields, expected {width}."
            )
        chunk.append((lineno, row))
        if len(chunk) >= TEXT_CHUNK_ROWS:
            flush()
            rows += len(chunk)
            chunk = []
    if chunk:
        flush()
        rows += len(chunk)
    if rows == 0:
        raise BucketoptError(f"{path.name}: has a header but no rows.")
    arrays = [np.concatenate(part) if len(part) > 1 else part[0] for part in parts]
    if chosen is None:
        return _array_source(path, "text", [("", "text")], arrays[0], column=None,
                             reason="one length per line")
    return _array_source(path, "text", [(h, "text") for h in header], arrays[0],
                         column=chosen.name, reason=chosen.reason,
                         count_column=chosen.count_column,
                         counts=arrays[1] if len(arrays) > 1 else None)


_FAST_BLOCK = 1 << 22  # bytes of a one-column text file parsed at a time by numpy
_FAST_REFUSE = re.compile(rb'[^0-9+\-\s]')  # anything else (floats, quotes, #, 1_000): slow path


def _one_column_fast(path: Path, header_line: int, name: str) -> np.ndarray | None:
    """The values of a one-column text file, read in blocks of bytes: a block of plain integers
    is parsed by numpy (10M lines in seconds, memory flat), any other block line by line (which
    takes floats and comments, or names the bad line). None when a block holds no newline at
    all (old Mac line ends, a giant line): the caller then reads the file line by line."""
    parts, rows, lineno, carry = [], 0, 0, b""
    with open(path, "rb") as handle:
        while True:
            block = handle.read(_FAST_BLOCK)
            if lineno == 0 and carry == b"" and block.startswith(b"\xef\xbb\xbf"):
                block = block[3:]
            data = carry + block
            if not data:
                break
            cut = data.rfind(b"\n") + 1 if block else len(data)
            if cut == 0:
                return None
            data, carry = data[:cut], data[cut:]
            lines = data.split(b"\n")
            if data.endswith(b"\n"):
                lines.pop()
            base = lineno + 1  # the line number of lines[0]
            lineno += len(lines)
            if header_line >= base:  # the header (and what precedes it) is read already
                lines = lines[header_line - base + 1:]
                base = header_line + 1
            if lines:
                values = _fast_block(lines)
                if values is None:
                    values = _slow_block(path, lines, base, name, rows)
                elif values.size:
                    values = validate_lengths(values, name=name, start=rows)
                parts.append(values)
                rows += values.size
            if not block:
                break
    if rows == 0:
        return None
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


def _fast_block(lines: list[bytes]) -> np.ndarray | None:
    """int64 values of lines of plain integers (blank lines skipped), else None."""
    if max(map(len, lines)) > 40 or _FAST_REFUSE.search(b"\n".join(lines)):
        return None
    cells = np.char.strip(np.array(lines))
    try:
        return cells[cells != b""].astype(np.int64)
    except (ValueError, OverflowError):
        return None


def _slow_block(path: Path, lines: list[bytes], base: int, name: str, start: int) -> np.ndarray:
    rows = []
    for i, raw in enumerate(lines):
        try:
            line = raw.decode("utf-8").strip()
        except UnicodeDecodeError:
            raise BucketoptError(f"{path.name}: is not UTF-8 text.") from None
        if line and not line.startswith("#"):
            rows.append((base + i, _cells(line, None)))
    if not rows:
        return np.zeros(0, dtype=np.int64)
    return _text_column(path, rows, 0, name, start=start)


def _text_lines(path: Path):
    """(line number, stripped line) of every line that is not blank or a ``#`` comment, read
    one line at a time."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096)
    except OSError as exc:
        raise BucketoptError(f"{path.name}: could not be read ({exc.strerror}).") from None
    if b"\x00" in head:
        raise BucketoptError(
            f"{path.name}: looks binary, not text; supported: .npy, .npz, Parquet, Arrow IPC / "
            "Feather, text/CSV."
        )
    try:
        with open(path, encoding="utf-8-sig", newline=None) as handle:
            for lineno, line in enumerate(handle, start=1):
                line = line.strip()
                if line and not line.startswith("#"):
                    yield lineno, line
    except UnicodeDecodeError:
        raise BucketoptError(f"{path.name}: is not UTF-8 text.") from None
    except OSError as exc:
        raise BucketoptError(f"{path.name}: could not be read ({exc.strerror}).") from None


def _cells(line: str, delimiter) -> list[str]:
    return [c.strip().strip('"') for c in _split(line, delimiter)]


def _header(path: Path, lineno: int, first_row: list[str]) -> list[str] | None:
    """The first row as a header (column names), or None when it is a row of numbers."""
    if all(_is_number(c) for c in first_row):
        return None
    # A header names columns: every cell a name (seq_len, count, "num tokens"). A first line
    # like 0x10 or 12abc is a bad value, not a header: it must not silently vanish.
    for cell in first_row:
        if not _is_number(cell) and not _HEADER_NAME.fullmatch(cell):
            raise BucketoptError(
                f"{path.name}: line {lineno}: {_cell(cell)} is neither a number nor a column "
                "name (a header's cells are names like seq_len)."
            )
        if _is_number(cell):
            shown = ", ".join(map(_cell, first_row[:6]))
            raise BucketoptError(
                f"{path.name}: line {lineno} mixes numbers and names ({shown}); a header row "
                "holds column names only."
            )
    if len(set(first_row)) != len(first_row):
        seen: set[str] = set()
        twice = next(h for h in first_row if h in seen or seen.add(h))
        raise BucketoptError(f"{path.name}: the header names column {twice!r} twice.")
    return first_row


def _text_column(path, rows, col, name, *, positive=True, start=0) -> np.ndarray:
    cells = [row[col] for _, row in rows]
    joined = "".join(cells)
    try:
        if not joined.isascii() or "_" in joined:  # int() takes 1_000 and non-ASCII digits
            raise ValueError
        arr = np.array(cells, dtype=np.int64)
    except (ValueError, OverflowError):
        for lineno, row in rows:
            cell = row[col]
            if _INTEGER.fullmatch(cell):
                digits = cell.lstrip("+-").lstrip("0")
                if len(digits) <= 18 or (len(digits) == 19
                                         and int(digits) <= np.iinfo(np.int64).max):
                    continue
                raise BucketoptError(
                    f"{path.name}: line {lineno}: an integer of {len(digits):,} digits exceeds "
                    "the int64 range."
                ) from None
            if not _is_number(cell):
                raise BucketoptError(
                    f"{path.name}: line {lineno}: {_cell(cell)} is not a number."
                ) from None
            if not math.isfinite(float(cell)) and not _NON_FINITE.fullmatch(cell):
                raise BucketoptError(
                    f"{path.name}: line {lineno}: {_cell(cell)} exceeds the range of numbers."
                ) from None
        arr = np.array(cells, dtype=np.float64)
    return validate_lengths(arr, name=name, positive=positive, start=start)


def _split(line: str, delimiter):
    return line.split(delimiter) if delimiter else [line]


_HEADER_NAME = re.compile(r"[^\W\d][\w .()*/:-]{0,199}")  # names in any script (länge)
_INTEGER = re.compile(r"[+-]?[0-9]+")
_NON_FINITE = re.compile(r"[+-]?(nan|inf|infinity)", re.IGNORECASE)
_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|[+-]?(nan|inf|infinity)",
                     re.IGNORECASE)


def _cell(cell: str) -> str:
    if len(cell) <= 40:
        return repr(cell)
    return repr(cell[:37] + "...") + f" ({len(cell):,} characters)"


def _is_number(cell: str) -> bool:
    """A decimal number as people write one (not Python's 1_000, 0x10 or non-ASCII digits)."""
    return _NUMBER.fullmatch(cell.strip().strip('"')) is not None
