"""Kernels of :mod:`bucketopt.training.packing` (rows of documents under a token capacity).

Arrays and numbers in, arrays out; the callers in ``packing.py`` validate first. Kept apart from
``_kernels.py`` (the solver's DP kernels) so the sampler does not load those.
"""

from __future__ import annotations

import numpy as np

from ..jit import njit
from ..sorting import sort_ints


@njit(cache=True)
def _lay_out(row_of, items, rows, order, starts, out, first_row):
    """Write ``items`` (item t goes to row ``row_of[t]`` of ``rows``) into ``order`` from ``out``,
    row after row in row order, items in their given order; the rows' offsets go to ``starts``
    from ``first_row``."""
    count = np.zeros(rows + 1, dtype=np.int64)
    for t in range(row_of.size):
        count[row_of[t] + 1] += 1
    for r in range(rows):
        count[r + 1] += count[r]
    for r in range(rows):
        starts[first_row + r] = out + count[r]
    for t in range(row_of.size):
        order[out + count[row_of[t]]] = items[t]
        count[row_of[t]] += 1


@njit(cache=True)
def greedy_starts(lengths, capacity):
    """Row starts of greedy packing: walk in order, open a new row where the next document
    would take the row's tokens over ``capacity``."""
    n = lengths.size
    starts = np.empty(n, dtype=np.int64)
    rows = 0
    used = capacity + 1  # no row open yet
    for i in range(n):
        x = lengths[i]
        if used + x > capacity:
            starts[rows] = i
            rows += 1
            used = x
        else:
            used += x
    return starts[:rows].copy()


# --- best-fit decreasing over length classes ----------------------------------------------------
#
# Best-fit decreasing takes the documents longest first and puts each into the open row with the
# least room that still fits it (ties: the row opened first), else into a new row. Documents of
# one length x arrive together, and the row that takes one keeps taking them: its room r falls
# to r - x, which is then the least room >= x (no room lies in [x, r): r was the least). So a row
# with room r takes floor(r / x) of them in a row, rows of equal room are taken in opening order,
# and a new row takes floor(capacity / x). The planner below runs that on *groups* of rows with
# equal room and consecutive opening numbers, one length class at a time, with two heaps (rooms
# that fit the current length, by (room, first row); rooms below it, by room, admitted as the
# lengths fall). It records events "rows a .. a+f-1 take q documents of this class each" and lays
# the positions out afterwards, in O(n) writes. Groups: at most 4 per class; events: at most
# one per group touched, each consuming >= 1 document. The rows are exactly those of the
# one-document-at-a-time reference (tests/naive.py: bfd_window_rows).


@njit(cache=True)
def _heap_less(key, tie, a, b, sign):
    """Heap order: ``sign`` 1 for a min-heap on (key, tie), -1 for a max-heap on key."""
    if sign > 0:
        return key[a] < key[b] or (key[a] == key[b] and tie[a] < tie[b])
    return key[a] > key[b]


@njit(cache=True)
def _heap_push(heap, size, item, key, tie, sign):
    heap[size] = item
    i = size
    while i > 0:
        parent = (i - 1) // 2
        if _heap_less(key, tie, heap[i], heap[parent], sign):
            heap[i], heap[parent] = heap[parent], heap[i]
            i = parent
        else:
            break
    return size + 1


@njit(cache=True)
def _heap_pop(heap, size, key, tie, sign):
    """Remove the top; returns the new size (the top was ``heap[0]`` before the call)."""
    size -= 1
    heap[0] = heap[size]
    i = 0
    while True:
        left = 2 * i + 1
        best = i
        if left < size and _heap_less(key, tie, heap[left], heap[best], sign):
            best = left
        if left + 1 < size and _heap_less(key, tie, heap[left + 1], heap[best], sign):
            best = left + 1
        if best == i:
            return size
        heap[i], heap[best] = heap[best], heap[i]
        i = best


@njit(cache=True)
def class_table(lengths, top):
    """Length classes by a table of ``top + 1`` slots (``top`` the longest length; the caller
    bounds it): (``slot[x]`` the class of length x, 0 the longest; the distinct lengths,
    decreasing)."""
    slot = np.zeros(top + 1, dtype=np.int64)
    for i in range(lengths.size):
        slot[lengths[i]] = 1
    m = 0
    for v in range(top, 0, -1):
        if slot[v]:
            m += 1
    values = np.empty(m, dtype=np.int64)
    c = 0
    for v in range(top, 0, -1):
        if slot[v]:
            slot[v] = c
            values[c] = v
            c += 1
    return slot, values


@njit(cache=True)
def _grow(a, need):
    if need <= a.size:
        return a
    out = np.empty(max(need, 2 * a.size), dtype=np.int64)
    for t in range(a.size):  # (a loop: a slice assignment compiles numba's shape checks)
        out[t] = a[t]
    return out


