"""Order statistics of draws without replacement: the longest of s samples drawn from a bucket.

A bucket holds N samples of the distinct lengths x_lo < ... < x_top; with c(v) the samples of
length <= x_v, the longest M of s samples drawn without replacement has
P(M <= x_v) = C(c(v), s) / C(N, s), so

    E[M]   = top   - sum_{v < top} (x_{v+1} - x_v) C(c(v), s) / C(N, s)
    E[M^2] = top^2 - sum_{v < top} (x_{v+1}^2 - x_v^2) C(c(v), s) / C(N, s)

Every objective that pads a batch to its longest member reads these (dynamic padding, the time
objective, the certified DP, the 2-D bins). The sums are walked from the top down: for large s
the probabilities collapse a few lengths below the top, so a walk stops once the rest is
provably negligible. Here:

- the log-factorial tables the binomial ratios read (:func:`log_factorial_table` behind
  :func:`log_factorials`, :func:`log_factorial_dd` behind :func:`walk_tables`; two
  accumulations, each kept because the results of its objective depend on its last bits);
- the binomial ratios C(a, s) / C(n, s): from a table, by Stirling differences without
  cancellation (:func:`log_binom_ratio`), one step at a time (:func:`binom_ratio`), and the
  plain log binomial (:func:`log_binomial`);
- the walks: :func:`expected_max` (E[M] exactly), :func:`walk_max_capped` (its sum, stopped
  once a cost built on it is proven above a cap), :func:`walk_moments` and
  :func:`walk_moments_capped` (E[M] and E[M^2]).

numba kernels, arrays and numbers in (the tables and the Python helpers excepted); the callers
validate first. The walks of E[M] allocate nothing and are compiled without numba's reference
counting (:data:`bucketopt.jit.NO_REFCOUNTS`): the atomic increments and decrements it takes on
every array argument cost more than a short walk, and callers run millions. The flag is set here,
not left to the callers: numba compiles a kernel that does not set it with the setting of the
kernel that first calls it, so the same walk would otherwise run with or without the counts as
compiles happened.
"""

from __future__ import annotations

import math

import numpy as np

from .errors import BucketoptError
from .jit import NO_REFCOUNTS, njit

# Below this argument the Stirling series is not used (its truncation error at 100 is < 1e-17).
STIRLING_MIN = 100
# A probability below exp(LOG_ZERO) counts as 0 (it changes no sum by 1e-300 of its value).
LOG_ZERO = -745.0
# A walk stops once the rest of its sum is provably below NEGLIGIBLE of its top: then exact.
NEGLIGIBLE = 1e-16


# ---- log-factorial tables ------------------------------------------------------------------
# Two accumulations of log(a!) as a double-double (hi + lo), each with its own users:
# log_factorial_table (TwoSum with renormalisation, exact size n + 1) serves the time objective,
# the certified DP and the 2-D dynamic padding through log_factorials; log_factorial_dd
# (Neumaier, from a vector of logs, grown by doubling and cached) serves pad="batch" through
# walk_tables. They are not merged: they round differently in the last bits (for a <= 100,000
# their hi parts differ in 98,728 entries, hi + lo in 8), and the table differences the walks
# take, hence every value, boundary and certificate of those objectives, follow those bits.

# A double-double table of log(a!) (hi + lo, accumulated with TwoSum), so that
# log C(a, b) - log C(N, b) = (L[a] - L[a-b]) - (L[N] - L[N-b]) keeps ~1e-13 relative accuracy.
@njit(cache=True)
def log_factorial_table(n):
    """hi, lo with hi[a] + lo[a] = log(a!) for a = 0..n, to about 1e-16 relative."""
    hi = np.zeros(n + 1)
    lo = np.zeros(n + 1)
    s = 0.0
    c = 0.0
    for a in range(2, n + 1):
        x = np.log(a)
        t = s + x
        bp = t - s
        err = (s - (t - bp)) + (x - bp)
        c += err
        s = t + c
        c = c - (s - t)
        hi[a] = s
        lo[a] = c
    return hi, lo


