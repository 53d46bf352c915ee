"""compare(): batching strategies side by side on one dataset (``bucketopt compare``).

Every strategy gets one row, a plain dict built by
:func:`~bucketopt.training.rows.strategy_row` from its boundaries (if any), its analytic
expectation (if one exists) and its simulated epochs; extend a row there (or from
``Comparison.epochs``, which keeps the simulated :class:`~bucketopt.training.epoch.Epoch`
objects).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..cost.steps import KEYS as STEP_KEYS
from ..data.histogram import as_histogram, validate_lengths
from ..errors import BucketoptError
from ..heuristics import RULES
from ..validate import (
    DEFAULT_PAD,
    DEFAULT_SYNC_BUCKETS,
    DEFAULT_WORLD_SIZE,
    check_k,
    check_world_size,
)
from .rows import strategy_row

MAX_SIMULATIONS = 1000
# Above this many samples the simulated epochs run on a seeded uniform subsample of this size
# (the analytic figures and the sorted row stay exact, from the whole histogram).
SIMULATED_SAMPLES = 1_000_000


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
    # planned items of bucketopt.data.overflow.overflow_items, not the dataset's samples)
    overflow: dict | None = None
    # where the figures come from: samples, simulated_samples, subsampled, from_histogram, ...
    simulation: dict = field(default_factory=dict)
    # with a memory model: the model, the budgets searched and the two plans' Ktok/s side by side
    memory: dict | None = None
    # the bucketed row's objective (time with a profile, padding without: bucketopt.validate)
    objective: str = "padding"
    # the recommended row (bucketopt.training.packed_rows.recommended_row)
    recommended: str | None = None
    # row name -> the Solution solve() returned for bucketopt's solved rows (their plans)
    solutions: dict = field(default_factory=dict, repr=False, compare=False)

    def batches(self, name: str, epoch: int = 0) -> list:
        """The batches (dataset indices, training order) row ``name`` timed in ``epoch``.

        When the simulation ran on a subsample (``simulation["subsampled"]``), these are the
        batches of the whole dataset planned the same way, not the subsample's timed ones."""
        from .plans import comparison_batches

        return comparison_batches(self, name, epoch)

    @property
    def simulation_line(self) -> str:
        """One line for people: which figures come from the histogram, which from a simulation
        and on how many samples."""
        sim = self.simulation
        if not sim:
            return ""
        if sim["subsampled"]:
            return (f"simulated figures (padding (simulated), batches, Ktok/s, ETA, step mix gap,"
                    f" epoch churn): a seeded uniform subsample of {sim['simulated_samples']:,} "
                    f"of the {sim['samples']:,} samples, totals scaled to the whole dataset; "
                    "padding (analytic) and the sorted row: exact, from the whole histogram")
        return (f"simulated figures: every one of the {sim['samples']:,} samples (the sorted row "
                "from the histogram, the same batches); padding (analytic): exact")

    def to_dict(self) -> dict:
        return {"k": self.k, "token_budget": self.token_budget, "pad": self.pad,
                "objective": self.objective, "recommended": self.recommended,
                "simulations": self.simulations, "seed": self.seed, **self.timing,
                **({} if self.overflow is None else {"overflow": self.overflow}),
                **({} if not self.simulation else {"simulation": self.simulation}),
                **({} if self.memory is None else {"memory": self.memory}),
                "strategies": self.strategies}


def subsample(hist, size, seed=0) -> np.ndarray:
    """The lengths of a uniform random subsample, without replacement, of ``size`` of the
    histogram's samples (sorted; int64), drawn from ``(seed, "subsample")``: a multivariate
    hypergeometric draw of the counts, the exact law of the lengths of ``size`` samples picked
    uniformly from the dataset, in O(m)."""
    rng = np.random.default_rng([seed, 0x5AB5A3])
    if hist.n < 10**9:  # numpy's bound for the marginals method
        counts = rng.multivariate_hypergeometric(hist.counts, int(size))
    else:  # a billion samples or more: with replacement, indistinguishable at this size
        counts = rng.multinomial(int(size), hist.counts / hist.n)
    return np.repeat(hist.values, counts)


