"""Exact costs of buckets for the certified DP (numba kernels): expected seconds under the step
model of :mod:`bucketopt.objectives._time_kernels` (which the padding objective also takes, with
alpha = 0, beta = 1, gamma = 0 and one rank: then seconds are padded plus real tokens).

A bucket (i, j] of candidate groups: the samples of groups i+1..j, its edge the edge of group j,
``size_full`` rows a batch. Two ways to price:

- :func:`pair_cost`: one bucket by walks over its lengths
  (:func:`bucketopt.orderstats.walk_moments_capped`), or
  exactly in O(1) with edge padding; stops early once the bucket is proven to cost more than a
  cap.
- :func:`rect_costs`: a rectangle of buckets, every start of a decreasing list with every end of
  an increasing list, by sweeps over scaled binomial sums (the technique of
  :mod:`bucketopt.objectives._batch_sweep`, kept for E[M] and E[M^2]): one sweep down from the
  first end keeps each start's sums u[m] = sum_v gap_v C(c_v, m) m! / N^m for every draw count
  m <= s, and each later end only rescales them and adds the lengths that join at the top.
  Every step type of the bucket then reads E[max of its rows] exactly: O(s) a bucket, against a
  walk of the whole bucket for each of its step types.

:func:`tilde` bounds a bucket from below from the moments of a larger bucket with the same end
(removing shorter samples never shortens the expected maximum), the step types exact.
"""

from __future__ import annotations

import numpy as np

from ...jit import njit
from ...orderstats import NEGLIGIBLE, walk_moments_capped
from .._batch_sweep import _grow
from .._time_kernels import MAX_STEP_TYPES, bucket_steps, fewest_rows
from .protocol import DynamicPricing

# The largest draw count priced by sweeps (the Pascal table's size, objectives._batch_sweep).
SWEEP_MAX = 256
# rect_costs' work: a unit a bucket (about 1-2 us) plus one for every SWEEP_TERMS terms its sums
# took in (a length entering a start's sums for s draws: s + 1 terms, about 1 ns each; the
# rectangles keep s + 1 draws, :func:`rect_costs`)
SWEEP_TERMS = 2048


def by_padding(edge, dynamic, name, doc):
    """A kernel that runs ``edge`` on an :class:`.protocol.EdgePricing` and ``dynamic`` on a
    :class:`.protocol.DynamicPricing` (its first argument), as compiled code and from Python.
    numba picks the implementation by the argument's type when it compiles a caller, so a solve
    compiles only the pricing of its padding (an edge-padding solve none of the walks and
    sweeps of dynamic padding)."""
    from numba.extending import overload

    def kernel(pr, *args):
        return (dynamic if isinstance(pr, DynamicPricing) else edge)(pr, *args)

    @overload(kernel)
    def _typed(pr, *args):
        impl = dynamic if issubclass(pr.instance_class, DynamicPricing) else edge

        def call(pr, *args):
            return impl(pr, *args)

        return call

    kernel.__name__ = kernel.__qualname__ = name
    kernel.__doc__ = doc
    return kernel


# The rows of rect_costs' moments.
MAIN1, MAIN2, FEW1, FEW2, UP1, UP2 = range(6)


@njit(cache=True)
def step_scratch():
    """Scratch arrays of :func:`bucket_steps` (types, then classes and heap), and a counter of
    the lengths :func:`pair_cost` has walked (its [0])."""
    return (np.empty(MAX_STEP_TYPES, np.int64), np.empty(MAX_STEP_TYPES, np.int64),
            np.empty(MAX_STEP_TYPES, np.int64), np.zeros(2 * MAX_STEP_TYPES, np.int64),
            np.zeros(2 * MAX_STEP_TYPES, np.int64), np.zeros(2 * MAX_STEP_TYPES, np.int64),
            np.zeros(2 * MAX_STEP_TYPES, np.int64), np.zeros(1, np.int64))


@njit(cache=True)
def _enter(u1, u2, s, xs1, g1, g2, inv_n, n_in):
    # the lengths that enter (x + 1 in xs1, gaps in x and x^2 in g1, g2; both overwritten): add
    # gap x (x - 1) .. (x - m + 1) / N^m to u[m], m = 0..s (all terms >= 0)
    acc1 = 0.0
    acc2 = 0.0
    for t in range(n_in):
        acc1 += g1[t]
        acc2 += g2[t]
    u1[0] += acc1
    u2[0] += acc2
    for m in range(1, s + 1):
        acc1 = 0.0
        acc2 = 0.0
        fm = float(m)
        for t in range(n_in):
            f = (xs1[t] - fm) * inv_n
            g1[t] *= f
            g2[t] *= f
            acc1 += g1[t]
            acc2 += g2[t]
        u1[m] += acc1
        u2[m] += acc2


