"""Rows of documents under a token capacity (padding-free packing) and rank balancing.

A *row* is a list of documents trained as one flattened sequence with document-masked
(variable-length) attention: it holds at most ``capacity`` tokens (the token budget of one
micro-batch), costs ``beta * tokens + gamma * sum of d**2`` beyond the per-micro-batch
``alpha``, and computes no padding. With data parallelism over G ranks the rows
``i*G .. i*G + G - 1`` form step ``i`` (row ``i*G + r`` runs on rank ``r``), as the batches of an
:class:`~bucketopt.training.epoch.Epoch` do.

Every function here takes lengths in training order (already shuffled by the caller) and returns
``(order, starts)``: ``order`` a permutation of the positions ``0 .. n-1`` of ``lengths`` in which
every row is contiguous, ``starts`` the int64 offset in ``order`` where each row begins (the first
is 0). Row ``j`` is ``order[starts[j]:starts[j + 1]]`` (the last ends at ``n``); ``rows(order,
starts)`` splits them. Positions index the given ``lengths``: to get dataset indices, index the
caller's permutation with ``order``.

- :func:`pack_rows`: ``method="greedy"`` walks the documents in order and opens a new row when
  the next does not fit (row tokens <= capacity); ``method="bfd"`` is best-fit decreasing, over
  all the documents or inside consecutive windows of ``window`` documents (rows never cross a
  window), planned on length classes: O(n) passes plus work per distinct length, never
  quadratic (16.3 million documents of at most 512 tokens in about a second:
  ``benchmarks/packing_plan.py``).
- :func:`balance_steps`: re-deals the documents of each step over its G rows so the heaviest rank
  is lighter (longest-processing-time first, by ``weights``, default d**2, under the capacity).
- :func:`row_stats`: tokens and sum of d**2 of every row.
- :func:`attention_balance`: how evenly the ranks of each step share attention (1: equally).

Plain numpy in, numpy out; the loops run in numba kernels (``_packing_kernels``), which never
load the solver's kernels.
"""

from __future__ import annotations

import numpy as np

from ..errors import BucketoptError
from ..validate import check_positive_int, check_world_size, shown

METHODS = ("greedy", "bfd")


def _lengths(lengths, capacity) -> tuple[np.ndarray, int]:
    capacity = check_positive_int(capacity, "capacity")
    arr = np.asarray(lengths)
    if arr.ndim != 1:
        raise BucketoptError(f"`lengths` must be one-dimensional; got shape {arr.shape}.",
                             param="lengths")
    if arr.size and not np.issubdtype(arr.dtype, np.integer) and (
            not np.issubdtype(arr.dtype, np.floating) or not np.all(np.isfinite(arr))
            or not np.all(arr == np.round(arr))):
        raise BucketoptError("`lengths` must hold integers.", param="lengths")
    arr = arr.astype(np.int64, copy=False)
    if arr.size and arr.min() < 1:
        raise BucketoptError(f"`lengths` must be >= 1; got {int(arr.min())}.", param="lengths")
    if arr.size and arr.max() > capacity:
        raise BucketoptError(f"a document of {int(arr.max())} tokens exceeds capacity="
                             f"{capacity}: no row can hold it.", param="capacity")
    return arr, capacity


def pack_rows(lengths, capacity, *, method="greedy", window=None) -> tuple[np.ndarray, np.ndarray]:
    """Pack documents (lengths in training order) into rows of at most ``capacity`` tokens.

    Parameters
    ----------
    lengths : array-like of int
        Tokens of every document, in the (already shuffled) order they are taken.
    capacity : int
        Most tokens one row holds; every length must be <= capacity.
    method : {"greedy", "bfd"}
        ``"greedy"``: walk in order, a document joins the current row while the row's tokens stay
        <= capacity, else it opens a new row (``order`` is then ``arange(n)``). ``"bfd"``:
        best-fit decreasing inside consecutive windows of ``window`` documents: longest first
        (documents of one length in their given order), each into the open row of the window
        with the least room that fits it (ties: the row opened first), else a new row. Rows come
        in the order they were opened, documents in the order they were placed.

        The BFD planner works on length classes, not documents: a row with room r takes
        ``floor(r / x)`` documents of length x in a row, so it places whole runs of one length
        at once on groups of rows of equal room, then lays the positions out in O(n). Time
        O(n + m log m) for m distinct lengths in practice, O(n log n) at worst; memory O(n)
        (a table of ``longest + 1`` slots classifies lengths when that is at most
        ``max(4 n, 2**22)``, else a sort). The rows are exactly those of placing one document
        at a time (tested against tests/naive.py).
    window : int, optional
        ``"bfd"`` only: documents per window (default: all of them, one window: the fewest rows
        best-fit decreasing finds).

    Returns
    -------
    (order, starts) : int64 arrays (see the module docstring)

    Examples
    --------
    >>> order, starts = pack_rows([3, 4, 2, 5], 7)
    >>> rows(order, starts)
    [[0, 1], [2, 3]]
    >>> order, starts = pack_rows([3, 4, 2, 5], 7, method="bfd")
    >>> rows(order, starts)
    [[3, 2], [1, 0]]
    """
    arr, capacity = _lengths(lengths, capacity)
    if method not in METHODS:
        raise BucketoptError(f"`method` must be one of {', '.join(METHODS)}; got {shown(method)}.",
                             param="method")
    n = arr.size
    if method == "greedy":
        if window is not None:
            raise BucketoptError('`window` applies to method="bfd" only.', param="window")
        return np.arange(n, dtype=np.int64), greedy_row_starts(arr, capacity)
    if window is None:
        window = max(n, 1)
    window = check_positive_int(window, "window")
    if n == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    from ._packing_kernels import bfd_windows

    return bfd_windows(*length_classes(arr), capacity, min(window, n))