class _Stages:
    """The progress line of compare() on stderr (bucketopt.progress rules: only on a terminal,
    never with ``enabled=False``, silent for the first two seconds)."""

    def __init__(self, total, enabled):
        from ..progress import Progress

        self.bar = Progress("compare", total, enabled=enabled)
        self.what = None
        self.bar._draw = self._draw

    def __call__(self, what):
        """``what`` starts now (the step before it, if any, is done)."""
        first, self.what = self.what is None, what
        self.bar.update(0 if first else 1)

    def _draw(self, now):
        bar = self.bar
        total = max(bar.total or 1, 1)
        share = min(bar.done / total, 1.0)
        filled = int(share * 24)
        text = (f"compare [{'#' * filled}{'-' * (24 - filled)}] {bar.done}/{total} steps, "
                f"{now - bar._start:.0f} s: {self.what}")
        bar.redraw(text)

    def close(self):
        self.what = "done"
        if self.bar.total:
            self.bar.done = self.bar.total
        self.bar.close()


# budget_plan(): token budgets tried between the one every boundary set fits and the largest
# one the longest bucket can take.
BUDGETS_SEARCHED = 24


def budget_plan(hist, k, memory, *, profile, pad=DEFAULT_PAD, world_size=None, epochs=1,
                budgets=BUDGETS_SEARCHED, **solver_kwargs):
    """The best single-token-budget plan whose every batch fits the memory model.

    For each budget T on a grid, the time-optimal boundaries under B_k = floor(T / b_k) are
    solved; a plan fits when every bucket's predicted peak, m0 + m1 B b + m2 B b^2, is within
    headroom x capacity. The grid runs from the largest T under which any boundaries fit,
    (headroom x capacity - m0) / (m1 + m2 x longest), to the largest T the last bucket can take,
    (B(longest) + 1) x longest - 1. Returns (best fitting Solution, [{token_budget, ktok_per_s,
    fits, largest_peak_bytes}] for every budget tried).
    """
    from ..cost.memory import load_memory
    from ..solver import solve

    mm = load_memory(memory)
    longest = int(hist.max_length)
    last = int(mm.batch_size([longest])[0])
    if last < 1:
        from ..cost.memory import batch_sizes

        batch_sizes([longest], None, mm)  # raises the clear error
    room = mm.usable - mm.m0
    safe = int(room / (mm.m1 + mm.m2 * longest))
    high = (last + 1) * longest - 1
    low = max(longest, min(safe, high))
    grid = np.unique(np.linspace(low, high, max(int(budgets), 2)).astype(np.int64))
    best, tried = None, []
    for budget in grid:
        sol = solve(hist, k, token_budget=int(budget), pad=pad, objective="time",
                    profile=profile, world_size=world_size, epochs=epochs, **solver_kwargs)
        peak = float(np.max(mm.peak_bytes(sol.batch_sizes, sol.boundaries)))
        fits = peak <= mm.usable
        tried.append({"token_budget": int(budget), "ktok_per_s": sol.ktok_per_s, "fits": fits,
                      "largest_peak_bytes": peak})
        if fits and (best is None or sol.ktok_per_s > best.ktok_per_s):
            best = sol
    return best, tried