@njit(cache=True)
def log_factorial_dd(logs):
    """hi, lo with hi[a] + lo[a] = log(a!) for a = 0..n, from ``logs[a] = log(a)`` (a = 0..n):
    a compensated (Neumaier) running sum, so table differences keep ~1e-15 absolute accuracy."""
    size = logs.size
    hi = np.zeros(size)
    lo = np.zeros(size)
    acc = 0.0
    comp = 0.0
    for a in range(2, size):
        x = logs[a]
        t = acc + x
        if abs(acc) >= abs(x):
            comp += (acc - t) + x
        else:
            comp += (x - t) + acc
        acc = t
        hi[a] = acc
        lo[a] = comp
    return hi, lo


# The double-double table of log(a!) takes 16 bytes per sample: refuse beyond 2**26 samples
# (1 GiB) rather than exhaust memory.
MAX_TABLE = 1 << 26


# Up to this many samples the walks read log(a!) from a table (16 bytes per entry, built once per
# process and kept); above it they evaluate Stirling differences (slower per term, no memory).
WALK_TABLE_MAX = 1 << 21
_walk_table = (np.zeros(1), np.zeros(1))


def walk_tables(n: int):
    """(hi, lo) log-factorial table reaching n for the pad="batch" kernels, or a one-entry pair
    (the kernels then use Stirling differences) when n > WALK_TABLE_MAX."""
    global _walk_table
    if n > WALK_TABLE_MAX:
        return np.zeros(1), np.zeros(1)
    if _walk_table[0].size <= n:
        size = min(max(n + 1, 2 * _walk_table[0].size), WALK_TABLE_MAX + 1)
        with np.errstate(divide="ignore"):
            logs = np.log(np.arange(size, dtype=np.float64))
        logs[:2] = 0.0
        _walk_table = log_factorial_dd(logs)
    return _walk_table


def log_factorials(n: int):
    """The double-double log(a!) table for a = 0..n (:func:`log_factorial_table`, checked against
    MAX_TABLE): the time objective, the certified DP and the 2-D bins read it."""
    if n > MAX_TABLE:
        raise BucketoptError(
            f'pad="batch" supports at most {MAX_TABLE:,} samples ({n:,} given); subsample the '
            "lengths (the optimum depends on the distribution, not on n).",
            param=None,
        )
    return log_factorial_table(int(n))


def log_binomial(n, s):
    """log C(n, s) by lgamma, in Python (0 <= s <= n)."""
    return math.lgamma(n + 1) - math.lgamma(s + 1) - math.lgamma(n - s + 1)


@njit(cache=True)
def _log_falling(hi, lo, a, b):
    # log(a! / (a-b)!) for 0 <= b <= a, from the double-double table of log(k!).
    return (hi[a] - hi[a - b]) + (lo[a] - lo[a - b])


# ---- binomial ratios C(a, s) / C(n, s) -----------------------------------------------------

@njit(cache=True)
def _stirling_tail(z):
    # lgamma(z) - ((z - 1/2) log z - z + log(2 pi) / 2) for z >= 100: the next term of the series
    # is below 1 / (1188 z**9) < 1e-20.
    r = 1.0 / z
    r2 = r * r
    return r * (1.0 / 12.0 - r2 * (1.0 / 360.0 - r2 * (1.0 / 1260.0 - r2 * (1.0 / 1680.0))))


