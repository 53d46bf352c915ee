"""Arrow-readable tables: Parquet files, Arrow IPC / Feather files, Hugging Face ``save_to_disk``
directories, and directories or globs of shards.

Everything here streams: :meth:`ArrowTable.batches` yields record batches of the requested columns
only, one file at a time, so the caller can fold them into a histogram with memory that does not
grow with the row count. Parquet is read with ``ParquetFile.iter_batches`` without pre-buffering
(the lowest peak memory we measured, even for a file written as one giant row group). Arrow IPC
files are memory-mapped, so a list column's offsets are read without touching (or copying) its
values. Every pyarrow failure becomes a one-line :class:`BucketoptError`.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import BucketoptError

PARQUET_SUFFIXES = (".parquet", ".pq", ".parq")
IPC_SUFFIXES = (".arrow", ".arrows", ".feather", ".ipc")
BATCH_ROWS = 1 << 20
# Parquet must decode a list column's values to reach its lengths: fewer rows per batch keep a
# batch of 8k-token rows near 100 MB.
LIST_BATCH_ROWS = 1 << 12


@contextlib.contextmanager
def arrow_errors(label: str, what: str):
    """Turn pyarrow / OS failures inside the block into one clean line."""
    import pyarrow as pa

    try:
        yield
    except BucketoptError:
        raise
    except (pa.ArrowException, OSError, ValueError, EOFError) as exc:
        text = " ".join(str(exc).split()) or type(exc).__name__
        text = re.sub(r"'?/[^\s']*/([^/\s']+)'?", r"\1", text)  # absolute paths -> file names
        if len(text) > 200:
            text = text[:197] + "..."
        raise BucketoptError(f"{label}: could not be read as {what} ({text}).") from None


@dataclass(frozen=True)
class ArrowTable:
    """One logical table stored in one or more files of the same format."""

    label: str
    format: str  # "parquet" | "arrow" | "huggingface"
    files: tuple[Path, ...]
    schema: object  # pyarrow.Schema
    num_rows: int | None
    note: str | None = None  # e.g. which split of a DatasetDict was taken

    @property
    def what(self) -> str:
        return "Parquet" if self.format == "parquet" else "Arrow IPC"

    def batches(self, names: list[str], *, batch_rows: int = BATCH_ROWS) -> Iterator:
        """Record batches holding only the columns ``names``, one file after the other."""
        for _, batch in self.file_batches(names, batch_rows=batch_rows):
            yield batch

    def file_label(self, path: Path) -> str:
        """The label for messages about one file: the table's, plus the file of a shard set."""
        return self.label if len(self.files) == 1 else f"{self.label} (file {path.name})"

    def file_batches(self, names: list[str], *, batch_rows: int = BATCH_ROWS) -> Iterator:
        """(file, record batch) pairs: like :meth:`batches`, naming the file each came from."""
        for path in self.files:
            label = self.file_label(path)
            if self.format == "parquet":
                parts = _parquet_batches(path, names, label, batch_rows)
            else:
                parts = _ipc_batches(path, names, label)
            for batch in parts:
                yield path, batch


def _parquet_file(path: Path):
    import pyarrow.parquet as pq

    # No pre-buffering: a whole column chunk is never held at once, so even a file written as
    # one giant row group streams in BATCH_ROWS pieces (measured: docs/ingest.md).
    return pq.ParquetFile(str(path), pre_buffer=False, buffer_size=1 << 22)


def _parquet_batches(path: Path, names: list[str], label: str, batch_rows: int):
    with arrow_errors(label, "Parquet"):
        parquet = _parquet_file(path)
        _check_columns(parquet.schema_arrow, names, path, label)
        yield from parquet.iter_batches(batch_size=batch_rows, columns=names,
                                        use_threads=False)


def _check_columns(schema, names, path: Path, label: str) -> None:
    missing = [n for n in names if schema.get_field_index(n) < 0]
    if missing:
        raise BucketoptError(
            f"{label}: file {path.name} has no column {missing[0]!r}; it has "
            f"{', '.join(schema.names)}."
        )


