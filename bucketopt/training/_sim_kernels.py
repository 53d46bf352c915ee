"""Kernels of the lean simulation path (:mod:`bucketopt.training.simulate`): arrays in, arrays out.

They work on lengths in training order (int32 where the lengths fit) and never on sample indices,
so a simulated epoch of tens of millions of samples needs one copy of the lengths and per-batch
arrays. Callers validate first.
"""

from __future__ import annotations

import numpy as np

from ..jit import njit
from ..sorting import search_left


@njit(cache=True)
def greedy_batches(x, token_budget, count, longest, real):
    """Greedy batches over ``x`` in order, continuing an open batch ``(count, longest, real)``.

    A sample joins the open batch while ``(count + 1) * max_len <= token_budget`` (``max_len``
    including the new sample), as tests/naive.py's ``greedy_pack``. Returns the closed
    batches' (sizes, longest, real tokens) and the state of the batch still open at the end, so a
    long stream can be fed in chunks.
    """
    n = x.size
    sizes = np.empty(n + 1, dtype=np.int64)
    tops = np.empty(n + 1, dtype=np.int64)
    reals = np.empty(n + 1, dtype=np.int64)
    b = 0
    for i in range(n):
        v = np.int64(x[i])
        top = v if v > longest else longest
        if count > 0 and (count + 1) * top <= token_budget:
            count += 1
            longest = top
            real += v
        else:
            if count > 0:
                sizes[b] = count
                tops[b] = longest
                reals[b] = real
                b += 1
            count = 1
            longest = v
            real = v
    return sizes[:b].copy(), tops[:b].copy(), reals[:b].copy(), count, longest, real


@njit(cache=True)
def bucket_partition(x, edges):
    """``x`` grouped by bucket (bucket k holds (edges[k-1], edges[k]]), keeping the order inside
    each bucket (a stable counting sort), and the count of each bucket."""
    n = x.size
    k = edges.size
    counts = np.zeros(k, dtype=np.int64)
    for i in range(n):
        counts[_first_at_least(edges, x[i])] += 1
    pos = np.empty(k, dtype=np.int64)
    acc = 0
    for j in range(k):
        pos[j] = acc
        acc += counts[j]
    out = np.empty_like(x)
    for i in range(n):
        g = _first_at_least(edges, x[i])
        out[pos[g]] = x[i]
        pos[g] += 1
    return out, counts


@njit(cache=True)
def sorted_greedy(values, counts, token_budget):
    """Greedy batches over all samples sorted by length, from the histogram alone.

    Inside a run of equal lengths ``w`` every batch but the first and the last holds
    ``token_budget // w`` samples, so each run adds at most two records. Returns records
    ``(sizes, longest, real, multiplicity)`` in build order: record ``r`` stands for
    ``multiplicity[r]`` consecutive identical batches.
    """
    m = values.size
    sizes = np.empty(2 * m + 1, dtype=np.int64)
    tops = np.empty(2 * m + 1, dtype=np.int64)
    reals = np.empty(2 * m + 1, dtype=np.int64)
    mult = np.empty(2 * m + 1, dtype=np.int64)
    r = 0
    count = 0
    longest = 0
    real = 0
    for j in range(m):
        w = np.int64(values[j])
        c = np.int64(counts[j])
        if c <= 0:
            continue
        cap = token_budget // w  # (count + 1) * w <= token_budget
        if count > 0:
            if count + 1 <= cap:
                a = min(c, cap - count)
                count += a
                longest = w
                real += a * w
                c -= a
            if c > 0:  # the next sample does not fit: the open batch closes
                sizes[r] = count
                tops[r] = longest
                reals[r] = real
                mult[r] = 1
                r += 1
                count = 0
        if c > 0:
            full = c // cap
            rest = c - full * cap
            if full > 0:
                sizes[r] = cap
                tops[r] = w
                reals[r] = cap * w
                mult[r] = full
                r += 1
            if rest > 0:
                count = rest
                longest = w
                real = rest * w
    if count > 0:
        sizes[r] = count
        tops[r] = longest
        reals[r] = real
        mult[r] = 1
        r += 1
    return sizes[:r].copy(), tops[:r].copy(), reals[:r].copy(), mult[:r].copy()