# A table of one slot per length classifies documents in O(n + longest); beyond this many slots
# (and beyond 4 per document) a sort does it instead, so no array grows with the capacity.
CLASS_TABLE_SLOTS = 1 << 22


def length_classes(lengths) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Length classes of validated int64 lengths as ``(keys, slot, values)``: document i is in
    class ``slot[keys[i]]`` (0 the longest), of length ``values[slot[keys[i]]]`` (``values``:
    the distinct lengths, decreasing). O(n + longest) with a table of ``longest + 1`` slots
    (``keys`` the lengths themselves) when that is at most ``max(4 n, CLASS_TABLE_SLOTS)``, else
    a sort, O(n log n) (``keys`` the classes, ``slot`` the identity).

    Examples
    --------
    >>> keys, slot, values = length_classes(np.array([3, 7, 3, 1]))
    >>> slot[keys], values
    (array([1, 0, 1, 2]), array([7, 3, 1]))
    """
    if lengths.size == 0:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, empty
    top = int(lengths.max())
    if top <= max(4 * lengths.size, CLASS_TABLE_SLOTS):
        from ._packing_kernels import class_table

        return (lengths, *class_table(lengths, top))
    values, inverse = np.unique(lengths, return_inverse=True)
    classes = (values.size - 1 - inverse).astype(np.int64)
    return classes, np.arange(values.size, dtype=np.int64), values[::-1].copy()


def greedy_row_starts(lengths, capacity) -> np.ndarray:
    """Row starts of greedy packing of ``lengths`` (validated int64, each <= ``capacity``): one
    pass, a new row where the next document would take the row over ``capacity``."""
    from ._packing_kernels import greedy_starts

    return greedy_starts(np.asarray(lengths, dtype=np.int64), capacity)


def rows(order, starts) -> list:
    """The rows of ``(order, starts)`` as lists of positions."""
    order = np.asarray(order, dtype=np.int64)
    return [r.tolist() for r in np.split(order, np.asarray(starts, dtype=np.int64)[1:])] \
        if order.size else []


def row_stats(lengths, order, starts) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, attention) of every row: the sum of d and the sum of d**2 over its documents
    (int64 and float64: d**2 summed over a row may pass 2**53 only beyond any real budget).

    Examples
    --------
    >>> row_stats([3, 4, 2], [0, 1, 2], [0, 2])
    (array([7, 2]), array([25.,  4.]))
    """
    arr = np.asarray(lengths, dtype=np.int64)
    order = np.asarray(order, dtype=np.int64)
    starts = np.asarray(starts, dtype=np.int64)
    if starts.size == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)
    d = arr[order]
    tokens = np.add.reduceat(d, starts).astype(np.int64)
    attention = np.add.reduceat(d.astype(np.float64) ** 2, starts)
    return tokens, attention


