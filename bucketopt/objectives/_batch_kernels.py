"""numba kernels of ``pad="batch"``: the expected dynamic padding of a bucket and the DP over it.

Arrays and numbers in, arrays out; the wrappers (bucketopt/objectives/batchpad.py,
bucketopt/objectives/batch.py) validate first. The expected maximum of a batch and its walks
live in :mod:`bucketopt.orderstats` (past ``WALK_TABLE_MAX`` samples their binomial ratios come
from Stirling differences, not a table of log(a!), so nothing here grows with n).
"""

from __future__ import annotations

import numpy as np

from ..jit import njit
from ..orderstats import expected_max, walk_max_capped
from ._batch_sweep import pascal_table, stage_costs, sweep_costs, sweep_suits


@njit(cache=True)
def batch_bucket_cost(values, prefix_count, prefix_tokens, lf_hi, lf_lo, lo, hi, size, cap):
    """Expected dynamic padding of the bucket made of distinct lengths ``values[lo:hi]``.

    The bucket's N samples are shuffled and cut into q = N // size batches of ``size`` and one of
    r = N % size; every batch is padded to its longest member:
    padding = q size E[M_size] + r E[M_r] - tokens, with
    E[M_s] = top - sum_{v < top} gap(v) C(c(v), s) / C(N, s) (gap(v) = next length - v).
    The full-batch sum is walked first (short for large batches), then the partial batch's; each
    stops once its rest is provably below 1e-15 of N x top. E[M_r] >= the mean bounds the partial
    batch before it is walked. ``prefix_count`` / ``prefix_tokens`` are prefix sums over
    ``values`` (index 0 empty).

    Returns the expectation, or a lower bound of it that is > ``cap`` (then the walk stopped early:
    the bucket cannot beat ``cap``).
    """
    n = prefix_count[hi] - prefix_count[lo]
    tokens = float(prefix_tokens[hi] - prefix_tokens[lo])
    top = float(values[hi - 1])
    if size >= n:
        return n * top - tokens
    if size <= 1:
        return 0.0  # every batch is one sample
    q = n // size
    r = n - q * size
    wb = float(q * size)
    mean = tokens / n
    span = top - mean  # top - E[M_s] <= top - mean for every s >= 1
    r_low = r * mean  # r E[M_r] >= r x mean
    tol = 1e-15 * n * top
    sb, exact = walk_max_capped(values, prefix_count, lf_hi, lf_lo, lo, hi, size, wb,
                                r_low - tokens, cap, tol, span)
    full = wb * (top - sb)
    if not exact:
        return _above(full + r_low - tokens, cap)
    if r <= 1 or full + r_low - tokens > cap:
        return full + r_low - tokens  # E[M_1] is the mean; else a bound above cap
    fr = float(r)
    sr, exact = walk_max_capped(values, prefix_count, lf_hi, lf_lo, lo, hi, r, fr,
                                full - tokens, cap, tol, span)
    cost = full + fr * (top - sr) - tokens
    return cost if exact else _above(cost, cap)


@njit(cache=True)
def _above(bound, cap):
    # A walk stops once its lower bound of the cost exceeds ``cap``; summed again in another
    # order, that bound can round back to cap or below when both are near 0 against the bucket's
    # tokens (buckets of batch size 1 cost 0): return it strictly above cap, as the DPs assume.
    return bound if bound > cap else np.nextafter(cap, np.inf)


@njit(cache=True)
def _limit(bound, values, prefix_count):
    # The most a state may cost and still lie on a chain of cost ``bound``: the bound plus a
    # margin for rounding, 1e-9 of it and 1e-12 of n x (longest length), the scale of the token
    # sums whose differences the costs are (a bound of 0 needs the second).
    if bound == np.inf:
        return np.inf
    return bound + 1e-9 * abs(bound) + 1e-12 * float(prefix_count[-1]) * float(values[-1]) + 1e-9