@njit(cache=True)
def _sums_cost(pr, u1, u2, n, size, top, mean1, mean2, norm, scratch):
    # the bucket's seconds from its scaled sums, with each step type's E[max of its rows]
    world, alpha, beta, gamma = pr.world, pr.alpha, pr.beta, pr.gamma
    tw, tr, tm, c1, c2, c3, c4 = scratch[:7]
    nt = bucket_steps(n, size, world, tw, tr, tm, c1, c2, c3, c4)
    rmax = 0
    for q in range(nt):
        if tr[q] < n and tr[q] > rmax:
            rmax = tr[q]
    fn = float(n)
    inv = 1.0 / fn
    f = 1.0
    norm[0] = 1.0
    for m in range(1, rmax + 1):  # C(n, m) m! / n^m
        f *= (fn - m + 1.0) * inv
        norm[m] = f
    cost = 0.0
    for q in range(nt):
        r = tr[q]
        if r >= n:
            a1 = top
            a2 = top * top
        elif r == 1:
            a1 = mean1
            a2 = mean2
        else:
            a1 = top - u1[r] / norm[r]
            a2 = top * top - u2[r] / norm[r]
        cost += tm[q] * (alpha + tw[q] * (beta * a1 + gamma * a2))
    return cost


@njit(cache=True)
def _stage(xs1, g1, g2, values, pcv, base, lo, hi):
    # the lengths values[lo:hi] as they enter a bucket whose samples start at pcv index base
    k = 0
    for t in range(lo, hi):
        xs1[k] = pcv[t + 1] - base + 1.0
        x = float(values[t])
        x2 = float(values[t + 1])
        g1[k] = x2 - x
        g2[k] = x2 * x2 - x * x
        k += 1
    return k


@njit(cache=True, nogil=True)
def rect_costs(pr, starts, ends, s, last, out, moments):
    """out[a, q] = seconds of the bucket (starts[q], ends[a]] of groups (``starts`` decreasing,
    ``ends`` increasing, every start below every end, every step at most ``s`` <= SWEEP_MAX
    rows) for a <= last[q] (start q is carried no further: its later cells are left as they
    were); ``moments`` (6, ends, starts): [MAIN1], [MAIN2] E[M] and E[M^2] of its full steps'
    rows (world x batch size); [UP1], [UP2] of one draw more (:func:`diluted` reads both);
    [FEW1], [FEW2] of the fewest rows any other step holds, (world - 1) (batch size // 2) + 1
    (-inf where the bucket is one step). Returns its work: the cells priced, and a unit every
    SWEEP_TERMS terms the sums took in."""
    values, pcv, pq1, pq2, group_end = pr.values, pr.pcv, pr.pq1, pr.pq2, pr.group_end
    sizes, world, pascal = pr.sizes, pr.world, pr.pascal
    main1, main2 = moments[MAIN1], moments[MAIN2]
    few1, few2 = moments[FEW1], moments[FEW2]
    up1, up2 = moments[UP1], moments[UP2]
    nq = starts.size
    s += 1  # the sums' draw counts: one beyond the full steps' (up1 / up2)
    st1 = np.zeros((nq, s + 1))
    st2 = np.zeros((nq, s + 1))
    hi0 = group_end[ends[0]]
    top_v = hi0 - 1
    room = group_end[ends[ends.size - 1]] + 1
    xs1 = np.empty(room)
    g1 = np.empty(room)
    g2 = np.empty(room)
    scratch_s = np.empty(s + 1)
    norm = np.empty(s + 1)
    scratch = step_scratch()
    u1 = np.zeros(s + 1)
    u2 = np.zeros(s + 1)
    lo = top_v  # values[lo:hi0]: the top alone, no term yet
    entered = 0  # lengths entered into sums: each costs s + 1 terms
    n = pcv[hi0] - pcv[lo]
    for q in range(nq):  # the first end: one sweep down over the starts
        new_lo = group_end[starts[q]]
        if new_lo < lo:
            new_n = pcv[hi0] - pcv[new_lo]
            if lo < top_v:
                _grow(u1, n, new_n, s, pascal, scratch_s)
                _grow(u2, n, new_n, s, pascal, scratch_s)
            k = _stage(xs1, g1, g2, values, pcv, pcv[new_lo], new_lo, lo)
            _enter(u1, u2, s, xs1, g1, g2, 1.0 / new_n, k)
            entered += k
            lo = new_lo
            n = new_n
        for m in range(s + 1):  # (a loop: a slice assignment compiles numba's shape checks)
            st1[q, m] = u1[m]
            st2[q, m] = u2[m]
    old_hi = hi0
    priced = 0
    for a in range(ends.size):
        hi = group_end[ends[a]]
        top = float(values[hi - 1])
        size_full = sizes[ends[a]]
        for q in range(nq):
            if a > last[q]:
                continue
            priced += 1
            lo = group_end[starts[q]]
            base = pcv[lo]
            nn = pcv[hi] - base
            v1 = st1[q]
            v2 = st2[q]
            if a > 0:  # rescale to the larger bucket, then the lengths that join at the top
                ratio = float(pcv[old_hi] - base) / nn
                f = 1.0
                for m in range(1, s + 1):
                    f *= ratio
                    v1[m] *= f
                    v2[m] *= f
                k = _stage(xs1, g1, g2, values, pcv, base, old_hi - 1, hi - 1)
                _enter(v1, v2, s, xs1, g1, g2, 1.0 / nn, k)
                entered += k
            size = min(size_full, nn)
            out[a, q] = _sums_cost(pr, v1, v2, nn, size, top, (pq1[hi] - pq1[lo]) / nn,
                                   (pq2[hi] - pq2[lo]) / nn, norm, scratch)
            full = world * size
            few1[a, q] = -np.inf
            few2[a, q] = -np.inf
            if full >= nn:
                main1[a, q] = top
                main2[a, q] = top * top
                up1[a, q] = top
                up2[a, q] = top * top
            else:
                fewest = fewest_rows(world, size)
                fn = float(nn)
                f = 1.0
                for m in range(1, full + 1):
                    f *= (fn - m + 1.0) / fn
                    if m == fewest and m > 1:
                        few1[a, q] = top - v1[m] / f
                        few2[a, q] = top * top - v2[m] / f
                main1[a, q] = top - v1[full] / f
                main2[a, q] = top * top - v2[full] / f
                f *= (fn - full) / fn  # (full < nn)
                up1[a, q] = top - v1[full + 1] / f
                up2[a, q] = top * top - v2[full + 1] / f
        old_hi = hi
    return priced + entered * (s + 1) // SWEEP_TERMS