@njit(cache=True)
def _bfd_window(keys, slot, values, capacity, lo, hi, count, order, starts, out, first_row):
    """Best-fit decreasing of the documents ``lo .. hi - 1`` (document i in class
    ``slot[keys[i]]``, of length ``values[slot[keys[i]]]``); writes their positions into
    ``order`` from ``out`` row after row (rows in opening order, documents in placement order)
    and the rows' offsets into ``starts`` from ``first_row``. ``count`` (one zero per class) is
    used and left zeroed. Returns the rows."""
    w = hi - lo
    # the window's classes, longest first, and its positions by class (stable: counting sort)
    used = np.empty(min(w, values.size), dtype=np.int64)
    u = 0
    for i in range(lo, hi):
        c = slot[keys[i]]
        if count[c] == 0:
            used[u] = c
            u += 1
        count[c] += 1
    used = sort_ints(used[:u].copy())  # (np.sort's values; a small sort to compile)
    offset = np.empty(u + 1, dtype=np.int64)
    offset[0] = 0
    for j in range(u):
        offset[j + 1] = offset[j] + count[used[j]]
        count[used[j]] = offset[j]  # now the next free slot of the class
    by_class = np.empty(w, dtype=np.int64)
    for i in range(lo, hi):
        c = slot[keys[i]]
        by_class[count[c]] = i
        count[c] += 1
    for j in range(u):
        count[used[j]] = 0
    # groups of rows: room, first row, rows
    g_cap = 4 * u + 4
    room = np.empty(g_cap, dtype=np.int64)
    first = np.empty(g_cap, dtype=np.int64)
    size = np.empty(g_cap, dtype=np.int64)
    fit = np.empty(g_cap, dtype=np.int64)  # min-heap on (room, first row): rooms >= x
    low = np.empty(g_cap, dtype=np.int64)  # max-heap on room: rooms < x
    # (counters as int64 variables, not literals: one compiled signature of each helper a heap;
    # the heaps' signs stay literals, so each heap's order compiles without a branch)
    n_fit = np.int64(0)
    n_low = np.int64(0)
    groups = np.int64(0)
    # events: rows a .. a + f - 1 take q documents each from by_class[src ..]
    ev_a = np.empty(2 * u + 16, dtype=np.int64)
    ev_f = np.empty(2 * u + 16, dtype=np.int64)
    ev_q = np.empty(2 * u + 16, dtype=np.int64)
    n_ev = np.int64(0)
    rows = np.int64(0)
    for j in range(u):
        x = values[used[j]]
        c = offset[j + 1] - offset[j]
        while n_low > 0 and room[low[0]] >= x:
            top = low[0]
            n_low = _heap_pop(low, n_low, room, first, -1)
            n_fit = _heap_push(fit, n_fit, top, room, first, 1)
        while c > 0:
            if n_ev + 2 > ev_a.size:
                ev_a = _grow(ev_a, n_ev + 2)
                ev_f = _grow(ev_f, n_ev + 2)
                ev_q = _grow(ev_q, n_ev + 2)
            if n_fit == 0:  # no open row fits: new rows take floor(capacity / x) each
                q = capacity // x
                f = c // q
                r = c - f * q
                if f > 0:
                    ev_a[n_ev], ev_f[n_ev], ev_q[n_ev] = rows, f, q
                    n_ev += 1
                    room[groups], first[groups], size[groups] = capacity - q * x, rows, f
                    if room[groups] > 0:
                        n_low = _heap_push(low, n_low, groups, room, first, -1)
                    groups += 1
                    rows += f
                if r > 0:
                    ev_a[n_ev], ev_f[n_ev], ev_q[n_ev] = rows, 1, r
                    n_ev += 1
                    room[groups], first[groups], size[groups] = capacity - r * x, rows, 1
                    n_low = _heap_push(low, n_low, groups, room, first, -1)
                    groups += 1
                    rows += 1
                c = 0
                break
            g = fit[0]
            n_fit = _heap_pop(fit, n_fit, room, first, 1)
            q = room[g] // x
            k = size[g]
            if c >= k * q:  # every row of the group fills up with this length
                ev_a[n_ev], ev_f[n_ev], ev_q[n_ev] = first[g], k, q
                n_ev += 1
                c -= k * q
                room[g] -= q * x
                if room[g] > 0:
                    n_low = _heap_push(low, n_low, g, room, first, -1)
                continue
            f = c // q
            r = c - f * q
            a = first[g]
            rest = k - f - (1 if r > 0 else 0)
            if f > 0:
                ev_a[n_ev], ev_f[n_ev], ev_q[n_ev] = a, f, q
                n_ev += 1
                room[groups], first[groups], size[groups] = room[g] - q * x, a, f
                if room[groups] > 0:
                    n_low = _heap_push(low, n_low, groups, room, first, -1)
                groups += 1
            if r > 0:
                ev_a[n_ev], ev_f[n_ev], ev_q[n_ev] = a + f, 1, r
                n_ev += 1
                room[groups], first[groups], size[groups] = room[g] - r * x, a + f, 1
                n_low = _heap_push(low, n_low, groups, room, first, -1)
                groups += 1
            if rest > 0:  # the untouched rows keep their room
                first[g] = a + k - rest
                size[g] = rest
                n_fit = _heap_push(fit, n_fit, g, room, first, 1)
            c = 0
    # lay the documents out: row sizes, offsets, then the events in placement order
    cursor = np.zeros(rows + 1, dtype=np.int64)
    for e in range(n_ev):
        cursor[ev_a[e]] += ev_q[e]
        cursor[ev_a[e] + ev_f[e]] -= ev_q[e]
    total = 0
    run = 0
    for r in range(rows):
        run += cursor[r]
        starts[first_row + r] = out + total
        cursor[r] = out + total
        total += run
    src = 0
    for e in range(n_ev):
        q = ev_q[e]
        for r in range(ev_a[e], ev_a[e] + ev_f[e]):
            at = cursor[r]
            for t in range(q):
                order[at + t] = by_class[src + t]
            cursor[r] = at + q
            src += q
    return rows


