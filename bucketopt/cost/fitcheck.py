"""Is a measured profile good enough to plan with? The thresholds ``bucketopt probe`` warns at.

A profile is only as good as the step times it was fitted to. On a quiet machine the probe's
k-fold held-out error is a few percent (1.4% median on synthetic data with 2% noise; 6% median,
12-19% max on a loaded 2-core CPU, docs/cost_model.md). Far beyond that the step times did not
follow ``alpha + beta s L + gamma s L^2`` while they were measured, almost always because the
machine changed under the probe (other jobs, torch threads waiting for each other on a shared
CPU, too few rounds to pool the drift), and every prediction made with the profile inherits the
error. :func:`fit_warnings` says so, with the figures and the likely cause.

The thresholds (docs/cost_model.md, "bucketopt probe"):

- held-out median relative error above ``HELDOUT_MEDIAN`` (15%),
- held-out max relative error above ``HELDOUT_MAX`` (50%),
- R^2 of the fit on the pooled shapes below ``MIN_R2`` (0.95).
"""

from __future__ import annotations

import numpy as np

HELDOUT_MEDIAN = 0.15
HELDOUT_MAX = 0.50
MIN_R2 = 0.95
OTHER_LOAD = 0.5  # load average beyond the probe's own threads that counts as other jobs
FEW_ROUNDS = 3


def fit_problems(calibration) -> list:
    """The thresholds a calibration misses, as phrases (empty when the fit looks sound).

    Examples
    --------
    >>> from types import SimpleNamespace as Fit
    >>> fit_problems(Fit(r2=0.999, heldout={"median_rel_error": 0.04, "max_rel_error": 0.12}))
    []
    >>> for problem in fit_problems(Fit(r2=0.90, heldout={"median_rel_error": 0.2,
    ...                                                   "max_rel_error": 1.68})):
    ...     print(problem)
    held-out median error 20% (over 15%)
    held-out max error 168% (over 50%)
    R^2 0.90 (under 0.95)
    """
    problems = []
    heldout = calibration.heldout or {}
    median, worst = heldout.get("median_rel_error"), heldout.get("max_rel_error")
    if median is not None and median > HELDOUT_MEDIAN:
        problems.append(f"held-out median error {median:.0%} (over {HELDOUT_MEDIAN:.0%})")
    if worst is not None and worst > HELDOUT_MAX:
        problems.append(f"held-out max error {worst:.0%} (over {HELDOUT_MAX:.0%})")
    if calibration.r2 is not None and calibration.r2 < MIN_R2:
        problems.append(f"R^2 {calibration.r2:.2f} (under {MIN_R2:.2f})")
    return problems


def likely_causes(*, device: str, threads: int, load: float | None, cores: int | None,
                  rounds: int) -> list:
    """What most likely made the step times erratic, from what the probe saw of the machine.

    ``load`` is the highest 1-minute load average seen during the probe (None where the system
    has none); the probe's own busy threads (``threads`` on a CPU, one otherwise) are part of it.

    Examples
    --------
    >>> for cause in likely_causes(device="cpu", threads=2, load=3.4, cores=2, rounds=5):
    ...     print(cause)
    2 torch threads on a shared CPU wait for each other (--threads 1 times more steadily)
    other jobs loaded the machine (load average 3.4 on 2 cores, the probe itself about 2)
    """
    own = threads if device == "cpu" else 1
    causes = []
    if device == "cpu" and threads > 1:
        causes.append(f"{threads} torch threads on a shared CPU wait for each other "
                      "(--threads 1 times more steadily)")
    if load is not None and load - own > OTHER_LOAD:
        on = f" on {cores} cores" if cores else ""
        causes.append(f"other jobs loaded the machine (load average {load:.1f}{on}, the probe "
                      f"itself about {own})")
    if rounds < FEW_ROUNDS:
        causes.append(f"only {rounds} round(s) were timed, too few to pool drift (raise "
                      "--time-limit or --repeats)")
    if not causes:
        causes.append("the machine or device changed speed during the probe (another job, a "
                      "thermal or power limit), or the step time is not alpha + beta s L + "
                      "gamma s L^2 over these shapes (try a narrower --max-length)")
    return causes