@njit(cache=True)
def log_binom_ratio(a, n, s):
    """log(C(a, s) / C(n, s)) for 0 <= s <= a <= n, to about 1e-16 x (|result| + 4 s) absolute.

    With d = n - a: log C(a,s)/C(n,s) = sum_{l<s} log(1 - d/(n-l)) = sum_{u<d} log(1 - s/(a+1+u)).
    When a - s + 1 >= STIRLING_MIN it is the difference of two Stirling expansions, arranged as
    s log1p(-d/(n+1)) - (a-s+1/2) log1p(-s/(a+1)) + (n-s+1/2) log1p(-s/(n+1)) + tails,
    where every term is at most ~s or the result itself; otherwise the shorter product is summed
    (results below LOG_ZERO are returned as LOG_ZERO: (a/n)**s bounds the ratio from above).
    """
    d = n - a
    if d == 0 or s == 0:
        return 0.0
    fa = float(a)
    fn = float(n)
    fs = float(s)
    fd = float(d)
    if a - s + 1 >= STIRLING_MIN:
        out = fs * np.log1p(-fd / (fn + 1.0))
        out -= (fa - fs + 0.5) * np.log1p(-fs / (fa + 1.0))
        out += (fn - fs + 0.5) * np.log1p(-fs / (fn + 1.0))
        out += (_stirling_tail(fa + 1.0) - _stirling_tail(fa - fs + 1.0)
                - _stirling_tail(fn + 1.0) + _stirling_tail(fn - fs + 1.0))
        return out
    bound = fs * np.log1p(-fd / fn)  # log (a/n)**s >= the result
    if bound < LOG_ZERO:
        return LOG_ZERO
    out = 0.0
    if s <= d:
        for ell in range(s):
            out += np.log1p(-fd / (fn - ell))
    else:
        for u in range(d):
            out += np.log1p(-fs / (fa + 1.0 + u))
    return out


@njit(cache=True)
def _walk_constant(n, s):
    # The n-only part of log_binom_ratio(a, n, s) on its Stirling branch.
    fn = float(n)
    fs = float(s)
    return ((fn - fs + 0.5) * np.log1p(-fs / (fn + 1.0))
            - _stirling_tail(fn + 1.0) + _stirling_tail(fn - fs + 1.0))


@njit(cache=True)
def _log1p_small(x):
    # log(1 + x) for |x| <= 1/16: the series to x**14 (the rest is below 1e-18 of the result).
    acc = 1.0 / 14.0
    for k in range(13, 0, -1):
        acc = 1.0 / k - x * acc
    return x * acc


@njit(cache=True)
def _walk_log_ratio(a, n, s, const):
    # log_binom_ratio(a, n, s), with its n-only part ``const`` computed once per walk; the
    # log(1 - s / (a + 1)) of the Stirling branch by its series when s / (a + 1) <= 1/16 (every
    # step near the top of a walk, where the terms are large).
    if a - s + 1 < STIRLING_MIN or a == n:
        return log_binom_ratio(a, n, s)
    fa = float(a)
    fs = float(s)
    x = -fs / (fa + 1.0)
    lx = _log1p_small(x) if x >= -0.0625 else np.log1p(x)
    return (fs * np.log((fa + 1.0) / (float(n) + 1.0)) - (fa - fs + 0.5) * lx
            + _stirling_tail(fa + 1.0) - _stirling_tail(fa - fs + 1.0) + const)


@njit(cache=True)
def _ratio_constant(n, s, lf_hi, lf_lo):
    # The n-only part of the walk's log ratio: log(n! / (n-s)!) from the table when it reaches n,
    # else the Stirling branch's constant.
    if n < lf_hi.size:
        return (lf_hi[n] - lf_hi[n - s]) + (lf_lo[n] - lf_lo[n - s])
    return _walk_constant(n, s)


@njit(cache=True)
def _log_ratio(a, n, s, const, lf_hi, lf_lo):
    # log(C(a, s) / C(n, s)): two table differences when the table reaches n (cheapest), else
    # the Stirling form; ``const`` from _ratio_constant.
    if n < lf_hi.size:
        return (lf_hi[a] - lf_hi[a - s]) + (lf_lo[a] - lf_lo[a - s]) - const
    return _walk_log_ratio(a, n, s, const)


