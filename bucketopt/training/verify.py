"""verify(): train a short slice of a plan's real batches and set what was measured against
what the profile predicts for those very batches.

A profile's Ktok/s is a prediction; ``verify`` checks it on the machine that will train. It
builds the plan's sampler (:meth:`BucketBatchSampler.from_plan
<bucketopt.BucketBatchSampler.from_plan>`; or solves ``k`` buckets first), takes the first
micro-batches of an epoch on one rank (``rank``, 0 by default) and trains them one by one with
the model as ``probe`` takes it (``module:function`` or ``hf:CONFIG``; zero_grad, forward,
backward, AdamW step, the device synchronised around each step), until ``steps`` or
``time_limit``. Token ids are random below the model's vocabulary; each batch has the plan's
shape: ``s`` rows padded to the bucket edge (``pad="edge"``) or to the batch's longest sample
(``pad="batch"``), or with ``packing="varlen"`` one row of the documents' tokens.

It reports, measured against predicted, with the prediction's interval and a verdict:

- ``step_time_mean``, ``step_time_p50``, ``step_time_p90`` (seconds) over the slice's steps;
- ``tokens_per_s`` (real tokens over the measured seconds);
- ``peak_memory_bytes``: CUDA's ``max_memory_allocated`` over the slice, against the plan's
  memory model where it has one; CPU torch keeps no peak of its tensors, so it is null there
  (the process's resident high-water mark is given beside it as ``rss_peak_bytes``, which
  counts everything the process ever held).

**What is predicted.** The profile's cost model applied to exactly the batches that ran (their
sizes, padded lengths, real tokens; a packed row runs as one row of its documents' tokens
through the model's own attention, ``forward(input_ids)`` taking no document boundaries, so it
is predicted with attention over the whole row, and a warning gives how much less the plan's
document-masked figure is), so the slice's bucket mix, which is not the epoch's, does not
confound the verdict. The epoch's own predictions (``step_time_p50`` ... of the plan) are under
``predicted_epoch``. The interval repeats the prediction with each coefficient set of the
profile's ``uncertainty`` (the central ``coverage`` share) and widens it by the error the
profile claims for one step (``provenance.probe.claimed_error`` of a probed profile, else the
held-out 90th-percentile error of a calibrated one; none for a profile without either): a
prediction is "inside" when the measurement falls in that interval, else the verdict says by
how much it is off (a fraction of the nearer end: +0.2 = 20% above the high end).

**When to distrust the measurement.** Warnings say when the slice is too short (fewer than
``MIN_STEPS`` steps, or fewer buckets than the plan has), when steps of one shape scattered
(other processes), when the machine's load average was above what this process accounts for,
and, for packed rows run through a model without a document mask, how much more its dense
attention costs than the prediction assumes.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import BucketoptError
from ..validate import check_int, shown

MIN_STEPS = 20  # fewer timed steps say little about a p90
TIME_LIMIT = 60.0
MAX_STEPS = 1_000_000
WARMUP_SHAPES = 32  # untimed first steps of distinct shapes (allocations, kernel choice)
SCATTER_LIMIT = 0.10  # measured / predicted per step: p75 / p25 - 1 beyond this warns
OTHER_LOAD = 0.5
# On CPU, the timed steps' CPU seconds over wall seconds x threads below this: the process was
# kept waiting by other processes during the slice (a quiet machine gives 0.95-1.0).
MIN_CPU_SHARE = 0.85
KEYS = ("step_time_mean", "step_time_p50", "step_time_p90", "tokens_per_s", "peak_memory_bytes")


@dataclass(frozen=True)
class VerifyResult:
    """What :func:`verify` measured and predicted; :meth:`to_dict` is the ``--json`` object."""

    device: str
    device_name: str
    steps: int
    measured: dict
    predicted: dict
    verdicts: dict
    warnings: tuple
    plan: dict = field(repr=False)
    packing: str = "fixed"  # how the batches were made (the plan's, or packing=)
    predicted_epoch: dict | None = None
    step_seconds: tuple = field(default=(), repr=False)
    step_predicted: tuple = field(default=(), repr=False)
    shapes: tuple = field(default=(), repr=False)  # (rows, padded length) of each step
    claimed_error: float = 0.0
    elapsed_s: float = 0.0
    stopped_by: str = "steps"
    notes: tuple = ()

    def to_dict(self) -> dict:
        return {
            "device": self.device, "device_name": self.device_name, "steps": self.steps,
            "measured": dict(self.measured), "predicted": dict(self.predicted),
            "verdicts": dict(self.verdicts), "warnings": list(self.warnings),
            "predicted_epoch": self.predicted_epoch, "claimed_error": self.claimed_error,
            "elapsed_s": self.elapsed_s, "stopped_by": self.stopped_by,
            "notes": list(self.notes),
            "plan": {**{key: self.plan[key] for key in ("boundaries", "batch_sizes",
                                                        "token_budget", "pad", "world_size",
                                                        "sync_buckets")},
                     "packing": self.packing},
            "step_seconds": list(self.step_seconds),
            "step_predicted_seconds": list(self.step_predicted),
            "step_shapes": [list(s) for s in self.shapes],
        }


def verdict(value, interval) -> dict:
    """``{"inside": bool, "off_by": fraction}``: 0 inside [low, high], else how far beyond
    the nearer end, as a fraction of it (positive above, negative below).

    Examples
    --------
    >>> verdict(1.2, [0.9, 1.0])
    {'inside': False, 'off_by': 0.2}
    >>> verdict(0.95, [0.9, 1.0])
    {'inside': True, 'off_by': 0}
    """
    low, high = interval
    if low <= value <= high:
        return {"inside": True, "off_by": 0}
    end = high if value > high else low
    return {"inside": False, "off_by": round((value - end) / end, 6) if end else math.inf}


def claimed_error_of(profile) -> float:
    """The relative error a profile claims for one step: a probe's ``claimed_error``, else its
    calibration's held-out 90th-percentile error, else 0 (nothing claimed)."""
    prov = getattr(profile, "provenance", None) or {}
    probe = prov.get("probe") if isinstance(prov.get("probe"), dict) else {}
    claim = probe.get("claimed_error")
    if isinstance(claim, (int, float)) and math.isfinite(claim) and claim >= 0:
        return float(claim)
    heldout = prov.get("heldout")
    if isinstance(heldout, dict) and isinstance(heldout.get("p90_rel_error"), (int, float)):
        return max(0.0, float(heldout["p90_rel_error"]))
    return 0.0