@njit(cache=True)
def bfd_windows(keys, slot, values, capacity, window):
    """Best-fit decreasing inside consecutive windows of ``window`` documents.

    Document i has length ``values[slot[keys[i]]]``: ``slot`` maps a key to its length class (0
    the longest), ``values`` the classes' lengths (decreasing). Returns (order, starts):
    ``order`` lists positions, row after row; rows never cross a window and appear in the order
    they were opened. Inside a window the documents go longest first (ties: the earlier position
    first) to the open row with the least room that still fits them (ties: the row opened
    first), else to a new row.
    """
    n = keys.size
    order = np.empty(n, dtype=np.int64)
    starts = np.empty(n, dtype=np.int64)
    count = np.zeros(values.size, dtype=np.int64)
    n_rows = np.int64(0)
    for lo in range(0, n, window):
        hi = min(n, lo + window)
        n_rows += _bfd_window(keys, slot, values, capacity, lo, hi, count, order, starts, lo,
                              n_rows)
    return order, starts[:n_rows].copy()


@njit(cache=True)
def balance_kernel(lengths, weights, order, starts, world_size, capacity):
    """Longest-processing-time dealing of each step's documents over ``world_size`` rows.

    ``order``/``starts`` are rows in training order (step i = rows i*G .. i*G + G - 1). For each
    step the documents are taken by decreasing weight (ties: longer first, then earlier) and each
    goes to the row of least weight among those it fits in (tokens <= capacity; ties: the lower
    rank). The dealt rows replace the step's rows only when every document found a row and the
    heaviest row is strictly lighter than the heaviest original row; otherwise the step keeps
    its rows. A last step of fewer than G rows is dealt over G rows when it has at least G
    documents. Returns (order, starts, dealt steps).
    """
    n = order.size
    n_rows = starts.size
    g = world_size
    new_order = np.empty(n, dtype=np.int64)
    new_starts = np.empty(n_rows + g, dtype=np.int64)
    bounds = np.empty(n_rows + 1, dtype=np.int64)
    bounds[:n_rows] = starts
    bounds[n_rows] = n
    out = 0
    rows_out = 0
    dealt = 0
    load = np.empty(g, dtype=np.float64)
    tokens = np.empty(g, dtype=np.int64)
    for first in range(0, n_rows, g):
        last = min(n_rows, first + g)
        lo = bounds[first]
        hi = bounds[last]
        m = hi - lo
        # the heaviest original row
        old_max = 0.0
        for r in range(first, last):
            s = 0.0
            for t in range(bounds[r], bounds[r + 1]):
                s += weights[order[t]]
            if s > old_max:
                old_max = s
        ok = m >= g
        if ok:
            docs = order[lo:hi]
            w = weights[docs]
            ln = lengths[docs]
            # decreasing weight, then decreasing length, then position (lexsort: last key first)
            rank = np.argsort(np.arange(m), kind="mergesort")
            rank = rank[np.argsort(-ln[rank], kind="mergesort")]
            rank = rank[np.argsort(-w[rank], kind="mergesort")]
            load[:] = 0.0
            tokens[:] = 0
            row_of = np.empty(m, dtype=np.int64)
            for t in range(m):
                j = rank[t]
                x = ln[j]
                best = -1
                for r in range(g):
                    if tokens[r] + x <= capacity and (best < 0 or load[r] < load[best]):
                        best = r
                if best < 0:
                    ok = False
                    break
                load[best] += w[j]
                tokens[best] += x
                row_of[t] = best
            if ok:
                new_max = 0.0
                for r in range(g):
                    if load[r] > new_max:
                        new_max = load[r]
                ok = new_max < old_max
            if ok:
                _lay_out(row_of, docs[rank], g, new_order, new_starts, out, rows_out)
                rows_out += g
                dealt += 1
        if not ok:
            for r in range(first, last):
                new_starts[rows_out] = out + bounds[r] - lo
                rows_out += 1
            new_order[out:out + m] = order[lo:hi]
        out += m
    return new_order, new_starts[:rows_out].copy(), dealt