def fit_warnings(calibration, **machine) -> list:
    """One warning line when the fit is poor (else none): the figures, then the likely cause.

    ``machine`` holds the keyword arguments of :func:`likely_causes`.

    Examples
    --------
    >>> from types import SimpleNamespace as Fit
    >>> good = Fit(r2=0.99, heldout={"median_rel_error": 0.05, "max_rel_error": 0.2})
    >>> fit_warnings(good, device="cpu", threads=1, load=1.0, cores=2, rounds=10)
    []
    """
    problems = fit_problems(calibration)
    if not problems:
        return []
    return [f"the fit is poor: {', '.join(problems)}; predictions with this profile can be off "
            f"by as much. Likely cause: {'; '.join(likely_causes(**machine))}. Rerun the probe "
            "on an idle machine before planning with it."]


# --- timings on a busy machine: the scatter of repeats, the claimed error, the growth check ---

SCATTER_LIMIT = 0.10  # median over shapes of the repeats' relative spread (p75 / p25 - 1)
DRIFT_LIMIT = 1.25  # fastest / slowest round (each round's median of time / shape's pooled time)
CLAIM_FLOOR = 0.05  # the least error a profile claims, whatever its bootstrap says
GROWTH_FLOOR = 1.05  # the most-token shape must take at least 5% longer than the fewest-token


def scatter(rows, quantile: float = 0.25) -> dict | None:
    """How much repeats of one shape disagree, and how much the machine's speed moved.

    ``rows``: dicts with batch_size, padded_len, seconds and round (the probe's timed steps).
    ``spread`` is, per shape with 3 or more repeats, ``p75 / p25 - 1`` of its times (median and
    max over shapes); ``drift`` is the fastest round over the slowest, each round's speed the
    median over its steps of seconds / the shape's pooled (``quantile``) seconds. None with
    fewer than 3 repeats of every shape.

    Examples
    --------
    >>> rows = [{"batch_size": s, "padded_len": 8, "seconds": 0.01 * s * f, "round": r}
    ...         for r, f in enumerate((1.0, 1.0, 2.0)) for s in (1, 2)]
    >>> out = scatter(rows)
    >>> round(out["drift"], 2), round(out["spread_median"], 2)
    (2.0, 0.5)
    """
    shapes = {}
    for row in rows:
        shapes.setdefault((row["batch_size"], row["padded_len"]), []).append(row)
    spreads, pooled = [], {}
    for shape, group in shapes.items():
        times = np.array([r["seconds"] for r in group])
        pooled[shape] = float(np.quantile(times, quantile))
        if times.size >= 3:
            q25, q75 = np.quantile(times, [0.25, 0.75])
            spreads.append(q75 / q25 - 1.0)
    if not spreads:
        return None
    speed = {}
    for row in rows:
        speed.setdefault(row["round"], []).append(
            row["seconds"] / pooled[(row["batch_size"], row["padded_len"])])
    rounds = [float(np.median(v)) for v in speed.values()]
    return {"spread_median": float(np.median(spreads)), "spread_max": float(np.max(spreads)),
            "round_speed": [float(min(rounds)), float(max(rounds))],
            "drift": float(max(rounds) / min(rounds)), "shapes": len(spreads)}


