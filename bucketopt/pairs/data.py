"""Pairs of lengths (input, output) and their 2-D histogram, the sufficient statistic of every
2-D plan: the distinct pairs and how many samples hold each.

A pair array is an ``(n, 2)`` integer array: column 0 the input length (encoder, prompt, source,
audio frames), column 1 the output length (decoder, completion, target, transcript tokens).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..errors import BucketoptError

DIMS = ("input", "output")


def is_pairs(lengths) -> bool:
    """True when ``lengths`` holds pairs: an ``(n, 2)`` array, a :class:`PairHistogram`, or a
    list whose items are 2-sequences. A 1-D input (lengths, histograms, paths) is not."""
    if isinstance(lengths, PairHistogram):
        return True
    if isinstance(lengths, (str, bytes, Mapping)) or lengths is None:
        return False
    shape = getattr(lengths, "shape", None)
    if shape is not None:
        return len(shape) == 2 and shape[1] == 2
    if isinstance(lengths, (list, tuple)) and lengths:
        first = lengths[0]
        return isinstance(first, (list, tuple, np.ndarray)) and len(first) == 2
    return False


def check_pairs(pairs, *, name: str = "lengths", param: str | None = "lengths") -> np.ndarray:
    """An ``(n, 2)`` int64 array of positive pairs, or one clear error naming the problem
    (empty input, a shape other than (n, 2), non-integers, a value <= 0)."""
    from ..data.histogram import validate_lengths

    if isinstance(pairs, PairHistogram):
        return pairs.to_pairs()
    try:
        arr = np.asarray(pairs)
    except (ValueError, TypeError, OverflowError) as exc:
        raise BucketoptError(f"{name} could not be read as (input, output) pairs: {exc}",
                             param=param) from None
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise BucketoptError(f"{name} must be pairs, an array of shape (n, 2); got shape "
                             f"{tuple(arr.shape)}.", param=param)
    cols = [validate_lengths(arr[:, d], name=f"{name} ({DIMS[d]} column)", param=param)
            for d in (0, 1)]
    return np.stack(cols, axis=1)


@dataclass(frozen=True, eq=False)
class PairHistogram:
    """Distinct pairs and their counts, in both orders.

    ``a_values`` (ascending distinct inputs) and ``b_values`` (ascending distinct outputs);
    every distinct pair is an entry: by input (CSR: ``a_ptr``, ``a_b`` the output index,
    ``a_count``, outputs ascending within an input) and by output (CSC: ``b_ptr``, ``b_a``,
    ``b_count``)."""

    a_values: np.ndarray
    b_values: np.ndarray
    a_ptr: np.ndarray
    a_b: np.ndarray
    a_count: np.ndarray
    b_ptr: np.ndarray
    b_a: np.ndarray
    b_count: np.ndarray

    @classmethod
    def from_pairs(cls, pairs) -> PairHistogram:
        arr = check_pairs(pairs)
        return cls.from_counts(arr[:, 0], arr[:, 1], np.ones(arr.shape[0], dtype=np.int64))

    @classmethod
    def from_counts(cls, a, b, counts) -> PairHistogram:
        """From pairs (a[i], b[i]) held ``counts[i]`` times each (repeats are summed)."""
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        counts = np.asarray(counts, dtype=np.int64)
        a_values, ai = np.unique(a, return_inverse=True)
        b_values, bi = np.unique(b, return_inverse=True)
        key = ai.astype(np.int64) * b_values.size + bi
        keys, inv = np.unique(key, return_inverse=True)
        cnt = np.bincount(inv, weights=counts, minlength=keys.size).astype(np.int64)
        keep = cnt > 0
        keys, cnt = keys[keep], cnt[keep]
        ea, eb = keys // b_values.size, keys % b_values.size  # sorted by (a, b)
        a_ptr = np.zeros(a_values.size + 1, dtype=np.int64)
        np.cumsum(np.bincount(ea, minlength=a_values.size), out=a_ptr[1:])
        order = np.lexsort((ea, eb))  # by b, then a
        b_ptr = np.zeros(b_values.size + 1, dtype=np.int64)
        np.cumsum(np.bincount(eb, minlength=b_values.size), out=b_ptr[1:])
        return cls(a_values, b_values, a_ptr, eb.astype(np.int64), cnt, b_ptr,
                   ea[order].astype(np.int64), cnt[order])

    @property
    def n(self) -> int:
        return int(self.a_count.sum())

    @property
    def distinct(self) -> int:
        return int(self.a_count.size)

    def entries(self):
        """(a, b, count) arrays of the distinct pairs, sorted by input then output."""
        ea = np.repeat(np.arange(self.a_values.size), np.diff(self.a_ptr))
        return self.a_values[ea], self.b_values[self.a_b], self.a_count

    def to_pairs(self) -> np.ndarray:
        a, b, c = self.entries()
        return np.stack([np.repeat(a, c), np.repeat(b, c)], axis=1)

    @property
    def real_tokens(self) -> int:
        a, b, c = self.entries()
        return int(np.sum((a + b) * c))


def as_pair_histogram(lengths) -> PairHistogram:
    if isinstance(lengths, PairHistogram):
        return lengths
    return PairHistogram.from_pairs(lengths)
