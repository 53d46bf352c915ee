"""solve(), evaluate() and sweep(): request -> objective -> DP -> backtrack.

The solver knows no cost. Each entry builds one request (:func:`bucketopt.request.build_request`:
every option checked once, the histogram, the models and the candidate edges resolved), hands
the request's edges to its objective (:mod:`bucketopt.objectives`: ``candidates``, ``fit``,
``layers``), backtracks every requested k and lets the objective ``refine`` the boundaries;
nothing below the entry checks an option again.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from .errors import BucketoptError
from .groups import (
    INF,
    Groups,
    backtrack,
    make_groups,
    share_count_bounds,
    share_windows,
)
from .objectives import Objective
from .request import SolveRequest, build_request, plan_settings
from .solution import Solution, make_solution, with_notes
from .validate import (
    DEFAULT_PAD,
    DEFAULT_SYNC_BUCKETS,
    DEFAULT_WORLD_SIZE,
    MAX_SWEEP_KS,
    check_number,
    shown,
)

# Backtracking keeps one int32 start index per (k, group): refuse beyond this many entries (600 MB).
MAX_BACKTRACK_ENTRIES = 150_000_000
# (make_groups, share_windows: read from here by the tests)
__all__ = ["MAX_SWEEP_KS", "Sweep", "evaluate", "evaluate_request", "make_groups",
           "plan_settings", "recommend_k", "run_layers", "share_windows", "solve",
           "solve_request", "sweep"]


def _infeasible(groups, kmax, min_share, max_share, align, min_fill=0.0) -> BucketoptError:
    n = int(groups.prefix_count[-1])
    lo_count, hi_count = share_count_bounds(n, min_share, max_share)
    what = []
    if hi_count < n and math.ceil(n / max(hi_count, 1)) > kmax:
        what.append(f"max_share={max_share} needs at least {math.ceil(n / max(hi_count, 1))} "
                    f"buckets but k={kmax}")
    if not what:
        what.append(f"min_share={min_share}, max_share={max_share}")
    if min_fill > 0:
        what.append(f"min_fill={min_fill}")
    extra = f" with align={align}" if align > 1 else ""
    return BucketoptError(
        "infeasible constraints: no set of at most "
        f"{kmax} buckets{extra} satisfies {'; '.join(what)} "
        f"(buckets must hold between {lo_count} and {hi_count} of {n} samples; lengths with one "
        "edge cannot be split)."
    )


@dataclass(frozen=True, eq=False)
class _Run:
    """One DP run of a request up to its largest k: the optimum for every smaller k is
    backtracked from it."""

    request: SolveRequest
    objective: Objective
    kmax_eff: int
    opt: np.ndarray
    best: np.ndarray

    @property
    def hist(self):
        return self.request.hist

    @property
    def cost_model(self):
        return self.request.cost_model

    @property
    def groups(self):
        return self.objective.groups

    def feasible(self, k: int) -> bool:
        return bool(self.best[min(k, self.kmax_eff) - 1] < INF)

    def infeasible(self, k: int) -> BucketoptError:
        r = self.request
        return _infeasible(self.groups, k, r.min_share, r.max_share, r.align, r.min_fill)

    def solution(self, k: int) -> Solution:
        if not self.feasible(k):
            raise self.infeasible(k)
        layer = min(k, self.kmax_eff)
        edges = self.groups.edges[backtrack(self.opt, layer, self.groups.g)]
        obj, request = self.objective, self.request
        sol = make_solution(self.hist, edges, token_budget=obj.token_budget, pad=obj.pad, k=k,
                            objective=obj.name, memory=request.memory, **request.constraints)
        obj.verify(sol, self.best[layer - 1])
        sol = dataclasses.replace(sol, certificate=obj.optimality(layer,
                                                                  float(self.best[layer - 1])))
        from .progress import Stage

        with Stage(f"finishing k={k} ({obj.describe()})"):  # e.g. polishing unsynced waits
            refined = obj.refine(sol)
        if refined is not None:
            boundaries, cert = refined
            if boundaries is not None:
                sol = make_solution(self.hist, boundaries, token_budget=sol.token_budget,
                                    pad=sol.pad, k=sol.k, align=sol.align,
                                    min_share=sol.min_share, max_share=sol.max_share,
                                    objective=sol.objective, memory=request.memory)
            sol = dataclasses.replace(sol, certificate=cert)
        cert = sol.certificate
        notes = () if callable(cert) else obj.notes(cert)
        if notes:
            sol = dataclasses.replace(sol, warnings=(*sol.warnings, *notes))
        if self.cost_model is not None:
            from .cost.intervals import annotate

            sol = annotate(sol, self.hist, self.cost_model, sync_buckets=request.sync_buckets)
        return dataclasses.replace(with_notes(sol, request.overflow_report),
                                   settings=request.settings)


def run_layers(obj: Objective, groups: Groups, kmax: int, ks=None, *, token_budget, min_share,
               max_share, stage: bool = True):
    """The DP driver of every objective: its candidates, the share windows, ``fit``, then
    ``layers`` up to ``kmax``; returns (kmax_eff, opt, best). ``obj.groups`` holds the candidate
    groups the DP ran on (backtrack over them)."""
    groups = obj.candidates(groups, token_budget)
    kmax_eff = min(kmax, groups.g)
    if kmax_eff * (groups.g + 1) > MAX_BACKTRACK_ENTRIES and \
            not getattr(obj, "bounded_memory", False):
        raise BucketoptError(
            f"k={kmax} over {groups.g:,} candidate edges needs "
            f"{kmax_eff * (groups.g + 1) * 4 / 1e6:,.0f} MB of DP state; use a smaller k or "
            "align= to merge nearby lengths.",
            param=None,
        )
    win_lo, win_hi = share_windows(groups, min_share, max_share)
    obj.fit(groups, token_budget=token_budget, win_lo=win_lo, win_hi=win_hi)
    if not stage:
        return (kmax_eff, *obj.layers(kmax_eff, ks))
    from .progress import Stage

    with Stage(f"solving k={kmax} ({obj.describe()})"):
        return (kmax_eff, *obj.layers(kmax_eff, ks))


def _run(request: SolveRequest, ks=None) -> _Run:
    """The DP of ``request`` once, up to the largest of ``ks`` (default: the request's); the
    optima for ``ks`` are read from it."""
    ks = list(request.ks if ks is None else ks)
    obj = request.make_objective()
    kmax_eff, opt, best = run_layers(obj, request.groups, max(ks), ks,
                                     token_budget=request.token_budget,
                                     min_share=request.min_share, max_share=request.max_share)
    return _Run(request, obj, kmax_eff, opt, best)


def solve(lengths, k, *, token_budget=None, pad=DEFAULT_PAD, objective=None, min_share=0.0,
          max_share=1.0, align=1, profile=None, world_size=DEFAULT_WORLD_SIZE, epochs=1,
          min_fill=0.0, sync_buckets=DEFAULT_SYNC_BUCKETS, max_length=None, overflow="truncate",
          exact=False, memory=None, memory_headroom=None, gpu_memory=None,
          grid=None) -> Solution:
    """Optimal bucket boundaries over all sets of at most ``k`` buckets, with a proof.

    ``Solution.optimality`` says what is proven: ``exact`` (the value is the minimum over every
    boundary set drawn from the distinct lengths, within float rounding) or a ``lower_bound``
    of the minimum and the relative ``gap`` to it (docs/method.md, "Certificates").

    Parameters
    ----------
    lengths : array-like of int, Histogram, or mapping
        One length (tokens) per sample, or their histogram: a :class:`Histogram` or a mapping
        ``{length: count}`` such as ``collections.Counter(lengths)``.
    k : int
        Maximum number of buckets.
    token_budget : int, optional
        Most padded tokens per micro-batch; gives batch sizes B_k = floor(T / b_k).
    pad : {"edge", "batch"}
        Edge padding (every sample padded to its bucket's edge; the default) or dynamic padding
        (each batch padded to its longest member; the objective is the exact expectation). The
        defaults of ``pad``, ``objective`` and ``sync_buckets`` are the ones every command and
        the sampler share (``bucketopt.validate.DEFAULT_PAD`` and its neighbours).
    objective : {"padding", "time"}, optional
        Minimise padded tokens or the expected epoch time under ``profile``. Default: time when
        a profile is given, padding otherwise.
    min_share, max_share : float
        Bounds on the fraction of samples in every bucket.
    align : int
        Every edge is a multiple of ``align`` (the last one is the longest length rounded up).
    profile : str, path or dict, optional
        Hardware profile; adds ``ktok_per_s`` and ``eta_days``.
    world_size : int or None
        GPUs in data parallel; every step waits for the slowest (default 1; ``None``: the
        profile's world size).
    epochs : int
        Epochs for the ETA.
    min_fill : float
        Padding objective only: every bucket's largest batch must be expected to hold at least
        ``min_fill x token_budget`` padded tokens (default 0; see ``Solution.fill``).
    sync_buckets : bool or "step"
        How the sampler runs the buckets over ``world_size`` ranks (its default, True: every
        rank takes the same bucket at each micro-step); the time objective and the Ktok/s
        follow it.
    max_length : int, optional
        Longest sample kept as it is; longer ones follow ``overflow``.
    overflow : {"truncate", "drop", "split"}
        What happens to samples longer than ``max_length``: cut to it, left out, or cut into
        ceil(len / max_length) chunks.
    exact : bool
        Prove the optimum whatever it costs: ``pad="batch"`` with the padding objective runs
        the certified DP (the time objective's, one token one second: seconds on the embedded
        example, minutes on large heavy-tailed inputs) instead of its grid search; the time
        objective runs its certified DP past its work limit (docs/method.md).
    memory : dict, path or profile name, optional
        A memory model: ``{"m0", "m1", "m2", "capacity"}`` in bytes, a JSON file holding one, or
        a profile holding a memory fit (``bucketopt probe`` on a GPU). A bucket with edge b then
        holds B(b) = the largest s with m0 + m1 s b + m2 s b^2 <= headroom x capacity (and
        s b <= token_budget when a budget is given too); every DP stays exact
        (docs/cost_model.md, "Batch sizes from memory").
    memory_headroom : float, optional
        Share of the capacity a batch may fill (default 0.9, or the model's own ``headroom``).
    gpu_memory : float, optional
        The card's memory in GB (2**30 bytes): sets the model's capacity.
    grid : (K1, K2), optional
        Pairs only: at most K1 dim0 buckets with at most K2 sub-buckets each, instead of at most
        ``k`` bins distributed optimally. ``lengths`` of shape (n, 2) (input, output) give an
        exact 2-D plan in ``Solution.bins`` (docs/pairs.md).

    Returns
    -------
    Solution

    Examples
    --------
    >>> import bucketopt
    >>> bucketopt.solve([3, 4, 10, 11, 12], k=2).boundaries
    (4, 12)
    """
    from .pairs.data import is_pairs

    if is_pairs(lengths) or grid is not None:  # (n, 2) pairs: 2-D bins (bucketopt.pairs)
        return _solve_pairs(lengths, k, grid, token_budget=token_budget, pad=pad,
                            objective=objective, profile=profile, world_size=world_size,
                            epochs=epochs, others=dict(
                                min_share=min_share, max_share=max_share, align=align,
                                min_fill=min_fill, max_length=max_length, exact=exact,
                                memory=memory, memory_headroom=memory_headroom,
                                gpu_memory=gpu_memory))
    request = build_request(
        lengths, k=k, token_budget=token_budget, pad=pad, objective=objective,
        min_share=min_share, max_share=max_share, align=align, profile=profile,
        world_size=world_size, epochs=epochs, min_fill=min_fill, sync_buckets=sync_buckets,
        max_length=max_length, overflow=overflow, exact=exact, memory=memory,
        memory_headroom=memory_headroom, gpu_memory=gpu_memory)
    return solve_request(request)


_PAIR_DEFAULTS = {"min_share": 0.0, "max_share": 1.0, "align": 1, "min_fill": 0.0,
                  "max_length": None, "exact": False, "memory": None, "memory_headroom": None,
                  "gpu_memory": None}


def _refuse_for_pairs(given):
    """Options the 2-D plans do not take yet: one clear error for the first one set."""
    for name, (value, default) in given.items():
        if value is not default and value != default:
            raise BucketoptError(f"`{name}` is not supported with pairs of lengths (2-D bins); "
                                 f"got {shown(value)}.", param=name)


def _solve_pairs(lengths, k, grid, *, others, world_size, **options):
    from .pairs.plans import solve_pairs

    _refuse_for_pairs({name: (others[name], _PAIR_DEFAULTS[name]) for name in others
                       if name != "exact"})
    return solve_pairs(lengths, k, grid=grid, world_size=world_size, exact=others["exact"],
                       **options)


def solve_request(request: SolveRequest) -> Solution:
    """:func:`solve` of a built request (its one k)."""
    (k,) = request.ks
    return _run(request).solution(k)


@dataclass(frozen=True)
class Sweep:
    """The optimum for every k of a sweep, from one DP run."""

    ks: tuple
    solutions: tuple
    recommended_k: int
    tolerance: float
    reason: str
    criterion: str = "padding"
    # no k of the range qualified (the curve still falls at its end): the largest k is
    # recommended and ``reason`` suggests a wider range
    range_too_short: bool = False

    def to_dict(self) -> dict:
        return {
            "ks": list(self.ks),
            "recommended_k": self.recommended_k,
            "tolerance": self.tolerance,
            "criterion": self.criterion,
            "reason": self.reason,
            "range_too_short": self.range_too_short,
            "rows": [s.to_dict() for s in self.solutions],
        }

    def __getitem__(self, k):
        return self.solutions[self.ks.index(k)]


def recommend_k(ks, solutions, tolerance=0.01, *, criterion=None):
    """The smallest k from which one more bucket buys at most ``tolerance``; returns
    (k, one-line reason). See :func:`sweep` for the rule; when no k of the range qualifies the
    largest k is returned and the reason says the range is too short."""
    k, reason, _ = _recommend(ks, solutions, tolerance, criterion=criterion)
    return k, reason


def _recommend(ks, solutions, tolerance=0.01, *, criterion=None):
    """The smallest k from which one more bucket buys at most ``tolerance``; returns
    (k, one-line reason, range_too_short).

    The gain of k is measured to the next k of the range, per added bucket (``ks`` need not be
    consecutive): ``criterion="padding"``: padding fraction saved, absolute (0.01 = 1 percentage
    point per bucket); ``criterion="throughput"``: predicted Ktok/s gained, relative to k's
    (0.01 = 1% per bucket). The rule does not depend on where the range ends. When no k of the
    range qualifies (the curve still falls, or rises, at its end, or the range holds one k), the
    largest k is returned and ``range_too_short`` is True: the reason says so and suggests a wider
    range. Default criterion: throughput when every solution has a ``ktok_per_s`` (a profile was
    given), padding otherwise.
    """
    if criterion is None:
        has_rate = all(s.ktok_per_s is not None for s in solutions)
        criterion = "throughput" if has_rate else "padding"
    if criterion == "throughput":
        values = [s.ktok_per_s for s in solutions]
        if any(v is None for v in values):
            raise BucketoptError('criterion="throughput" needs a profile (Ktok/s per k).',
                                 param="criterion")
    elif criterion == "padding":
        values = [s.padding_fraction for s in solutions]
    else:
        raise BucketoptError(f"`criterion` must be 'padding' or 'throughput'"
                             f"; got {shown(criterion)}.", param="criterion")
    ks = [int(k) for k in ks]
    gains = [_gain_per_bucket(criterion, values[i], values[i + 1], ks[i + 1] - ks[i])
             for i in range(len(ks) - 1)]
    tol = f"{tolerance * 100:g}"
    for i, gain in enumerate(gains):
        if gain <= tolerance + 1e-12:
            k, nxt = ks[i], ks[i + 1]
            if criterion == "padding":
                reason = (f"k={k} is the smallest k from which one more bucket saves at most {tol} "
                          f"percentage point(s) of padding ({values[i] * 100:.2f}% at k={k}, "
                          f"{values[i + 1] * 100:.2f}% at k={nxt}: {gain * 100:.2f} points per "
                          "bucket).")
            else:
                reason = (f"k={k} is the smallest k from which one more bucket adds at most {tol}% "
                          f"predicted throughput ({values[i]:.1f} Ktok/s at k={k}, "
                          f"{values[i + 1]:.1f} at k={nxt}: {gain * 100:+.2f}% per bucket).")
            return k, reason, False
    top = ks[-1]
    wider = f"sweep a wider range, e.g. -k 1:{2 * top}"
    if not gains:
        reason = (f"k={top} is the only k in the range: nothing tells whether more buckets pay; "
                  f"{wider}.")
    elif criterion == "padding":
        reason = (f"k={top} is the largest k asked for: padding still falls by "
                  f"{gains[-1] * 100:.2f} points per bucket at k={top}; {wider}.")
    else:
        reason = (f"k={top} is the largest k asked for: predicted throughput still rises by "
                  f"{gains[-1] * 100:.2f}% per bucket at k={top}; {wider}.")
    return top, reason, True


def _gain_per_bucket(criterion, value, following, buckets):
    """What each bucket added between two ks of a sweep buys: padding fraction saved (absolute)
    or Ktok/s gained relative to the smaller k's."""
    if criterion == "padding":
        return (value - following) / buckets
    return (following - value) / value / buckets if value > 0 else math.inf


def sweep(lengths, ks, *, token_budget=None, pad=DEFAULT_PAD, objective=None, min_share=0.0,
          max_share=1.0, align=1, profile=None, world_size=DEFAULT_WORLD_SIZE, epochs=1,
          tolerance=0.01, criterion=None, min_fill=0.0, sync_buckets=DEFAULT_SYNC_BUCKETS,
          max_length=None, overflow="truncate", exact=False, memory=None, memory_headroom=None,
          gpu_memory=None) -> Sweep:
    """The optimum for every k in ``ks`` from a single DP run up to ``max(ks)``.

    ``recommended_k`` is the smallest k from which one more bucket buys at most ``tolerance``:
    the gain of k is measured to the next k of the range, per added bucket; padding fraction
    saved, absolute (0.01 = 1 percentage point per bucket), or, with a ``profile``
    (``criterion="throughput"``), predicted Ktok/s gained relative to k's (0.01 = 1% per bucket).
    The rule does not depend on where the range ends. When no k qualifies (the curve still falls
    at the end of the range), the largest k is recommended, ``range_too_short`` is True and
    ``reason`` suggests a wider range.

    Examples
    --------
    >>> import bucketopt
    >>> s = bucketopt.sweep([3, 4, 10, 11, 12], ks=[1, 2, 3])
    >>> [sol.padded_tokens for sol in s.solutions]
    [20, 4, 2]
    """
    tolerance = check_number(tolerance, "tolerance", low=0.0)
    from .pairs.data import is_pairs

    if is_pairs(lengths):  # 2-D bins: the optimum at every k, the same rule picks one
        from .validate import check_ks

        ks = check_ks(ks)
        solutions = tuple(_solve_pairs(
            lengths, k, None, token_budget=token_budget, pad=pad, objective=objective,
            profile=profile, world_size=world_size, epochs=epochs, others=dict(
                min_share=min_share, max_share=max_share, align=align, min_fill=min_fill,
                max_length=max_length, exact=exact, memory=memory,
                memory_headroom=memory_headroom, gpu_memory=gpu_memory)) for k in ks)
        criterion = criterion or ("throughput" if profile is not None else "padding")
        k_rec, reason, too_short = _recommend(ks, solutions, tolerance, criterion=criterion)
        return Sweep(tuple(ks), solutions, k_rec, tolerance, reason, criterion, too_short)
    request = build_request(
        lengths, ks=ks, token_budget=token_budget, pad=pad, objective=objective,
        min_share=min_share, max_share=max_share, align=align, profile=profile,
        world_size=world_size, epochs=epochs, min_fill=min_fill, sync_buckets=sync_buckets,
        max_length=max_length, overflow=overflow, exact=exact, memory=memory,
        memory_headroom=memory_headroom, gpu_memory=gpu_memory)
    ks = list(request.ks)
    run = _run(request)
    feasible = [k for k in ks if run.feasible(k)]
    if not feasible:
        raise run.infeasible(max(ks))
    solutions = tuple(run.solution(k) for k in feasible)
    if criterion is None:
        criterion = "throughput" if run.cost_model is not None else "padding"
    k_rec, reason, too_short = _recommend(feasible, solutions, tolerance, criterion=criterion)
    if not run.objective.sweep_rows_are_solves(run.kmax_eff, ks):
        # pad="batch" on many lengths: every row comes from one DP over the candidate grid; the
        # recommended k is the one solve() gives (grid optimum refined, docs/dynamic_padding.md).
        alone = _run(request, [k_rec])
        solutions = tuple(alone.solution(k) if k == k_rec else sol
                          for k, sol in zip(feasible, solutions))
        note = run.objective.sweep_row_note()
        if note is not None:  # a long sweep: its other rows stay on the grid
            solutions = tuple(sol if k == k_rec else dataclasses.replace(
                sol, warnings=(*sol.warnings, note)) for k, sol in zip(feasible, solutions))
    return Sweep(tuple(feasible), solutions, k_rec, tolerance, reason, criterion, too_short)


def evaluate(lengths, boundaries, *, token_budget=None, pad=DEFAULT_PAD, profile=None,
             world_size=DEFAULT_WORLD_SIZE, epochs=1, sync_buckets=DEFAULT_SYNC_BUCKETS,
             max_length=None, overflow="truncate", memory=None, memory_headroom=None,
             gpu_memory=None) -> Solution:
    """The same statistics as :func:`solve` for boundaries chosen elsewhere (e.g. a heuristic).

    ``memory``, ``memory_headroom``, ``gpu_memory``: batch sizes from a memory model, as in
    :func:`solve`.

    Examples
    --------
    >>> import bucketopt
    >>> bucketopt.evaluate([3, 4, 10, 11, 12], [4, 12]).padded_tokens
    4
    """
    from .pairs.data import is_pairs

    if is_pairs(lengths):  # 2-D bins on pairs; ``unassigned`` counts the samples fitting none
        from .pairs.plans import evaluate_pairs

        _refuse_for_pairs(dict(sync_buckets=(sync_buckets, DEFAULT_SYNC_BUCKETS),
                               max_length=(max_length, None), memory=(memory, None),
                               memory_headroom=(memory_headroom, None),
                               gpu_memory=(gpu_memory, None)))
        return evaluate_pairs(lengths, boundaries, token_budget=token_budget, pad=pad,
                              profile=profile, world_size=world_size, epochs=epochs)
    r = build_request(lengths, boundaries=boundaries, token_budget=token_budget, pad=pad,
                      profile=profile, world_size=world_size, epochs=epochs,
                      sync_buckets=sync_buckets, max_length=max_length, overflow=overflow,
                      memory=memory, memory_headroom=memory_headroom, gpu_memory=gpu_memory)
    return evaluate_request(r)


def evaluate_request(r: SolveRequest) -> Solution:
    """:func:`evaluate` of a built request (its boundaries)."""
    sol = make_solution(r.hist, r.edges, token_budget=r.token_budget, pad=r.pad, memory=r.memory)
    if r.cost_model is not None:
        from .cost.intervals import annotate

        sol = annotate(sol, r.hist, r.cost_model, sync_buckets=r.sync_buckets)
    return dataclasses.replace(with_notes(sol, r.overflow_report), settings=r.settings)


def evaluate_plan(plan, lengths, *, allow_other_lengths=False):
    """The plan's boundaries scored on ``lengths`` exactly as the plan was scored: a
    :class:`~bucketopt.Solution` whose batch sizes, padding and predictions equal the plan's
    when the lengths are the plan's (checked by fingerprint first)."""
    from .plan import check_lengths, load_plan, plan_solver_kwargs

    plan = load_plan(plan)
    check_lengths(plan, lengths, allow_other_lengths=allow_other_lengths)
    sol = evaluate(lengths, plan["boundaries"], **plan_solver_kwargs(plan))
    return dataclasses.replace(sol, objective=plan["objective"])