def claimed_error(calibration, shapes) -> float:
    """The relative error a profile claims for one step's time: the larger of its k-fold
    held-out 90th-percentile error and the median half-width of its 95% prediction intervals
    over ``shapes`` (the bootstrap coefficient sets), and at least ``CLAIM_FLOOR``."""
    claims = [CLAIM_FLOOR]
    heldout = calibration.heldout or {}
    if heldout.get("p90_rel_error") is not None:
        claims.append(float(heldout["p90_rel_error"]))
    sets = np.asarray(calibration.coefficient_sets, dtype=np.float64)
    if sets.size and len(shapes):
        s = np.array([a for a, _ in shapes], dtype=np.float64)
        length = np.array([b for _, b in shapes], dtype=np.float64)
        features = np.stack([np.ones_like(s), s * length, s * length * length], axis=1)
        point = features @ [calibration.alpha, calibration.beta, calibration.gamma]
        lo, hi = np.quantile(features @ sets.T, [0.025, 0.975], axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            half = (np.maximum(hi, point) - np.minimum(lo, point)) / 2.0 / point
        half = half[np.isfinite(half)]
        if half.size:
            claims.append(float(np.median(half)))
    return max(claims)


def timing_warnings(spread: dict | None, claim: float, holdout: dict | None = None) -> list:
    """Warnings when the step times scattered beyond what the fit claims (a busy machine), and
    when shapes timed alongside but never fitted (``holdout``) miss by more than the claim."""
    out = []
    if spread is not None:
        busy = []
        if spread["spread_median"] > max(SCATTER_LIMIT, claim):
            busy.append(f"repeats of one shape scattered {spread['spread_median']:.0%} (median "
                        f"p75/p25 spread over {spread['shapes']} shapes)")
        if spread["drift"] > DRIFT_LIMIT:
            lo, hi = spread["round_speed"]
            busy.append(f"the machine's speed moved {spread['drift']:.2f}x between rounds "
                        f"({lo:.2f}x to {hi:.2f}x the pooled step times)")
        if busy:
            out.append(f"the step times are not steady: {'; '.join(busy)}, beyond the "
                       f"{claim:.0%} error the fit claims. The machine was busy (other "
                       "processes, a changing clock): steps were pooled by their fast quarter, "
                       "but predictions can be off by as much; rerun the probe on an idle "
                       "machine.")
    if holdout and holdout.get("median_rel_error") is not None \
            and holdout["median_rel_error"] > claim:
        out.append(f"shapes timed alongside but never fitted miss by "
                   f"{holdout['median_rel_error']:.0%} (median; max "
                   f"{holdout['max_rel_error']:.0%}), beyond the {claim:.0%} error the fit claims: "
                   "predictions with this profile are less accurate than its "
                   "intervals say.")
    return out


def growth_problem(rows, quantile: float = 0.25) -> str | None:
    """A phrase when step times do not grow with the batch, else None.

    Shapes are pooled by ``quantile``; the fastest of the shapes holding at least half the most
    tokens must take at least ``GROWTH_FLOOR`` times the fastest of the shapes holding at most
    twice the fewest tokens (the fastest of each group: a step slowed by another process in
    either group does not decide it). Fewer than a 4x spread of tokens: None (nothing to say).
    """
    shapes = {}
    for row in rows:
        shapes.setdefault((row["batch_size"], row["padded_len"]), []).append(row["seconds"])
    tokens = {sl: sl[0] * sl[1] for sl in shapes}
    if not tokens:
        return None
    most, fewest = max(tokens.values()), min(tokens.values())
    if most < 4 * fewest:
        return None
    pooled = {sl: float(np.quantile(t, quantile)) for sl, t in shapes.items()}
    big = min((sl for sl in shapes if tokens[sl] * 2 >= most), key=pooled.get)
    small = min((sl for sl in shapes if tokens[sl] <= 2 * fewest), key=pooled.get)
    if pooled[big] >= GROWTH_FLOOR * pooled[small]:
        return None
    return (f"the step times do not grow with the batch: {big[0]}x{big[1]} ({tokens[big]:,} "
            f"tokens) took {pooled[big] * 1e3:.3g} ms, {small[0]}x{small[1]} ({tokens[small]:,} "
            f"tokens) {pooled[small] * 1e3:.3g} ms")
