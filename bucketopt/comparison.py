"""compare(): batching strategies side by side on one dataset (``bucketopt compare``).

Every strategy gets one row, a plain dict built by :func:`strategy_row` from its boundaries (if
any), its analytic expectation (if one exists) and its simulated epochs; extend a row there (or
from ``Comparison.epochs``, which keeps the simulated :class:`~bucketopt.epoch.Epoch` objects).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import BucketoptError
from .heuristics import RULES, rule_of_thumb
from .histogram import as_histogram, validate_lengths
from .simulate import simulate
from .solution import check_token_budget

MAX_SIMULATIONS = 1000


@dataclass(frozen=True)
class Comparison:
    """Rows per strategy (name -> dict) and the simulated epochs behind them."""

    k: int
    token_budget: int
    pad: str
    simulations: int
    seed: int
    strategies: dict
    epochs: dict = field(default_factory=dict, repr=False)
    timing: dict = field(default_factory=dict)  # profile, world_size, epochs (with a profile)
    lengths: np.ndarray | None = field(default=None, repr=False, compare=False)  # for batches()
    # with max_length: what the overflow policy touched (rows and batches() then index the
    # planned items of bucketopt.overflow.overflow_items, not the dataset's samples)
    overflow: dict | None = None

    def batches(self, name: str, epoch: int = 0) -> list:
        """The batches (dataset indices, training order) row ``name`` timed in ``epoch``."""
        from .plans import comparison_batches

        return comparison_batches(self, name, epoch)

    def to_dict(self) -> dict:
        return {"k": self.k, "token_budget": self.token_budget, "pad": self.pad,
                "simulations": self.simulations, "seed": self.seed, **self.timing,
                **({} if self.overflow is None else {"overflow": self.overflow}),
                "strategies": self.strategies}


def strategy_row(name: str, kind: str, epochs, *, boundaries=None, analytic=None) -> dict:
    """One row: ``padding_fraction`` is the analytic expectation where it exists, else the mean
    of the simulated epochs; both are kept (``padding_fraction_analytic`` is None without one)."""
    fractions = [e.padding_fraction for e in epochs]
    simulated = float(np.mean(fractions))
    row = {
        "kind": kind,
        "boundaries": None if boundaries is None else [int(b) for b in boundaries],
        "padding_fraction": simulated if analytic is None else float(analytic.padding_fraction),
        "padding_fraction_analytic": None if analytic is None
        else float(analytic.padding_fraction),
        "padding_fraction_simulated": simulated,
        "padded_tokens_simulated": float(np.mean([e.padded_tokens for e in epochs])),
        "real_tokens": int(epochs[0].total_real_tokens),
        "batches": float(np.mean([e.n_batches for e in epochs])),
    }
    if analytic is not None:
        row["padded_tokens_analytic"] = float(analytic.padded_tokens)
        row["batch_sizes"] = None if analytic.batch_sizes is None else list(analytic.batch_sizes)
    return row


def compare(lengths, k, *, token_budget=None, pad="batch", seed=0, simulations=1, rules=RULES,
            profile=None, world_size=None, epochs=1, grad_accum=1, diversity=True,
            sampler=False, **solver_kwargs) -> Comparison:
    """Padding of every strategy on ``lengths``: sorted, shuffle, bucketed with bucketopt's
    boundaries (pad-optimal; the edge-optimal ones too when ``pad="batch"``), each rule of thumb
    (bucketed), and best-fit-decreasing packing.

    ``diversity`` adds ``step_mix_gap`` and ``epoch_churn`` (:mod:`bucketopt.diversity`, over
    ``world_size`` ranks x ``grad_accum`` micro-steps) to the sorted, shuffle and bucketed rows;
    ``sampler=True`` adds a "sampler" row: :class:`~bucketopt.BucketBatchSampler`'s real batch
    order (one bucket per micro-step on every rank), timed like the others.

    Bucketed strategies use fixed batch sizes B_k = floor(T / b_k), so their simulated padding
    estimates the same quantity as the analytic one. ``solver_kwargs`` go to :func:`solve`.

    Examples
    --------
    >>> import numpy as np
    >>> from bucketopt.comparison import compare
    >>> lengths = np.random.default_rng(0).integers(10, 500, size=2_000)
    >>> c = compare(lengths, 3, token_budget=2_000)
    >>> c.strategies["packed"]["padding_fraction"] < c.strategies["shuffle"]["padding_fraction"]
    True
    """
    from .solver import check_k, evaluate, solve

    k = check_k(k)
    lengths = validate_lengths(lengths)
    overflow_report = None
    if solver_kwargs.get("max_length") is not None:  # every strategy sees the same samples
        from .overflow import apply_overflow, overflow_items

        max_length = solver_kwargs.pop("max_length")
        policy = solver_kwargs.pop("overflow", "truncate")
        _, overflow_report = apply_overflow(as_histogram(lengths), max_length, policy)
        lengths = overflow_items(lengths, max_length, policy)[0]
    solver_kwargs.pop("max_length", None)
    solver_kwargs.pop("overflow", None)
    hist = as_histogram(lengths)
    cost_model = None
    if profile is not None:  # rows gain ktok_per_s / eta_days; budget defaults to the profile's
        from .costmodel import resolve_cost_model

        cost_model, token_budget = resolve_cost_model(profile, world_size, token_budget, hist)
        cost_model = cost_model.with_epochs(epochs)
        if solver_kwargs.get("objective") == "time":
            solver_kwargs.update(profile=profile, world_size=cost_model.world_size)
    elif solver_kwargs.get("objective") == "time":
        raise BucketoptError('objective="time" needs a profile (--profile).')
    token_budget = check_token_budget(token_budget, hist)
    if token_budget is None:
        raise BucketoptError("compare needs a token_budget (--token-budget): batches are built "
                             "under it.")
    if pad not in ("batch", "edge"):
        raise BucketoptError(f"`pad` must be 'batch' or 'edge'; got {pad!r}.")
    if isinstance(simulations, bool) or not isinstance(simulations, (int, np.integer)) \
            or simulations < 1:
        raise BucketoptError(f"`simulations` must be an integer >= 1; got {simulations!r}.")
    if simulations > MAX_SIMULATIONS:  # each one simulates every strategy over the whole data
        raise BucketoptError(f"`simulations` must be at most {MAX_SIMULATIONS:,}; "
                             f"got {simulations!r}.")
    from .costmodel import _positive_int

    grad_accum = _positive_int(grad_accum, "grad_accum")
    if world_size is not None:
        world_size = _positive_int(world_size, "world_size")

    def run(strategy, **kw):
        return [simulate(lengths, strategy, token_budget=token_budget, seed=seed, epoch=e, **kw)
                for e in range(simulations)]

    rows, epochs = {}, {}

    def add(name, kind, eps, boundaries=None, analytic=None):
        rows[name] = strategy_row(name, kind, eps, boundaries=boundaries, analytic=analytic)
        epochs[name] = eps

    add("sorted", "sorted", run("sorted"))
    add("shuffle", "shuffle", run("shuffle"))
    bucket_sets = [("bucketed", solve(hist, k, token_budget=token_budget, pad=pad,
                                      **solver_kwargs).boundaries)]
    if cost_model is not None and solver_kwargs.get("objective") != "time":
        # the time-optimal boundaries beside the padding optimum; compare's simulated epochs run
        # the batches in random order, so the time DP plans for that order too
        time_kwargs = {key: value for key, value in solver_kwargs.items()
                       if key not in ("objective", "min_fill", "profile", "world_size")}
        bucket_sets.append(("bucketed-time", solve(
            hist, k, token_budget=token_budget, pad=pad, objective="time", profile=profile,
            world_size=cost_model.world_size, sync_buckets=False, **time_kwargs).boundaries))
    if pad == "batch":
        bucket_sets.append(("edge_optimal", solve(hist, k, token_budget=token_budget,
                                                  pad="edge").boundaries))
    for name in rules:
        bucket_sets.append((name, rule_of_thumb(name, hist, k, token_budget=token_budget)))
    for name, boundaries in bucket_sets:
        analytic = evaluate(hist, boundaries, token_budget=token_budget, pad=pad)
        eps = run("bucketed", boundaries=boundaries, packing="fixed", pad=pad)
        add(name, name if name in ("bucketed", "bucketed-time") else "bucketed:" + name, eps,
            boundaries, analytic)
    if diversity or sampler:  # bucketopt.diversity; the sampler's real batch order
        from .diversity import comparison_diversity, sampler_epochs

        ranks = cost_model.world_size if cost_model is not None else (world_size or 1)
        edges = rows["bucketed"]["boundaries"]
        if sampler:
            add("sampler", "bucketed:sampler", sampler_epochs(
                lengths, edges, token_budget=token_budget, world_size=ranks,
                grad_accum=grad_accum, seed=seed, epochs=simulations, pad=pad), edges)
            rows["sampler"].update(world_size=ranks, grad_accum=grad_accum)
        if diversity:
            for name, fields in comparison_diversity(
                    lengths, edges, token_budget=token_budget, world_size=ranks,
                    grad_accum=grad_accum, seed=seed).items():
                if name in rows:
                    rows[name].update(fields, diversity_ranks=ranks, grad_accum=grad_accum)
    add("packed", "packed", run("packed"))
    timing = {}
    if cost_model is not None:
        from .costmodel import annotate, timing_fields
        from .intervals import epochs_intervals

        for name, eps in epochs.items():
            if name == "packed":  # rows of many documents: gamma * s * L^2 would charge
                rows[name].update(ktok_per_s=None, eta_days=None, wait_fraction=None)
                continue  # attention across the whole row; not modelled
            rows[name].update(timing_fields(eps, cost_model))
            rows[name].update(epochs_intervals(eps, cost_model))
        for name, boundaries in bucket_sets:  # the analytic fast path, next to the simulation
            analytic = evaluate(hist, boundaries, token_budget=token_budget, pad=pad)
            rows[name]["ktok_per_s_analytic"] = annotate(analytic, hist, cost_model).ktok_per_s
        timing = {"profile": cost_model.name, "world_size": cost_model.world_size,
                  "epochs": cost_model.epochs}
    return Comparison(k, token_budget, pad, simulations, seed, rows, epochs, timing, lengths,
                      overflow_report)
