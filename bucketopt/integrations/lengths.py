"""One length per sample of a training dataset, in dataset order, without touching the tokens.

A Hugging Face ``datasets.Dataset`` keeps its columns in Arrow: an integer column named like a
length (``seq_len``, ``length``, ...) is read as it is, and a token list column (``input_ids``)
is read from its list offsets alone (``offsets[1:] - offsets[:-1]``), the rules of
:func:`bucketopt.load_lengths`. A ``select``/``shuffle``/``filter`` view is followed through its
indices mapping. Any other dataset is asked item by item (``len(dataset[i][column])``).
"""

from __future__ import annotations

import numpy as np

from ..data.histogram import validate_lengths
from ..errors import BucketoptError


def dataset_lengths(dataset, *, column=None) -> np.ndarray:
    """Lengths of every sample of ``dataset`` (int64, dataset order).

    Parameters
    ----------
    dataset : datasets.Dataset, a sized indexable of dicts, or a list of sequences
    column : str, optional
        The length or token-list column; by default the column :func:`bucketopt.load_lengths`
        would pick (a length-named integer column, else ``input_ids`` / ``token_ids`` /
        ``tokens``, else the only list column).

    Examples
    --------
    >>> dataset_lengths([{"input_ids": [1, 2, 3]}, {"input_ids": [4]}]).tolist()
    [3, 1]
    """
    if column is not None and not isinstance(column, str):
        raise BucketoptError(f"column must be a column name (str); got {column!r}.", param="column")
    table = _arrow_table(dataset)
    if table is not None:
        return _arrow_lengths(dataset, table, column)
    try:
        n = len(dataset)
    except TypeError:
        raise BucketoptError(
            f"dataset must have a length (got {type(dataset).__name__}, which has none): for a "
            "stream, plan with bucketopt.training.streaming (boundaries from a sample, online "
            "batching).", param="dataset") from None
    if n == 0:
        raise BucketoptError("dataset is empty: there is nothing to batch.", param="dataset")
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        out[i] = _item_length(dataset[i], column, i)
    return validate_lengths(out, name="lengths")


def _arrow_table(dataset):
    data = getattr(dataset, "data", None)
    table = getattr(data, "table", None)  # datasets.table.Table wraps a pyarrow.Table
    try:
        import pyarrow as pa
    except ImportError:  # pragma: no cover - pyarrow is a dependency
        return None
    return table if isinstance(table, pa.Table) else None


def _arrow_lengths(dataset, table, column):
    from ..data.arrow_tables import field_kind, nested_list
    from ..data.io import choose_column

    fields = [(f.name, field_kind(f.type), str(f.type), nested_list(f.type))
              for f in table.schema]
    label = f"dataset ({type(dataset).__name__})"
    chosen = choose_column(fields, column, label)
    if chosen.kind == "histogram":
        raise BucketoptError(f"{label}: column {chosen.name!r} with {chosen.count_column!r} "
                             "looks like a histogram, not one row per sample; pass column=.",
                             param="column")
    if chosen.kind not in ("integer", "list"):
        raise BucketoptError(f"{label}: column {chosen.name!r} ({chosen.type}) holds neither "
                             "lengths nor token lists; pass column=.", param="column")
    from ..data.arrow_tables import column_values

    parts, start = [], 0
    for chunk in table.column(chosen.name).chunks:
        parts.append(np.asarray(column_values(chunk, kind=chosen.kind, label=label,
                                              column=chosen.name, start=start), dtype=np.int64))
        start += len(chunk)
    lengths = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    indices = getattr(dataset, "_indices", None)  # a select/shuffle/filter view
    if indices is not None:
        lengths = lengths[np.asarray(indices.column(0).to_numpy(), dtype=np.int64)]
    if lengths.size == 0:
        raise BucketoptError(f"{label} is empty: there is nothing to batch.")
    return validate_lengths(lengths, name="lengths")


def _item_length(item, column, i) -> int:
    if isinstance(item, dict) or hasattr(item, "keys"):
        names = [column] if column is not None else [
            c for c in ("seq_len", "length", "input_ids") if c in item]
        if not names or names[0] not in item:
            raise BucketoptError(f"dataset item {i} has no {column or 'input_ids'!r} field; "
                                 "pass lengths= or column=.", param="column")
        value = item[names[0]]
    else:
        value = item
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    try:
        return len(value)
    except TypeError:
        raise BucketoptError(f"dataset item {i}: cannot take a length of "
                             f"{type(value).__name__}; pass lengths=.") from None