def _stats(step_seconds, real_tokens) -> list:
    t = np.asarray(step_seconds, dtype=np.float64)
    return [float(t.mean()), float(np.quantile(t, 0.5)), float(np.quantile(t, 0.9)),
            float(np.sum(real_tokens) / t.sum())]


def predict_steps(features, real_tokens, cost_model, claim) -> dict:
    """The predicted step figures of batches with ``features`` ([1, tokens, attention] per
    step, one rank: a step is one micro-batch), each ``{"value", "interval",
    "coefficient_interval"}``; the interval widened by ``claim`` (see the module's text)."""
    from ..cost.coverage import coefficient_sets as _sets
    from ..cost.coverage import interval

    coef = np.array([cost_model.alpha, cost_model.beta, cost_model.gamma])
    point = _stats(features @ coef, real_tokens)
    sets, coverage = _sets(cost_model)
    per_set = np.array([_stats(features @ c, real_tokens) for c in sets]).reshape(-1, 4)
    out = {}
    for i, key in enumerate(KEYS[:4]):
        low, high = interval(per_set[:, i], point[i], coverage)
        widened = [low * (1 - claim), high * (1 + claim)] if key != "tokens_per_s" else \
            [low / (1 + claim), high / max(1 - claim, 1e-12)]
        out[key] = {"value": point[i], "interval": widened, "coefficient_interval": [low, high]}
    return out


