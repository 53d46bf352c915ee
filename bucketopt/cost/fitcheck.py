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
