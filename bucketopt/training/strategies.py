"""The batching strategies :func:`bucketopt.compare` puts side by side, each registered once.

A strategy gives rows of ``compare``'s table from a :class:`Context` (the data, the token budget,
the solver's options, a ``simulate`` of the data). Rows keep the order of the phases, then the
order of registration:

- ``"simulated"``: rows from their own simulated epochs, first (``sorted``, ``shuffle``);
- ``"bucketed"``: boundaries, each evaluated analytically and simulated as bucketed batches
  (``bucketed``, ``bucketed-padding``, ``edge_optimal``, the rules of thumb); their solves run
  together, under one progress step. ``bucketed`` is exactly the plan :func:`bucketopt.solve`
  returns for the same data, k and options (:meth:`Context.plan`: the one set of defaults of
  :mod:`bucketopt.validate`); with a profile and the time objective, ``bucketed-padding`` is
  the padding optimum under the same options;
- ``"after"``: rows from their own epochs that may read the rows before them (``sampler``);

then the packed rows and the timing, which ``compare`` adds to every row. Adding a strategy is
one :func:`register_strategy`; ``compare``'s rows and its progress total follow the registry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

PHASES = ("simulated", "bucketed", "after")


class Row(NamedTuple):
    """One row a strategy adds: ``epochs`` for a simulated row (None for a bucketed one, which
    ``compare`` simulates from ``boundaries``); ``extra`` fields go into the row as they are."""

    name: str
    kind: str
    epochs: list | None = None
    boundaries: object = None
    extra: dict | None = None


@dataclass(frozen=True)
class Strategy:
    name: str
    phase: str
    rows: Callable  # (Context) -> list of Row
    applies: Callable = lambda context: True  # (Context) -> bool: whether it gives rows
    stage: str | None = None  # its step on the progress line (default: its name)


@dataclass
class Context:
    """What a strategy may read; ``rows`` holds the rows built so far (name -> dict)."""

    hist: object
    lengths: object  # the simulated samples (a subsample beyond compare's simulated_samples)
    k: int
    token_budget: int
    pad: str
    seed: int
    simulations: int
    cost_model: object
    profile: object
    solver_kwargs: dict
    rules: tuple
    ranks: int
    grad_accum: int
    sampler: bool
    rows: dict = field(default_factory=dict)
    objective: str = "padding"  # the objective of the bucketed row (solve's default rule)
    epochs: int = 1  # the ETA's epochs (with a profile)
    plans: dict = field(default_factory=dict)  # row name -> the Solution solve() returned

    def plan(self, name: str, objective: str | None = None):
        """The Solution :func:`bucketopt.solve` returns for this comparison's data, k, token
        budget, padding and solver options (``objective``: the comparison's by default), with the
        sampler's synced ranks (``DEFAULT_SYNC_BUCKETS``) and, with a profile, its world size
        and epochs: the very call ``bucketopt solve`` makes for the same flags, solved from the
        request compare() built (:attr:`request`). Kept in :attr:`plans` under ``name`` (its row
        then carries the plan's Ktok/s and ETA)."""
        from ..solver import solve_request

        request = self.request
        if objective is not None and objective != request.objective:
            request = request.with_objective(objective)
        sol = self.plans[name] = solve_request(request)
        return sol
    # a plan (bucketopt.plan) whose boundaries are the "bucketed" row, with its own figures
    # re-scored on these lengths as the plan was scored (Solution), or None
    given_plan: dict | None = None
    plan_solution: object = None
    # the bucketed row's SolveRequest (bucketopt.request), built and checked once by compare()
    request: object = None

    def simulate(self, strategy: str, **kw) -> list:
        """``simulations`` epochs of ``bucketopt.simulate`` on the simulated samples."""
        from .simulate import simulate

        return [simulate(self.lengths, strategy, token_budget=self.token_budget, seed=self.seed,
                         epoch=e, **kw) for e in range(self.simulations)]


_STRATEGIES: dict[str, Strategy] = {}


def register_strategy(name: str, phase: str = "after", rows=None, *, applies=None, stage=None):
    """Register ``rows(context) -> [Row, ...]`` as strategy ``name`` (a decorator without
    ``rows``). A second registration under the same name replaces the first in place."""
    from ..errors import BucketoptError

    if phase not in PHASES:
        raise BucketoptError(f"`phase` must be one of {', '.join(PHASES)}; got {phase!r}.",
                             param="phase")

    def add(function):
        _STRATEGIES[name] = Strategy(name, phase, function,
                                     applies if applies is not None else (lambda context: True),
                                     stage)
        return function

    return add if rows is None else add(rows)


def strategies(phase: str | None = None) -> tuple:
    """The registered strategies of ``phase`` (all without), in row order."""
    ordered = sorted(_STRATEGIES.values(), key=lambda s: PHASES.index(s.phase))
    return tuple(s for s in ordered if phase is None or s.phase == phase)


# --- the built-in strategies -----------------------------------------------------------------


def _sorted(c):
    from .simulate import sorted_epoch

    return [Row("sorted", "sorted", [sorted_epoch(c.hist, c.token_budget, seed=c.seed, epoch=e)
                                     for e in range(c.simulations)])]


def _shuffle(c):
    return [Row("shuffle", "shuffle", c.simulate("shuffle"))]


def _bucketed(c):
    if c.given_plan is not None:  # compare --plan: the row is the plan, scored as planned
        c.plans["bucketed"] = c.plan_solution
        return [Row("bucketed", "bucketed", boundaries=tuple(c.given_plan["boundaries"]),
                    extra={"plan": _plan_fields(c.given_plan, c.plan_solution)})]
    return [Row("bucketed", "bucketed", boundaries=c.plan("bucketed").boundaries)]


def _plan_fields(plan, sol) -> dict:
    """The plan's settings and its figures re-scored on these lengths, as it was scored (its
    batch sizes, the sampler's bucket order ``sync_buckets``, its world size)."""
    out = {"batch_sizes": None if sol.batch_sizes is None else list(sol.batch_sizes),
           "token_budget": sol.token_budget, "pad": plan["pad"],
           "objective": plan["objective"], "sync_buckets": plan["sync_buckets"],
           "world_size": plan["world_size"], "padding_fraction": sol.padding_fraction,
           "padded_tokens": sol.padded_tokens, "real_tokens": sol.real_tokens}
    if sol.ktok_per_s is not None:
        out.update(ktok_per_s=sol.ktok_per_s, ktok_per_s_interval=list(sol.ktok_per_s_interval),
                   eta_days=sol.eta_days, eta_days_interval=list(sol.eta_days_interval))
    return out


def _bucketed_padding(c):
    # the padding optimum beside the time-optimal plan, under the same options
    return [Row("bucketed-padding", "bucketed-padding",
                boundaries=c.plan("bucketed-padding", "padding").boundaries)]


def _edge_optimal(c):
    from ..solver import solve

    return [Row("edge_optimal", "bucketed:edge_optimal", boundaries=solve(
        c.hist, c.k, token_budget=c.token_budget, pad="edge").boundaries)]


def _rules(c):
    from ..heuristics import rule_of_thumb

    return [Row(name, "bucketed:" + name,
                boundaries=rule_of_thumb(name, c.hist, c.k, token_budget=c.token_budget))
            for name in c.rules]


def _sampler(c):
    from .diversity import sampler_epochs

    edges = c.rows["bucketed"]["boundaries"]
    return [Row("sampler", "bucketed:sampler", sampler_epochs(
        c.lengths, edges, token_budget=c.token_budget, world_size=c.ranks,
        grad_accum=c.grad_accum, seed=c.seed, epochs=c.simulations, pad=c.pad), edges,
        dict(world_size=c.ranks, grad_accum=c.grad_accum))]


register_strategy("sorted", "simulated", _sorted, stage="sorted (from the histogram)")
register_strategy("shuffle", "simulated", _shuffle)
register_strategy("bucketed", "bucketed", _bucketed)
register_strategy("bucketed-padding", "bucketed", _bucketed_padding,
                  applies=lambda c: c.objective != "padding")
register_strategy("edge_optimal", "bucketed", _edge_optimal, applies=lambda c: c.pad == "batch")
register_strategy("rules", "bucketed", _rules)
register_strategy("sampler", "after", _sampler, applies=lambda c: c.sampler)