def _check_positive(value, name, *, integer=False, limit=None):
    bad = isinstance(value, bool) or not isinstance(value, (int, float, np.integer)) or (
        integer and not float(value).is_integer()) or not math.isfinite(value) or value <= 0
    if bad or (limit is not None and value > limit):
        kind = "an integer >= 1" if integer else "a number > 0"
        rule = f" (at most {limit:,})" if limit is not None else ""
        raise BucketoptError(f"{name} must be {kind}{rule}; got {shown(value)}.",
                             param=name.split(" ")[0])
    return int(value) if integer else float(value)


def _plan_for(lengths, plan, k, profile, packing, solve_kwargs, allow_other_lengths):
    from ..plan import check_lengths, load_plan

    if (plan is None) == (k is None):
        raise BucketoptError("verify needs either plan= (--plan) or k= (-k), not both and not "
                             "neither.", param="plan")
    if plan is None:
        from ..solver import solve

        if solve_kwargs.get("token_budget") is None and solve_kwargs.get("memory") is None:
            raise BucketoptError("verify -k needs token_budget= (--token-budget): the batches "
                                 "to run come from it.", param="token_budget")
        plan = solve(lengths, k, profile=profile, **solve_kwargs).to_plan()
    elif solve_kwargs:
        raise BucketoptError(f"plan= sets the solver settings; drop {', '.join(solve_kwargs)}.",
                             param="plan")
    plan = load_plan(plan)
    check_lengths(plan, lengths, allow_other_lengths=allow_other_lengths)
    if packing is not None:
        from ..training.sampler import PACKINGS

        if packing not in PACKINGS:
            raise BucketoptError(f"packing= (--packing) must be one of {', '.join(PACKINGS)}; "
                                 f"got {shown(packing)}.", param="packing")
        if packing != "fixed" and plan["token_budget"] is None:
            raise BucketoptError(f"packing={packing!r} (--packing) needs a plan with a token "
                                 "budget.", param="packing")
    return plan


@dataclass(frozen=True)
class PlanBatches:
    """Every rank's micro-batches of one epoch of a plan, in step order (global batch i: step
    i // G on rank i % G): ``sizes``, ``padded`` (rows and padded length; a packed row: 1 and
    its tokens), ``real`` tokens, ``features`` [1, tokens, attention] as they run (a packed row
    through dense attention over the row) and ``masked`` (a packed row's document-masked
    attention, sum of d^2; the same as ``features`` for padded batches)."""

    sampler: object
    packing: str
    varlen: bool
    sizes: np.ndarray
    padded: np.ndarray
    real: np.ndarray
    features: np.ndarray
    masked: np.ndarray

    def shape(self, i) -> tuple:
        """(rows, padded length) of global batch ``i`` as the model gets it."""
        return (1, int(self.padded[i])) if self.varlen else (int(self.sizes[i]),
                                                              int(self.padded[i]))


def plan_batches(plan, lengths, *, packing=None, seed=0, epoch=0, rank=0,
                 allow_other_lengths=False) -> PlanBatches:
    """The :class:`PlanBatches` of ``plan``'s sampler (``packing`` replaces the plan's)."""
    from .sampler import BucketBatchSampler

    overrides = {} if packing is None else {"packing": packing}
    if packing is not None and packing != "fixed":
        overrides["batch_sizes"] = None  # rows of documents, or greedy batches: no fixed sizes
    sampler = BucketBatchSampler.from_plan(plan, lengths, rank=rank, seed=seed,
                                           allow_other_lengths=allow_other_lengths, **overrides)
    varlen = sampler.packing not in ("fixed", "greedy")
    full = sampler.epoch_view(epoch, pad="varlen" if varlen else plan["pad"])
    masked = full.features()
    features = masked.copy()
    if varlen:  # one row of T tokens through the model's own attention: dense over the row
        features[:, 2] = features[:, 1] ** 2
    return PlanBatches(sampler, sampler.packing, varlen, full.sizes, full.padded_lens,
                       full.real_tokens, features, masked)