@njit(cache=True, inline="always")
def diluted(m, up, full, n_ref, n):
    """A lower bound of E[M] (or E[M^2]) of ``full`` draws from a bucket of ``n`` samples, from
    a reference bucket with the same samples and ``n_ref - n`` shorter ones: its E[M] of
    ``full`` draws, ``m``, and of ``full + 1``, ``up``. Draw D rows from the reference, D =
    full or full + 1 at random with mean x = full n_ref / n: X of them fall in the bucket, a
    uniform draw of X of its samples, E[X] = full, and the longest row is the longest of those
    X (the others are shorter; with X = 0 at most the bucket's shortest, E[M_0]). E[M_r] is
    concave in r (docs/method.md, "Concave in the draws"), so the mix of the reference's
    E[M_D] is at most E[E[M_X]] <= E[M_full] (Jensen): m + min(1, x - full) (up - m). Where
    the reference adds a few percent of short samples to a bucket of few rows a step (one GPU,
    long rows), m alone is that much below, and the exact layers price hundreds of starts an
    end that this rules out (docs/method.md, "Diluted references")."""
    if n_ref <= n:
        return m
    w = full * (n_ref - n) / n
    if w > 1.0:
        w = 1.0
    return m + w * (up - m)


@njit(cache=True, inline="always")
def _bucket(pr, i, j, scratch):
    # the bucket (i, j]: its value range [lo, hi), n samples, batch size, step types in
    # scratch (nt of them) and longest length
    tw, tr, tm, c1, c2, c3, c4 = scratch[:7]
    lo = pr.group_end[i]
    hi = pr.group_end[j]
    n = pr.pcv[hi] - pr.pcv[lo]
    size = min(pr.sizes[j], n)
    nt = bucket_steps(n, size, pr.world, tw, tr, tm, c1, c2, c3, c4)
    return lo, hi, n, size, nt, float(pr.values[hi - 1])


@njit(cache=True)
def _edge_cost(pr, i, j, cap, scratch):
    # pair_cost with edge padding: every row at the edge, in O(1) (exact whatever the cap)
    alpha, beta, gamma = pr.alpha, pr.beta, pr.gamma
    tw, tm = scratch[0], scratch[2]
    _, _, _, _, nt, _ = _bucket(pr, i, j, scratch)
    e = float(pr.edges[j])
    cost = 0.0
    for q in range(nt):
        cost += tm[q] * (alpha + tw[q] * (beta * e + gamma * e * e))
    return cost, True