@njit(cache=True)
def fill_ok(values, prefix_count, lf_hi, lf_lo, lo, hi, size, need):
    """Does the bucket ``values[lo:hi]`` fill at least ``need`` padded tokens per full batch?

    Its largest batch has s = min(size, N) rows padded to their longest, s x E[max of s]."""
    if need <= 0.0:
        return True
    n = prefix_count[hi] - prefix_count[lo]
    s = min(size, n)
    if s * float(values[hi - 1]) < need:
        return False
    return s * expected_max(values, prefix_count, lf_hi, lf_lo, lo, hi, s) >= need * (1 - 1e-12)


@njit(cache=True)
def batch_layers_kernel(values, prefix_count, prefix_tokens, lf_hi, lf_lo, cand_group, cand_end,
                        cand_size, win_lo, win_hi, g, kmax, min_fill_tokens, bound, last_only,
                        costs):
    """Exact DP for expected dynamic padding over candidate edges, same contract as edge_layers.

    Candidate c (c = 0..C-1, increasing) closes group ``cand_group[c]`` (cand_group[0] = 0 is the
    empty prefix); the lengths up to it are ``values[:cand_end[c]]`` and its batch size is
    ``cand_size[c]``. A bucket from candidate i to candidate j (i < j) is allowed when
    ``win_lo[gj] <= gi <= win_hi[gj]`` in group indices. Every allowed pair is considered
    (the cost is not Monge); a pair is skipped only when a proven lower bound of its cost cannot
    improve any layer. Returns opt (kmax, g + 1) int32 indexed by group (-1 where no candidate
    closes there) and best (kmax,) float64 (inf when infeasible).

    ``bound`` (inf when none is known): the cost of a feasible chain of candidates with at most
    kmax buckets. A state above it (with a margin for rounding, see _limit) cannot lie on the
    best chain of layer kmax (bucket costs are >= 0), so a pair is walked only until its cost is
    proven to lift every layer above it: layer kmax comes out exactly as without the bound, the
    other layers do not (their optima may lie above it).

    ``last_only``: only layer kmax at the last candidate is wanted, so the DP keeps layers
    1..kmax-1 before the last candidate (a state of layer kmax there ends no chain of kmax
    buckets) and layer kmax alone at it; the other layers' entries at the last candidate are
    left unset (inf).

    ``costs``: a (C, C) array receives the cost of every pair priced, costs[i, j] (inf for the
    pairs skipped; a lower bound above the cap for walks stopped early); any other shape, none.
    """
    C = cand_group.size
    inf = np.inf
    limit = _limit(bound, values, prefix_count)
    F = np.full((kmax + 1, C), inf)
    F[:, 0] = 0.0
    arg = np.full((kmax + 1, C), -1, dtype=np.int64)
    first = np.empty(kmax, dtype=np.int64)
    seen = np.full(C, -1, dtype=np.int64)  # seen[i] == j: the pair (i, j) is done
    # the ends priced by a sweep: every start's exact cost at once, in swept[i] (inf: a start the
    # share windows or min_fill rule out)
    swept = np.full(C, inf)
    sweep_at = np.empty(C, dtype=np.int64)
    sweep_who = np.empty(C, dtype=np.int64)
    sweep_out = np.empty(C)
    keep = costs.shape[0] == C
    pascal = pascal_table()
    if keep:
        costs[:, :] = inf
    for j in range(1, C):
        gj = cand_group[j]
        k_lo = 1
        k_hi = kmax
        if last_only:
            if j == C - 1:
                k_lo = kmax
            else:
                k_hi = kmax - 1
        use_sweep = sweep_suits(cand_size[j], j)
        if use_sweep:
            # every allowed start, from the nearest down: a pair's cost depends (in its last
            # bits) on the starts swept before it, so they do not depend on the DP's state, and
            # a bound or last_only changes no cost
            count = 0
            for i in range(j - 1, -1, -1):
                swept[i] = inf
                gi = cand_group[i]
                if gi < win_lo[gj] or gi > win_hi[gj] or not fill_ok(
                        values, prefix_count, lf_hi, lf_lo, cand_end[i], cand_end[j],
                        cand_size[j], min_fill_tokens):
                    continue
                sweep_at[count] = cand_end[i]
                sweep_who[count] = i
                count += 1
            sweep_costs(values, prefix_count, prefix_tokens, cand_end[j], cand_size[j],
                        sweep_at[:count], sweep_out[:count], pascal)
            for q in range(count):
                swept[sweep_who[q]] = sweep_out[q]
                if keep:
                    costs[sweep_who[q], j] = sweep_out[q]
        # The starts that were best for the previous end go first: their costs make the caps of
        # the other pairs tight, so most of those stop after a few steps of their walk.
        nfirst = 0
        for k in range(1, kmax + 1):
            i = arg[k, j - 1]
            if i >= 0 and seen[i] != j:
                seen[i] = j
                first[nfirst] = i
                nfirst += 1
        for step in range(nfirst + j):
            if step < nfirst:
                i = first[step]
            else:
                i = j - 1 - (step - nfirst)
                if seen[i] == j:
                    continue
            gi = cand_group[i]
            if gi < win_lo[gj] or gi > win_hi[gj]:
                continue
            cap = -inf
            for k in range(k_lo, k_hi + 1):
                if F[k - 1, i] < inf:
                    room = min(F[k, j], limit) - F[k - 1, i]
                    if room > cap:
                        cap = room
            if cap < 0.0:
                continue  # no layer can improve (bucket costs are >= 0)
            if use_sweep:
                cost = swept[i]
                if cost == inf:
                    continue  # not an allowed start (share windows or min_fill)
            else:
                if not fill_ok(values, prefix_count, lf_hi, lf_lo, cand_end[i], cand_end[j],
                               cand_size[j], min_fill_tokens):
                    continue
                cost = batch_bucket_cost(values, prefix_count, prefix_tokens, lf_hi, lf_lo,
                                         cand_end[i], cand_end[j], cand_size[j], cap)
                if keep:
                    costs[i, j] = cost
            for k in range(k_lo, k_hi + 1):
                v = F[k - 1, i] + cost
                if v < F[k, j] or (v == F[k, j] and v < inf):
                    F[k, j] = v
                    arg[k, j] = i
    opt = np.full((kmax, g + 1), -1, dtype=np.int32)
    best = np.empty(kmax)
    for k in range(1, kmax + 1):
        for j in range(1, C):
            if arg[k, j] >= 0:
                opt[k - 1, cand_group[j]] = cand_group[arg[k, j]]
        best[k - 1] = F[k, C - 1]
    return opt, best