def verify(lengths, *, model, plan=None, k=None, profile=None, device="cpu", dtype="float32",
           threads=None, time_limit=TIME_LIMIT, steps=None, packing=None, rank=0, seed=0,
           epoch=0, vocab_size=None, lr=1e-5, allow_other_lengths=False,
           **solve_kwargs) -> VerifyResult:
    """Train the first micro-batches of an epoch of a plan and compare them with the profile.

    Parameters
    ----------
    lengths : array-like of int
        One length per sample, in dataset order (the plan's lengths).
    model : str, torch.nn.Module or callable
        As :func:`bucketopt.cost.probe.probe` takes it (``module:function``, ``hf:CONFIG``).
    plan : dict or path, optional
        A plan (``solve -o``); else ``k`` with the solver's keywords (``token_budget``,
        ``pad``, ``world_size``, ...) solves one.
    profile : name, path, dict or Profile, optional
        The profile to predict with (default: the plan's).
    device : {"cpu", "cuda", "mps"}
    threads : int, optional
        torch CPU threads while training (restored after).
    time_limit : float
        Seconds of timed steps at most (the untimed first step of each shape included).
    steps : int, optional
        Steps at most (default: as many as ``time_limit`` allows).
    packing : {"fixed", "greedy", "varlen", "varlen-balanced"}, optional
        Replace the plan's packing (``"varlen"``: rows of documents, the packed plan).
    rank, seed, epoch : int
        Whose batches, of which epoch (the sampler's).

    Examples
    --------
    >>> import torch, bucketopt                                       # doctest: +SKIP
    >>> result = bucketopt.verify(lengths, k=4, token_budget=2048, model="hf:tiny.json",
    ...                           profile="my-cpu.json", threads=1)  # doctest: +SKIP
    >>> result.verdicts["step_time_mean"]                             # doctest: +SKIP
    {'inside': True, 'off_by': 0}
    """
    from ..cost.costmodel import load_profile
    from ..cost.probe import DTYPES, Trainer
    from ..data.histogram import Histogram, validate_lengths

    start = time.monotonic()
    time_limit = _check_positive(time_limit, "time_limit (--time-limit)")
    if steps is not None:
        steps = _check_positive(steps, "steps (--steps)", integer=True, limit=MAX_STEPS)
    if threads is not None:
        threads = check_int(threads, "threads", low=1, high=4096)
    if dtype not in DTYPES:
        raise BucketoptError(f"dtype= (--dtype) must be one of {', '.join(DTYPES)}; got "
                             f"{shown(dtype)}.", param="dtype")
    if isinstance(lengths, Histogram):
        raise BucketoptError("lengths must hold one length per sample in dataset order (the "
                             "sampler's batches come from them); got a Histogram.",
                             param="lengths")
    lengths = validate_lengths(lengths)
    plan = _plan_for(lengths, plan, k, profile, packing, solve_kwargs, allow_other_lengths)
    if profile is None:
        profile = plan["profile"]
    if profile is None:
        raise BucketoptError("verify needs a profile (--profile) to predict with: the plan "
                             "holds none.", param="profile")
    prof = load_profile(profile)
    cost_model = prof.cost_model(world_size=1)
    claim = claimed_error_of(prof)
    world = int(plan["world_size"])
    rank = int(rank)
    if not 0 <= rank < world:
        raise BucketoptError(f"rank must be in [0, {world}) (the plan's world size); got "
                             f"{rank}.", param="rank")
    batches = plan_batches(plan, lengths, packing=packing, seed=seed, epoch=epoch,
                           allow_other_lengths=allow_other_lengths)
    sampler, packing, varlen = batches.sampler, batches.packing, batches.varlen
    take = slice(rank, None, world)
    features, masked = batches.features[take], batches.masked[take]
    sizes, padded, real = batches.sizes[take], batches.padded[take], batches.real[take]
    if steps is not None:
        features, masked, sizes, padded, real = (a[:steps] for a in (features, masked, sizes,
                                                                     padded, real))
    masked = masked if varlen else None

    trainer = Trainer(model, device=device, dtype=dtype, lr=lr, vocab_size=vocab_size,
                      seed=seed)
    torch, dev = trainer.torch, trainer.device

    def shape_of(i):
        return (1, int(padded[i])) if varlen else (int(sizes[i]), int(padded[i]))

    old_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    load = [_load_average()]
    seconds, stopped_by = [], "steps"
    try:
        threads_used = torch.get_num_threads()
        device_name = trainer.device_name()
        seen = {}
        for i in range(sizes.size):  # the first step of each new shape: untimed
            if len(seen) >= WARMUP_SHAPES:
                break
            shape = shape_of(i)
            if shape not in seen:
                if time.monotonic() - start + max(seen.values(), default=0.0) > time_limit:
                    break
                seen[shape] = trainer.step(*shape)[0]
        peaks = []
        budget_start = time.monotonic()
        cpu_start = time.process_time()
        for i in range(sizes.size):
            guess = seconds[-1] if seconds else seen.get(shape_of(i), 0.0)
            if time.monotonic() - budget_start + guess > time_limit:
                stopped_by = "time_limit"
                break
            took, peak = trainer.step(*shape_of(i))
            seconds.append(took)
            peaks.append(peak)
        peak = max(peaks) if peaks and peaks[0] is not None else None
        load.append(_load_average())
        # the share of its threads' time the process got while its steps were timed: the
        # 1-minute load average lags a slice of a second, this does not
        cpu_share = (time.process_time() - cpu_start) / max(
            (time.monotonic() - budget_start) * threads_used, 1e-9)
    finally:
        torch.set_num_threads(old_threads)
    n = len(seconds)
    if n == 0:
        raise BucketoptError(f"no step fitted in time_limit={time_limit:g} s (--time-limit): "
                             "raise it.", param="time_limit")
    features, sizes, padded, real = (a[:n] for a in (features, sizes, padded, real))
    measured_stats = _stats(seconds, real)
    measured = dict(zip(KEYS[:4], measured_stats))
    measured["peak_memory_bytes"] = peak
    if peak is None:
        measured["rss_peak_bytes"] = _rss_peak()
    predicted = predict_steps(features, real, cost_model, claim)
    memory = _predicted_peak(plan, sizes, padded, varlen)
    predicted["peak_memory_bytes"] = memory or {"value": None, "interval": None}
    verdicts = {key: verdict(measured[key], predicted[key]["interval"])
                for key in KEYS if measured.get(key) is not None
                and predicted[key]["value"] is not None}
    step_predicted = features @ np.array([cost_model.alpha, cost_model.beta, cost_model.gamma])
    notes = []
    if peak is None:
        notes.append(f"peak memory is not measured on {dev.type}: torch keeps a peak of its "
                     "tensors' memory on CUDA only (rss_peak_bytes, where given, is the "
                     "process's resident high-water mark, everything it ever held)")
    if memory is None:
        notes.append("no memory model in the plan: peak memory is not predicted")
    warnings = _warnings(seconds, step_predicted, [shape_of(i) for i in range(n)], plan,
                         sampler, verdicts, load, threads_used, dev.type, features,
                         None if masked is None else masked[:n], cost_model)
    if dev.type == "cpu":
        notes.append(f"the timed steps got {cpu_share:.0%} of the {threads_used} CPU thread(s) "
                     "they ran on (CPU seconds over wall seconds)")
    if dev.type == "cpu" and cpu_share < MIN_CPU_SHARE:
        outside = [key for key, v in verdicts.items() if not v["inside"]]
        warnings.append(f"the machine was busy: the steps got {cpu_share:.0%} of the "
                        f"{threads_used} CPU thread(s) they ran on (other processes took the "
                        "rest), so they ran slower than the profile's machine"
                        + (f"; {', '.join(outside)} outside the prediction may be their doing"
                           if outside else ""))
    probed = ((prof.provenance or {}).get("probe") or {}).get("max_length") \
        if isinstance((prof.provenance or {}).get("probe"), dict) else None
    longest = int(padded.max())
    if isinstance(probed, int) and longest > probed:
        warnings.append(f"the slice's longest row ({longest:,} tokens) is beyond the "
                        f"profile's probed max_length ({probed:,}): its predictions there are "
                        "extrapolated (probe with --max-length at least the longest row)")
    pred = plan["predictions"]
    epoch_figures = {key: {"value": pred[key], "interval": pred.get(key + "_interval")}
                     for key in ("step_time_mean", "step_time_p50", "step_time_p90",
                                 "rank_wait_s") if pred.get(key) is not None} or None
    return VerifyResult(
        device=dev.type, device_name=device_name, steps=n, measured=measured,
        predicted=predicted, verdicts=verdicts, warnings=tuple(warnings), plan=plan,
        packing=packing,
        predicted_epoch=epoch_figures, step_seconds=tuple(float(s) for s in seconds),
        step_predicted=tuple(float(s) for s in step_predicted),
        shapes=tuple(shape_of(i) for i in range(n)), claimed_error=claim,
        elapsed_s=time.monotonic() - start, stopped_by=stopped_by, notes=tuple(notes))