def open_parquet(files: list[Path], label: str) -> ArrowTable:
    """Parquet file(s): the schema of the first, the row count of all (from the footers)."""
    schema, num_rows = None, 0
    for path in files:
        with arrow_errors(label if len(files) == 1 else f"{label} (file {path.name})",
                          "Parquet"):
            parquet = _parquet_file(path)
            schema = parquet.schema_arrow if schema is None else schema
            num_rows += parquet.metadata.num_rows
    return ArrowTable(label, "parquet", tuple(files), schema, num_rows)


def open_ipc(files: list[Path], label: str, *, fmt: str = "arrow",
             note: str | None = None) -> ArrowTable:
    import pyarrow as pa

    with arrow_errors(label, "Arrow IPC"), pa.memory_map(str(files[0])) as source:
        if _is_feather_v1(source):
            schema = _feather_v1(files[0]).schema
        else:
            schema = _ipc_reader(source, None).schema
    return ArrowTable(label, fmt, tuple(files), schema, None, note)


def _is_feather_v1(source) -> bool:
    """Feather V1 (the format before Arrow IPC) starts with the magic bytes FEA1."""
    head = source.read(4)
    source.seek(0)
    return head == b"FEA1"


def _feather_v1(path: Path):
    """A Feather V1 file as a memory-mapped table (its columns are not streamed, but mapped:
    reading one column touches only its pages)."""
    import warnings

    import pyarrow.feather as feather

    with warnings.catch_warnings():  # pyarrow deprecates V1; reading it is still right here
        warnings.simplefilter("ignore", DeprecationWarning)
        return feather.read_table(str(path), memory_map=True)


def _ipc_reader(source, options):
    import pyarrow as pa

    head = source.read(6)
    source.seek(0)
    if head == b"ARROW1":
        return pa.ipc.open_file(source, options=options)
    return pa.ipc.open_stream(source, options=options)


def _ipc_batches(path: Path, names: list[str], label: str):
    import pyarrow as pa

    with arrow_errors(label, "Arrow IPC"), pa.memory_map(str(path)) as source:
        if _is_feather_v1(source):
            table = _feather_v1(path)
            _check_columns(table.schema, names, path, label)
            yield from table.select(names).to_batches(max_chunksize=BATCH_ROWS)
            return
        schema = _ipc_reader(source, None).schema
        _check_columns(schema, names, path, label)
        fields = [schema.get_field_index(n) for n in names]
        reader = _ipc_reader(source, pa.ipc.IpcReadOptions(included_fields=fields))
        if isinstance(reader, pa.ipc.RecordBatchFileReader):
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i)
        else:
            yield from reader


def open_huggingface(directory: Path, label: str) -> ArrowTable:
    """A ``datasets`` ``save_to_disk`` directory, read with pyarrow alone.

    A ``DatasetDict`` directory (``dataset_dict.json``) gives its ``train`` split; any other split
    is read by passing its subdirectory (``PATH/test``).
    """
    _, files, note = _huggingface_layout(directory, label)
    return open_ipc(files, label, fmt="huggingface", note=note)


def huggingface_files(directory: Path, label: str) -> list[Path]:
    """Every file a read of a ``save_to_disk`` folder opens: its JSON files (``dataset_dict.json``,
    ``state.json``, ``dataset_info.json``) and the shards ``state.json`` lists; no shard is
    opened. A folder whose layout is broken gives its JSON files."""
    folders = [Path(directory)]
    files = []
    try:
        split, files, _ = _huggingface_layout(Path(directory), label)
        folders.append(split)
    except BucketoptError:
        pass
    return [folder / name for folder in dict.fromkeys(folders)
            for name in ("dataset_dict.json", "state.json", "dataset_info.json")
            if (folder / name).is_file()] + files