def compare(lengths, k, *, token_budget=None, pad=DEFAULT_PAD, seed=0, simulations=1, rules=RULES,
            profile=None, world_size=DEFAULT_WORLD_SIZE, epochs=1, grad_accum=1,
            diversity=True,
            sampler=False, simulated_samples=SIMULATED_SAMPLES, progress=False,
            memory=None, memory_headroom=None, gpu_memory=None, plan=None,
            allow_other_lengths=False, **solver_kwargs) -> Comparison:
    """Padding of every strategy on ``lengths``: sorted, shuffle, bucketed with bucketopt's
    plan, each rule of thumb (bucketed), and padding-free packing.

    The ``bucketed`` row is exactly the plan :func:`bucketopt.solve` returns for the same
    lengths, ``k``, ``token_budget``, ``pad`` and ``solver_kwargs``, with the defaults every
    entry shares (:mod:`bucketopt.validate`: ``pad="edge"``, the objective ``"time"`` with a
    ``profile`` and ``"padding"`` without, ``sync_buckets=True``, fixed batch sizes): the same
    boundaries, batch sizes and padding, and with a profile the same ``ktok_per_s``,
    ``eta_days`` and intervals (solve's synced prediction; the simulated random-order figures
    stay beside them as ``ktok_per_s_simulated``, ``eta_days_simulated``, ...). With a profile
    and the time objective, ``bucketed-padding`` is the padding optimum under the same options;
    with ``pad="batch"``, ``edge_optimal`` is the edge-padding optimum padded per batch. Every
    row carries ``settings`` (:func:`row_settings`), ``bucketopt`` (one of bucketopt's own
    plans) and ``recommended``; ``Comparison.recommended`` names the row
    :func:`bucketopt.training.packed_rows.recommended_row` picks.

    ``diversity`` adds ``step_mix_gap`` and ``epoch_churn`` (:mod:`bucketopt.training.diversity`,
    over ``world_size`` ranks x ``grad_accum`` micro-steps) to the sorted, shuffle and bucketed
    rows; ``sampler=True`` adds a "sampler" row: :class:`~bucketopt.BucketBatchSampler`'s real batch
    order (one bucket per micro-step on every rank), timed like the others.

    Bucketed strategies use fixed batch sizes B_k = floor(T / b_k), so their simulated padding
    estimates the same quantity as the analytic one. ``solver_kwargs`` (``objective``,
    ``min_share``, ``max_share``, ``align``, ``min_fill``, ``max_length``, ``overflow``) go to
    :func:`solve`.

    ``memory`` (with a ``profile``): two more rows, ``bucketed-memory`` (the time-optimal plan
    whose batch sizes come from the memory model, and from ``token_budget`` too when one is
    given: :func:`solve`'s plan for the same arguments) and ``bucketed-budget-fit`` (the best
    plan of one token budget whose every batch fits the same capacity, :func:`budget_plan`),
    each with its Ktok/s; without ``token_budget`` the other strategies run under that budget.

    Scale: the analytic figures come from the histogram, and so does the sorted row (its
    greedy batches are runs of equal lengths: the same batches a per-sample simulation builds).
    With more than ``simulated_samples`` samples (default 1,000,000; None: never) the other
    simulated epochs (shuffle, bucketed, rules, packed, sampler) and their diversity figures
    run on a seeded uniform subsample of that many samples (:func:`subsample`): shares, rates,
    step mix gap and churn are those of the subsample, token, batch and ETA totals are scaled to
    the whole dataset. ``Comparison.simulation`` (``simulation`` in JSON) says which route ran.
    ``lengths`` may be a :class:`~bucketopt.Histogram`: beyond ``simulated_samples`` nothing
    per-sample is built (``Comparison.batches`` then has no samples to index); otherwise its
    samples are simulated in length order. ``progress``: a progress line on stderr (None: when
    stderr is a terminal).

    ``plan`` (a dict from ``Solution.to_plan()`` or a plan path; :mod:`bucketopt.plan`): the
    "bucketed" row takes the plan's boundaries, and its ``plan`` field holds the plan's batch
    sizes, padding and Ktok/s re-scored on ``lengths`` exactly as the plan was scored. The
    plan's settings replace ``token_budget``, ``pad``, ``profile``, ``world_size``, ``epochs``,
    ``objective``, ``max_length``, ``overflow`` and the constraints (values passed for them
    are overridden; ``memory`` is ignored: the plan's memory rule is in its row's figures, and
    the other rows run under its largest batch's tokens when it has no token budget); ``k``
    may be None (the plan's). Lengths whose fingerprint differs from the plan's are refused
    unless ``allow_other_lengths=True``.

    Examples
    --------
    >>> import numpy as np
    >>> from bucketopt.training.compare import compare
    >>> lengths = np.random.default_rng(0).integers(10, 500, size=2_000)
    >>> c = compare(lengths, 3, token_budget=2_000)
    >>> c.strategies["packed"]["padding_fraction"] < c.strategies["shuffle"]["padding_fraction"]
    True
    """
    from ..pairs.data import is_pairs

    if is_pairs(lengths):  # 2-D bins: NeMo's grids beside bucketopt's (bucketopt.pairs.compare)
        from ..pairs.compare import compare_pairs

        return compare_pairs(lengths, k, token_budget=token_budget, pad=pad, profile=profile,
                             world_size=world_size, epochs=epochs,
                             objective=solver_kwargs.get("objective"))
    from ..data.histogram import Histogram
    from ..solver import evaluate, solve

    plan_solution = None
    if plan is not None:  # its settings replace the arguments
        from ..plan import load_plan
        from ..solver import evaluate_plan

        plan = load_plan(plan)
        plan_solution = evaluate_plan(plan, lengths, allow_other_lengths=allow_other_lengths)
        cons = plan["constraints"] or {}
        token_budget, pad = plan["token_budget"], plan["pad"]
        if token_budget is None:  # batch sizes from a memory model: its largest batch's tokens
            token_budget = max(b * e for b, e in zip(plan["batch_sizes"], plan["boundaries"]))
        profile, epochs = plan["profile"], plan["epochs"]
        world_size = plan["world_size"]
        # the plan's memory rule is in its row's figures; no budget search beside it
        memory = memory_headroom = gpu_memory = None
        solver_kwargs.update(objective=plan["objective"], max_length=plan["max_length"],
                             overflow=plan["overflow"] or "truncate",
                             **{key: cons[key] for key in ("min_share", "max_share", "align",
                                                           "min_fill") if key in cons})
        if k is None:
            k = cons.get("k", len(plan["boundaries"]))
    k = check_k(k)
    if simulated_samples is not None:
        simulated_samples = _positive(simulated_samples, "simulated_samples")
    # a Histogram beyond simulated_samples stays one: no per-sample array is ever built
    as_hist = isinstance(lengths, Histogram) and simulated_samples is not None \
        and lengths.n > simulated_samples
    if not as_hist:
        lengths = validate_lengths(lengths)
    overflow_report = None
    if solver_kwargs.get("max_length") is not None:  # every strategy sees the same samples
        from ..data.overflow import apply_overflow, overflow_items

        max_length = solver_kwargs.pop("max_length")
        policy = solver_kwargs.pop("overflow", "truncate")
        folded, overflow_report = apply_overflow(as_histogram(lengths), max_length, policy)
        lengths = folded if as_hist else overflow_items(lengths, max_length, policy)[0]
    solver_kwargs.pop("max_length", None)
    solver_kwargs.pop("overflow", None)
    hist = as_histogram(lengths)
    if as_hist:
        from ..data.histogram import EXPAND_LIMIT

        if hist.n > EXPAND_LIMIT:  # the sorted row holds every batch of the whole dataset
            raise BucketoptError(
                f"a histogram of {hist.n:,} samples is too large to expand into compare's "
                f"batches (the sorted row is built for the whole dataset; at most "
                f"{EXPAND_LIMIT:,} samples); solve() and evaluate() take the Histogram itself.")
        lengths = None  # Comparison.batches() needs one length per sample
    cost_model = None
    if profile is not None:  # rows gain ktok_per_s / eta_days; budget defaults to the profile's
        from ..cost.costmodel import resolve_cost_model

        cost_model, token_budget = resolve_cost_model(
            profile, world_size, token_budget, hist,
            budget_needed=memory is None and gpu_memory is None)
        cost_model = cost_model.with_epochs(epochs)
    # the bucketed row's objective by the one rule (bucketopt.validate): time with a profile
    from ..objectives import names as objective_names
    from ..validate import check_objective

    objective = check_objective(solver_kwargs.pop("objective", None), profile,
                                objective_names())
    mem = None
    if memory is not None or gpu_memory is not None:
        from ..cost.memory import load_memory

        mem = load_memory(memory, gpu_memory=gpu_memory, headroom=memory_headroom)
        if cost_model is None:
            raise BucketoptError("compare with a memory model needs a profile (--profile): its "
                                 "rows are ranked by predicted Ktok/s.")
        memory_kwargs = {key: value for key, value in solver_kwargs.items()
                         if key not in ("min_fill", "profile", "world_size")}
        fit_plan, tried = budget_plan(hist, k, mem, profile=profile, pad=pad,
                                      world_size=cost_model.world_size, epochs=epochs,
                                      **memory_kwargs)
        if fit_plan is None:
            raise BucketoptError("no token budget on the searched grid gives a plan whose every "
                                 "batch fits the memory model.")
        # solve()'s plan for the same flags: memory batch sizes, capped by the token budget
        # when one is given (s b <= T as well)
        memory_plan = solve(hist, k, token_budget=token_budget, pad=pad, objective="time",
                            profile=profile, world_size=cost_model.world_size, epochs=epochs,
                            memory=mem, **memory_kwargs)
        if token_budget is None:
            token_budget = fit_plan.token_budget
    if token_budget is None:
        raise BucketoptError("compare needs a token_budget (--token-budget): batches are built "
                             "under it.", param="token_budget")
    # the bucketed row's request: every solver option checked once, as solve() checks it
    from ..request import build_request

    options = dict(solver_kwargs)
    if cost_model is not None:
        options.update(profile=profile, world_size=cost_model.world_size, epochs=epochs)
    request = build_request(hist, k=k, token_budget=token_budget, pad=pad, objective=objective,
                            **options)
    token_budget, pad = request.token_budget, request.pad
    if isinstance(simulations, bool) or not isinstance(simulations, (int, np.integer)) \
            or simulations < 1:
        raise BucketoptError(f"`simulations` must be an integer >= 1; got {simulations!r}.",
                             param="simulations")
    if simulations > MAX_SIMULATIONS:  # each one simulates every strategy over the whole data
        raise BucketoptError(f"`simulations` must be at most {MAX_SIMULATIONS:,}; "
                             f"got {simulations!r}.", param="simulations")
    from ..validate import check_positive_int

    grad_accum = check_positive_int(grad_accum, "grad_accum")
    if world_size is not None:
        world_size = check_world_size(world_size)

    n = hist.n
    subsampled = simulated_samples is not None and n > simulated_samples
    sim_lengths = subsample(hist, simulated_samples, seed) if subsampled else lengths
    scale = (int(sim_lengths.size), hist.real_tokens) if subsampled else None
    stages = _Stages(None, progress)

    from .strategies import Context, strategies

    ranks = cost_model.world_size if cost_model is not None else (world_size or 1)
    context = Context(hist, sim_lengths, k, token_budget, pad, seed, simulations, cost_model,
                      profile, solver_kwargs, tuple(rules), ranks, grad_accum, bool(sampler),
                      objective=objective, epochs=epochs, given_plan=plan,
                      plan_solution=plan_solution, request=request)
    rows, epochs, scales = context.rows, {}, {}

    def add(name, kind, eps, boundaries=None, analytic=None, extra=None):
        # every row but "sorted" is simulated on sim_lengths (the subsample, if any)
        row_scale = None if name == "sorted" else scale
        rows[name] = strategy_row(name, kind, eps, boundaries=boundaries, analytic=analytic,
                                  scale=row_scale)
        if extra:
            rows[name].update(extra)
        epochs[name] = eps
        if row_scale is not None:
            scales[name] = hist.real_tokens / eps[0].total_real_tokens

    def simulated(phase):
        for strategy in strategies(phase):
            if strategy.applies(context):
                stages(strategy.stage or strategy.name)
                for row in strategy.rows(context):
                    add(row.name, row.kind, row.epochs, row.boundaries, extra=row.extra)

    simulated("simulated")
    if mem is not None:
        from .simulate import simulate

        stages("memory plans")
        for name, plan in (("bucketed-memory", memory_plan), ("bucketed-budget-fit", fit_plan)):
            eps = [simulate(sim_lengths, "bucketed", boundaries=plan.boundaries,
                            batch_sizes=plan.batch_sizes, seed=seed, epoch=e, pad=pad)
                   for e in range(simulations)]
            add(name, name, eps, plan.boundaries, plan)
            from ..cost.intervals import annotate

            rows[name].update(  # random batch order, as the other rows' analytic figure
                ktok_per_s_analytic=annotate(plan, hist, cost_model).ktok_per_s,
                token_budget=plan.token_budget,
                peak_memory_bytes=[float(x) for x in
                                   mem.peak_bytes(plan.batch_sizes, plan.boundaries)])
    stages("solving")
    bucket_sets = [row for strategy in strategies("bucketed") if strategy.applies(context)
                   for row in strategy.rows(context)]
    analytics = {}
    steps = sum(s.applies(context) for s in strategies() if s.phase != "bucketed")
    stages.bar.total = (len(bucket_sets) + steps + 2 + bool(diversity) + (mem is not None)
                        + 2 * (cost_model is not None))
    for row in bucket_sets:
        stages(row.name)
        # solve's own plan where the row is one (the same statistics evaluate() gives)
        analytic = analytics[row.name] = context.plans.get(row.name) or evaluate(
            hist, row.boundaries, token_budget=token_budget, pad=pad)
        eps = context.simulate("bucketed", boundaries=row.boundaries, packing="fixed", pad=pad)
        add(row.name, row.kind, eps, row.boundaries, analytic, extra=row.extra)
    simulated("after")
    if diversity:  # bucketopt.training.diversity
        from .diversity import row_diversity

        edges = rows["bucketed"]["boundaries"]
        stages("diversity")
        # bucketopt's plans train in the sampler's order (synced ranks): their step mix is that
        # order's; "bucketed" is the sampler row's very plan
        synced = {name: rows[name]["boundaries"] for name in ("bucketed-padding",)
                  if name in rows}
        measured = row_diversity(
            sim_lengths, edges, token_budget=token_budget, world_size=ranks,
            grad_accum=grad_accum, seed=seed, dataset=hist if subsampled else None,
            synced=synced)
        measured["bucketed"] = measured["sampler"]
        for name, fields in measured.items():
            if name in rows:
                rows[name].update(fields, diversity_ranks=ranks, grad_accum=grad_accum)
    stages("packed")
    from .packed_rows import packed_rows, packing_fields  # padding-free rows

    packed, packed_epochs = packed_rows(
        sim_lengths, k, token_budget=token_budget, cost_model=cost_model,
        world_size=world_size or 1, grad_accum=grad_accum, seed=seed, simulations=simulations,
        diversity=diversity, timing=False)
    for name, row in packed.items():  # timed with the others below (sum of d^2 attention)
        add(name, "packed", packed_epochs[name], row["boundaries"])
        rows[name] = {**row, **rows[name]}
        # the bound for the whole dataset's tokens (real_tokens is scaled on a subsample)
        rows[name].update(packing_fields(rows[name], packed_epochs[name], token_budget,
                                         row["world_size"]))
    timing = {}
    if cost_model is not None:
        from ..cost.costmodel import timing_fields
        from ..cost.intervals import annotate, epochs_intervals
        from ..cost.steps import epoch_steps

        stages("timing")
        for name, eps in epochs.items():
            rows[name].update(timing_fields(eps, cost_model))
            rows[name].update(epochs_intervals(eps, cost_model))
            rows[name].update(epoch_steps(eps, cost_model))
        stages("analytic timing")
        for row in bucket_sets:  # the analytic fast path, next to the simulation
            analytic = analytics.get(row.name) or evaluate(hist, row.boundaries,
                                                           token_budget=token_budget, pad=pad)
            rows[row.name]["ktok_per_s_analytic"] = annotate(analytic, hist,
                                                             cost_model).ktok_per_s
        timing = {"profile": cost_model.name, "world_size": cost_model.world_size,
                  "epochs": cost_model.epochs}
    for name, factor in scales.items():  # simulated on a subsample: ETA of the whole dataset
        row = rows[name]
        if row.get("eta_days") is not None:
            row["eta_days"] *= factor
        if row.get("eta_days_interval") is not None:
            row["eta_days_interval"] = [v * factor for v in row["eta_days_interval"]]
    stages.close()
    if cost_model is not None:  # bucketopt's plans: the Ktok/s and ETA solve predicts for them
        predicted = dict(context.plans)
        if mem is not None:
            predicted.update({"bucketed-memory": memory_plan, "bucketed-budget-fit": fit_plan})
        if "edge_optimal" in rows:
            predicted["edge_optimal"] = evaluate(
                hist, rows["edge_optimal"]["boundaries"], token_budget=token_budget, pad=pad,
                profile=profile, world_size=cost_model.world_size, epochs=cost_model.epochs)
        for name, plan in predicted.items():
            if name in rows:
                rows[name].update(plan_prediction(rows[name], plan))
    for name, row in rows.items():
        row["settings"] = row_settings(name, row, pad=pad, objective=objective, ranks=ranks,
                                       sync_buckets=request.sync_buckets)
        row["bucketopt"] = row["settings"]["source"] == "bucketopt"
    from .packed_rows import recommended_row

    recommended = recommended_row(rows)
    for name, row in rows.items():
        row["recommended"] = name == recommended
    simulation = {
        "samples": n, "simulated_samples": int(sim_lengths.size), "subsampled": subsampled,
        "from_histogram": ["padding_fraction_analytic", "padded_tokens_analytic",
                           "ktok_per_s_analytic", "real_tokens", "rows_lower_bound", "sorted"],
        "from_simulation": ["padding_fraction_simulated", "padded_tokens_simulated", "batches",
                            "ktok_per_s", "eta_days", "wait_fraction", "step_mix_gap",
                            "epoch_churn", "packing_efficiency", "attention_balance"],
    }
    memory_report = None
    if mem is not None:
        memory_report = {
            "model": mem.to_dict(), "budgets_searched": tried,
            "budget_fit_token_budget": fit_plan.token_budget,
            "ktok_per_s_memory": memory_plan.ktok_per_s,
            "ktok_per_s_budget_fit": fit_plan.ktok_per_s,
            "ratio": memory_plan.ktok_per_s / fit_plan.ktok_per_s,
            "note": "analytic Ktok/s of the synced time model (the simulated rows above run "
                    "the batches in random order)"}
    solutions = dict(context.plans)
    if mem is not None:
        solutions.update({"bucketed-memory": memory_plan, "bucketed-budget-fit": fit_plan})
    return Comparison(k, token_budget, pad, simulations, seed, rows, epochs, timing, lengths,
                      overflow_report, simulation, memory_report, objective, recommended,
                      solutions)


