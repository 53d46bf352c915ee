"""numba kernels of objective="time": the exact expected step time of a bucket and its DP.

Arrays and numbers in, arrays out (see bucketopt/objectives/time.py for the wrapper and
docs/method.md for the maths and the proof of exactness).

The step model (one bucket; ``G`` data-parallel ranks, the sampler's ``sync_buckets=True``):
the bucket's N samples make q = N // B batches of B rows (B = B(edge), e.g. T // edge) and
one of r = N mod B.
With G > 1 the sampler splits the largest batches in two until the count is a multiple of G
(:func:`bucket_steps` replays it) and runs G batches of the bucket at once, sorted by size. A
step whose rows are padded to the longest member M of its S rows, with w rows in its largest
batch, costs ``alpha + w * (beta * M + gamma * M**2)``: for G = 1, and for every step whose G
batches have one size, that is the exact time of the step (the slowest batch is the one holding
the longest of the S rows); for the at most few steps of a bucket that mix batch sizes it is an
upper bound. ``pad="edge"``: M is the edge, and the cost is exact for every step.

Expectations over the without-replacement law of M: P(M <= x_v) = C(a_v, S) / C(N, S), with a_v
the samples of the bucket of length <= x_v, so E[M] = top - sum_v (x_{v+1} - x_v) C(a_v, S) /
C(N, S) and E[M^2] likewise with x_{v+1}^2 - x_v^2.
"""

from __future__ import annotations

import numpy as np

from ..jit import njit
from ..orderstats import NEGLIGIBLE, walk_moments

# Step types of one bucket: at most this many kinds (size classes are halved at most ~60 times).
MAX_STEP_TYPES = 256
# Walks whose moments only bound from below (the certified DP's references and its cells'
# moments) stop once the rest is below BOUND_REL of the top: their sums then lack at most that
# much, which they subtract. A walk of d draws goes down while its weight C(a, d) / C(n, d),
# about (a / n)^d, stays above the cut, so it walks some 2.7 times fewer lengths than one to
# NEGLIGIBLE. On the 4M-token corpus of benchmarks/certified.py under alpha 0.5 the references
# walked 85, 102 and 18 million lengths in layers 2-4, and 33, 40 and 7 million so; the cells'
# moments took 0.52 s, and 0.24 s so (1e-3 bounded too loosely: the work limit stopped it).
BOUND_REL = 1e-6


@njit(cache=True, inline="always")
def _floor_div(a, b):
    # a // b for 0 <= a < 2**52 and b >= 1 through a float division (an int64 division costs
    # tens of cycles in the DP's inner loop), corrected to the exact quotient.
    q = np.int64(float(a) / float(b))
    if q * b > a:
        q -= 1
    elif (q + 1) * b <= a:
        q += 1
    return q


