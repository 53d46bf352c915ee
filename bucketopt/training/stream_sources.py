"""Where a resumed :class:`~bucketopt.training.streaming.StreamBatcher` reads its stream from.

A batcher's state records the stream position (items read so far) and, for each item still in
its buffer, the item's index in the stream and its length. Resuming needs those items again and
the stream from the position on. How a source gives them, best first:

- **random access** (``len(source)`` and ``source[i]``, item ``i`` of the iteration: a list, a
  numpy array, a Hugging Face ``datasets.Dataset``, :class:`ArrowRows` over an Arrow table or a
  Parquet file): the buffered items are read by index and the stream goes on at the position.
  Nothing before it is read again.
- **seek** (a method ``iter_from(start)`` iterating the items from index ``start``; a
  ``datasets.IterableDataset`` through its ``skip(start)``): the stream is read from the first
  buffered item (the oldest still waiting), so only the buffer's span is read again.
- **anything else** (a generator factory, a plain iterable): read again from the start and
  skipped forward to the position, picking up the buffered items on the way. Only their lengths
  are stored, so the source must yield the same items in the same order every time it is
  iterated (as the batcher already requires of every rank).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

from ..errors import BucketoptError
from ..validate import shown

__all__ = ["ArrowRows", "check_source", "open_at", "random_access", "seekable"]


def random_access(source) -> bool:
    """True when ``source[i]`` reads item ``i`` directly (see the module docstring)."""
    if isinstance(source, ArrowRows):
        return True
    if isinstance(source, (Mapping, str, bytes)) or _is_arrow(source):
        return False
    return hasattr(source, "__len__") and hasattr(source, "__getitem__")


def _is_arrow(source) -> bool:
    return type(source).__module__.startswith("pyarrow")


def _hf_iterable(source) -> bool:
    return type(source).__module__.startswith("datasets.") and hasattr(source, "skip") \
        and not hasattr(source, "__getitem__")


def check_source(source):
    """``source``, if a stream can read it (else one clear error)."""
    if _is_arrow(source):
        raise BucketoptError("an Arrow table streams its columns, not its rows: wrap it in "
                             "bucketopt.training.stream_sources.ArrowRows(table).")
    if not hasattr(source, "__iter__") and not random_access(source):
        raise BucketoptError(f"stream must be iterable (or have len() and [i]); got "
                             f"{type(source).__name__}.")
    return source


def open_at(source, start: int):
    """An iterator over ``source``'s items from index ``start`` on: by index, by
    ``iter_from``/``skip``, or by reading and skipping the first ``start`` items."""
    if hasattr(source, "iter_from"):
        return iter(source.iter_from(start))
    if random_access(source):
        return (source[i] for i in range(start, len(source)))
    if start and _hf_iterable(source):
        return iter(source.skip(start))
    return itertools.islice(iter(source), start, None)


def seekable(source) -> bool:
    """True when :func:`open_at` starts at an index without reading the items before it."""
    return hasattr(source, "iter_from") or random_access(source) or _hf_iterable(source)


class ArrowRows:
    """The rows of an Arrow table, record batch, or Parquet / Arrow IPC file as a stream with
    random access: ``len``, ``rows[i]`` (a dict of the row's columns) and ``iter_from(start)``
    (record batches from ``start`` on, zero-copy slices of a memory-mapped file).

    Parameters
    ----------
    source : pyarrow.Table, pyarrow.RecordBatch, str or path
        A ``.parquet`` file is read memory-mapped (``pyarrow.parquet.read_table``), any other
        path as an Arrow IPC (Feather v2) file.
    columns : list of str, optional
        The columns to read (default: all). Keep the rows light: every rank reads every row.
    batch_rows : int
        Rows converted to Python at a time while iterating.

    Examples
    --------
    >>> import pyarrow as pa
    >>> rows = ArrowRows(pa.table({"seq_len": [3, 5, 2]}))
    >>> len(rows), rows[1], [r["seq_len"] for r in rows.iter_from(1)]
    (3, {'seq_len': 5}, [5, 2])
    """

    def __init__(self, source, *, columns=None, batch_rows=8192):
        import pyarrow as pa

        if isinstance(source, pa.RecordBatch):
            source = pa.Table.from_batches([source])
        if not isinstance(source, pa.Table):
            source = _read_table(source, columns)
        elif columns is not None:
            source = source.select(list(columns))
        if isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1:
            raise BucketoptError(f"batch_rows must be an integer >= 1; got {shown(batch_rows)}.",
                                 param="batch_rows")
        self.table = source
        self.batch_rows = batch_rows

    def __len__(self) -> int:
        return self.table.num_rows

    def __getitem__(self, index):
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(self):
            raise IndexError(f"row {shown(index)} is not in [0, {len(self)}).")
        return self.table.slice(index, 1).to_pylist()[0]

    def __iter__(self):
        return self.iter_from(0)

    def iter_from(self, start: int):
        """The rows from index ``start`` on, one dict each."""
        for batch in self.table.slice(start).to_batches(max_chunksize=self.batch_rows):
            yield from batch.to_pylist()


def _read_table(path, columns):
    from pathlib import Path

    import pyarrow as pa

    path = Path(path)
    if not path.is_file():
        raise BucketoptError(f"{str(path)!r} is not a file (ArrowRows takes a pyarrow Table, a "
                             "RecordBatch, or a Parquet / Arrow IPC file).")
    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            return pq.read_table(path, columns=columns, memory_map=True)
        table = pa.ipc.open_file(pa.memory_map(str(path))).read_all()
    except (pa.ArrowException, OSError) as err:
        raise BucketoptError(f"cannot read {str(path)!r} as Parquet or Arrow IPC: {err}") from None
    return table if columns is None else table.select(list(columns))
