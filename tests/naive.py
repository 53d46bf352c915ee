"""Slow, obviously-correct reference implementations (oracles) for the tests.

Nothing here is fast or clever: loops over samples, brute force over every boundary subset, the
textbook O(k m^2) dynamic program.
"""

from __future__ import annotations

import itertools
import math
import numbers

import numpy as np

from bucketopt.groups import INF


def edge_padding(lengths, boundaries):
    """Padded tokens when every sample is padded to the edge of its bucket (per-sample loop)."""
    total = 0
    for x in lengths:
        for b in boundaries:
            if x <= b:
                total += b - x
                break
        else:
            raise ValueError(f"length {x} above the last boundary")
    return total


def bucket_counts(lengths, boundaries):
    counts = [0] * len(boundaries)
    for x in lengths:
        for i, b in enumerate(boundaries):
            if x <= b:
                counts[i] += 1
                break
    return counts


def shares_ok(lengths, boundaries, min_share, max_share):
    """Every non-empty bucket holds between min_share and max_share of the samples."""
    n = len(lengths)
    tol = 1e-9 * n
    for c in bucket_counts(lengths, boundaries):
        if c and not (min_share * n - tol <= c <= max_share * n + tol):
            return False
    return True


def candidate_last_edge(lengths, align):
    return math.ceil(max(lengths) / align) * align


def brute_force(cost, inner, last, k, lengths, min_share, max_share, *, rel_tol=0.0):
    """Minimum of ``cost(edges)`` over every set of at most k edges: any subset of ``inner``
    followed by ``last``, keeping only sets whose non-empty buckets respect the shares.

    Returns (cost, boundaries) or None when no set satisfies the constraints. A later set wins
    only when it is lower by more than ``rel_tol`` (for float costs).
    """
    best = None
    for size in range(0, k):
        for combo in itertools.combinations(inner, size):
            edges = (*combo, last)
            if not shares_ok(lengths, edges, min_share, max_share):
                continue
            value = cost(edges)
            if best is None or value < best[0] - rel_tol * abs(value):
                best = (value, edges)
    return best


def brute_force_edge(lengths, k, *, min_share=0.0, max_share=1.0, align=1):
    """Minimum edge padding over every set of at most k edges (all multiples of align).

    Returns (padding, boundaries) or None when no set satisfies the constraints.
    """
    last = candidate_last_edge(lengths, align)
    return brute_force(lambda edges: edge_padding(lengths, edges), range(align, last, align),
                       last, k, lengths, min_share, max_share)


def textbook_dp_edge(lengths, k, *, min_share=0.0, max_share=1.0, align=1):
    """The textbook O(k m^2) DP over candidate edges (each distinct length rounded up to align).

    Returns the minimum padding with at most k non-empty buckets, or None if infeasible.
    """
    n = len(lengths)
    edges = sorted({math.ceil(x / align) * align for x in lengths})
    m = len(edges)
    # cnt[j], tok[j]: samples and tokens with edge <= edges[j-1]
    cnt = [0] * (m + 1)
    tok = [0] * (m + 1)
    for j, e in enumerate(edges, start=1):
        members = [x for x in lengths if math.ceil(x / align) * align <= e]
        cnt[j] = len(members)
        tok[j] = sum(members)
    tol = 1e-9 * n
    inf = float("inf")
    prev = [0] + [inf] * m
    best = inf
    for _ in range(k):
        cur = [0] + [inf] * m
        for j in range(1, m + 1):
            for i in range(j):
                c = cnt[j] - cnt[i]
                if not (min_share * n - tol <= c <= max_share * n + tol):
                    continue
                cost = prev[i] + edges[j - 1] * c - (tok[j] - tok[i])
                cur[j] = min(cur[j], cost)
        prev = cur
        best = min(best, cur[m])
    return None if best == inf else best