def _huggingface_layout(directory: Path, label: str):
    """(the split's folder, its shards, a note or None) of a ``save_to_disk`` folder."""
    note = None
    if (directory / "dataset_dict.json").is_file() and not (directory / "state.json").is_file():
        splits = _read_json(directory / "dataset_dict.json", label).get("splits")
        if not isinstance(splits, list) or not all(isinstance(s, str) for s in splits):
            raise BucketoptError(f"{label}: dataset_dict.json has no list of splits.")
        if "train" not in splits:
            example = f"{label.rstrip('/')}/{splits[0] if splits else 'SPLIT'}"
            raise BucketoptError(
                f"{label}: a DatasetDict with splits {', '.join(splits)} and no 'train'; "
                f"give one split's directory, e.g. {example}."
            )
        note = f"split 'train' of a DatasetDict (splits: {', '.join(splits)})"
        directory = directory / "train"
        if not (directory / "state.json").is_file():
            raise BucketoptError(f"{label}: split directory 'train' has no state.json.")
    state = _read_json(directory / "state.json", label)
    entries = state.get("_data_files")
    if not isinstance(entries, list) or not entries:
        raise BucketoptError(f"{label}: state.json lists no _data_files.")
    files = []
    for entry in entries:
        name = entry.get("filename") if isinstance(entry, dict) else None
        if not isinstance(name, str) or Path(name).name != name:
            raise BucketoptError(f"{label}: state.json has a bad _data_files entry: {entry!r}.")
        path = directory / name
        if not path.is_file():
            raise BucketoptError(f"{label}: shard {name} listed in state.json is missing.")
        files.append(path)
    return directory, files, note


# state.json / dataset_dict.json are kilobytes; a larger one is refused before it is read.
JSON_BYTES = 16 << 20


def _read_json(path: Path, label: str) -> dict:
    from .guards import read_json

    data = read_json(path, f"{label}: {path.name}", limit=JSON_BYTES)
    if not isinstance(data, dict):
        raise BucketoptError(f"{label}: {path.name} is not a JSON object.")
    return data


def is_huggingface_dir(directory: Path) -> bool:
    from .guards import path_kind

    return any(path_kind(directory / name, f"{directory}/{name}") == "file"
               for name in ("state.json", "dataset_dict.json"))


# --- columns ------------------------------------------------------------------------------------

def field_kind(arrow_type) -> str:
    """'integer', 'list', 'float', 'string' or 'other' for an Arrow type."""
    import pyarrow as pa

    t = arrow_type
    if pa.types.is_dictionary(t):  # dictionary-encoded: what its values are
        t = t.value_type
    if pa.types.is_integer(t):
        return "integer"
    if (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)
            or getattr(pa.types, "is_list_view", lambda _: False)(t)
            or getattr(pa.types, "is_large_list_view", lambda _: False)(t)):
        return "list"
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "float"
    if (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
            or pa.types.is_large_binary(t)):
        return "string"
    return "other"


def nested_list(arrow_type) -> bool:
    """True for a list of lists (e.g. chat turns): its length is not a token count."""
    return field_kind(arrow_type) == "list" and field_kind(arrow_type.value_type) == "list"


def _check_offsets(offsets: np.ndarray, values: int, label: str, column: str,
                   start: int) -> None:
    """A list column's offsets must rise and stay within its values buffer: a corrupt file
    otherwise reads as lengths of trillions of tokens (or negative ones)."""
    if offsets.size == 0:
        return
    steps = np.diff(offsets)
    if offsets[0] < 0 or offsets[-1] > values or (steps.size and steps.min() < 0):
        bad = int(np.flatnonzero(steps < 0)[0]) if steps.size and steps.min() < 0 else None
        where = f" (row {start + bad:,})" if bad is not None else ""
        raise BucketoptError(
            f"{label}: column {column!r} is corrupt: its list offsets{where} run outside its "
            f"values ({int(offsets[0]):,}..{int(offsets[-1]):,} over {values:,} values).")


def column_values(array, *, kind: str, label: str, column: str, start: int) -> np.ndarray:
    """One chunk of a column as numpy: integers as they are, lists as their lengths.

    List lengths come from the offsets buffer alone (``offsets[1:] - offsets[:-1]``): the values
    are never read, converted or copied.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if array.null_count:
        first = int(np.flatnonzero(array.is_null().to_numpy(zero_copy_only=False))[0])
        raise BucketoptError(
            f"{label}: column {column!r} has null values (first at row {start + first:,}); "
            "every sample needs a length."
        )
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    if kind == "integer":
        return array.to_numpy(zero_copy_only=False)
    if isinstance(array, (pa.ListArray, pa.LargeListArray)):
        offsets = array.offsets.to_numpy(zero_copy_only=False)
        _check_offsets(offsets, len(array.values), label, column, start)
        return np.diff(offsets).astype(np.int64, copy=False)
    if isinstance(array, pa.FixedSizeListArray):
        return np.full(len(array), array.type.list_size, dtype=np.int64)
    return pc.list_value_length(array).to_numpy(zero_copy_only=False).astype(np.int64)