@njit(cache=True, inline="always")
def binom_ratio(a, c, s, lf_hi, lf_lo):
    """C(a, s) / C(a + c, s) = prod_{t=1..c} (a + t - s) / (a + t): a few divisions for the
    small counts of long tails, one exp of the log-factorial table (``lf_hi``, ``lf_lo``)
    otherwise. A walk one length down multiplies its probability by it."""
    if c <= 4:
        rho = 1.0
        for t in range(1, c + 1):
            rho *= (a + t - s) / (a + t)
        return rho
    return np.exp(_log_falling(lf_hi, lf_lo, a, s) - _log_falling(lf_hi, lf_lo, a + c, s))


# ---- the walks: E[M] and E[M^2] from the top down ------------------------------------------

@njit(cache=True, inline="always")
def _walk_down(values, prefix_count, base, n, s, const, lf_hi, lf_lo, t):
    # One length down a walk of E[M], to values[t]: (p, v, term) with v = values[t],
    # p = C(a, s) / C(n, s) for the a samples up to v and term = (next length - v) p; p = -1
    # once a < s (no s draws have their longest below: the walk ends).
    a = prefix_count[t + 1] - base
    if a < s:
        return -1.0, 0.0, 0.0
    p = np.exp(_log_ratio(a, n, s, const, lf_hi, lf_lo))
    v = float(values[t])
    return p, v, (float(values[t + 1]) - v) * p


@njit(cache=True, **NO_REFCOUNTS)
def expected_max(values, prefix_count, lf_hi, lf_lo, lo, hi, s):
    """E[longest of s samples drawn without replacement] from the distinct lengths
    ``values[lo:hi]`` (``prefix_count``: prefix counts over values, index 0 empty).

    E = top - sum_{v < top} (next length - v) C(c(v), s) / C(N, s), walked from the top down until
    the rest is provably below 1e-16 of the top.
    """
    base = prefix_count[lo]
    n = prefix_count[hi] - base
    top = float(values[hi - 1])
    if s >= n:
        return top
    if s <= 0:
        return 0.0
    # walk_max_capped's walk with no cap (the same terms, the same stop), in a loop small enough
    # for the compiler to inline where the walks are short and many (the 2-D bins)
    tol = 1e-16 * top
    bottom = float(values[lo])
    const = _ratio_constant(n, s, lf_hi, lf_lo)
    acc = 0.0
    for t in range(hi - 2, lo - 1, -1):
        p, v, term = _walk_down(values, prefix_count, base, n, s, const, lf_hi, lf_lo, t)
        if p < 0.0:
            break
        acc += term
        if (v - bottom) * p <= tol:  # the rest is at most (v - bottom) p
            break
    return top - acc


# A walk first sums EXACT_STEPS terms exactly, then bounds the rest from the probabilities at the
# tops of blocks of BLOCK distinct lengths (the probability grows with the length); it bounds
# again each time the exact walk has doubled in length.
EXACT_STEPS = 16
BLOCK = 64


