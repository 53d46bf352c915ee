"""numba kernels of objective="time": the exact expected step time of a bucket and its DP.

Arrays and numbers in, arrays out (see bucketopt/objectives/time.py for the wrapper and
docs/method.md for the maths and the proof of exactness).

The step model (one bucket; ``G`` data-parallel ranks, the sampler's ``sync_buckets=True``):
the bucket's N samples make q = N // B batches of B = T // edge rows and one of r = N mod B.
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
from numba import njit

# Step types of one bucket: at most this many kinds (size classes are halved at most ~60 times).
MAX_STEP_TYPES = 256


@njit(cache=True)
def _log_falling(hi, lo, a, b):
    # log(a! / (a-b)!) for 0 <= b <= a, from the double-double table of log(k!).
    return (hi[a] - hi[a - b]) + (lo[a] - lo[a - b])


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


@njit(cache=True)
def walk_moments(values, pcv, lo, hi, draws, lf_hi, lf_lo):
    """(E[M], E[M^2]) of the longest of ``draws`` samples drawn without replacement from the
    distinct lengths ``values[lo:hi]`` (``pcv``: prefix counts over values, index 0 empty).

    Walks from the top down and stops once the rest is provably below 1e-16 of the result.
    """
    top = float(values[hi - 1])
    if draws >= pcv[hi] - pcv[lo]:
        return top, top * top
    m1, m2, _ = walk_moments_capped(values, pcv, lo, hi, draws, lf_hi, lf_lo, 0.0, 0.0, np.inf)
    return m1, m2


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
    extra = world * _floor_div(nb + world - 1, world) - nb
    if extra > n - nb:
        extra = 0  # too few samples to split (the sampler then pools buckets): last step short
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
def bucket_features(values, pcv, pq1, pq2, lo, hi, edge, token_budget, world, pad_code, lf_hi,
                    lf_lo):
    """The bucket of distinct lengths ``values[lo:hi]`` as (steps, sum of w E[M], sum of
    w E[M^2]) over its steps (its own walks): its expected seconds are linear in them,
    ``alpha * steps + beta * f1 + gamma * f2``.

    ``pq1`` / ``pq2``: prefix sums over values of count * x and count * x^2 (float64).
    ``pad_code`` 0: rows padded to ``edge``; 1: to the longest row of the step.
    """
    n = pcv[hi] - pcv[lo]
    if n == 0:
        return 0.0, 0.0, 0.0
    size = min(token_budget // edge, n)
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
            m1, m2 = walk_moments(values, pcv, lo, hi, typ_rows[t], lf_hi, lf_lo)
        steps += typ_mult[t]
        f1 += typ_mult[t] * typ_w[t] * m1
        f2 += typ_mult[t] * typ_w[t] * m2
    return steps, f1, f2


@njit(cache=True)
def bucket_time(values, pcv, pq1, pq2, lo, hi, edge, token_budget, alpha, beta, gamma, world,
                pad_code, lf_hi, lf_lo):
    """Expected seconds of the bucket made of distinct lengths ``values[lo:hi]`` (see
    :func:`bucket_features`)."""
    steps, f1, f2 = bucket_features(values, pcv, pq1, pq2, lo, hi, edge, token_budget, world,
                                    pad_code, lf_hi, lf_lo)
    return alpha * steps + beta * f1 + gamma * f2


@njit(cache=True)
def walk_moments_capped(values, pcv, lo, hi, draws, lf_hi, lf_lo, w1, w2, slack):
    """:func:`walk_moments` (``draws`` below the bucket's size), stopping early once
    ``w1 * E[M] + w2 * E[M^2]`` is proven to exceed ``slack``; returns (E[M], E[M^2], exact),
    lower bounds when not exact."""
    base = pcv[lo]
    n = pcv[hi] - base
    top = float(values[hi - 1])
    norm = _log_falling(lf_hi, lf_lo, n, draws)
    bottom = float(values[lo])
    s1 = 0.0
    s2 = 0.0
    steps = 0
    p = 1.0  # C(a, draws) / C(n, draws) for the samples a up to the current length
    prev = n
    for t in range(hi - 2, lo - 1, -1):
        a = pcv[t + 1] - base
        if a < draws:
            break
        # one length down: a ratio of a few factors where it lost few samples (exp otherwise);
        # the product keeps a relative error of an ulp a step
        if prev == n:
            p = np.exp(_log_falling(lf_hi, lf_lo, a, draws) - norm)
        else:
            p *= _binom_ratio(a, prev - a, draws, lf_hi, lf_lo)
        prev = a
        v = float(values[t])
        nxt = float(values[t + 1])
        s1 += (nxt - v) * p
        s2 += (nxt * nxt - v * v) * p
        r1 = (v - bottom) * p
        r2 = (v * v - bottom * bottom) * p
        if r1 <= 1e-16 * top and r2 <= 1e-16 * top * top:
            break
        steps += 1
        if steps >= 8:
            steps = 0
            if w1 * (top - s1 - r1) + w2 * (top * top - s2 - r2) > slack:
                return top - s1 - r1, top * top - s2 - r2, False
    return top - s1, top * top - s2, True


@njit(cache=True, inline="always")
def _binom_ratio(a, c, s, lf_hi, lf_lo):
    # C(a, s) / C(a + c, s) = prod_{t=1..c} (a + t - s) / (a + t): a few divisions for the small
    # counts of long tails, one exp of the log-factorial table otherwise.
    if c <= 4:
        rho = 1.0
        for t in range(1, c + 1):
            rho *= (a + t - s) / (a + t)
        return rho
    return np.exp(_log_falling(lf_hi, lf_lo, a, s) - _log_falling(lf_hi, lf_lo, a + c, s))


@njit(cache=True, inline="always")
def _lower_moments(rows, top, smax, u1, u2, tc, run_ok, run_s, run1, run2, rungs, rung_s, r1, r2):
    """(E[M], E[M^2], exact) for ``rows`` draws above the small kept counts: exact from the
    current run's sums or a ladder rung equal to ``rows``, else the moments of the largest kept
    count below it (a lower bound: E[M] never decreases with the draw count)."""
    if run_ok and rows == run_s:
        return top - run1, top * top - run2, True
    m1 = top - u1[smax] / tc[smax]
    m2 = top * top - u2[smax] / tc[smax]
    hit = False
    for rr in range(rungs):
        rs = rung_s[rr]
        if rs > rows:
            break
        m1 = top - r1[rr]
        m2 = top * top - r2[rr]
        hit = rs == rows
    return m1, m2, hit


@njit(cache=True, nogil=True)
def time_layers_kernel(values, pcv, pq1, pq2, group_end, edges, win_lo, win_hi, kmax,
                       token_budget, alpha, beta, gamma, world, pad_code, lf_hi, lf_lo, s0):
    """Exact DP over every pair of candidate edges for the expected epoch time.

    Group j (1..g) holds the distinct lengths ``values[group_end[j-1]:group_end[j]]`` and closes
    at ``edges[j]``; a bucket (i, j] is allowed when ``win_lo[j] <= i <= win_hi[j]``.
    Returns ``opt`` (kmax, g + 1) int32, ``opt[k-1, j]`` the smallest best start of the last
    bucket of the best cover of groups 1..j by at most k buckets (-1 if none), and ``best``
    (kmax,) float64 (inf when infeasible).

    The DP pushes from every start i, in increasing order (the cover of 1..i is final by then),
    to every end j > i, so the bucket (i, j] grows one length at a time and its order-statistic
    sums are updated as it grows: for every draw count S <= s0, sum_v gap_v C(a_v, S) with
    C(a, S) from the recurrence C(a, S) = C(a, S-1) (a - S + 1) / S; for a ladder of larger
    draw counts (s0 * 2^t), the normalised sums, each multiplied by C(N, S) / C(N', S) as the
    bucket grows from N to N' samples. A step whose draw count is on neither is bounded below by
    the largest kept count under it (E[M] never decreases with the draw count) and walked
    (:func:`walk_moments_capped`) only when that bound does not rule the pair out.
    """
    g = edges.size - 1
    inf = np.inf
    F = np.full((g + 1, kmax + 1), inf)
    F[0, :] = 0.0
    arg = np.full((g + 1, kmax + 1), -1, dtype=np.int64)
    u1 = np.zeros(s0 + 1)
    u2 = np.zeros(s0 + 1)
    tc = np.zeros(s0 + 1)  # C(a, S) at the bucket's current sample count a
    inv = np.zeros(s0 + 1)
    for s in range(1, s0 + 1):
        inv[s] = 1.0 / s
    n_total = pcv[pcv.size - 1]
    rungs = 0
    while rungs < 40 and s0 * 2 ** (rungs + 1) <= n_total:
        rungs += 1
    rung_s = np.zeros(max(rungs, 1), dtype=np.int64)
    for t in range(rungs):
        rung_s[t] = s0 * 2 ** (t + 1)
    r1 = np.zeros(max(rungs, 1))
    r2 = np.zeros(max(rungs, 1))
    typ_w = np.empty(MAX_STEP_TYPES, dtype=np.int64)
    typ_rows = np.empty(MAX_STEP_TYPES, dtype=np.int64)
    typ_mult = np.empty(MAX_STEP_TYPES, dtype=np.int64)
    typ_lb = np.empty(MAX_STEP_TYPES)
    typ_exact = np.empty(MAX_STEP_TYPES, dtype=np.bool_)
    cls_s = np.zeros(2 * MAX_STEP_TYPES, dtype=np.int64)
    cls_c = np.zeros(2 * MAX_STEP_TYPES, dtype=np.int64)
    heap_s = np.zeros(2 * MAX_STEP_TYPES, dtype=np.int64)
    heap_c = np.zeros(2 * MAX_STEP_TYPES, dtype=np.int64)
    room = np.empty(kmax + 1)
    sizes = token_budget // np.maximum(edges, 1)
    # Phase 0 bounds every optimum from above before the exact DP runs: covers whose inner
    # boundaries lie on every stride-th group, each bucket costed with the moments of a larger
    # kept draw count (E[M] never decreases with the draw count) or of the top length. The
    # exact phase then skips a pair as soon as its lower bound exceeds that bound.
    P = np.full((g + 1, kmax + 1), inf)
    P[0, :] = 0.0
    stride = max(1, g // 256)
    for phase in range(2):
        upper = phase == 0
        for i in range(g):
            if upper and i % stride != 0:
                continue
            if (P[i, kmax - 1] if upper else F[i, kmax - 1]) == inf:
                continue  # no cover of groups 1..i with fewer than kmax buckets
            lo = group_end[i]
            base = pcv[lo]
            u1[:] = 0.0
            u2[:] = 0.0
            r1[:] = 0.0
            r2[:] = 0.0
            run_ok = False  # exact normalised sums for the full steps' draw count of this run
            run_s = 0
            run1 = 0.0
            run2 = 0.0
            a = 0
            prev_x = 0.0
            for j in range(i + 1, g + 1):
                if win_lo[j] > i:
                    break  # the windows only move right: no later end accepts start i
                edge = edges[j]
                size_full = sizes[j]
                smax = min(s0, world * size_full)
                if run_ok and run_s != world * size_full:
                    run_ok = False  # the batch size changed: a new run
                # grow the bucket by the lengths of group j
                if pad_code == 1:
                    for v in range(group_end[j - 1], group_end[j]):
                        x = float(values[v])
                        c = pcv[v + 1] - pcv[v]
                        if a > 0:
                            g1 = x - prev_x
                            g2 = x * x - prev_x * prev_x
                            for s in range(1, smax + 1):
                                u1[s] += g1 * tc[s]
                                u2[s] += g2 * tc[s]
                            for t in range(rungs):
                                rs = rung_s[t]
                                if rs > world * size_full:
                                    break
                                if a >= rs:
                                    rho = _binom_ratio(a, c, rs, lf_hi, lf_lo)
                                    r1[t] = (r1[t] + g1) * rho
                                    r2[t] = (r2[t] + g2) * rho
                            if run_ok:
                                if a >= run_s:
                                    rho = _binom_ratio(a, c, run_s, lf_hi, lf_lo)
                                    run1 = (run1 + g1) * rho
                                    run2 = (run2 + g2) * rho
                                else:
                                    run1 = 0.0
                                    run2 = 0.0
                        a += c
                        t_c = 1.0
                        af = float(a)
                        for s in range(1, smax + 1):
                            t_c = t_c * (af - s + 1.0) * inv[s]
                            tc[s] = t_c
                        prev_x = x
                else:
                    a = pcv[group_end[j]] - base
                if i < win_lo[j] or i > win_hi[j]:
                    continue
                n = a
                top = prev_x
                size = min(size_full, n)
                hi = group_end[j]
                if world > 1 and not upper:
                    # a quick bound before the step plan: at least ceil(batches / G) steps, and
                    # the full batches no split touches make uniform steps of G x size rows
                    q = _floor_div(n, size)
                    nb = q + (1 if n > q * size else 0)
                    quick = _floor_div(nb + world - 1, world) * alpha
                    uniform = _floor_div(max(q - world + 1, 0), world)
                    if uniform > 0:
                        if pad_code == 0:
                            m1 = float(edge)
                            m2 = m1 * m1
                        elif world * size >= n:
                            m1 = top
                            m2 = top * top
                        elif world * size <= smax:
                            m1 = top - u1[world * size] / tc[world * size]
                            m2 = top * top - u2[world * size] / tc[world * size]
                        else:
                            m1, m2, _ = _lower_moments(world * size, top, smax, u1, u2, tc,
                                                       run_ok, run_s, run1, run2, rungs, rung_s,
                                                       r1, r2)
                        quick += uniform * size * (beta * m1 + gamma * m2)
                    useful = False
                    for k in range(1, kmax + 1):
                        cap = min(F[j, k], P[j, k] * (1.0 + 1e-9) + 1e-300)
                        if quick < cap - F[i, k - 1]:
                            useful = True
                            break
                    if not useful:
                        continue
                if world == 1:
                    # bucket_steps' one-rank case written out: the call (even inlined) made the
                    # one-GPU DP five times slower in benchmarks
                    q = _floor_div(n, size)
                    r = n - q * size
                    typ_w[0] = size
                    typ_rows[0] = size
                    typ_mult[0] = q
                    typ_w[1] = r
                    typ_rows[1] = r
                    typ_mult[1] = 1
                    nt = 2 if r > 0 else 1
                else:
                    nt = bucket_steps(n, size, world, typ_w, typ_rows, typ_mult, cls_s, cls_c,
                                      heap_s, heap_c)
                e = float(edge)
                # lower bound of every step type (exact where the draw count is kept)
                lower = 0.0
                exact = True
                for t in range(nt):
                    rows = typ_rows[t]
                    typ_exact[t] = True
                    if pad_code == 0:
                        m1 = e
                        m2 = e * e
                    elif rows >= n:
                        m1 = top
                        m2 = top * top
                    elif rows == 1:
                        m1 = (pq1[hi] - pq1[lo]) / n
                        m2 = (pq2[hi] - pq2[lo]) / n
                    elif rows <= smax:
                        m1 = top - u1[rows] / tc[rows]
                        m2 = top * top - u2[rows] / tc[rows]
                    elif upper and not (run_ok and rows == run_s):
                        # the smallest kept draw count at or above `rows`, else the top
                        m1 = top
                        m2 = top * top
                        for rr in range(rungs):
                            rs = rung_s[rr]
                            if rs > world * size_full:
                                break
                            if rs >= rows:
                                m1 = top - r1[rr]
                                m2 = top * top - r2[rr]
                                break
                    else:
                        m1, m2, hit = _lower_moments(rows, top, smax, u1, u2, tc, run_ok, run_s,
                                                     run1, run2, rungs, rung_s, r1, r2)
                        if not hit:
                            typ_exact[t] = False
                            exact = False
                    typ_lb[t] = typ_mult[t] * (alpha + typ_w[t] * (beta * m1 + gamma * m2))
                    lower += typ_lb[t]
                if upper:
                    for k in range(1, kmax + 1):
                        v = P[i, k - 1] + lower
                        if v < P[j, k]:
                            P[j, k] = v
                    continue
                best_room = -inf
                for k in range(1, kmax + 1):
                    # P is inflated a little so that rounding never hides an optimum equal to it
                    cap = min(F[j, k], P[j, k] * (1.0 + 1e-9) + 1e-300)
                    room[k] = cap - F[i, k - 1]
                    if room[k] > best_room:
                        best_room = room[k]
                if not lower < best_room:
                    continue
                cost = lower
                if not exact:
                    for t in range(nt):
                        if typ_exact[t]:
                            continue
                        wm = typ_mult[t] * typ_w[t]
                        slack = best_room - (cost - typ_lb[t]) - typ_mult[t] * alpha
                        m1, m2, done = walk_moments_capped(values, pcv, lo, hi, typ_rows[t],
                                                           lf_hi, lf_lo, wm * beta, wm * gamma,
                                                           slack)
                        if done and typ_rows[t] == world * size_full:
                            # start this run's exact sums: later ends of the run update them
                            run_ok = True
                            run_s = typ_rows[t]
                            run1 = top - m1
                            run2 = top * top - m2
                        cost += typ_mult[t] * (alpha + typ_w[t] * (beta * m1 + gamma * m2)) \
                            - typ_lb[t]
                        if not done:
                            break  # proven too costly: cost is a lower bound above best_room
                    if not cost < best_room:
                        continue
                for k in range(1, kmax + 1):
                    v = F[i, k - 1] + cost
                    if v < F[j, k]:
                        F[j, k] = v
                        arg[j, k] = i
    opt = np.full((kmax, g + 1), -1, dtype=np.int32)
    best = np.empty(kmax)
    for k in range(1, kmax + 1):
        for j in range(1, g + 1):
            opt[k - 1, j] = arg[j, k]
        best[k - 1] = F[g, k]
    return opt, best


@njit(cache=True, nogil=True)
def pair_costs(values, pcv, pq1, pq2, group_end, edges, starts, ends, token_budget, alpha, beta,
               gamma, world, pad_code, lf_hi, lf_lo):
    """:func:`bucket_time` of every bucket (starts[p], ends[p]] of candidate groups."""
    out = np.empty(starts.size)
    for p in range(starts.size):
        i = starts[p]
        j = ends[p]
        out[p] = bucket_time(values, pcv, pq1, pq2, group_end[i], group_end[j], edges[j],
                             token_budget, alpha, beta, gamma, world, pad_code, lf_hi, lf_lo)
    return out
