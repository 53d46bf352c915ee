"""The GPU cost model: micro-batch time, data-parallel steps, Ktok/s and ETA; hardware profiles.

One micro-batch of ``s`` rows padded to length ``L`` takes
``t = alpha + beta * s * L + gamma * s * L**2`` seconds on one GPU. A padding-free (packed)
micro-batch, one row of documents d_i with document-masked attention, takes
``alpha + beta * sum d_i + gamma * sum d_i**2`` (:meth:`CostModel.batch_times` reads both kinds
from an :class:`~bucketopt.training.epoch.Epoch`; :mod:`bucketopt.training.packed` simulates packed
epochs).
With data parallelism over ``G`` GPUs the batches ``i*G .. i*G + G - 1`` of an epoch run at
once and the step waits for the slowest of them. Throughput counts real tokens only, over all
GPUs; the ETA is ``epochs x epoch time``. See docs/cost_model.md for the fit and its residuals.

Two ways to evaluate a batching:

- :func:`time_epoch` on any :class:`~bucketopt.training.epoch.Epoch` (simulated or from a real
sampler):
  the real batch order, step time = max over ranks, the last partial step included.
- :func:`annotate` on a :class:`~bucketopt.solution.Solution` (the analytic fast path): the
  batch-time distribution of the buckets in closed form, and the expected slowest of ``G``
  batches drawn from it (batches of all buckets in random order, as a shuffled bucketed epoch
  interleaves them).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from ..errors import BucketoptError

SECONDS_PER_DAY = 86_400.0
PROFILE_KEYS = ("name", "description", "alpha", "beta", "gamma", "world_size", "token_budget",
                "provenance")


def _coefficient(value, name: str, source: str = "") -> float:
    where = f" in {source}" if source else ""
    if isinstance(value, bool):
        raise BucketoptError(f"`{name}`{where} must be a number >= 0; got {value!r}.")
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise BucketoptError(f"`{name}`{where} must be a number >= 0; got {value!r}.") from None
    if not math.isfinite(value) or value < 0:
        raise BucketoptError(f"`{name}`{where} must be a finite number >= 0; got {value}.")
    return value


def _positive_int(value, name: str, source: str = "") -> int:
    where = f" in {source}" if source else ""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise BucketoptError(f"`{name}`{where} must be an integer >= 1; got {value!r}.")
    if value > 2**60:  # beyond any real count; int64 arithmetic would overflow
        raise BucketoptError(f"`{name}`{where} must be at most 2**60; got {value!r}.")
    return int(value)


@dataclass(frozen=True)
class CostModel:
    """Per-micro-batch time ``alpha + beta * s * L + gamma * s * L**2`` over ``world_size`` GPUs.

    Parameters
    ----------
    alpha : float
        Seconds per micro-batch (launch, optimizer share, host overhead).
    beta : float
        Seconds per padded token.
    gamma : float
        Seconds per padded token per unit of padded length (attention's quadratic term).
    world_size : int
        Data-parallel GPUs; every step waits for the slowest of them.
    epochs : int
        Epochs for the ETA.

    Examples
    --------
    >>> m = CostModel(alpha=0.1, beta=1e-4, gamma=1e-8)
    >>> round(float(m.micro_batch_time(8, 4096)), 6)
    4.718977
    """

    alpha: float
    beta: float
    gamma: float
    world_size: int = 1
    epochs: int = 1
    name: str = "custom"
    uncertainty: dict | None = field(default=None, compare=False, repr=False)  # intervals.py

    def __post_init__(self):
        for key in ("alpha", "beta", "gamma"):
            object.__setattr__(self, key, _coefficient(getattr(self, key), key))
        if self.alpha == self.beta == self.gamma == 0.0:
            raise BucketoptError("alpha, beta and gamma are all 0: the model predicts no time.")
        object.__setattr__(self, "world_size", _positive_int(self.world_size, "world_size"))
        object.__setattr__(self, "epochs", _positive_int(self.epochs, "epochs"))

    def micro_batch_time(self, sizes, padded_lens):
        """Seconds of micro-batches of ``sizes`` rows padded to ``padded_lens`` (broadcasts)."""
        s = np.asarray(sizes, dtype=np.float64)
        length = np.asarray(padded_lens, dtype=np.float64)
        return self.alpha + s * length * (self.beta + self.gamma * length)

    def batch_times(self, epoch) -> np.ndarray:
        """Seconds of every micro-batch of an :class:`~bucketopt.training.epoch.Epoch`: padded
        batches as :meth:`micro_batch_time`, padding-free ones ``alpha + beta * tokens + gamma *
        sum d**2``."""
        if epoch.attention is None:
            return self.micro_batch_time(epoch.sizes, epoch.padded_lens)
        return (self.alpha + self.beta * epoch.computed_tokens.astype(np.float64)
                + self.gamma * epoch.attention_terms)

    def with_epochs(self, epochs) -> CostModel:
        return replace(self, epochs=_positive_int(epochs, "epochs"))

    def with_world_size(self, world_size) -> CostModel:
        return replace(self, world_size=_positive_int(world_size, "world_size"))

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Profile:
    """A hardware profile: coefficients, the world size and token budget they were fitted at."""

    name: str
    description: str
    alpha: float
    beta: float
    gamma: float
    world_size: int = 1
    token_budget: int | None = None
    provenance: dict = field(default_factory=dict, compare=False)
    uncertainty: dict | None = field(default=None, compare=False)  # see intervals.py

    def cost_model(self, world_size=None, epochs: int = 1) -> CostModel:
        return CostModel(self.alpha, self.beta, self.gamma,
                         world_size=self.world_size if world_size is None else world_size,
                         epochs=epochs, name=self.name, uncertainty=self.uncertainty)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["units"] = {"alpha": "s per micro-batch", "beta": "s per padded token",
                        "gamma": "s per padded token x padded length"}
        return out

    def save(self, path) -> Path:
        path = Path(path)
        try:
            path.write_text(json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n")
        except OSError as exc:
            raise BucketoptError(
                f"could not write the profile to {path}: {exc.strerror}."
            ) from None
        return path


def _profiles_dir():
    from importlib.resources import files

    return files("bucketopt") / "profiles"


def available_profiles() -> tuple:
    """Names of the profiles shipped with bucketopt."""
    try:
        entries = list(_profiles_dir().iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return ()
    return tuple(sorted(p.name[:-5] for p in entries if p.name.endswith(".json")))


def profile_from_dict(data, source: str = "profile") -> Profile:
    """Validate a profile's JSON object (as written by :meth:`Profile.save`)."""
    if not isinstance(data, dict):
        raise BucketoptError(f"{source} must hold a JSON object; got {type(data).__name__}.")
    missing = [k for k in ("alpha", "beta", "gamma") if k not in data]
    if missing:
        raise BucketoptError(f"{source} lacks the key(s) {', '.join(missing)}.")
    coeffs = {k: _coefficient(data[k], k, source) for k in ("alpha", "beta", "gamma")}
    if coeffs["alpha"] == coeffs["beta"] == coeffs["gamma"] == 0.0:
        raise BucketoptError(f"{source}: alpha, beta and gamma are all 0.")
    from .intervals import parse_uncertainty

    budget = data.get("token_budget")
    provenance = data.get("provenance", {})
    return Profile(
        name=str(data.get("name", Path(source).stem)),
        description=str(data.get("description", "")),
        world_size=_positive_int(data.get("world_size", 1), "world_size", source),
        token_budget=None if budget is None else _positive_int(budget, "token_budget", source),
        provenance=provenance if isinstance(provenance, dict) else {"note": str(provenance)},
        uncertainty=parse_uncertainty(data.get("uncertainty"), source),
        **coeffs,
    )


def load_profile(profile) -> Profile:
    """A :class:`Profile` from a shipped name, a JSON file path, a dict or a Profile.

    Examples
    --------
    >>> load_profile("rtx-pro-6000-blackwell").world_size
    8
    """
    if isinstance(profile, Profile):
        return profile
    if isinstance(profile, dict):
        return profile_from_dict(profile)
    if not isinstance(profile, (str, Path)):
        raise BucketoptError(
            f"`profile` must be a profile name, a JSON file path or a Profile; got "
            f"{type(profile).__name__}."
        )
    text = str(profile)
    if text in available_profiles():
        data = json.loads((_profiles_dir() / f"{text}.json").read_text())
        return profile_from_dict(data, f"profile {text!r}")
    path = Path(text)
    if not path.is_file():
        names = ", ".join(available_profiles()) or "none"
        raise BucketoptError(
            f"profile {text!r} is neither a shipped profile ({names}) nor a JSON file."
        )
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise BucketoptError(f"profile file {text} is not readable JSON: {exc}") from None
    return profile_from_dict(data, f"profile file {text}")


def resolve_cost_model(profile, world_size, token_budget, hist, *, budget_needed=True):
    """The cost model and token budget for solve()/evaluate(): (CostModel, token_budget).

    ``world_size=None`` means the profile's; ``token_budget=None`` means the budget the profile
    was calibrated at, unless ``budget_needed`` is False (a memory model sets the batch sizes:
    then no budget stays no budget).
    """
    if profile is None:
        names = ", ".join(available_profiles())
        raise BucketoptError(
            f'objective="time" needs a hardware profile: pass profile= (one of: {names}) or a '
            "profile JSON written by `bucketopt calibrate -o`."
        )
    prof = load_profile(profile)
    model = prof.cost_model(world_size=None if world_size is None else
                            _positive_int(world_size, "world_size (--gpus)"))
    if token_budget is None and budget_needed:
        if prof.token_budget is None:
            raise BucketoptError(
                f"profile {prof.name!r} has no token_budget: pass token_budget= (--token-budget)."
            )
        token_budget = prof.token_budget
        if hist is not None and hist.max_length > token_budget:
            raise BucketoptError(
                f"the profile's token_budget={token_budget} is smaller than the longest sample "
                f"({hist.max_length}); pass a larger token_budget= (--token-budget)."
            )
    return model, token_budget


# --- simulated epochs ------------------------------------------------------------------------


@dataclass(frozen=True)
class EpochTiming:
    """Predicted time of one epoch (see :func:`time_epoch`)."""

    strategy: str
    seconds: float
    steps: int
    world_size: int
    real_tokens: int
    ktok_per_s: float
    eta_days: float
    epochs: int
    wait_fraction: float  # share of GPU time spent waiting for the slowest rank

    def to_dict(self) -> dict:
        return asdict(self)


def step_times(epoch, cost_model: CostModel) -> np.ndarray:
    """Seconds of every data-parallel step: the slowest of its ``world_size`` micro-batches."""
    times = cost_model.batch_times(epoch)
    g = cost_model.world_size
    steps = -(-times.size // g)
    padded = np.zeros(steps * g)  # a rank with no batch in the last step waits (time 0)
    padded[: times.size] = times
    return padded.reshape(steps, g).max(axis=1)


def time_epoch(epoch, cost_model: CostModel) -> EpochTiming:
    """Time of an :class:`~bucketopt.training.epoch.Epoch` in training order under ``cost_model``.

    Batches ``i*G .. i*G + G - 1`` form step ``i`` (a DistributedSampler-style split); a step
    lasts as long as its slowest micro-batch. Ktok/s counts real tokens over all GPUs.
    """
    if epoch.n_batches == 0:
        raise BucketoptError("the epoch has no batches.")
    steps = step_times(epoch, cost_model)
    seconds = float(steps.sum())
    busy = float(cost_model.batch_times(epoch).sum())
    real = epoch.total_real_tokens
    rate = real / seconds / 1e3
    return EpochTiming(
        strategy=epoch.strategy, seconds=seconds, steps=int(steps.size),
        world_size=cost_model.world_size, real_tokens=real, ktok_per_s=rate,
        eta_days=cost_model.epochs * seconds / SECONDS_PER_DAY, epochs=cost_model.epochs,
        wait_fraction=1.0 - busy / (seconds * cost_model.world_size),
    )


def epoch_time(epoch, cost_model: CostModel) -> float:
    """Seconds of one epoch (see :func:`time_epoch`)."""
    return time_epoch(epoch, cost_model).seconds


def throughput(epoch, cost_model: CostModel) -> float:
    """Real Ktok/s over all GPUs for one epoch (see :func:`time_epoch`)."""
    return time_epoch(epoch, cost_model).ktok_per_s


# --- analytic fast path ----------------------------------------------------------------------


def _max_distribution(values, counts, draws):
    """P(longest of ``draws`` samples without replacement = each value) for one bucket."""
    from scipy.special import gammaln

    total = int(counts.sum())
    below = np.cumsum(counts)
    log_cdf = np.full(values.size, -np.inf)
    ok = below >= draws
    log_cdf[ok] = (gammaln(below[ok] + 1) - gammaln(below[ok] - draws + 1)
                   - gammaln(total + 1) + gammaln(total - draws + 1))
    cdf = np.exp(log_cdf)
    return np.diff(np.r_[0.0, cdf])


def batch_time_atoms(hist, boundaries, sizes, pad, cost_model):
    """The distribution of micro-batch times of a bucketed epoch: (times, batch counts).

    Bucket k with N samples yields q = N // B_k batches of B_k rows and one of r = N mod B_k.
    ``pad="edge"``: rows are padded to the edge, every full batch costs the same.
    ``pad="batch"``: rows are padded to the batch's longest member, whose law is the maximum of
    draws without replacement from the bucket. ``sizes``: every bucket's batch size B_k, or a
    token budget T (B_k = T // b_k).
    """
    from ..synced import per_bucket_sizes

    edges = np.asarray(boundaries, dtype=np.int64)
    sizes = per_bucket_sizes(edges, sizes)
    which = np.searchsorted(edges, hist.values, side="left")
    parts = [bucket_time_atoms(hist.values[which == k], hist.counts[which == k], int(edge),
                               int(sizes[k]), pad, cost_model) for k, edge in enumerate(edges)]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def bucket_time_atoms(values, counts, edge, batch_size, pad, cost_model):
    """(times, batch counts) of one bucket's micro-batches (see :func:`batch_time_atoms`);
    ``batch_size``: the bucket's B."""
    n = int(counts.sum())
    if n == 0:
        return np.empty(0), np.empty(0)
    size = min(int(batch_size), n)
    q, r = divmod(n, size)
    times, weights = [], []
    for rows, batches in ((size, q), (r, 1)):
        if rows == 0 or batches == 0:
            continue
        if pad == "edge":
            times.append(np.atleast_1d(cost_model.micro_batch_time(rows, edge)))
            weights.append(np.array([float(batches)]))
        else:
            times.append(cost_model.micro_batch_time(rows, values))
            weights.append(batches * _max_distribution(values, counts, rows))
    return np.concatenate(times), np.concatenate(weights)


def expected_step_max(times, weights, draws):
    """E[slowest of ``draws`` micro-batches] drawn independently from (times, weights).

    ``draws`` may be a sequence: one expectation per entry, from one sort.
    """
    order = np.argsort(times, kind="stable")  # timsort: merges the buckets' sorted runs fast
    t, w = times[order], weights[order]
    cdf = np.cumsum(w) / w.sum()
    cdf[-1] = 1.0
    cdf[cdf < 1e-30] = 0.0  # powers of tiny values would be subnormal: slow, and irrelevant
    # (t * p).sum(), not np.dot: a threaded BLAS call costs milliseconds on a busy machine.
    out = [float((t * np.diff(cdf ** d, prepend=0.0)).sum()) for d in np.atleast_1d(draws)]
    return out if np.ndim(draws) else out[0]


def analytic_epoch_seconds(hist, boundaries, sizes, pad, cost_model) -> float:
    """Expected epoch time of a bucketed epoch whose batches run in random order.

    With nb batches over G ranks there are nb // G full steps, each lasting the expected slowest
    of G batch times (independent draws from the epoch's batch-time distribution), plus one
    step of the remaining nb mod G batches.
    """
    times, weights = batch_time_atoms(hist, boundaries, sizes, pad, cost_model)
    return _seconds_from_atoms(times, weights, cost_model.world_size)


def _seconds_from_atoms(times, weights, world_size) -> float:
    n_batches = round(float(weights.sum()))
    g = world_size
    full, rest = divmod(n_batches, g)
    step, last = expected_step_max(times, weights, [g, max(rest, 1)])
    return full * step + (last if rest else 0.0)


def annotate(solution, hist, cost_model: CostModel, *, sync_buckets=False):
    """``solution`` with ``ktok_per_s`` and ``eta_days`` from the analytic fast path.

    ``sync_buckets=True``: the ranks take one bucket per micro-step (the sampler's default), and
    the epoch time is the exact sum over buckets of the time DP (:mod:`bucketopt.synced`).
    Otherwise the batches of all buckets run in random order (:func:`analytic_epoch_seconds`).
    With one GPU both are the summed micro-batch time.
    """
    if solution.batch_sizes is None:
        raise BucketoptError("throughput needs a token_budget or a memory model (the batch "
                             "sizes come from it).")
    sizes = np.asarray(solution.batch_sizes, dtype=np.int64)
    extra = dict(solution.extra)
    if sync_buckets is True:
        from ..synced import synced_features
        from .intervals import _sets, from_seconds

        features = synced_features(hist, solution.boundaries, sizes, solution.pad,
                                   cost_model.world_size)
        seconds = float(features @ [cost_model.alpha, cost_model.beta, cost_model.gamma])
        sets, coverage = _sets(cost_model)
        intervals = from_seconds([float(features @ c) for c in sets], seconds,
                                 real_tokens=solution.real_tokens, epochs=cost_model.epochs,
                                 coverage=coverage)
    else:
        from .intervals import solution_intervals

        seconds = analytic_epoch_seconds(hist, solution.boundaries, sizes, solution.pad,
                                         cost_model)
        intervals = solution_intervals(solution, hist, cost_model, seconds)
    extra.update(profile=cost_model.name, world_size=cost_model.world_size,
                 epochs=cost_model.epochs, epoch_hours=seconds / 3600.0,
                 sync_buckets=sync_buckets)
    extra.update(intervals)
    return replace(solution, ktok_per_s=solution.real_tokens / seconds / 1e3,
                   eta_days=cost_model.epochs * seconds / SECONDS_PER_DAY, extra=extra)


def timing_fields(epochs, cost_model: CostModel) -> dict:
    """Mean ``ktok_per_s``, ``eta_days`` and ``wait_fraction`` over simulated epochs (a row of
    ``bucketopt compare``)."""
    timings = [time_epoch(e, cost_model) for e in epochs]
    return {
        "ktok_per_s": float(np.mean([t.ktok_per_s for t in timings])),
        "eta_days": float(np.mean([t.eta_days for t in timings])),
        "wait_fraction": float(np.mean([t.wait_fraction for t in timings])),
    }