# --- sampler and diversity oracles (tests/test_sampler.py) ---------------------------------------
def edge_layers_quadratic(edges, prefix_count, prefix_tokens, win_lo, win_hi, kmax):
    """The textbook O(k g^2) edge DP with the contract of
    :func:`bucketopt.objectives._edge_kernels.edge_layers`: (opt, best), ``opt[k-1, j]`` the
    smallest best start of the last bucket of a cover of groups 1..j by at most k buckets (-1
    when none), ``best[k-1]`` the cost for j = g (``INF`` when unreachable). Starts of the end
    j range over ``win_lo[j] .. min(win_hi[j], j - 1)``; each layer scans them all (numpy over
    the starts of one end, int64 arithmetic as in the kernel)."""
    edges, pc, pt = (np.asarray(a, dtype=np.int64) for a in (edges, prefix_count, prefix_tokens))
    g = edges.size - 1
    opt = np.full((kmax, g + 1), -1, dtype=np.int32)
    best = np.empty(kmax, dtype=np.int64)
    prev = np.full(g + 1, INF, dtype=np.int64)
    prev[0] = 0
    for k in range(kmax):
        cur = np.full(g + 1, INF, dtype=np.int64)
        cur[0] = 0
        for j in range(1, g + 1):
            starts = np.arange(int(win_lo[j]), min(int(win_hi[j]), j - 1) + 1)
            if starts.size == 0:
                continue
            cost = prev[starts] + edges[j] * (pc[j] - pc[starts]) - (pt[j] - pt[starts])
            at = int(np.argmin(cost))  # the first, so the smallest start among ties
            cur[j] = min(int(cost[at]), INF)
            opt[k, j] = starts[at]
        best[k] = cur[g]
        prev = cur
    return opt, best


def greedy_pack(lengths, token_budget):
    """Greedy batches of lengths taken in order: join while (count + 1) * max_len <= budget."""
    batches, current, longest = [], [], 0
    for i, x in enumerate(lengths):
        if current and (len(current) + 1) * max(longest, x) <= token_budget:
            current.append(i)
            longest = max(longest, x)
        else:
            if current:
                batches.append(current)
            current, longest = [i], x
    if current:
        batches.append(current)
    return batches


def greedy_starts(lengths, segment_start, token_budget):
    """Start of every greedy batch (:func:`greedy_pack`) over ``lengths`` taken in order, with a
    new batch forced wherever ``segment_start`` is True (batches never cross a bucket)."""
    lengths = [int(x) for x in lengths]
    bounds = [i for i in range(1, len(lengths)) if segment_start[i]] + [len(lengths)]
    starts, lo = [], 0
    for hi in bounds:
        starts += [lo + b[0] for b in greedy_pack(lengths[lo:hi], int(token_budget))]
        lo = hi
    return starts


def step_mix_gap(lengths, steps):
    """Mean TV distance between each step's share of samples per length decile and the dataset's
    (cuts at the 10th..90th percentiles, a length equal to a cut counts above it)."""
    ordered = sorted(lengths)
    n = len(ordered)
    cuts = []
    for p in range(10, 100, 10):  # numpy's linear percentile rule, written out
        pos = p / 100 * (n - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, n - 1)
        cuts.append(ordered[lo] + (pos - lo) * (ordered[hi] - ordered[lo]))

    def bin_of(x):
        return sum(1 for c in cuts if x >= c)

    dataset = [0.0] * 10
    for x in lengths:
        dataset[bin_of(x)] += 1 / n
    total = 0.0
    for step in steps:
        share = [0.0] * 10
        for i in step:
            share[bin_of(lengths[i])] += 1 / len(step)
        total += 0.5 * sum(abs(a - b) for a, b in zip(share, dataset))
    return total / len(steps)


def epoch_churn(batches_e, batches_e1):
    """Share of the batches of epoch e+1 equal (as sets) to some batch of epoch e."""
    same = 0
    for b in batches_e1:
        if any(sorted(b) == sorted(a) for a in batches_e):
            same += 1
    return same / len(batches_e1)


# --- cost model oracles (tests/test_costmodel.py) ------------------------------------------------
def batch_size(rule, edge):
    """A bucket's batch size: ``rule`` is a token budget T (B = T // edge), a function
    edge -> B, or a sequence indexed by the edge (a batch-size table)."""
    if callable(rule):
        return int(rule(edge))
    if isinstance(rule, numbers.Integral):
        return int(rule) // edge
    return int(rule[edge])