@njit(cache=True, **NO_REFCOUNTS)
def walk_max_capped(values, prefix_count, lf_hi, lf_lo, lo, hi, s, weight, fixed, cap, tol,
                    span):
    """sum_{v < top} gap(v) C(c(v), s) / C(N, s) over the bucket ``values[lo:hi]`` (N > s >= 1).

    The bucket's cost is ``fixed + weight * (top - sum)``. Returns (sum, True) to within
    ``tol / weight``, or (an upper bound of the sum, False) once that bound proves the cost above
    ``cap``. ``span`` >= the sum (top - mean). With ``cap`` infinite it is the plain walk of
    :func:`expected_max` (which runs it in its own loop: the same terms, the same stop).
    """
    base = prefix_count[lo]
    n = prefix_count[hi] - base
    top = float(values[hi - 1])
    bottom = float(values[lo])
    const = _ratio_constant(n, s, lf_hi, lf_lo)
    acc = 0.0
    check = EXACT_STEPS
    for t in range(hi - 2, lo - 1, -1):
        p, v, term = _walk_down(values, prefix_count, base, n, s, const, lf_hi, lf_lo, t)
        if p < 0.0:
            break
        acc += term
        rest = min((v - bottom) * p, span - acc)
        if weight * rest <= tol:
            break
        if hi - 1 - t == check and cap < np.inf:  # terms summed so far (no cap: no bound)
            check *= 2
            if fixed + weight * (top - acc - rest) > cap:
                return acc + rest, False
            # the rest, block by block: each block's gaps times the probability at its top
            bound = 0.0
            t1 = t - 1
            while t1 >= lo:
                a1 = prefix_count[t1 + 1] - base
                if a1 < s:
                    break
                p1 = np.exp(_log_ratio(a1, n, s, const, lf_hi, lf_lo))
                top1 = float(values[t1 + 1])
                tail = (top1 - bottom) * p1  # this block and every one below it
                if weight * tail <= tol or tail <= 1e-3 * bound:
                    bound += tail
                    break
                t0 = max(lo, t1 - BLOCK + 1)
                bound += (top1 - float(values[t0])) * p1
                t1 = t0 - 1
            up = acc + min(bound, rest)
            if fixed + weight * (top - up) > cap:
                return up, False
    return acc, True


@njit(cache=True)
def walk_moments(values, pcv, lo, hi, draws, lf_hi, lf_lo, rel=NEGLIGIBLE):
    """(E[M], E[M^2]) of the longest of ``draws`` samples drawn without replacement from the
    distinct lengths ``values[lo:hi]`` (``pcv``: prefix counts over values, index 0 empty).

    Walks from the top down and stops once the rest is provably below 1e-16 of the result
    (lower bounds where ``rel`` is above NEGLIGIBLE: :func:`walk_moments_capped`).
    """
    top = float(values[hi - 1])
    if draws >= pcv[hi] - pcv[lo]:
        return top, top * top
    m1, m2, _, _ = walk_moments_capped(values, pcv, lo, hi, draws, lf_hi, lf_lo, 0.0, 0.0,
                                       np.inf, rel)
    return m1, m2


@njit(cache=True)
def walk_moments_capped(values, pcv, lo, hi, draws, lf_hi, lf_lo, w1, w2, slack,
                        rel=NEGLIGIBLE):
    """:func:`walk_moments` (``draws`` below the bucket's size), stopping early once
    ``w1 * E[M] + w2 * E[M^2]`` is proven to exceed ``slack``, or, where ``rel`` is above
    NEGLIGIBLE, once the rest is below ``rel`` of the top; returns (E[M], E[M^2], exact,
    lengths walked), lower bounds when not exact."""
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
    walked = 0
    for t in range(hi - 2, lo - 1, -1):
        a = pcv[t + 1] - base
        if a < draws:
            break
        walked += 1
        # one length down: a ratio of a few factors where it lost few samples (exp otherwise);
        # the product keeps a relative error of an ulp a step
        if prev == n:
            p = np.exp(_log_falling(lf_hi, lf_lo, a, draws) - norm)
        else:
            p *= binom_ratio(a, prev - a, draws, lf_hi, lf_lo)
        prev = a
        v = float(values[t])
        nxt = float(values[t + 1])
        s1 += (nxt - v) * p
        s2 += (nxt * nxt - v * v) * p
        r1 = (v - bottom) * p
        r2 = (v * v - bottom * bottom) * p
        if r1 <= rel * top and r2 <= rel * top * top:
            if rel > NEGLIGIBLE:  # the rest is at most r1, r2: lower bounds
                return top - s1 - r1, top * top - s2 - r2, False, walked
            break
        steps += 1
        if steps >= 8:
            steps = 0
            if w1 * (top - s1 - r1) + w2 * (top * top - s2 - r2) > slack:
                return top - s1 - r1, top * top - s2 - r2, False, walked
    return top - s1, top * top - s2, True, walked