def attention_balance(attention, world_size) -> float:
    """How evenly the ranks of each step share attention: the sum over steps of the mean rank
    attention over the sum over steps of the heaviest rank's attention.

    ``attention``: the sum of d**2 of every row in training order (:func:`row_stats`); rows
    ``i*G .. i*G + G - 1`` are step ``i`` and a rank with no row in the last step counts 0. The
    result is ``1 - wait_fraction`` of a cost model where attention is the only cost
    (alpha = beta = 0): the share of attention time the ranks spend computing rather than
    waiting for the heaviest rank. 1: every step's ranks carry equal attention; 1/G: one rank
    of each step carries all of it. An empty epoch gives 1.

    Examples
    --------
    >>> attention_balance([4.0, 2.0, 3.0, 3.0], 2)  # steps (4, 2) and (3, 3): (3 + 3) / (4 + 3)
    0.8571428571428571
    """
    g = check_world_size(world_size)
    att = np.asarray(attention, dtype=np.float64)
    if att.ndim != 1 or not np.all(np.isfinite(att)) or (att.size and att.min() < 0):
        raise BucketoptError("`attention` must be one finite number >= 0 per row.",
                             param="attention")
    steps = -(-att.size // g)
    padded = np.zeros(steps * g)
    padded[:att.size] = att
    heaviest = float(padded.reshape(steps, g).max(axis=1).sum())
    return float(padded.sum() / g / heaviest) if heaviest > 0 else 1.0


def balance_steps(lengths, order, starts, world_size, capacity, *,
                  weights=None) -> tuple[np.ndarray, np.ndarray]:
    """Re-deal the documents of every step across its ranks so the heaviest rank is lighter.

    Step ``i`` is rows ``i*G .. i*G + G - 1`` of ``(order, starts)`` (``G = world_size``). Its
    documents are taken by decreasing weight and each goes to the rank (row) of least weight so
    far among those it fits in (row tokens <= ``capacity``): longest processing time first. The
    new rows replace the step's rows only when every document found room and the heaviest new
    row is strictly lighter than the heaviest old one; otherwise the step keeps its rows. A last
    step of fewer than G rows is dealt over G rows when it holds at least G documents (so every
    rank gets a row).

    Guarantees (tested): every document exactly once; no row over ``capacity``; every step
    holds the same documents as before; the heaviest rank of every step is never heavier than
    before (strictly lighter wherever the step changed); the row count is a multiple of G except
    where a last step holds fewer than G documents, or kept its fewer-than-G rows.

    Parameters
    ----------
    lengths : array-like of int
        Tokens of every document (positions as in ``order``).
    order, starts : int arrays
        Rows in training order, as :func:`pack_rows` returns them.
    world_size : int
        Ranks per step.
    capacity : int
        Most tokens per row.
    weights : array-like of float, optional
        Cost of every document (positions as in ``lengths``), default ``d**2`` (the attention
        of document-masked attention). Pass ``beta * d + gamma * d**2`` to balance the time a
        cost model predicts.

    Returns
    -------
    (order, starts) : int64 arrays

    Examples
    --------
    >>> order, starts = balance_steps([4, 4, 1, 1, 1, 1], [0, 1, 2, 3, 4, 5], [0, 2], 2, 8)
    >>> rows(order, starts)
    [[0, 2, 4], [1, 3, 5]]
    """
    arr, capacity = _lengths(lengths, capacity)
    g = check_world_size(world_size)
    order = np.asarray(order, dtype=np.int64)
    starts = np.asarray(starts, dtype=np.int64)
    _check_rows(arr, order, starts, capacity)
    if weights is None:
        w = arr.astype(np.float64) ** 2
    else:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != arr.shape or not np.all(np.isfinite(w)) or (w.size and w.min() < 0):
            raise BucketoptError("`weights` must hold one finite number >= 0 per length.",
                                 param="weights")
    if arr.size == 0 or g == 1:
        return order.copy(), starts.copy()
    from ._packing_kernels import balance_kernel

    new_order, new_starts, _ = balance_kernel(arr, w, order, starts, g, capacity)
    return new_order, new_starts


def _check_rows(lengths, order, starts, capacity) -> None:
    n = lengths.size
    if order.shape != (n,) or (n and not np.array_equal(np.sort(order), np.arange(n))):
        raise BucketoptError("`order` must be a permutation of the positions of `lengths`.",
                             param="order")
    if n == 0:
        if starts.size:
            raise BucketoptError("`starts` must be empty when there are no documents.",
                                 param="starts")
        return
    if starts.ndim != 1 or starts.size == 0 or starts[0] != 0 or np.any(np.diff(starts) <= 0) \
            or starts[-1] >= n:
        raise BucketoptError("`starts` must begin at 0 and increase strictly below the number "
                             "of documents.", param="starts")
    tokens = np.add.reduceat(lengths[order], starts)
    if tokens.max() > capacity:
        raise BucketoptError(f"a row of `order`/`starts` holds {int(tokens.max())} tokens, over "
                             f"capacity={capacity}.", param=None)