def _load_average() -> float | None:
    """The 1-minute load average (None where the system keeps none)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def _rss_peak() -> int | None:
    try:
        import resource
    except ImportError:  # pragma: no cover - not on Windows
        return None
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def _predicted_peak(plan, sizes, padded, varlen) -> dict | None:
    """The plan's memory model at the slice's largest batch (None without one)."""
    memory = plan.get("memory")
    if memory is None:
        return None
    s = np.where(varlen, 1, sizes).astype(np.float64)
    length = padded.astype(np.float64)
    peaks = memory["m0"] + memory["m1"] * s * length + memory["m2"] * s * length * length
    value = float(peaks.max())
    return {"value": value, "interval": [value, value], "coefficient_interval": [value, value]}


def _warnings(seconds, predicted, shapes, plan, sampler, verdicts, load, threads, device,
              features, masked, cost_model) -> list:
    out = []
    n = len(seconds)
    varlen = masked is not None
    buckets = len(set(shapes)) if not varlen else None
    if n < MIN_STEPS:
        out.append(f"the slice is too short to say much: {n} step(s) (at least {MIN_STEPS} "
                   "give a p90 worth reading); raise --time-limit or --steps")
    planned = int(np.count_nonzero(sampler._bucket_counts))
    if not varlen and plan["pad"] == "edge" and buckets < planned:
        out.append(f"the slice ran {buckets} of the plan's {planned} bucket shapes: its step "
                   "mix is not the epoch's (the epoch's own predictions are under "
                   "predicted_epoch)")
    ratio = np.asarray(seconds) / np.maximum(predicted, 1e-300)
    spread = None
    if n >= 4:
        q25, q75 = np.quantile(ratio, [0.25, 0.75])
        spread = q75 / q25 - 1
        if spread > SCATTER_LIMIT:
            out.append(f"measured step times scattered {spread:.0%} around their predictions "
                       "(p75/p25 of measured / predicted): the machine's speed changed during "
                       "the slice (other processes), so its figures are not steady")
    known = [x for x in load if x is not None]
    own = threads if device == "cpu" else 1
    busy = known and max(known) - own > OTHER_LOAD
    outside = [key for key, v in verdicts.items() if not v["inside"]]
    if busy:
        cores = os.cpu_count()
        out.append(f"the machine was busy: load average {max(known):.1f}"
                   + (f" on {cores} cores" if cores else "")
                   + f" (this run about {own}): other processes slow the measured steps"
                   + (f"; {', '.join(outside)} outside the prediction may be their doing, not "
                      "the profile's" if outside else ""))
    if varlen:
        coef = np.array([cost_model.alpha, cost_model.beta, cost_model.gamma])
        extra = float((features @ coef).sum() / (masked @ coef).sum() - 1)
        if extra > 0.02:
            out.append(f"packed rows ran as one row through the model's own attention, without "
                       f"a document mask, and are predicted so (attention over the whole row); "
                       f"the plan's figures count document-masked attention (sum of d^2), "
                       f"which the profile prices {extra:.0%} below the dense row")
    return out


def predict_ranked_steps(features, world, cost_model, claim, *, noise=None, extra=None,
                         draws=2000, seed=0) -> dict:
    """The predicted step figures of batches with ``features`` in step order over ``world``
    ranks (a step waits for its slowest rank): ``step_time_p50``, ``step_time_p90``,
    ``step_time_mean`` and ``rank_wait_s``, each ``{"value", "interval",
    "coefficient_interval"}``; the step times' intervals widened by ``claim`` (a fraction), the
    wait's by ``claim`` x the mean step (a wait is a difference of step times).

    ``noise`` (optional): the ranks' measured scatter, a (K, ``world``) array of factors
    (measured time / the cost model's, one row per measured step, the ranks together), with
    ``extra`` (K,) seconds every rank waited in that step beyond the slowest (see
    :func:`bucketopt.cost.steps.noisy_step_stats`). The values are then the expected figures
    of steps whose rank times are multiplied by a random row, and the interval before widening
    is the central ``coverage`` share of the figures that runs of these n steps measure
    (:func:`~bucketopt.cost.steps.sampled_step_stats`: ``draws`` runs, each with one of the
    profile's coefficient sets and fresh rows), the point held; its entries add
    ``sample_interval`` (that share, before widening). The claimed error then widens the wait
    as it widens the step times, by ``claim`` of its ends: it is an error of a shape's time, and
    the ranks of one step run close shapes (one bucket's batches, rows of about the budget), so
    it moves their times, and the differences between them, alike."""
    from ..cost.coverage import coefficient_sets as _sets
    from ..cost.coverage import interval
    from ..cost.steps import KEYS as STEP_KEYS
    from ..cost.steps import noisy_step_stats, sampled_step_stats, step_stats

    features = np.asarray(features, dtype=np.float64)
    world = int(world)
    coef = [cost_model.alpha, cost_model.beta, cost_model.gamma]
    if noise is None:
        stats = step_stats(features, world)
    else:
        def stats(c):
            return noisy_step_stats(features, world, c, noise, extra)
    point = stats(coef)
    sets, coverage = _sets(cost_model)
    per_set = np.array([stats(c) for c in sets]).reshape(-1, len(STEP_KEYS))
    sampled = None
    if noise is not None:
        sampled = sampled_step_stats(features, world, sets if sets.size else [coef], noise,
                                     extra, draws=draws, seed=seed)
    out = {}
    for i, key in enumerate(STEP_KEYS):
        low, high = interval(per_set[:, i], point[i], coverage)
        entry = {"value": point[i], "coefficient_interval": [low, high]}
        if sampled is not None:
            entry["sample_interval"] = interval(sampled[:, i], point[i], coverage)
            low, high = entry["sample_interval"]
        if key == "rank_wait_s" and noise is None:
            widened = [max(0.0, low - claim * point[2]), high + claim * point[2]]
        else:
            widened = [max(0.0, low * (1 - claim)), high * (1 + claim)]
        out[key] = {"value": point[i], "interval": widened, **entry}
    return out