# Timed figures of a simulated row that a plan's prediction replaces (kept as NAME_simulated).
_SIMULATED_TIMING = ("ktok_per_s", "eta_days", "wait_fraction", "ktok_per_s_interval",
                     "eta_days_interval")
# Step-time figures (bucketopt.cost.steps) a plan's prediction replaces the same way.
_STEP_KEYS = STEP_KEYS


def plan_prediction(row, plan) -> dict:
    """The figures a row of bucketopt's plan shows: ``ktok_per_s``, ``eta_days`` and their
    intervals exactly as :func:`bucketopt.solve` predicts them for ``plan`` (the synced analytic
    model: the order the sampler trains in), the simulated ones (random batch order) kept beside
    them as ``ktok_per_s_simulated``, ``eta_days_simulated``, ``wait_fraction_simulated`` and
    ``..._interval_simulated``; ``wait_fraction`` is None (the simulation's waits are those of
    the random order)."""
    out = {f"{key}_simulated": row[key] for key in _SIMULATED_TIMING if key in row}
    out.update(ktok_per_s=plan.ktok_per_s, eta_days=plan.eta_days, wait_fraction=None,
               ktok_per_s_interval=plan.extra.get("ktok_per_s_interval"),
               eta_days_interval=plan.extra.get("eta_days_interval"),
               prediction="solve (synced analytic)")
    for key in _STEP_KEYS:
        for name in (key, key + "_interval"):
            if name in row:
                out[f"{name}_simulated"] = row[name]
            if name in plan.extra:
                out[name] = plan.extra[name]
    return out