@njit(cache=True)
def _first_at_least(edges, v):
    # the first edge >= v, the last edge where none is (a length above every edge: the last
    # group)
    return min(search_left(edges, v), edges.size - 1)


@njit(cache=True)
def _group_of(edges, lut, v):
    if lut.size:  # a table of every length's group (lengths up to lut.size - 1)
        return lut[v]
    return _first_at_least(edges, v)


@njit(cache=True)
def group_indices(idx, lengths, edges, lut):
    """The indices ``idx`` grouped by the position of ``lengths[idx]`` among ``edges`` (the
    first edge >= the length), keeping their order inside a group: a stable counting sort, the
    same as ``idx[np.argsort(np.searchsorted(edges, lengths[idx]), kind="stable")]``.
    ``lut``: that position for every length (empty: a binary search per sample).
    Returns the grouped indices and each group's count."""
    n = idx.size
    k = edges.size
    counts = np.zeros(k, dtype=np.int64)
    for i in range(n):
        counts[_group_of(edges, lut, lengths[idx[i]])] += 1
    pos = np.empty(k, dtype=np.int64)
    acc = 0
    for j in range(k):
        pos[j] = acc
        acc += counts[j]
    out = np.empty_like(idx)
    for i in range(n):
        g = _group_of(edges, lut, lengths[idx[i]])
        out[pos[g]] = idx[i]
        pos[g] += 1
    return out, counts


@njit(cache=True)
def place_batches(order, starts, sizes, batch_order):
    """The batches (``starts``, ``sizes``) of ``order`` listed in ``batch_order``, one after
    the other (batches left out of ``batch_order`` are left out)."""
    total = 0
    for b in batch_order:
        total += sizes[b]
    out = np.empty(total, dtype=order.dtype)
    at = 0
    for b in batch_order:
        s = starts[b]
        for j in range(sizes[b]):
            out[at + j] = order[s + j]
        at += sizes[b]
    return out


@njit(cache=True)
def best_fit_decreasing(lengths_desc, capacity):
    """Best-fit-decreasing bin packing of lengths (sorted decreasing) into rows of ``capacity``.

    Each length goes to the open row with the least room that still fits it (ties: the row that
    reached that room last), else to a new row. A segment tree over the room values finds that
    row in O(log capacity). Returns the row of every length, in input order.
    """
    n = lengths_desc.size
    size = 1
    while size < capacity + 1:
        size *= 2
    tree = np.zeros(2 * size, dtype=np.int64)  # rows with room r live in leaf size + r
    head = np.full(capacity + 1, -1, dtype=np.int64)  # rows per room value, a linked stack
    nxt = np.full(n, -1, dtype=np.int64)
    row_of = np.empty(n, dtype=np.int64)
    rows = 0
    for t in range(n):
        x = lengths_desc[t]
        # smallest room r >= x with a row in it
        r = -1
        node = x + size
        if tree[node] > 0:
            r = x
        else:
            while node > 1:
                if node % 2 == 0 and tree[node + 1] > 0:
                    node = node + 1
                    break
                node //= 2
            if node > 1:
                while node < size:
                    node = 2 * node if tree[2 * node] > 0 else 2 * node + 1
                r = node - size
        if r < 0:
            b = rows
            rows += 1
            left = capacity - x
        else:
            # take the row that reached room r last (the head of its stack)
            b = head[r]
            head[r] = nxt[b]
            node = r + size
            while node >= 1:
                tree[node] -= 1
                node //= 2
            left = r - x
        row_of[t] = b
        nxt[b] = head[left]
        head[left] = b
        node = left + size
        while node >= 1:
            tree[node] += 1
            node //= 2
    return row_of
