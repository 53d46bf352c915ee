"""Build the length histogram with Dask, for data too large for one machine (the ``dask`` extra).

The histogram is the sufficient statistic: each worker folds its own shards into a small
``(length, count)`` table and only those travel back to be summed. Any running
``distributed.Client`` is used, as with every Dask computation.
"""

from __future__ import annotations

import os

import numpy as np

from ..errors import BucketoptError, install_hint
from .histogram import Histogram, HistogramBuilder


def _require_dask():
    try:
        import dask
    except ImportError:
        raise BucketoptError(
            f"histogram_from_dask() needs Dask: {install_hint('dask')}."
        ) from None
    return dask


def histogram_from_dask(data, *, column: str | None = None, scheduler=None) -> Histogram:
    """The length histogram of a Dask collection or of sharded files, computed with Dask.

    Parameters
    ----------
    data : str, path-like, list of paths, dask DataFrame or dask Series
        Paths (a directory, a glob, a Hugging Face ``save_to_disk`` directory, or a list of files)
        give one task per file, each read by bucketopt's streaming reader (list columns such as
        ``input_ids`` count from their offsets). A Dask DataFrame (with ``column``) or Series of
        integer lengths is reduced with ``value_counts``.
    column : str, optional
        The lengths column; chosen as in :func:`bucketopt.load_lengths` when omitted.
    scheduler : optional
        Passed to ``dask.compute`` (default: the active client or Dask's default scheduler).

    Examples
    --------
    Needs Dask, so the example is not run by doctest:

    >>> import dask.dataframe as dd, pandas as pd  # doctest: +SKIP
    >>> frame = dd.from_pandas(pd.DataFrame({"seq_len": [3, 5, 5]}),
    ...                        npartitions=2)  # doctest: +SKIP
    >>> histogram_from_dask(frame).counts.tolist()  # doctest: +SKIP
    [1, 2]
    """
    dask = _require_dask()
    if isinstance(data, (str, os.PathLike, list, tuple)):
        return _from_files(dask, data, column, scheduler)
    return _from_collection(dask, data, column, scheduler)


def _from_files(dask, data, column, scheduler) -> Histogram:
    from .io import open_source

    if isinstance(data, (list, tuple)):
        if not data:
            raise BucketoptError("histogram_from_dask(): the list of files is empty.")
        sources = [open_source(p, column=column) for p in data]
        files = [f for s in sources for f in s.files]
        chosen = sources[0].column.name or None
    else:
        source = open_source(data, column=column)
        files = list(source.files)
        chosen = source.column.name or None
    tasks = [dask.delayed(_file_counts)(os.fspath(f), chosen) for f in files]
    parts = dask.compute(*tasks, scheduler=scheduler)
    builder = HistogramBuilder(name=f"{data}")
    for values, counts in parts:
        builder.add_counts(values, counts)
    return builder.result()


def _file_counts(path: str, column: str | None) -> tuple[np.ndarray, np.ndarray]:
    """Runs on a worker: one file folded into (values, counts)."""
    from .io import load_histogram

    hist = load_histogram(path, column=column, progress=False)
    return np.asarray(hist.values), np.asarray(hist.counts)


def _from_collection(dask, data, column, scheduler) -> Histogram:
    series = data
    if hasattr(data, "columns"):  # a DataFrame
        names = [str(c) for c in data.columns]
        if column is None:
            from .io import LENGTH_COLUMN_NAMES

            named = [c for c in names if c.lower() in LENGTH_COLUMN_NAMES]
            if len(named) != 1 and len(names) != 1:
                raise BucketoptError(
                    f"choose the lengths column with column=; columns are {', '.join(names)}.",
                    param="column",
                )
            column = named[0] if len(named) == 1 else names[0]
        if column not in names:
            raise BucketoptError(f"no column {column!r}; columns are {', '.join(names)}.",
                                 param="column")
        series = data[column]
    if not hasattr(series, "value_counts") or not hasattr(series, "dtype"):
        raise BucketoptError(
            f"histogram_from_dask() takes paths or a Dask DataFrame/Series; got "
            f"{type(data).__name__}."
        )
    from pandas.api.types import is_bool_dtype, is_integer_dtype

    if not is_integer_dtype(series.dtype) or is_bool_dtype(series.dtype):
        raise BucketoptError(
            f"lengths must be an integer column; got dtype {series.dtype} (for a list column "
            "such as input_ids, pass the files' paths instead)."
        )
    counts, nulls = dask.compute(series.value_counts(), series.isna().sum(), scheduler=scheduler)
    if int(nulls):
        raise BucketoptError(f"the lengths column has {int(nulls):,} null value(s).")
    builder = HistogramBuilder(name=str(column or "lengths"))
    builder.add_counts(np.asarray(counts.index, dtype=np.int64),
                       np.asarray(counts.to_numpy(), dtype=np.int64))
    return builder.result()
