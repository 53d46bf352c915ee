"""Lengths and their histogram: the one choke point that turns user input into clean data.

Every solver works on a :class:`Histogram` (distinct lengths + counts), so the cost grows with the
number of distinct lengths ``m``, never with the number of samples ``n``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from ..errors import BucketoptError
from ..validate import TOKEN_LIMIT, shown

# Dense counting (np.bincount) is used only below this maximum length; above it np.unique is used,
# so a length of 10**12 never allocates a dense array.
_DENSE_MAX = 1 << 24
# Histogram.to_lengths() (and so simulate(), compare(), the sampler) expands at most this many.
EXPAND_LIMIT = 1 << 28


@dataclass(frozen=True, eq=False)
class Histogram:
    """Distinct sequence lengths and how many samples have each.

    Parameters
    ----------
    values : array of int64, strictly increasing, all >= 1
    counts : array of int64, same size, all >= 1

    Examples
    --------
    >>> h = Histogram.from_lengths([5, 3, 5, 9])
    >>> h.values.tolist(), h.counts.tolist()
    ([3, 5, 9], [1, 2, 1])
    """

    values: np.ndarray
    counts: np.ndarray

    def __post_init__(self):
        values = _as_int_array(self.values, "histogram values")
        counts = _as_int_array(self.counts, "histogram counts")
        if values.shape != counts.shape:
            raise BucketoptError(
                f"histogram values and counts must have the same size; got {values.size} and "
                f"{counts.size}."
            )
        if values.size == 0:
            raise BucketoptError("the histogram is empty: at least one length is required.")
        if values.min() <= 0:
            raise BucketoptError(
                f"lengths must be positive integers; got {int(values.min())}."
            )
        if counts.min() < 0:
            raise BucketoptError(f"histogram counts must be >= 0; got {int(counts.min())}.")
        # before any merge of repeated values: their int64 sum could wrap around
        # (no temporary copies: 10**7 distinct lengths are 80 MB an array)
        _check_token_total(np.max(values, where=counts > 0, initial=0)[None], counts)
        if values.size > 1 and np.any(values[1:] <= values[:-1]):
            order = np.argsort(values, kind="stable")
            values, counts = values[order], counts[order]
            uniq, start = np.unique(values, return_index=True)
            counts = np.add.reduceat(counts, start)
            values = uniq
        keep = counts > 0
        if not keep.all():
            values, counts = values[keep], counts[keep]
            if values.size == 0:
                raise BucketoptError("the histogram is empty: every count is 0.")
        _check_token_total(values, counts)
        values.setflags(write=False)
        counts.setflags(write=False)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "counts", counts)

    @classmethod
    def from_lengths(cls, lengths) -> Histogram:
        """Build the histogram of raw lengths (validated by :func:`validate_lengths`)."""
        lengths = validate_lengths(lengths)
        top = int(lengths.max())
        if top <= _DENSE_MAX and top <= 8 * lengths.size + 1024:
            dense = np.bincount(lengths, minlength=top + 1)
            values = np.flatnonzero(dense)
            counts = dense[values]
            del dense  # (no copy more than needed: 10**7 distinct lengths are 80 MB an array)
        else:
            values, counts = np.unique(lengths, return_counts=True)
        return cls(values.astype(np.int64, copy=False), counts.astype(np.int64, copy=False))

    @property
    def n(self) -> int:
        """Number of samples."""
        return int(self.counts.sum())

    @property
    def m(self) -> int:
        """Number of distinct lengths."""
        return int(self.values.size)

    @property
    def real_tokens(self) -> int:
        """Sum of all lengths."""
        return int(np.dot(self.values, self.counts))

    @property
    def max_length(self) -> int:
        return int(self.values[-1])

    @property
    def min_length(self) -> int:
        return int(self.values[0])

    def merge(self, *others: Histogram) -> Histogram:
        """Sum this histogram with others (e.g. one per shard)."""
        parts = [self, *others]
        for other in parts:
            if not isinstance(other, Histogram):
                raise BucketoptError(
                    f"can only merge Histogram objects; got {type(other).__name__}."
                )
        values = np.concatenate([p.values for p in parts])
        counts = np.concatenate([p.counts for p in parts])
        uniq, inverse = np.unique(values, return_inverse=True)
        return Histogram(uniq, _sum_by(inverse, counts, uniq.size))

    def __add__(self, other):
        if not isinstance(other, Histogram):
            return NotImplemented
        return self.merge(other)

    def to_lengths(self) -> np.ndarray:
        """Expand back to one length per sample (sorted)."""
        if self.n > EXPAND_LIMIT:  # a few counts must not allocate terabytes
            raise BucketoptError(
                f"a histogram of {self.n:,} samples is too large to expand to one length per "
                f"sample (at most {EXPAND_LIMIT:,}); the solvers take the Histogram itself."
            )
        return np.repeat(self.values, self.counts)

    def percentile(self, q, *, method: str = "linear") -> np.ndarray:
        """Percentiles without expanding the samples, by one of numpy's rules.

        ``method="linear"`` (numpy's default) interpolates between neighbours, so it can fall
        between two lengths; ``"inverted_cdf"`` is the smallest length with at least q% of the
        samples at or below it: always a length that occurs.

        Examples
        --------
        >>> h = Histogram.from_lengths([1, 2, 3, 10])
        >>> h.percentile([50, 75]).tolist(), h.percentile([50, 75], method="inverted_cdf").tolist()
        ([2.5, 4.75], [2, 3])
        """
        if method not in ("linear", "inverted_cdf"):
            raise BucketoptError(
                f"`method` must be 'linear' or 'inverted_cdf'; got {method!r}.", param="method")
        try:
            q = np.atleast_1d(np.asarray(q, dtype=float))
        except (TypeError, ValueError):
            raise BucketoptError(f"percentiles must be numbers in [0, 100]; got {q!r}.") from None
        if not np.all((q >= 0) & (q <= 100)):  # also refuses NaN
            raise BucketoptError(f"percentiles must be numbers in [0, 100]; got {q.tolist()}.")
        cum = np.cumsum(self.counts)
        if method == "inverted_cdf":
            rank = np.clip(np.ceil(q / 100.0 * self.n), 1, self.n).astype(np.int64)
            return self.values[np.searchsorted(cum, rank, side="left")]
        pos = q / 100.0 * (self.n - 1)
        lo = np.floor(pos).astype(np.int64)
        hi = np.ceil(pos).astype(np.int64)
        v_lo = self.values[np.searchsorted(cum, lo, side="right")]
        v_hi = self.values[np.searchsorted(cum, hi, side="right")]
        return v_lo + (pos - lo) * (v_hi - v_lo)

    def __eq__(self, other):
        if not isinstance(other, Histogram):
            return NotImplemented
        return np.array_equal(self.values, other.values) and np.array_equal(
            self.counts, other.counts
        )

    def __repr__(self):
        return (
            f"Histogram(n={self.n:,}, distinct={self.m:,}, min={self.min_length}, "
            f"max={self.max_length})"
        )

    def to_dict(self) -> dict:
        return {"values": self.values.tolist(), "counts": self.counts.tolist()}


def _mapping_histogram(data, name: str) -> Histogram:
    if len(data) > 1 << 24:
        raise BucketoptError(f"{name}: a mapping of more than {1 << 24:,} distinct lengths; "
                             "pass a Histogram of numpy arrays.")
    values = validate_lengths(list(data.keys()), name=f"{name} (mapping keys: "
                              "lengths)")
    counts = validate_lengths(list(data.values()), name=f"{name} (mapping values: counts)",
                              positive=False)
    return Histogram(values, counts)


def _sum_by(inverse: np.ndarray, counts: np.ndarray, size: int) -> np.ndarray:
    out = np.zeros(size, dtype=np.int64)
    np.add.at(out, inverse, counts)
    return out


def _as_int_array(x, what: str) -> np.ndarray:
    if isinstance(x, (list, tuple)) and any(isinstance(v, (bool, np.bool_)) for v in x):
        raise BucketoptError(f"{what} must be integers; got a boolean ({shown(x)}).")
    arr = np.asarray(x)
    if arr.dtype == object or arr.dtype.kind not in "iu":
        arr = validate_lengths(arr, name=what, positive=False) if arr.size else arr
    if arr.ndim != 1:
        raise BucketoptError(f"{what} must be 1-D; got shape {arr.shape}.")
    if arr.dtype.kind == "u" and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
        raise BucketoptError(f"{what} exceed the int64 range.")
    return np.array(arr, dtype=np.int64, copy=True)


def _check_token_total(values: np.ndarray, counts: np.ndarray) -> None:
    # The float sum cannot wrap around as the int64 sum does (2**62 + 2**62 is negative there).
    n = float(counts.sum(dtype=np.float64))
    if n * float(values[-1]) >= TOKEN_LIMIT:
        raise BucketoptError(
            f"n x longest length = {n:,.0f} x {int(values[-1]):,} exceeds 2**60 tokens: padding "
            "totals could not be computed exactly in int64; split the data or cap the lengths."
        )


def validate_lengths(
    lengths, *, name: str = "lengths", positive: bool = True, start: int = 0,
    param: str | None = None,
) -> np.ndarray:
    """Turn any array-like of sequence lengths into a clean 1-D int64 array.

    Rejects empty input, NaN/inf, non-integer floats, values <= 0, non-numeric or object data
    and anything that is not 1-D, with a :class:`BucketoptError` naming the problem. ``start`` is
    added to the index quoted in messages (a chunk that begins at row ``start`` of a larger table).
    ``param``: the parameter the array came from (``"boundaries"``), which the errors carry
    (:attr:`BucketoptError.param`); None for the contents of a file.
    """
    if isinstance(lengths, Histogram):
        return lengths.to_lengths()
    if isinstance(lengths, (str, bytes)):
        raise BucketoptError(
            f"{name} must be an array of integers; got a string (use load_lengths() for a path).",
            param=param,
        )
    if isinstance(lengths, Mapping):
        raise BucketoptError(
            f"{name} must be one length per sample; got a {type(lengths).__name__} (a mapping "
            "{length: count} is a histogram: solve(), evaluate() and sweep() take it).",
            param=param)
    if isinstance(lengths, Iterable) and not hasattr(lengths, "__array__") and not isinstance(
        lengths, (list, tuple)
    ):
        lengths = list(lengths)
    try:
        arr = np.asarray(lengths)
    except (ValueError, TypeError, OverflowError) as exc:
        raise BucketoptError(f"{name} could not be read as an array of integers: {exc}",
                             param=param) from None
    if isinstance(lengths, (list, tuple)) and arr.dtype.kind in "iuf":
        # numpy reads True as 1 beside integers: a boolean is not a length, nor a count
        i = next((i for i, x in enumerate(lengths) if isinstance(x, (bool, np.bool_))), None)
        if i is not None:
            raise BucketoptError(f"{name} must be integers; got {bool(lengths[i])} at index "
                                 f"{start + i}.", param=param)
    if arr.dtype == object:
        try:
            arr = np.asarray(arr.tolist(), dtype=np.float64 if _has_float(arr) else np.int64)
        except OverflowError:
            raise BucketoptError(f"{name} exceed the int64 range.", param=param) from None
        except (ValueError, TypeError):
            raise BucketoptError(
                f"{name} must be numeric integers; got Python objects that are not.",
                param=param,
            ) from None
    if arr.ndim != 1:
        pairs = (" (pairs of lengths take solve, evaluate, compare, export and the sampler: 2-D "
                 "bins)" if arr.ndim == 2 and arr.shape[1:] == (2,) else "")
        raise BucketoptError(f"{name} must be 1-D; got an array of shape {arr.shape}{pairs}.",
                             param=param)
    if arr.size == 0:
        raise BucketoptError(f"{name} is empty: at least one length is required.", param=param)
    kind = arr.dtype.kind
    if kind == "b":
        raise BucketoptError(f"{name} must be integers; got booleans.", param=param)
    if kind == "f":
        bad = ~np.isfinite(arr)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise BucketoptError(
                f"{name} must be finite integers; got {arr[i]} at index {start + i}.",
                param=param,
            )
        frac = arr != np.floor(arr)
        if frac.any():
            i = int(np.flatnonzero(frac)[0])
            raise BucketoptError(f"{name} must be integers; got {arr[i]} at index {start + i}.",
                                 param=param)
        if arr.max() >= 2.0**63:
            raise BucketoptError(f"{name} exceed the int64 range; got {arr.max():.6g}.",
                                 param=param)
        arr = arr.astype(np.int64)
    elif kind == "u":
        if int(arr.max()) > np.iinfo(np.int64).max:
            raise BucketoptError(f"{name} exceed the int64 range.", param=param)
        arr = arr.astype(np.int64)
    elif kind == "i":
        arr = arr.astype(np.int64, copy=False)
    else:
        raise BucketoptError(f"{name} must be integers; got dtype {arr.dtype}.", param=param)
    if positive:
        low = int(arr.min())
        if low <= 0:
            i = int(np.argmin(arr))
            raise BucketoptError(
                f"{name} must be positive integers (>= 1); got {low} at index {start + i}.",
                param=param,
            )
    return arr


def _has_float(arr: np.ndarray) -> bool:
    return any(isinstance(x, float) for x in arr.ravel()[:1000])


def as_histogram(data, *, name: str = "lengths") -> Histogram:
    """Accept raw lengths, a :class:`Histogram` or a mapping ``{length: count}`` (a histogram,
    as ``collections.Counter(lengths)`` gives) and return a histogram."""
    if isinstance(data, Histogram):
        return data
    if isinstance(data, Mapping):
        return _mapping_histogram(data, name)
    return Histogram.from_lengths(validate_lengths(
        data, name=name, param=name if name.isidentifier() else None))


class HistogramBuilder:
    """Fold lengths into a histogram chunk by chunk: memory grows with the distinct lengths only.

    Every chunk goes through :func:`validate_lengths` (``start`` keeps row numbers in messages
    global), so streaming readers share the one choke point.

    Examples
    --------
    >>> builder = HistogramBuilder()
    >>> builder.add([3, 5]); builder.add([5, 9])
    >>> builder.result().counts.tolist()
    [1, 2, 1]
    """

    def __init__(self, *, name: str = "lengths"):
        self.name = name
        self.rows = 0
        self._dense = np.zeros(0, dtype=np.int64)  # counts by length while lengths are small
        self._sparse: list[tuple[np.ndarray, np.ndarray]] = []  # (values, counts) otherwise
        self._sparse_size = 0
        self._count_total = 0.0  # keeps every int64 sum of counts far from overflow

    def add(self, lengths, *, name: str | None = None, start: int | None = None) -> None:
        """Count one chunk of raw lengths (an empty chunk is allowed and adds nothing).

        ``name`` and ``start`` override what messages about this chunk say (e.g. the shard file
        it came from and the row within it)."""
        arr = np.asarray(lengths)
        if arr.ndim == 1 and arr.size == 0:
            return
        arr = validate_lengths(arr, name=name or self.name,
                               start=self.rows if start is None else start)
        self.rows += arr.size
        top = int(arr.max())
        if top <= _DENSE_MAX:
            counts = np.bincount(arr, minlength=0)
            if counts.size > self._dense.size:
                grown = np.zeros(counts.size, dtype=np.int64)
                grown[: self._dense.size] = self._dense
                self._dense = grown
            self._dense[: counts.size] += counts
        else:
            values, counts = np.unique(arr, return_counts=True)
            self._add_sparse(values, counts.astype(np.int64))

    def add_counts(self, values, counts, *, name: str | None = None,
                   start: int | None = None) -> None:
        """Add a chunk of (length, count) pairs, e.g. rows of a histogram file."""
        values = np.asarray(values)
        if values.ndim == 1 and values.size == 0:
            return
        name = name or self.name
        start = self.rows if start is None else start
        values = validate_lengths(values, name=f"{name} (length column)", start=start)
        counts = validate_lengths(counts, name=f"{name} (count column)", positive=False,
                                  start=start)
        if counts.size != values.size:
            raise BucketoptError(f"{self.name}: length and count columns differ in size.")
        if counts.min() < 0:
            i = int(np.argmin(counts))
            raise BucketoptError(
                f"{name}: counts must be >= 0; got {int(counts[i])} at row {start + i}."
            )
        self._count_total += float(counts.sum(dtype=np.float64))
        if self._count_total >= TOKEN_LIMIT:
            raise BucketoptError(
                f"{self.name}: the counts add up to more than 2**60 samples; that is not a real "
                "data set (check the count column)."
            )
        self.rows += values.size
        self._add_sparse(values, counts)

    def _add_sparse(self, values: np.ndarray, counts: np.ndarray) -> None:
        self._sparse.append((values, counts))
        self._sparse_size += values.size
        if len(self._sparse) > 64 or self._sparse_size > (1 << 22):
            self._sparse = [self._collapse()]
            self._sparse_size = self._sparse[0][0].size

    def _collapse(self) -> tuple[np.ndarray, np.ndarray]:
        values = np.concatenate([v for v, _ in self._sparse])
        counts = np.concatenate([c for _, c in self._sparse])
        uniq, inverse = np.unique(values, return_inverse=True)
        return uniq, _sum_by(inverse, counts, uniq.size)

    def result(self) -> Histogram:
        """The histogram of everything added (an error if nothing was)."""
        dense_values = np.flatnonzero(self._dense).astype(np.int64)
        parts = [(dense_values, self._dense[dense_values])]
        if self._sparse:
            parts.append(self._collapse())
        values = np.concatenate([v for v, _ in parts])
        counts = np.concatenate([c for _, c in parts])
        if values.size == 0 or int(counts.sum()) == 0:
            raise BucketoptError(f"{self.name} is empty: at least one length is required.")
        order = np.argsort(values, kind="stable")
        return Histogram(values[order], counts[order])
