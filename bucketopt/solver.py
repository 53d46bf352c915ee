"""solve(), evaluate() and sweep(): validate -> histogram -> candidate edges -> kernel -> backtrack.

The DP runs over *groups*: runs of distinct lengths that share one candidate edge. With
``align=1`` each distinct length is a group and its edge is the length itself (an optimal edge
always sits on a length present in the data: lowering an edge to the longest length in its bucket
never adds padding). With ``align=a`` the edge of length x is ceil(x / a) * a, so lengths that round
up to the same multiple form one group.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from .errors import BucketoptError
from .histogram import TOKEN_LIMIT, Histogram, as_histogram
from .solution import PADS, Solution, check_boundaries, check_token_budget, make_solution

OBJECTIVES = ("padding", "time")
# Backtracking keeps one int32 start index per (k, group): refuse beyond this many entries (600 MB).
MAX_BACKTRACK_ENTRIES = 150_000_000
# sweep() refuses more k values than this (the CLI's -k A:B spans at most as many).
MAX_SWEEP_KS = 4097


@dataclass(frozen=True)
class Groups:
    """Candidate edges and prefix sums over them (index 0 is the empty prefix)."""

    hist: Histogram
    edges: np.ndarray  # (g + 1,), edges[0] = 0
    prefix_count: np.ndarray  # (g + 1,)
    prefix_tokens: np.ndarray  # (g + 1,)
    first_value: np.ndarray  # (g,) index into hist.values of each group's first length

    @property
    def g(self) -> int:
        return self.edges.size - 1


def check_k(k, name: str = "k") -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        if isinstance(k, float) and k.is_integer():
            k = int(k)
        else:
            raise BucketoptError(f"`{name}` must be an integer >= 1; got {k!r}.")
    if k < 1:
        raise BucketoptError(f"`{name}` must be an integer >= 1; got {k}.")
    return int(k)


def check_align(align) -> int:
    if isinstance(align, float) and align.is_integer():
        align = int(align)
    if isinstance(align, bool) or not isinstance(align, (int, np.integer)) or align < 1:
        raise BucketoptError(f"`align` must be an integer >= 1; got {align!r}.")
    if align > TOKEN_LIMIT:  # larger edges overflow int64 (and n x edge exceeds 2**60 anyway)
        raise BucketoptError(f"`align` must be at most 2**60; got {align!r}.")
    return int(align)


def check_shares(min_share, max_share) -> tuple[float, float]:
    out = []
    for name, value in (("min_share", min_share), ("max_share", max_share)):
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise BucketoptError(f"`{name}` must be a number in [0, 1]; got {value!r}.") from None
        if not (0.0 <= value <= 1.0):
            raise BucketoptError(f"`{name}` must be in [0, 1]; got {value}.")
        out.append(value)
    if out[0] > out[1]:
        raise BucketoptError(
            f"`min_share` ({out[0]}) must not exceed `max_share` ({out[1]})."
        )
    return out[0], out[1]


def share_count_bounds(n: int, min_share: float, max_share: float) -> tuple[int, int]:
    """Smallest and largest sample count a non-empty bucket may hold.

    A bucket with c samples is allowed when min_share * n <= c <= max_share * n; products within
    1e-9 of an integer count as that integer, so min_share=0.25 with n=8 allows exactly 2.
    """

    def snap(x):
        r = round(x)
        return r if abs(x - r) <= 1e-9 * max(1.0, abs(x)) else None

    lo = min_share * n
    hi = max_share * n
    lo_int = snap(lo)
    hi_int = snap(hi)
    lo_count = max(1, lo_int if lo_int is not None else math.ceil(lo))
    hi_count = hi_int if hi_int is not None else math.floor(hi)
    return int(lo_count), int(hi_count)


def make_groups(hist: Histogram, align: int) -> Groups:
    values = hist.values
    if align == 1:
        edges = values
        starts = np.arange(values.size)
    else:
        edges_all = -(-values // align) * align
        starts = np.flatnonzero(np.r_[True, edges_all[1:] != edges_all[:-1]])
        edges = edges_all[starts]
    group_counts = np.add.reduceat(hist.counts, starts)
    group_tokens = np.add.reduceat(hist.values * hist.counts, starts)
    if float(edges[-1]) * float(hist.n) >= TOKEN_LIMIT:
        raise BucketoptError(
            f"n x last edge = {hist.n:,} x {int(edges[-1]):,} exceeds 2**60 tokens: padding "
            "could not be computed exactly in int64."
        )
    return Groups(
        hist=hist,
        edges=np.r_[0, edges].astype(np.int64),
        prefix_count=np.r_[0, np.cumsum(group_counts)].astype(np.int64),
        prefix_tokens=np.r_[0, np.cumsum(group_tokens)].astype(np.int64),
        first_value=starts.astype(np.int64),
    )


def share_windows(groups: Groups, min_share: float, max_share: float):
    """For each group end j, the allowed bucket starts i form [win_lo[j], win_hi[j]]."""
    n = int(groups.prefix_count[-1])
    lo_count, hi_count = share_count_bounds(n, min_share, max_share)
    pc = groups.prefix_count
    # count of bucket (i, j] = pc[j] - pc[i]; need lo_count <= pc[j] - pc[i] <= hi_count.
    win_lo = np.searchsorted(pc, pc - hi_count, side="left").astype(np.int64)
    win_hi = (np.searchsorted(pc, pc - lo_count, side="right") - 1).astype(np.int64)
    return win_lo, win_hi


def backtrack(opt: np.ndarray, k: int, g: int) -> list[int]:
    """Group indices j that close each bucket of the best cover by at most k buckets."""
    ends = []
    j = g
    layer = k - 1
    while j > 0:
        ends.append(j)
        i = int(opt[layer, j])
        if i < 0:
            raise AssertionError("backtracking reached an unreachable state")
        j = i
        layer -= 1
    return ends[::-1]


def _prepare(lengths, k, token_budget, pad, objective, min_share, max_share, align):
    hist = as_histogram(lengths)
    kmax = check_k(k)
    align = check_align(align)
    min_share, max_share = check_shares(min_share, max_share)
    if pad not in PADS:
        raise BucketoptError(f"`pad` must be one of {', '.join(PADS)}; got {pad!r}.")
    if objective not in OBJECTIVES:
        raise BucketoptError(
            f"`objective` must be one of {', '.join(OBJECTIVES)}; got {objective!r}."
        )
    token_budget = check_token_budget(token_budget, hist)
    groups = make_groups(hist, align)
    if token_budget is not None and groups.edges[-1] > token_budget:
        raise BucketoptError(
            f"align={align} rounds the last edge up to {int(groups.edges[-1])}, above "
            f"token_budget={token_budget}."
        )
    return hist, kmax, align, min_share, max_share, token_budget, groups


def _optimal_layers(groups, kmax, *, pad, objective, token_budget, win_lo, win_hi, cost_model,
                    ks=None):
    """Run the DP for the requested objective: returns (opt, best) as in edge_layers."""
    if objective == "time":
        from .costmodel import time_layers

        return time_layers(groups, kmax, pad=pad, token_budget=token_budget, win_lo=win_lo,
                           win_hi=win_hi, cost_model=cost_model)
    if pad == "edge":
        from ._kernels import edge_layers

        return edge_layers(groups.edges, groups.prefix_count, groups.prefix_tokens, win_lo,
                           win_hi, kmax)
    from .batchpad import batch_layers

    refine_ks = None if ks is None else {min(k, kmax) for k in ks}
    return batch_layers(groups, kmax, token_budget=token_budget, win_lo=win_lo, win_hi=win_hi,
                        refine_ks=refine_ks)


def _infeasible(groups, kmax, min_share, max_share, align) -> BucketoptError:
    n = int(groups.prefix_count[-1])
    lo_count, hi_count = share_count_bounds(n, min_share, max_share)
    what = []
    if hi_count < n and math.ceil(n / max(hi_count, 1)) > kmax:
        what.append(f"max_share={max_share} needs at least {math.ceil(n / max(hi_count, 1))} "
                    f"buckets but k={kmax}")
    if not what:
        what.append(f"min_share={min_share}, max_share={max_share}")
    extra = f" with align={align}" if align > 1 else ""
    return BucketoptError(
        "infeasible constraints: no set of at most "
        f"{kmax} buckets{extra} satisfies {'; '.join(what)} "
        f"(buckets must hold between {lo_count} and {hi_count} of {n} samples; lengths with one "
        "edge cannot be split)."
    )


@dataclass(frozen=True, eq=False)
class _Run:
    """One DP run up to some k: the optimum for every smaller k is backtracked from it."""

    hist: Histogram
    groups: Groups
    kmax_eff: int
    opt: np.ndarray
    best: np.ndarray
    token_budget: int | None
    pad: str
    objective: str
    align: int
    min_share: float
    max_share: float
    cost_model: object | None

    def feasible(self, k: int) -> bool:
        from ._kernels import INF

        return bool(self.best[min(k, self.kmax_eff) - 1] < INF)

    def infeasible(self, k: int) -> BucketoptError:
        return _infeasible(self.groups, k, self.min_share, self.max_share, self.align)

    def solution(self, k: int) -> Solution:
        if not self.feasible(k):
            raise self.infeasible(k)
        layer = min(k, self.kmax_eff)
        edges = self.groups.edges[backtrack(self.opt, layer, self.groups.g)]
        sol = make_solution(self.hist, edges, token_budget=self.token_budget, pad=self.pad, k=k,
                            align=self.align, min_share=self.min_share,
                            max_share=self.max_share, objective=self.objective)
        if (self.pad == "edge" and self.objective == "padding"
                and sol.padded_tokens != self.best[layer - 1]):
            raise AssertionError("DP optimum and evaluated padding disagree")
        if self.cost_model is not None:
            from .costmodel import annotate, refine_time

            if self.objective == "time":  # add the slowest-rank wait the DP cannot see
                sol = refine_time(sol, self.groups, self.cost_model)
            sol = annotate(sol, self.hist, self.cost_model)
        return sol


def _run(lengths, ks, *, token_budget, pad, objective, min_share, max_share, align, profile,
         world_size, epochs) -> _Run:
    """Validate, then run the DP once up to max(ks); the optima for ``ks`` are read from it."""
    kmax_request = max(ks)
    hist, kmax, align, min_share, max_share, token_budget, groups = _prepare(
        lengths, kmax_request, token_budget, pad, objective, min_share, max_share, align
    )
    cost_model = None
    if objective == "time" or profile is not None:
        from .costmodel import resolve_cost_model

        cost_model, token_budget = resolve_cost_model(profile, world_size, token_budget, hist)
        cost_model = cost_model.with_epochs(epochs)
    if pad == "batch" and token_budget is None:
        raise BucketoptError('pad="batch" needs a token_budget (the batch size comes from it).')
    kmax_eff = min(kmax, groups.g)
    if kmax_eff * (groups.g + 1) > MAX_BACKTRACK_ENTRIES:
        raise BucketoptError(
            f"k={kmax} over {groups.g:,} candidate edges needs "
            f"{kmax_eff * (groups.g + 1) * 4 / 1e6:,.0f} MB of DP state; use a smaller k or "
            "align= to merge nearby lengths."
        )
    win_lo, win_hi = share_windows(groups, min_share, max_share)
    opt, best = _optimal_layers(groups, kmax_eff, pad=pad, objective=objective,
                                token_budget=token_budget, win_lo=win_lo, win_hi=win_hi,
                                cost_model=cost_model, ks=ks)
    return _Run(hist, groups, kmax_eff, opt, best, token_budget, pad, objective, align, min_share,
                max_share, cost_model)


def solve(lengths, k, *, token_budget=None, pad="edge", objective="padding", min_share=0.0,
          max_share=1.0, align=1, profile=None, world_size=1, epochs=1) -> Solution:
    """Optimal bucket boundaries: the exact minimum over all sets of at most ``k`` buckets.

    Parameters
    ----------
    lengths : array-like of int or Histogram
        One length (tokens) per sample, or their histogram.
    k : int
        Maximum number of buckets.
    token_budget : int, optional
        Most padded tokens per micro-batch; gives batch sizes B_k = floor(T / b_k).
    pad : {"edge", "batch"}
        Edge padding (every sample padded to its bucket's edge) or dynamic padding (each batch
        padded to its longest member; the objective is the exact expectation).
    objective : {"padding", "time"}
        Minimise padded tokens or the cost model's estimated time (needs ``profile``).
    min_share, max_share : float
        Bounds on the fraction of samples in every bucket.
    align : int
        Every edge is a multiple of ``align`` (the last one is the longest length rounded up).
    profile : str or path, optional
        Hardware profile; adds ``ktok_per_s`` and ``eta_days``.
    world_size : int or None
        GPUs in data parallel; every step waits for the slowest (default 1; ``None``: the
        profile's world size).
    epochs : int
        Epochs for the ETA.

    Returns
    -------
    Solution

    Examples
    --------
    >>> import bucketopt
    >>> bucketopt.solve([3, 4, 10, 11, 12], k=2).boundaries
    (4, 12)
    """
    k = check_k(k)
    run = _run(lengths, [k], token_budget=token_budget, pad=pad, objective=objective,
               min_share=min_share, max_share=max_share, align=align, profile=profile,
               world_size=world_size, epochs=epochs)
    return run.solution(k)


@dataclass(frozen=True)
class Sweep:
    """The optimum for every k of a sweep, from one DP run."""

    ks: tuple
    solutions: tuple
    recommended_k: int
    tolerance: float
    reason: str
    criterion: str = "padding"

    def to_dict(self) -> dict:
        return {
            "ks": list(self.ks),
            "recommended_k": self.recommended_k,
            "tolerance": self.tolerance,
            "criterion": self.criterion,
            "reason": self.reason,
            "rows": [s.to_dict() for s in self.solutions],
        }

    def __getitem__(self, k):
        return self.solutions[self.ks.index(k)]


def recommend_k(ks, solutions, tolerance=0.01, *, criterion=None):
    """Smallest k within ``tolerance`` of the best in the range; returns (k, one-line reason).

    ``criterion="padding"``: padding fraction within ``tolerance`` (absolute, 0.01 = 1 percentage
    point) of the lowest. ``criterion="throughput"``: predicted Ktok/s within ``tolerance``
    (relative, 0.01 = 1%) of the highest. Default: throughput when every solution has a
    ``ktok_per_s`` (a profile was given), padding otherwise.
    """
    if criterion is None:
        has_rate = all(s.ktok_per_s is not None for s in solutions)
        criterion = "throughput" if has_rate else "padding"
    if criterion == "throughput":
        rates = [s.ktok_per_s for s in solutions]
        if any(r is None for r in rates):
            raise BucketoptError('criterion="throughput" needs a profile (Ktok/s per k).')
        top = max(rates)
        for k, r in zip(ks, rates):
            if r >= top * (1.0 - tolerance) - 1e-12:
                reason = (
                    f"k={k} is the smallest k within {tolerance * 100:g}% of the best predicted "
                    f"throughput in the range ({r:.1f} vs {top:.1f} Ktok/s)."
                )
                return k, reason
        raise AssertionError("unreachable")
    if criterion != "padding":
        raise BucketoptError(f"`criterion` must be 'padding' or 'throughput'; got {criterion!r}.")
    fractions = [s.padding_fraction for s in solutions]
    best = min(fractions)
    for k, f in zip(ks, fractions):
        if f <= best + tolerance + 1e-12:
            reason = (
                f"k={k} is the smallest k within {tolerance * 100:g} percentage point(s) of the "
                f"best padding in the range ({f * 100:.2f}% vs {best * 100:.2f}%)."
            )
            return k, reason
    raise AssertionError("unreachable")


def sweep(lengths, ks, *, token_budget=None, pad="edge", objective="padding", min_share=0.0,
          max_share=1.0, align=1, profile=None, world_size=1, epochs=1, tolerance=0.01,
          criterion=None) -> Sweep:
    """The optimum for every k in ``ks`` from a single DP run up to ``max(ks)``.

    ``recommended_k`` is the smallest k within ``tolerance`` of the best in the range: padding
    fraction within ``tolerance`` absolute (0.01 = 1 percentage point), or, with a ``profile``
    (``criterion="throughput"``), predicted Ktok/s within ``tolerance`` relative (0.01 = 1%).

    Examples
    --------
    >>> import bucketopt
    >>> s = bucketopt.sweep([3, 4, 10, 11, 12], ks=[1, 2, 3])
    >>> [sol.padded_tokens for sol in s.solutions]
    [20, 4, 2]
    """
    try:
        tolerance = float(tolerance)
    except (TypeError, ValueError):
        raise BucketoptError(f"`tolerance` must be a number >= 0; got {tolerance!r}.") from None
    if not (tolerance >= 0.0):
        raise BucketoptError(f"`tolerance` must be a number >= 0; got {tolerance}.")
    if isinstance(ks, (int, np.integer)) and not isinstance(ks, bool):
        ks = range(1, int(ks) + 1)
    try:
        ks = list(itertools.islice(ks, MAX_SWEEP_KS + 1))
        if len(ks) > MAX_SWEEP_KS:
            raise BucketoptError(f"`ks` holds more than {MAX_SWEEP_KS:,} values.")
        ks = sorted({check_k(k, "ks") for k in ks})
    except TypeError:
        raise BucketoptError(f"`ks` must be a list of integers >= 1; got {ks!r}.") from None
    if not ks:
        raise BucketoptError("`ks` is empty: give at least one k.")
    run = _run(lengths, ks, token_budget=token_budget, pad=pad, objective=objective,
               min_share=min_share, max_share=max_share, align=align, profile=profile,
               world_size=world_size, epochs=epochs)
    feasible = [k for k in ks if run.feasible(k)]
    if not feasible:
        raise run.infeasible(max(ks))
    solutions = tuple(run.solution(k) for k in feasible)
    if criterion is None:
        criterion = "throughput" if run.cost_model is not None else "padding"
    k_rec, reason = recommend_k(feasible, solutions, tolerance, criterion=criterion)
    return Sweep(tuple(feasible), solutions, k_rec, tolerance, reason, criterion)


def evaluate(lengths, boundaries, *, token_budget=None, pad="edge", profile=None, world_size=1,
             epochs=1) -> Solution:
    """The same statistics as :func:`solve` for boundaries chosen elsewhere (e.g. a heuristic).

    Examples
    --------
    >>> import bucketopt
    >>> bucketopt.evaluate([3, 4, 10, 11, 12], [4, 12]).padded_tokens
    4
    """
    hist = as_histogram(lengths)
    edges = check_boundaries(boundaries, hist)
    if pad not in PADS:
        raise BucketoptError(f"`pad` must be one of {', '.join(PADS)}; got {pad!r}.")
    token_budget = check_token_budget(token_budget, hist)
    cost_model = None
    if profile is not None:
        from .costmodel import resolve_cost_model

        cost_model, token_budget = resolve_cost_model(profile, world_size, token_budget, hist)
    sol = make_solution(hist, edges, token_budget=token_budget, pad=pad)
    if cost_model is not None:
        from .costmodel import annotate

        sol = annotate(sol, hist, cost_model.with_epochs(epochs))
    return sol