# Where a row's plan comes from, by kind: bucketopt (solve, its sampler, its packing levels),
# a rule of thumb, or a baseline; registered strategies are "registered".
_BASELINES = ("sorted", "shuffle")


def row_settings(name, row, *, pad, objective, ranks, sync_buckets=DEFAULT_SYNC_BUCKETS) -> dict:
    """The settings row ``name`` assumes: ``pad`` (how its batches are padded; None for
    padding-free rows), ``objective`` (what its boundaries minimise; None where nothing was
    optimised), ``sync_buckets`` (True: every rank takes the same bucket at each micro-step, the
    sampler's order; False: the batches of all buckets in random order, each rank its own; None
    without buckets), ``packing`` ("fixed": B_k = floor(T / b_k) samples; "greedy": batches
    filled up to the token budget; a packed row's strategy), ``world_size`` and ``source``
    ("bucketopt", "rule of thumb", "baseline" or "registered")."""
    from ..heuristics import RULES

    kind = row.get("kind", "")
    settings = {"pad": pad, "objective": None, "sync_buckets": False, "packing": "fixed",
                "world_size": int(row.get("world_size", ranks)), "source": "registered"}
    if kind in _BASELINES:
        settings.update(pad="batch", sync_buckets=None, packing="greedy", source="baseline")
    elif kind == "packed":
        ours = row.get("packing") != "packed"  # balanced ranks or levels: bucketopt's plans
        settings.update(pad=None, sync_buckets=None, packing=row.get("packing", name),
                        objective="time" if ours else None,
                        source="bucketopt" if ours else "baseline")
    elif kind in ("bucketed", "bucketed:sampler"):
        settings.update(objective=objective, sync_buckets=sync_buckets, source="bucketopt")
    elif kind == "bucketed-padding":
        settings.update(objective="padding", sync_buckets=sync_buckets, source="bucketopt")
    elif kind == "bucketed:edge_optimal":
        settings.update(objective="padding", solved_pad="edge", sync_buckets=sync_buckets,
                        source="bucketopt")
    elif kind in ("bucketed-memory", "bucketed-budget-fit"):
        settings.update(objective="time", sync_buckets=sync_buckets, source="bucketopt",
                        batch_sizes="memory" if kind == "bucketed-memory" else "token budget")
    elif kind.startswith("bucketed:") and kind.split(":", 1)[1] in RULES:
        settings.update(source="rule of thumb")
    return settings


def _positive(value, name):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise BucketoptError(f"`{name}` must be an integer >= 1 or None; got {value!r}.",
                             param=name)
    return int(value)