@njit(cache=True, inline="always")
def fewest_rows(world, size):
    """The fewest rows a step holds, unless it holds all of its bucket, at batch size ``size``
    on ``world`` synced ranks: (world - 1) floor(size / 2) + 1 (a full batch split in two leaves
    halves of at least floor(size / 2) rows, and a step holds world batches, one of them maybe
    the short one). Elementwise on arrays too (Time.fewest_rows calls the Python function)."""
    return (world - 1) * (size // 2) + 1


@njit(cache=True, inline="always")
def split_count(n, nb, world):
    """The full batches the synced sampler splits in two so that a bucket of ``n`` samples in
    ``nb`` batches fills whole steps of ``world`` batches: world * ceil(nb / world) - nb, or 0
    where it has too few samples to split (the sampler then pools buckets: the last step is
    short). :func:`bucket_steps` and the certified DP's quick bound both count by it."""
    extra = world * _floor_div(nb + world - 1, world) - nb
    if extra > n - nb:
        extra = 0
    return extra


@njit(cache=True, inline="always")
def bucket_steps(n, size, world, typ_w, typ_rows, typ_mult, cls_s, cls_c, heap_s, heap_c):
    """The steps of one bucket as the synced sampler runs them; returns the number of types.

    ``n`` samples, batches of ``size`` (the last one partial), ``world`` ranks. Type t is
    ``typ_mult[t]`` steps whose largest batch has ``typ_w[t]`` rows and whose batches hold
    ``typ_rows[t]`` rows together. With world > 1 the largest batches are split in two (the
    halves ceil and floor) until the batch count is a multiple of ``world``, as long as the
    bucket has samples to split; otherwise the last step is short. ``cls_*`` and ``heap_*``:
    int64 scratch arrays of 2 * MAX_STEP_TYPES, reused between calls.
    """
    q = _floor_div(n, size)
    r = n - q * size
    if world == 1:  # every batch is a step
        nt = 0
        if q > 0:
            typ_w[0] = size
            typ_rows[0] = size
            typ_mult[0] = q
            nt = 1
        if r > 0:
            typ_w[nt] = r
            typ_rows[nt] = r
            typ_mult[nt] = 1
            nt += 1
        return nt
    nb = q + (1 if r > 0 else 0)
    extra = split_count(n, nb, world)
    nc = 0
    if extra <= q:
        # the common case: `extra` full batches are split once each
        if q - extra > 0:
            cls_s[nc] = size
            cls_c[nc] = q - extra
            nc += 1
        if extra > 0:
            cls_s[nc] = size - size // 2
            cls_c[nc] = extra
            nc += 1
            if size // 2 == size - size // 2:
                cls_c[nc - 1] += extra
            else:
                cls_s[nc] = size // 2
                cls_c[nc] = extra
                nc += 1
        if r > 0:
            cls_s[nc] = r
            cls_c[nc] = 1
            nc += 1
    else:
        # every natural batch goes to the heap; split the largest, `extra` times
        nh = 0
        if q > 0:
            heap_s[0] = size
            heap_c[0] = q
            nh = 1
        if r > 0:
            heap_s[nh] = r
            heap_c[nh] = 1
            nh += 1
        for _ in range(extra):
            best = -1
            for h in range(nh):
                if heap_c[h] > 0 and (best < 0 or heap_s[h] > heap_s[best]):
                    best = h
            s = heap_s[best]
            heap_c[best] -= 1
            for side in range(2):
                half = s - s // 2 if side == 0 else s // 2
                found = -1
                for h in range(nh):
                    if heap_s[h] == half:
                        found = h
                        break
                if found < 0:
                    found = nh
                    heap_s[nh] = half
                    heap_c[nh] = 0
                    nh += 1
                heap_c[found] += 1
        for h in range(nh):
            if heap_c[h] > 0:
                cls_s[nc] = heap_s[h]
                cls_c[nc] = heap_c[h]
                nc += 1
    # sort classes by size, largest first (few classes: insertion sort)
    for a in range(1, nc):
        s = cls_s[a]
        c = cls_c[a]
        b = a - 1
        while b >= 0 and cls_s[b] < s:
            cls_s[b + 1] = cls_s[b]
            cls_c[b + 1] = cls_c[b]
            b -= 1
        cls_s[b + 1] = s
        cls_c[b + 1] = c
    # cut the sorted batches into steps of `world`
    nt = 0
    fill = 0  # batches in the open step
    w_open = 0
    rows_open = 0
    for c in range(nc):
        s = cls_s[c]
        left = cls_c[c]
        if left == 0:
            continue
        if fill > 0:
            take_now = min(left, world - fill)
            fill += take_now
            rows_open += take_now * s
            left -= take_now
            if fill == world:
                typ_w[nt] = w_open
                typ_rows[nt] = rows_open
                typ_mult[nt] = 1
                nt += 1
                fill = 0
        if left >= world:
            whole = _floor_div(left, world)
            typ_w[nt] = s
            typ_rows[nt] = world * s
            typ_mult[nt] = whole
            nt += 1
            left -= whole * world
        if left > 0:
            fill = left
            w_open = s
            rows_open = left * s
    if fill > 0:
        typ_w[nt] = w_open
        typ_rows[nt] = rows_open
        typ_mult[nt] = 1
        nt += 1
    return nt


@njit(cache=True)
def bucket_features(values, pcv, pq1, pq2, lo, hi, edge, batch_size, world, pad_code, lf_hi,
                    lf_lo):
    """The bucket of distinct lengths ``values[lo:hi]`` as (steps, sum of w E[M], sum of
    w E[M^2]) over its steps (its own walks): its expected seconds are linear in them,
    ``alpha * steps + beta * f1 + gamma * f2``.

    ``pq1`` / ``pq2``: prefix sums over values of count * x and count * x^2 (float64).
    ``pad_code`` 0: rows padded to ``edge``; 1: to the longest row of the step.
    ``batch_size``: the bucket's B (any rule: ``bucketopt.objectives.sizes.batch_sizes``).
    """
    n = pcv[hi] - pcv[lo]
    if n == 0:
        return 0.0, 0.0, 0.0
    size = min(batch_size, n)
    typ_w = np.empty(MAX_STEP_TYPES, dtype=np.int64)
    typ_rows = np.empty(MAX_STEP_TYPES, dtype=np.int64)
    typ_mult = np.empty(MAX_STEP_TYPES, dtype=np.int64)
    scratch = np.zeros((4, 2 * MAX_STEP_TYPES), dtype=np.int64)
    nt = bucket_steps(n, size, world, typ_w, typ_rows, typ_mult, scratch[0], scratch[1],
                      scratch[2], scratch[3])
    e = float(edge)
    steps = 0.0
    f1 = 0.0
    f2 = 0.0
    for t in range(nt):
        if pad_code == 0:
            m1 = e
            m2 = e * e
        elif typ_rows[t] == 1:
            m1 = (pq1[hi] - pq1[lo]) / n
            m2 = (pq2[hi] - pq2[lo]) / n
        else:
            m1, m2 = walk_moments(values, pcv, lo, hi, typ_rows[t], lf_hi, lf_lo, NEGLIGIBLE)
        steps += typ_mult[t]
        f1 += typ_mult[t] * typ_w[t] * m1
        f2 += typ_mult[t] * typ_w[t] * m2
    return steps, f1, f2


# A cell's full-steps line from its moments at SCALE times the full steps' draws too: a bucket of
# N samples whose starts lie at least 1 / SCALE of the cell's samples above its start is bounded
# by a chord of the cell's moments between those draw counts (docs/method.md, "Scaled draws")
SCALE = 2


@njit(cache=True, inline="always")
def _chord_deficit(a, b, va, vb, top):
    # max over r in [a, b] of r (top - (va + (r - a) s)), s the chord's slope: a concave
    # quadratic in r, at its vertex or an end
    s = (vb - va) / (b - a)
    k = top - va + a * s
    most = max(a * (k - a * s), b * (k - b * s))
    if s > 0.0:
        r = min(max(k / (2.0 * s), a), b)
        most = max(most, r * (k - r * s))
    return most


@njit(cache=True)
def last_batch_deficit(B, d, v1, vd, vB):
    """On one GPU, a bound of how much a bucket's last batch of r < B rows (r = N mod B; r = N
    for a bucket of one batch) costs below r rows at B draws, in the cost of rows: the
    largest r (vB - lb(r)) over 0 <= r <= B, lb the chords through (1, v1), (d, vd), (B, vB),
    lower bounds of the moments of 1, d and B draws (E[max] and E[max^2] are concave in the
    draws: docs/method.md, "Concave in the draws"). 0 for B = 1."""
    if B <= 1.0:
        return 0.0
    most = 0.0
    if d > 1.0 and d < B:
        most = max(_chord_deficit(1.0, d, v1, vd, vB), _chord_deficit(d, B, vd, vB, vB))
    else:
        most = _chord_deficit(1.0, B, v1, vB, vB)
    return max(most, 0.0)


@njit(cache=True, nogil=True)
def cell_rows(c, phi, phi2, phik, phim, mids, low, alpha, world, sizes, P, first, last, rest,
              spare, A, A2, U, U2, U2P):
    """Row c of the time DP's line bounds (:meth:`bucketopt.objectives.time.Time.bounds`) from a
    cell's moments (``phi``: beta E[M] + gamma E[M^2] of the full steps' draws, ``phi2``: of the
    fewest rows', ``phik``: of SCALE times the full steps' draws, ``phim``: of ``mids`` draws
    (one GPU), over every sample from the cell's start ``first`` to each end; ``low``: the
    shortest row's; ``last``: the cell's last start; ``rest``: the rows outside full steps;
    ``spare``: those the scaled-draws line prices at the fewest rows' moments): U, A (full
    steps), A2 (fewest rows and the rest), U2 and U2 P (fewest rows alone). On one GPU, A
    prices the last batch by :func:`last_batch_deficit` and serves every bucket (A2 = A).
    Column 0 (no end) is 0. In one pass, without the GIL: a row is as long as the candidate
    groups (tens of thousands on heavy tails, times a hundred or more cells).

    Scaled draws: S draws from the n samples between the cell's start and the edge take, in
    expectation, S N / n from a bucket of the N longest of them, and the rest are shorter, so
    (E[M] concave in the draws, Jensen) the bucket's E[M] of d draws is at least the cell's of
    d n / N. Where every start of the cell leaves N >= n / SCALE, that is at least the chord of
    the cell's moments between d and SCALE d draws, phi + (d n / N - d) s (s the chord's
    slope), so the (N - rest) rows of full steps cost at least (N - rest) (phi - d s) +
    d n s (1 - rest / N), whose last term is concave in N: at least its chord between the
    cell's least N and n. That is a line in N, equal to the plain one (every row at phi) at
    N = n, taken where it lies above the plain one at the cell's last start."""
    A[c, 0] = 0.0
    A2[c, 0] = 0.0
    U[c, 0] = 0.0
    U2[c, 0] = 0.0
    U2P[c, 0] = 0.0
    for j in range(1, P.size):
        um = alpha / (world * sizes[j])
        u = um + phi[j] / world
        U[c, j] = u
        if world == 1.0:  # (every bucket: the line holds for one batch of N < B rows too)
            A[c, j] = u * P[j] - last_batch_deficit(sizes[j], mids[j], max(phi2[j], low),
                                                    phim[j], phi[j])
            A2[c, j] = A[c, j]
        else:
            A[c, j] = u * P[j] - rest[j] * max(phi[j] - max(phi2[j], low), 0.0) / world
            A2[c, j] = u * P[j] - rest[j] * max(phi[j] - low, 0.0) / world
        u2 = um + phi2[j] / world
        U2[c, j] = u2
        U2P[c, j] = u2 * P[j]
        n = P[j] - P[first]
        n_min = P[j] - P[last]
        d = world * sizes[j]
        if n_min <= 0.0 or n_min * SCALE < n or SCALE * d > n or not phik[j] > phi[j]:
            continue
        slope = (phik[j] - phi[j]) / ((SCALE - 1) * d)
        per = phi[j] - d * slope
        ds = d * slope
        w = spare[j]
        u_s = um + (per + ds * w / n_min) / world
        a_s = u_s * P[j] + (ds * (n - n * w / n_min - w) - w * per) / world
        # (the rest rows as the plain lines price them: at min(phi, ...))
        a_s2 = a_s + w * min(low, phi[j]) / world
        a_s += w * min(max(phi2[j], low), phi[j]) / world
        if world == 1.0:
            a_s2 = a_s
        if (a_s - u_s * P[last] > A[c, j] - u * P[last]
                and a_s2 - u_s * P[last] > A2[c, j] - u * P[last]):
            U[c, j] = u_s
            A[c, j] = a_s
            A2[c, j] = a_s2