class TableRule:
    """A batch-size rule given as a table ``sizes[edge]`` (any non-increasing sequence), with
    the interface solve(memory=...) accepts for rule objects."""

    def __init__(self, sizes):
        self.sizes = [int(s) for s in sizes]

    def batch_size(self, edges, token_budget=None):
        import numpy as np

        out = []
        for e in np.atleast_1d(edges):
            s = self.sizes[min(int(e), len(self.sizes) - 1)]
            out.append(s if token_budget is None else min(s, token_budget // int(e)))
        return np.asarray(out, dtype=np.int64)

    def peak_bytes(self, sizes, edges):
        import numpy as np

        return np.full(np.shape(sizes), np.nan)

    def to_dict(self):
        return {"table": self.sizes}


def memory_batch_size(m0, m1, m2, usable, edge, limit=2**62):
    """The largest s <= ``limit`` with m0 + m1 s b + m2 s b^2 <= usable, by bisection on the
    rule's definition (the peak grows with s; no algebra)."""
    def fits(s):
        return s <= limit and m0 + m1 * s * edge + m2 * s * edge * edge <= usable

    lo, hi = 0, 1
    while fits(hi):
        lo, hi = hi, 2 * hi
    while hi - lo > 1:  # fits(lo), not fits(hi)
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def micro_batch_seconds(rows, padded_len, alpha, beta, gamma):
    return alpha + beta * rows * padded_len + gamma * rows * padded_len * padded_len


def epoch_seconds(sizes, padded_lens, world_size, alpha, beta, gamma):
    """Loop over steps: batches i*G .. i*G+G-1 run together; a step lasts as long as its slowest
    batch."""
    total = 0.0
    for start in range(0, len(sizes), world_size):
        total += max(micro_batch_seconds(sizes[i], padded_lens[i], alpha, beta, gamma)
                     for i in range(start, min(start + world_size, len(sizes))))
    return total


def _bucket_members(lengths, boundaries):
    members = [[] for _ in boundaries]
    for x in lengths:
        for i, b in enumerate(boundaries):
            if x <= b:
                members[i].append(x)
                break
    return members


def edge_time(lengths, boundaries, token_budget, alpha, beta, gamma):
    """Summed micro-batch seconds of edge-padded buckets cut into batches of T // edge
    (``token_budget``: T, or any batch-size rule of :func:`batch_size`)."""
    total = 0.0
    for edge, xs in zip(boundaries, _bucket_members(lengths, boundaries)):
        size = batch_size(token_budget, edge)
        for start in range(0, len(xs), size):
            rows = len(xs[start:start + size])
            total += micro_batch_seconds(rows, edge, alpha, beta, gamma)
    return total


def batch_time(lengths, boundaries, token_budget, alpha, beta, gamma):
    """Expected summed seconds under dynamic padding, by enumerating every subset of a bucket.

    A bucket of N samples cut into q batches of B = T // edge and one of r: by symmetry each
    batch of s rows is a uniformly random s-subset, padded to its longest member.
    """
    total = 0.0
    for edge, xs in zip(boundaries, _bucket_members(lengths, boundaries)):
        if not xs:
            continue
        size = min(batch_size(token_budget, edge), len(xs))
        q, r = divmod(len(xs), size)
        for rows, batches in ((size, q), (r, 1)):
            if rows == 0:
                continue
            subsets = list(itertools.combinations(xs, rows))
            mean = sum(micro_batch_seconds(rows, max(c), alpha, beta, gamma)
                       for c in subsets) / len(subsets)
            total += batches * mean
    return total


def brute_force_time(lengths, k, token_budget, alpha, beta, gamma, *, pad="edge",
                     min_share=0.0, max_share=1.0):
    """Minimum summed micro-batch time over every set of at most k edges.

    ``pad="edge"``: every integer edge (lowering an edge to its bucket's longest length never
    adds time, so the solver's candidates, the distinct lengths, must reach the same minimum).
    ``pad="batch"``: edges among the distinct lengths, the solver's candidates (there the edge
    only sets the batch size T // edge). Returns (seconds, boundaries) or None if infeasible.
    """
    cost = edge_time if pad == "edge" else batch_time
    last = max(lengths)
    inner = range(1, last) if pad == "edge" else sorted(set(lengths) - {last})
    return brute_force(lambda edges: cost(lengths, edges, token_budget, alpha, beta, gamma),
                       inner, last, k, lengths, min_share, max_share, rel_tol=1e-12)


def expected_max_exact(xs, m):
    """E[max of m draws without replacement from xs] as a Fraction, from DESIGN.md's formula:
    sum_x x (C(#<=x, m) - C(#<x, m)) / C(N, m)."""
    from fractions import Fraction

    n = len(xs)
    total = 0
    for x in sorted(set(xs)):
        le = sum(1 for y in xs if y <= x)
        lt = sum(1 for y in xs if y < x)
        total += x * (math.comb(le, m) - math.comb(lt, m))
    return Fraction(total, math.comb(n, m))


def expected_bucket_padding_exact(xs, size):
    """Expected padded tokens of one bucket shuffled and cut into batches of ``size`` (the last
    one partial), each padded to its longest member: q*B*E[max_B] + r*E[max_r] - sum (Fraction)."""
    n = len(xs)
    size = min(size, n)
    q, r = divmod(n, size)
    total = q * size * expected_max_exact(xs, size) - sum(xs)
    if r:
        total += r * expected_max_exact(xs, r)
    return total


def bucket_padding_of_histogram(values, counts, size):
    """:func:`expected_bucket_padding_exact` for a bucket given as a histogram (sorted distinct
    ``values`` and their ``counts``), for buckets too large to list (Fraction)."""
    from fractions import Fraction

    values, counts = [int(v) for v in values], [int(c) for c in counts]
    n = sum(counts)
    size = min(size, n)

    def e_max(m):
        total, below = 0, 0
        for v, c in zip(values, counts):
            total += v * (math.comb(below + c, m) - math.comb(below, m))
            below += c
        return Fraction(total, math.comb(n, m))

    q, r = divmod(n, size)
    real = sum(v * c for v, c in zip(values, counts))
    return q * size * e_max(size) + (r * e_max(r) if r else 0) - real


def expected_bucket_padding_enumerated(xs, size):
    """The same expectation by walking every permutation of the bucket (tiny buckets only)."""
    from fractions import Fraction

    total = 0
    count = 0
    for perm in itertools.permutations(xs):
        for start in range(0, len(perm), size):
            batch = perm[start:start + size]
            total += sum(max(batch) - x for x in batch)
        count += 1
    return Fraction(total, count)


def batch_padding_exact(lengths, boundaries, token_budget):
    """Expected dynamic padding of every bucket summed (Fraction), B_k = T // b_k."""
    total = 0
    for edge, xs in zip(boundaries, _bucket_members(lengths, boundaries)):
        if xs:
            total += expected_bucket_padding_exact(xs, batch_size(token_budget, edge))
    return total


def batch_fills(lengths, boundaries, token_budget, min_fill):
    """Does every non-empty bucket's largest batch, min(B, N) rows padded to their longest,
    expect at least min_fill x token_budget padded tokens (exact fractions)?"""
    from fractions import Fraction

    for edge, xs in zip(boundaries, _bucket_members(lengths, boundaries)):
        if xs:
            rows = min(batch_size(token_budget, edge), len(xs))
            # min_fill as the decimal it was written as (0.8 is 4/5, not the binary double just
            # above it, which would refuse a batch filling exactly 0.8 x token_budget)
            if rows * expected_max_exact(xs, rows) < Fraction(repr(min_fill)) * token_budget:
                return False
    return True


def brute_force_batch(lengths, k, token_budget, *, min_share=0.0, max_share=1.0, min_fill=0.0):
    """Minimum expected dynamic padding over every set of at most k edges drawn from the distinct
    lengths (the solver's candidates) whose buckets all meet ``min_fill``. Returns (padding as
    a Fraction, boundaries) or None."""
    last = max(lengths)

    def cost(edges):
        if min_fill > 0 and not batch_fills(lengths, edges, token_budget, min_fill):
            return math.inf
        return batch_padding_exact(lengths, edges, token_budget)

    best = brute_force(cost, sorted(set(lengths) - {last}), last, k, lengths, min_share,
                       max_share)
    return None if best is None or best[0] == math.inf else best


def best_fit_decreasing(lengths, capacity):
    """Rows of best-fit-decreasing packing: each length (longest first) goes to the row with the
    least room that fits it (ties: the row whose room changed last), else to a new row. Returns
    the list of rows, each a list of lengths."""
    rows, rooms, touched = [], [], []
    for clock, x in enumerate(sorted(lengths, reverse=True), start=1):
        fits = [i for i, room in enumerate(rooms) if room >= x]
        if fits:
            i = min(fits, key=lambda i: (rooms[i], -touched[i]))
        else:
            rows.append([])
            rooms.append(capacity)
            touched.append(0)
            i = len(rows) - 1
        rows[i].append(x)
        rooms[i] -= x
        touched[i] = clock
    return rows


# --- the synced step model of objective="time" (tests/test_time_objective.py) -------------------
def synced_step_sizes(n, size, world):
    """Batch sizes of one bucket as the synced sampler makes them, largest first: q batches of
    ``size`` and one of the rest; with world > 1, while the count is not a multiple of world and
    there are samples to split, the `extra` largest batches are split (always the largest piece
    of those, in two: ceil and floor halves)."""
    import heapq

    q, r = divmod(n, size)
    sizes = [size] * q + ([r] if r else [])
    extra = -len(sizes) % world
    if extra > n - len(sizes):
        extra = 0
    top, rest = sizes[:extra], sizes[extra:]
    heap = [-s for s in top]
    heapq.heapify(heap)
    for _ in range(extra):
        s = -heapq.heappop(heap)
        heapq.heappush(heap, -(s - s // 2))
        heapq.heappush(heap, -(s // 2))
    return sorted([-s for s in heap] + rest, reverse=True)


def _expected_step_pad(xs, rows, power):
    """E[M**power], M the longest of `rows` members drawn without replacement (enumeration)."""
    subsets = list(itertools.combinations(xs, rows))
    return sum(max(c) ** power for c in subsets) / len(subsets)


def _expected_step_pad_closed(xs, rows, power):
    """E[M**power] as :func:`_expected_step_pad`, from DESIGN.md's formula
    sum_x x**power (C(#<=x, rows) - C(#<x, rows)) / C(N, rows) (buckets too large to enumerate)."""
    from fractions import Fraction

    total = 0
    for x in sorted(set(xs)):
        le = sum(1 for y in xs if y <= x)
        lt = sum(1 for y in xs if y < x)
        total += x ** power * (math.comb(le, rows) - math.comb(lt, rows))
    return float(Fraction(total, math.comb(len(xs), rows)))


def synced_time(lengths, boundaries, token_budget, alpha, beta, gamma, world, pad="batch",
                closed=False):
    """Expected epoch seconds of the step model: each bucket's batches cut into steps of `world`
    (sorted by size); a step with S rows, w of them in its largest batch, costs
    alpha + w * (beta * M + gamma * M**2), M the longest of its S rows (pad="edge": the edge).
    ``closed``: E[M] by the closed formula instead of enumerating every draw."""
    step_pad = _expected_step_pad_closed if closed else _expected_step_pad
    total = 0.0
    for edge, xs in zip(boundaries, _bucket_members(lengths, boundaries)):
        if not xs:
            continue
        sizes = synced_step_sizes(len(xs), min(batch_size(token_budget, edge), len(xs)), world)
        for start in range(0, len(sizes), world):
            step = sizes[start:start + world]
            w, rows = step[0], sum(step)
            if pad == "edge":
                m1, m2 = edge, edge * edge
            else:
                m1, m2 = step_pad(xs, rows, 1), step_pad(xs, rows, 2)
            total += alpha + w * (beta * m1 + gamma * m2)
    return total


def brute_force_synced(lengths, k, token_budget, alpha, beta, gamma, world, *, pad="batch",
                       min_share=0.0, max_share=1.0, closed=False):
    """Minimum of :func:`synced_time` over every set of at most k edges among the distinct
    lengths. Returns (seconds, boundaries) or None if infeasible."""
    last = max(lengths)
    return brute_force(lambda edges: synced_time(lengths, edges, token_budget, alpha, beta, gamma,
                                                 world, pad, closed),
                       sorted(set(lengths) - {last}), last, k, lengths, min_share, max_share,
                       rel_tol=1e-12)


# --- padding-free rows of documents (tests/test_packing*.py) ---------------------------------
def greedy_rows(lengths, capacity):
    """Greedy rows of positions: walk in order, a document joins the current row while the row's
    tokens stay <= capacity, else it opens a new row."""
    rows, used = [], 0
    for i, x in enumerate(lengths):
        if rows and used + x <= capacity:
            rows[-1].append(i)
            used += x
        else:
            rows.append([i])
            used = x
    return rows


def bfd_window_rows(lengths, capacity, window):
    """Best-fit decreasing inside consecutive windows of `window` positions: longest first (ties:
    earlier position), each into the open row of its window with the least room that fits it
    (ties: the row opened first), else a new row. Rows of positions, in opening order."""
    out = []
    for lo in range(0, len(lengths), window):
        pos = sorted(range(lo, min(len(lengths), lo + window)), key=lambda i: (-lengths[i], i))
        rows, rooms = [], []
        for i in pos:
            fits = [r for r, room in enumerate(rooms) if room >= lengths[i]]
            if fits:
                r = min(fits, key=lambda r: (rooms[r], r))
            else:
                rows.append([])
                rooms.append(capacity)
                r = len(rows) - 1
            rows[r].append(i)
            rooms[r] -= lengths[i]
        out += rows
    return out


def packed_level_seconds(xs, capacity, alpha, beta, gamma, world):
    """The packing-level cost of bucketopt.objectives.packed written out from the documents:
    R = S1 / (T - (rho - 1) / 2) + 1/2 rows (at least 1), rho = S2 / S1; row spread from the room
    a greedy row leaves (uniform in the size-biased straddler) and the renewal-reward variance
    of its attention; each of R / G steps lasts mean + sigma * E[max of G normals]."""
    from bucketopt.objectives.packed import expected_max_normal

    if not xs:
        return 0.0
    t = float(capacity)
    n = len(xs)
    s1, s2, s3 = sum(xs), sum(x * x for x in xs), sum(x ** 3 for x in xs)
    rho = s2 / s1
    rows = max(1.0, s1 / (t - (rho - 1.0) / 2.0) + 0.5)
    var_room = max(0.0, s3 / (3.0 * s1) - (rho / 2.0) ** 2)
    mean_d = s1 / n
    var_att = max(0.0, (t / mean_d) * sum((x * x - rho * x) ** 2 for x in xs) / n)
    sigma = math.sqrt((beta + gamma * rho) ** 2 * var_room + gamma ** 2 * var_att)
    e_g = expected_max_normal(world)
    return (rows * alpha + beta * s1 + gamma * s2 + rows * sigma * e_g) / world


def brute_force_packing_levels(lengths, k, capacity, alpha, beta, gamma, world, *,
                               min_share=0.0, max_share=1.0):
    """Minimum over every set of at most k level edges (distinct lengths) of the summed
    :func:`packed_level_seconds`. Returns (seconds, boundaries) or None."""
    last = max(lengths)

    def cost(edges):
        return sum(packed_level_seconds(xs, capacity, alpha, beta, gamma, world)
                   for xs in _bucket_members(lengths, edges))

    return brute_force(cost, sorted(set(lengths) - {last}), last, k, lengths, min_share,
                       max_share, rel_tol=1e-12)


def attention_balance(attention, world):
    """Sum over steps (rows i*G .. i*G + G - 1; a rank without a row counts 0) of the mean rank
    attention, over the sum over steps of the heaviest rank's attention (1 when nothing)."""
    means, heaviest = 0.0, 0.0
    for first in range(0, len(attention), world):
        step = list(attention[first:first + world]) + [0.0] * world
        step = step[:world]
        means += sum(step) / world
        heaviest += max(step)
    return means / heaviest if heaviest > 0 else 1.0


def recommended_k(ks, values, tolerance, criterion):
    """The sweep's rule, spelled out: the first k (ascending) whose gain to the next k of the
    sweep, divided by the buckets added, is at most ``tolerance`` (padding: fraction saved;
    throughput: Ktok/s gained over k's). None when no k qualifies."""
    pairs = sorted(zip(ks, values))
    for (k, v), (k2, v2) in zip(pairs, pairs[1:]):
        gain = (v - v2) / (k2 - k) if criterion == "padding" else (v2 - v) / v / (k2 - k)
        if gain <= tolerance + 1e-12:
            return k
    return None


# ---- pairs of lengths (input, output): 2-D bins -------------------------------------------

def pair_bin_members(pairs, bins):
    """Per-sample walk of NeMo's strict 2-D selection: the smallest dim0 edge >= the input,
    then the smallest dim1 edge >= the output among that dim0 edge's bins. Returns (members of
    every bin, samples that fit no bin)."""
    members = [[] for _ in bins]
    lost = 0
    dim0 = sorted({e0 for e0, _ in bins})
    for a, b in pairs:
        e0 = next((e for e in dim0 if e >= a), None)
        t = None if e0 is None else next(
            (t for t, (x, y) in enumerate(bins) if x == e0 and y >= b), None)
        if t is None:
            lost += 1
        else:
            members[t].append((a, b))
    return members, lost


def pair_plan_cost(pairs, bins, objective, token_budget=None, coef=None, world=1):
    """Cost of 2-D bins by a per-sample loop: "edge" (exact int), "batch" (expected dynamic
    padding, a Fraction: each batch padded to its longest input and longest output, B =
    T // (e0 + e1)), "time" (seconds of static-shape batches under coef = (alpha, beta_in,
    beta_out, gamma_in, gamma_out, gamma_cross) over ``world`` GPUs). None when a sample fits
    no bin or a bin holds no sample of its shape."""
    members, lost = pair_bin_members(pairs, bins)
    if lost:
        return None
    total = 0
    for (e0, e1), xs in zip(bins, members):
        if not xs:
            continue
        if objective == "edge":
            total += sum((e0 - a) + (e1 - b) for a, b in xs)
            continue
        size = token_budget // (e0 + e1)
        if size < 1:
            return None
        if objective == "batch":
            total += expected_bucket_padding_exact([a for a, _ in xs], size)
            total += expected_bucket_padding_exact([b for _, b in xs], size)
        else:
            alpha, bi, bo, gi, go, gx = coef
            per = bi * e0 + bo * e1 + gi * e0 * e0 + go * e1 * e1 + gx * e0 * e1
            q, r = divmod(len(xs), size)
            total += (q * (alpha + size * per) + ((alpha + r * per) if r else 0)) / world
    return total


def hierarchical_bin_sets(pairs):
    """Every hierarchical bin set with tight edges: the distinct inputs cut into consecutive
    dim0 buckets (edge: the bucket's largest input), each bucket's distinct outputs cut into
    consecutive sub-buckets (edge: the sub-bucket's largest output). Yields (bins, number of
    dim0 buckets, largest number of sub-buckets in one)."""
    inputs = sorted({a for a, _ in pairs})
    for cuts in itertools.product((False, True), repeat=len(inputs) - 1):
        groups, cur = [], [inputs[0]]
        for x, cut in zip(inputs[1:], cuts):
            if cut:
                groups.append(cur)
                cur = []
            cur.append(x)
        groups.append(cur)
        choices = []
        for g in groups:
            outs = sorted({b for a, b in pairs if a in g})
            subsets = []
            for keep in itertools.product((False, True), repeat=len(outs) - 1):
                subsets.append([(g[-1], o) for o, k in zip(outs[:-1], keep) if k]
                               + [(g[-1], outs[-1])])
            choices.append(subsets)
        for pick in itertools.product(*choices):
            yield ([b for sub in pick for b in sub], len(groups), max(len(s) for s in pick))


def brute_force_pairs(pairs, objective, *, k=None, grid=None, **cost):
    """Least cost over every hierarchical bin set with at most ``k`` bins, or at most K1 dim0
    buckets of at most K2 bins each (``grid``), and the bins reaching it."""
    best, arg = None, None
    for bins, groups, widest in hierarchical_bin_sets(pairs):
        if grid is not None and (groups > grid[0] or widest > grid[1]):
            continue
        if grid is None and len(bins) > k:
            continue
        value = pair_plan_cost(pairs, bins, objective, **cost)
        if value is not None and (best is None or value < best):
            best, arg = value, bins
    return best, arg