@njit(cache=True)
def _walked_cost(pr, i, j, cap, scratch):
    # pair_cost with dynamic padding: by walks, stopped once the cost is above the cap
    values, pcv, pq1, pq2 = pr.values, pr.pcv, pr.pq1, pr.pq2
    alpha, beta, gamma = pr.alpha, pr.beta, pr.gamma
    tw, tr, tm = scratch[:3]
    lo, hi, n, _, nt, top = _bucket(pr, i, j, scratch)
    mean1 = (pq1[hi] - pq1[lo]) / n
    mean2 = (pq2[hi] - pq2[lo]) / n
    cost = 0.0
    for q in range(nt):  # every type at its lower bound: the mean, or the top for all rows
        if tr[q] >= n:
            cost += tm[q] * (alpha + tw[q] * (beta * top + gamma * top * top))
        else:
            cost += tm[q] * (alpha + tw[q] * (beta * mean1 + gamma * mean2))
    if cost > cap:
        return cost, False
    for q in range(nt):
        r = tr[q]
        if r >= n or r == 1:
            continue
        part = tm[q] * (alpha + tw[q] * (beta * mean1 + gamma * mean2))
        wm = tm[q] * tw[q]
        slack = cap - (cost - part) - tm[q] * alpha
        m1, m2, ok, walked = walk_moments_capped(values, pcv, lo, hi, r, pr.lf_hi, pr.lf_lo,
                                                 wm * beta, wm * gamma, slack, NEGLIGIBLE)
        scratch[7][0] += walked
        cost += tm[q] * (alpha + tw[q] * (beta * m1 + gamma * m2)) - part
        if not ok:
            return cost, False
    return cost, True


pair_cost = by_padding(_edge_cost, _walked_cost, "pair_cost", """(seconds of the bucket (i, j],
exact): in O(1) (edge padding) or by walks (dynamic padding, stopped once the cost is proven
above ``cap``: then it is a lower bound above the cap and exact is False).""")


@njit(cache=True)
def tilde(pr, i, j, m1, m2, f1, f2, scratch):
    """A lower bound of the seconds of (i, j]: the step types exact, the full steps' E[M] at
    least (m1, m2) and every other step's of at least the fewest rows
    (:func:`._time_kernels.fewest_rows`) at least (f1, f2) (the moments of that many draws from a
    bucket with the same end and more, shorter samples: more draws never shorten the expected
    maximum), the other rows at least the bucket's mean (E[M] of one draw).

    Between those draw counts a step of r rows takes the chords: E[M_r] (and E[M_r^2]) is
    concave in r (docs/method.md, "Concave in the draws"), so it lies above the chord of its
    own values at any two draw counts around r, and above any chord whose ends lie below them:
    (1, the bucket's mean) to (fewest, f) or (full, m), and (fewest, f) to (full, m)."""
    pq1, pq2, world, size_full = pr.pq1, pr.pq2, pr.world, pr.sizes[j]
    alpha, beta, gamma = pr.alpha, pr.beta, pr.gamma
    tw, tr, tm = scratch[:3]
    lo, hi, n, size, nt, top = _bucket(pr, i, j, scratch)
    mean1 = (pq1[hi] - pq1[lo]) / n
    mean2 = (pq2[hi] - pq2[lo]) / n
    full = world * size
    fewest = fewest_rows(world, size_full)
    few = f1 > -np.inf and 1 < fewest < full and size == size_full
    out = 0.0
    for q in range(nt):
        r = tr[q]
        if r >= n:
            a1 = top
            a2 = top * top
        elif r == full:
            a1 = max(m1, mean1)
            a2 = max(m2, mean2)
        else:
            a1 = mean1
            a2 = mean2
            if size == size_full and 1 < r < full:  # (1, mean) to (full, m)
                w = (r - 1.0) / (full - 1.0)
                a1 = max(a1, mean1 + w * (m1 - mean1))
                a2 = max(a2, mean2 + w * (m2 - mean2))
            if few and r >= fewest:  # (fewest, f) to (full, m)
                w = (r - fewest) / float(full - fewest)
                a1 = max(a1, f1 + w * (m1 - f1))
                a2 = max(a2, f2 + w * (m2 - f2))
            elif few:  # (1, mean) to (fewest, f)
                w = (r - 1.0) / (fewest - 1.0)
                a1 = max(a1, mean1 + w * (f1 - mean1))
                a2 = max(a2, mean2 + w * (f2 - mean2))
        out += tm[q] * (alpha + tw[q] * (beta * a1 + gamma * a2))
    return out