@njit(cache=True)
def batch_chain_kernel(values, prefix_count, prefix_tokens, lf_hi, lf_lo, group_end, group_size,
                       win_lo, win_hi, windows, offsets, min_fill_tokens, bound):
    """Best chain of buckets whose t-th boundary lies in window t (pad="batch").

    Window t holds the group indices ``windows[offsets[t]:offsets[t + 1]]`` (increasing); window 0
    is the empty prefix {0} and the last window the last group {g}. A bucket closes group j and
    starts after group i; its lengths are ``values[group_end[i]:group_end[j]]`` and its batch size
    ``group_size[j]``. Returns (chain of group indices, one per window, and its cost), with
    chain[0] = -1 when no chain satisfies the share windows.

    ``bound`` (inf when none is known): the cost of a chain through the windows. A pair whose
    prefix cost would exceed it (with a margin for rounding, see _limit) cannot lie on the best
    chain (bucket costs are >= 0), so its walk stops once that is proven: every pair that can lie on
    the best chain is walked exactly as without the bound, and the chain returned is the same.
    With a bound, the last bucket's cost from every end of the last but one window is walked
    first (the last stage needs those costs anyway), so the stage before it also counts that
    cost: a pair that cannot start a chain below the bound stops as soon as that is proven.
    """
    nw = offsets.size - 1
    inf = np.inf
    limit = _limit(bound, values, prefix_count)
    F = np.full(windows.size, inf)
    arg = np.full(windows.size, -1, dtype=np.int64)
    F[0] = 0.0
    # suffix[jj]: the exact cost of the last bucket from the end of window nw - 2 (with a bound)
    suffix = np.full(windows.size, inf)
    use_suffix = limit < inf and nw >= 3
    g_last = windows[offsets[nw - 1]]
    pascal = pascal_table()
    last = np.empty((0, 0))  # with a bound: the last stage's costs, priced at stage nw - 2
    for t in range(1, nw):
        lo_w = offsets[t - 1]
        width = offsets[t] - lo_w
        if use_suffix and t == nw - 1:
            swept = last  # read through suffix below, never again from swept
        else:
            # the stage's pair costs that sweeps price (nan: walked below); they depend on the
            # windows alone, so a bound changes no cost
            swept = stage_costs(values, prefix_count, prefix_tokens, group_end, group_size,
                                windows, offsets, t, pascal)
        if use_suffix and t == nw - 2:
            last = stage_costs(values, prefix_count, prefix_tokens, group_end, group_size,
                               windows, offsets, nw - 1, pascal)
            for jj in range(offsets[t], offsets[t + 1]):
                j = windows[jj]
                if j < g_last and win_lo[g_last] <= j <= win_hi[g_last] and fill_ok(
                        values, prefix_count, lf_hi, lf_lo, group_end[j], group_end[g_last],
                        group_size[g_last], min_fill_tokens):
                    cost = last[0, offsets[t + 1] - 1 - jj]
                    if np.isnan(cost):
                        cost = batch_bucket_cost(values, prefix_count, prefix_tokens, lf_hi,
                                                 lf_lo, group_end[j], group_end[g_last],
                                                 group_size[g_last], inf)
                    suffix[jj] = cost
        for jj in range(offsets[t], offsets[t + 1]):
            j = windows[jj]
            rest = 0.0
            if use_suffix and t == nw - 2:
                if suffix[jj] == inf:
                    continue  # no chain goes on from here
                rest = suffix[jj]
            # the start that was best for the previous end goes first (tight caps, see
            # batch_layers_kernel), then the others from the nearest down
            prev = arg[jj - 1] if jj > offsets[t] else -1
            for step in range(width + 1):
                if step == 0:
                    if prev < 0:
                        continue
                    pos = prev
                else:
                    pos = offsets[t] - step
                    if pos == prev:
                        continue
                i = windows[pos]
                if i >= j or F[pos] == inf:
                    continue
                if use_suffix and t == nw - 1:
                    # the last stage: its costs were priced with the stage before
                    if suffix[pos] == inf or min(F[jj], limit) - F[pos] < 0.0:
                        continue
                    v = F[pos] + suffix[pos]
                    if v < F[jj] or (v == F[jj] and v < inf):
                        F[jj] = v
                        arg[jj] = pos
                    continue
                if i < win_lo[j] or i > win_hi[j]:
                    continue
                if not fill_ok(values, prefix_count, lf_hi, lf_lo, group_end[i], group_end[j],
                               group_size[j], min_fill_tokens):
                    continue
                cap = min(F[jj], limit - rest) - F[pos]
                if cap < 0.0:
                    continue  # the prefix alone (and the last bucket) is above the bound
                cost = swept[jj - offsets[t], offsets[t] - 1 - pos]
                if np.isnan(cost):
                    cost = batch_bucket_cost(values, prefix_count, prefix_tokens, lf_hi, lf_lo,
                                             group_end[i], group_end[j], group_size[j], cap)
                v = F[pos] + cost
                if v < F[jj] or (v == F[jj] and v < inf):
                    F[jj] = v
                    arg[jj] = pos
    chain = np.full(nw, -1, dtype=np.int64)
    last = offsets[nw - 1]
    if F[last] == inf:
        return chain, inf
    pos = last
    for t in range(nw - 1, -1, -1):
        chain[t] = windows[pos]
        pos = arg[pos]
    return chain, F[last]


@njit(cache=True, nogil=True)
def pair_costs(values, prefix_count, prefix_tokens, lf_hi, lf_lo, group_end, sizes, starts,
               ends):
    """:func:`batch_bucket_cost` of every bucket (starts[p], ends[p]] of candidate groups."""
    out = np.empty(starts.size)
    for p in range(starts.size):
        out[p] = batch_bucket_cost(values, prefix_count, prefix_tokens, lf_hi, lf_lo,
                                   group_end[starts[p]], group_end[ends[p]], sizes[ends[p]],
                                   np.inf)
    return out


