"""Samples longer than ``max_length``: truncated, dropped or split into chunks, on the histogram.

``overflow="truncate"``: a sample longer than N is cut to N tokens (the tokens past N are lost).
``"drop"``: it is left out of the epoch. ``"split"``: it becomes ceil(len / N) samples, N tokens
each and the rest in the last one, as pretraining pipelines chunk long documents (no token lost).
The report says how many samples and tokens the policy touched; the sampler applies the same
policy per sample (``BucketBatchSampler(..., max_length=, overflow=)``).
"""

from __future__ import annotations

import numpy as np

from ..errors import BucketoptError
from ..validate import shown
from .histogram import Histogram

OVERFLOWS = ("truncate", "drop", "split")
# overflow_items() plans at most this many chunks one by one (each costs ~24 bytes in the plan's
# arrays); the histogram form, apply_overflow(), has no such limit.
SPLIT_ITEMS_LIMIT = 1 << 25


def check_max_length(max_length, overflow):
    if overflow not in OVERFLOWS:
        raise BucketoptError(f"`overflow` must be one of {', '.join(OVERFLOWS)}; got "
                             f"{shown(overflow)}.", param="overflow")
    if max_length is None:
        return None
    if isinstance(max_length, float) and max_length.is_integer():
        max_length = int(max_length)
    if isinstance(max_length, bool) or not isinstance(max_length, (int, np.integer)) \
            or max_length < 1:
        raise BucketoptError(f"`max_length` must be an integer >= 1; got {shown(max_length)}.",
                             param="max_length")
    if max_length > 2**60:
        raise BucketoptError(f"`max_length` must be at most 2**60; got {shown(max_length)}.",
                             param="max_length")
    return int(max_length)


def apply_overflow(hist: Histogram, max_length, overflow="truncate"):
    """(histogram after the policy, report dict or None when ``max_length`` is None).

    Examples
    --------
    >>> h, report = apply_overflow(Histogram.from_lengths([3, 10, 25]), 8, "split")
    >>> h.values.tolist(), h.counts.tolist(), report["samples_over"]
    ([1, 2, 3, 8], [1, 1, 1, 4], 2)
    """
    max_length = check_max_length(max_length, overflow)
    if max_length is None:
        return hist, None
    over = hist.values > max_length
    report = {"max_length": max_length, "overflow": overflow,
              "samples_over": int(hist.counts[over].sum()),
              "tokens_over": int(((hist.values[over] - max_length) * hist.counts[over]).sum())}
    if not over.any():
        report.update(samples_after=hist.n, tokens_lost=0)
        return hist, report
    keep_v, keep_c = hist.values[~over], hist.counts[~over]
    long_v, long_c = hist.values[over], hist.counts[over]
    if overflow == "truncate":
        values = np.r_[keep_v, max_length]
        counts = np.r_[keep_c, long_c.sum()]
        lost = report["tokens_over"]
    elif overflow == "drop":
        if keep_v.size == 0:
            raise BucketoptError(f"max_length={max_length} with overflow='drop' leaves no "
                                 f"sample (the shortest is {hist.min_length}).", param=None)
        values, counts = keep_v, keep_c
        lost = int((long_v * long_c).sum())
    else:
        full, rest = np.divmod(long_v, max_length)
        values = np.r_[keep_v, max_length, rest[rest > 0]]
        counts = np.r_[keep_c, (full * long_c).sum(), long_c[rest > 0]]
        lost = 0
    out = Histogram(values.astype(np.int64), counts.astype(np.int64))
    report.update(samples_after=out.n, tokens_lost=lost)
    return out, report


def describe(report) -> str:
    """One line for people."""
    if report is None:
        return ""
    what = {"truncate": "truncated to", "drop": "dropped (longer than", "split": "split into "
            "chunks of"}[report["overflow"]]
    close = ")" if report["overflow"] == "drop" else ""
    return (f"{report['samples_over']:,} samples longer than {report['max_length']:,} tokens "
            f"{what} {report['max_length']:,}{close}: {report['tokens_lost']:,} tokens lost, "
            f"{report['samples_after']:,} samples planned.")


def overflow_items(lengths: np.ndarray, max_length, overflow="truncate"):
    """Per-sample form of the policy for the sampler: (item lengths, dataset index of every item
    or None when items are the samples, chunk number of every item or None).

    Examples
    --------
    >>> lengths, index, chunk = overflow_items(np.array([3, 10]), 4, "split")
    >>> lengths.tolist(), index.tolist(), chunk.tolist()
    ([3, 4, 4, 2], [0, 1, 1, 1], [0, 0, 1, 2])
    """
    max_length = check_max_length(max_length, overflow)
    if max_length is None or not np.any(lengths > max_length):
        return lengths, None, None
    if overflow == "truncate":
        return np.minimum(lengths, max_length), None, None
    if overflow == "drop":
        index = np.flatnonzero(lengths <= max_length)
        if index.size == 0:
            raise BucketoptError(f"max_length={max_length} with overflow='drop' leaves no "
                                 f"sample (the shortest is {int(lengths.min())}).", param=None)
        return lengths[index], index, None
    chunks = -(-lengths // max_length)
    total = int(chunks.sum(dtype=np.float64)) if chunks.size else 0
    if total > SPLIT_ITEMS_LIMIT:  # counted before any per-chunk array exists
        raise BucketoptError(
            f"max_length={max_length} with overflow='split' cuts {lengths.size:,} samples into "
            f"{total:,} chunks, more than the {SPLIT_ITEMS_LIMIT:,} one plan can hold; use a "
            "larger max_length (or overflow='truncate').", param=None)
    index = np.repeat(np.arange(lengths.size), chunks)
    first = np.r_[0, np.cumsum(chunks)[:-1]]
    chunk = np.arange(index.size) - np.repeat(first, chunks)
    item = np.minimum(lengths[index] - chunk * max_length, max_length)
    return item.astype(np.int64), index, chunk


class OverflowDataset:
    """A map-style dataset seen through the sampler's ``max_length`` policy.

    ``dataset[i]`` is a sequence (or a dict of sequences, e.g. ``input_ids`` and
    ``attention_mask``); item ``i`` is cut to ``max_length`` tokens, and item ``(i, c)`` (what the
    sampler yields with ``overflow="split"``) is its c-th chunk of ``max_length`` tokens.

    Examples
    --------
    >>> data = OverflowDataset([[1, 2, 3, 4, 5]], max_length=2)
    >>> data[(0, 2)], data[0]
    ([5], [1, 2])
    """

    def __init__(self, dataset, max_length: int):
        self.dataset = dataset
        self.max_length = check_max_length(max_length, "truncate")

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, item):
        index, chunk = item if isinstance(item, tuple) else (item, 0)
        lo = chunk * self.max_length
        sample = self.dataset[index]
        if isinstance(sample, dict):
            return {key: value[lo:lo + self.max_length] for key, value in sample.items()}
        return sample[lo:lo + self.max_length]
