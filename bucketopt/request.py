"""One request, built and checked once at the entry of every planning call.

``solve``, ``sweep`` and ``evaluate`` (:mod:`bucketopt.solver`) and ``compare``
(:mod:`bucketopt.training.compare`) turn their keyword options into a :class:`SolveRequest` by
:func:`build_request`, the one place where every option is checked (each rule by its one check
in :mod:`bucketopt.validate`, one wording) and resolved: the lengths' histogram after
``max_length``, the objective and the token budget by their default rules, the cost model, the
memory model, the candidate groups. Everything below (the DP driver, the objectives) takes the
request, or what it holds, and checks nothing again.

Examples
--------
>>> r = build_request([3, 4, 10, 11, 12], k=2)
>>> r.ks, r.pad, r.objective, r.token_budget
((2,), 'edge', 'padding', None)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .data.histogram import Histogram
from .groups import Groups
from .validate import DEFAULT_PAD, DEFAULT_SYNC_BUCKETS

# Every option of the planning entries with its default: the keyword lists of solve(), sweep(),
# evaluate() and compare() (the API) give these, nothing below restates them.
OPTIONS = {
    "token_budget": None, "pad": DEFAULT_PAD, "objective": None, "min_share": 0.0,
    "max_share": 1.0, "align": 1, "profile": None, "world_size": 1, "epochs": 1,
    "min_fill": 0.0, "sync_buckets": DEFAULT_SYNC_BUCKETS, "max_length": None,
    "overflow": "truncate", "exact": False, "memory": None, "memory_headroom": None,
    "gpu_memory": None,
}
# evaluate() scores given boundaries: the DP's options (objective, constraints, exact) are not
# among its keywords.
EVALUATE_OPTIONS = ("token_budget", "pad", "profile", "world_size", "epochs", "sync_buckets",
                    "max_length", "overflow", "memory", "memory_headroom", "gpu_memory")


@dataclass(frozen=True, eq=False)
class SolveRequest:
    """Every option of one planning call, checked and resolved (:func:`build_request`).

    ``source``: the lengths as given (their fingerprint goes into plans); ``hist``: after
    ``max_length`` and ``overflow`` (``overflow_report`` says what they touched). ``ks``: the
    bucket counts asked for (sorted; None for ``evaluate``), ``edges``: ``evaluate``'s
    boundaries (None otherwise). ``token_budget`` is the profile's where none was given and a
    cost model needs one; ``objective`` follows :func:`bucketopt.validate.default_objective`;
    ``cost_model`` (with ``epochs``) is built with a profile or the time objective;
    ``memory`` is the loaded :class:`~bucketopt.objectives.sizes.MemoryModel` or None;
    ``groups``: the candidate edges on multiples of ``align`` (None for ``evaluate``).
    ``settings``: what ``Solution.settings`` holds for a plan."""

    source: Histogram
    hist: Histogram
    overflow_report: dict | None
    ks: tuple | None
    edges: np.ndarray | None
    token_budget: int | None
    pad: str
    objective: str
    min_share: float
    max_share: float
    align: int
    min_fill: float
    sync_buckets: bool | str
    exact: bool
    max_length: int | None
    overflow: str
    cost_model: object | None
    memory: object | None
    groups: Groups | None
    settings: dict

    @property
    def kmax(self) -> int:
        return max(self.ks)

    @property
    def constraints(self) -> dict:
        """The constraints a Solution records (``align``, the shares, ``min_fill``)."""
        return dict(align=self.align, min_share=self.min_share, max_share=self.max_share,
                    min_fill=self.min_fill)

    def with_objective(self, objective: str) -> SolveRequest:
        """The same request under another registered ``objective`` (its own preconditions
        checked), e.g. the padding optimum beside a time-optimal plan."""
        import dataclasses

        objective = _check_objective(objective, None, self.pad, self.min_fill, self.sync_buckets)
        return dataclasses.replace(self, objective=objective)

    def make_objective(self):
        """A fresh objective for this request (the registry's builder, given the memory
        model as a parameter)."""
        from .objectives import make_objective

        return make_objective(self.objective, self.pad, cost_model=self.cost_model,
                              min_fill=self.min_fill, sync_buckets=self.sync_buckets,
                              exact=self.exact, memory=self.memory)


def build_request(lengths, *, k=None, ks=None, boundaries=None, **options) -> SolveRequest:
    """Check and resolve the ``options`` (the names of :data:`OPTIONS`; the others keep their
    defaults) of a planning call on ``lengths``: ``k`` for ``solve``, ``ks`` (an int K or the
    bucket counts) for ``sweep``, ``boundaries`` for ``evaluate`` (then only
    :data:`EVALUATE_OPTIONS` apply). Raises a :class:`~bucketopt.errors.BucketoptError` for
    the first option that breaks its rule; each rule is checked here once."""
    from .cost.memory import load_memory
    from .data.histogram import as_histogram
    from .data.overflow import apply_overflow
    from .solution import check_boundaries
    from .validate import (
        check_align,
        check_batch_rule,
        check_dp_scale,
        check_edge_fits,
        check_exact,
        check_k,
        check_ks,
        check_min_fill,
        check_pad,
        check_shares,
        check_sync,
        check_token_budget,
        default_objective,
    )

    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise TypeError(f"build_request() got an unexpected keyword argument {unknown[0]!r}")
    o = {**OPTIONS, **options}
    evaluating = boundaries is not None
    if evaluating:
        ks = objective = None
        min_share, max_share, align, min_fill, exact = 0.0, 1.0, 1, 0.0, False
        sync_buckets = check_sync(o["sync_buckets"])
        pad = check_pad(o["pad"])
    else:
        ks = (check_k(k),) if ks is None else tuple(check_ks(ks))
    memory = load_memory(o["memory"], gpu_memory=o["gpu_memory"], headroom=o["memory_headroom"])
    if not evaluating:
        align = check_align(o["align"])
        min_share, max_share = check_shares(o["min_share"], o["max_share"])
        min_fill = check_min_fill(o["min_fill"])
        sync_buckets = check_sync(o["sync_buckets"])
        pad = check_pad(o["pad"])
        objective = _check_objective(o["objective"], o["profile"], pad, min_fill, sync_buckets)
        exact = check_exact(o["exact"])
    profile, max_length, overflow = o["profile"], o["max_length"], o["overflow"]
    source = as_histogram(lengths)
    hist, overflow_report = apply_overflow(source, max_length, overflow)
    edges = check_boundaries(boundaries, hist) if evaluating else None
    token_budget = check_token_budget(o["token_budget"], hist)
    cost_model = None
    if objective == "time" or profile is not None:
        from .cost.costmodel import resolve_cost_model

        cost_model, token_budget = resolve_cost_model(profile, o["world_size"], token_budget,
                                                      hist, budget_needed=memory is None)
        cost_model = cost_model.with_epochs(o["epochs"])
    if objective is None:  # evaluate: the objective its figures follow (no DP runs)
        objective = default_objective(profile)
    settings = plan_settings(source, cost_model, sync_buckets=sync_buckets,
                             world_size=o["world_size"], epochs=o["epochs"],
                             max_length=max_length, overflow=overflow)
    check_batch_rule(pad, token_budget, memory, min_fill)
    groups = None
    if not evaluating:
        from .groups import make_groups

        groups = make_groups(hist, align)
        check_dp_scale(groups.g, pad, objective, align)
        check_edge_fits(groups.edges[-1], token_budget, align)
        if memory is not None:  # the longest bucket must hold one sample: else one clear error
            from .cost.memory import batch_sizes

            batch_sizes(groups.edges[-1:], token_budget, memory)
    return SolveRequest(source, hist, overflow_report, ks, edges, token_budget, pad, objective,
                        min_share, max_share, align, min_fill, sync_buckets, exact, max_length,
                        overflow, cost_model, memory, groups, settings)


def _check_objective(objective, profile, pad, min_fill, sync_buckets) -> str:
    """The objective by its default rule, one of the registered names, with its own
    preconditions on the options (the registration's ``check``)."""
    from .objectives import names, registration
    from .validate import check_objective

    objective = check_objective(objective, profile, names())
    check = registration(objective, pad).check
    if check is not None:
        check(pad=pad, min_fill=min_fill, sync_buckets=sync_buckets)
    return objective


def plan_settings(source, cost_model, *, sync_buckets, world_size, epochs, max_length,
                  overflow) -> dict:
    """What ``Solution.settings`` holds for a plan (:meth:`Solution.to_plan`): the fingerprint
    of ``source`` (the histogram of the lengths as given, before ``max_length``; computed when
    first asked for) and the settings the solution was made and scored with."""
    from .plan import LazyFingerprint

    def whole(value):
        ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 1
        return int(value) if ok else 1

    profile = None
    if cost_model is not None:
        unc = cost_model.uncertainty
        profile = {"name": str(cost_model.name)[:200] or "custom", "alpha": cost_model.alpha,
                   "beta": cost_model.beta, "gamma": cost_model.gamma,
                   "uncertainty": None if not unc else {
                       "coverage": float(unc["coverage"]),
                       "coefficient_sets": [[float(v) for v in row]
                                            for row in unc["coefficient_sets"]]}}
    return {"fingerprint": LazyFingerprint(source), "sync_buckets": sync_buckets,
            "world_size": cost_model.world_size if cost_model is not None else whole(world_size),
            "epochs": cost_model.epochs if cost_model is not None else whole(epochs),
            "profile": profile, "max_length": None if max_length is None else int(max_length),
            "overflow": overflow if max_length is not None else None}
