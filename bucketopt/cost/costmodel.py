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
- :func:`bucketopt.cost.intervals.annotate` on a :class:`~bucketopt.solution.Solution` (the
  analytic fast path): the batch-time distribution of the buckets in closed form
  (:mod:`bucketopt.objectives.synced`), and the expected slowest of ``G`` batches drawn from it
  (batches of all buckets in random order, as a shuffled bucketed epoch interleaves them).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from ..errors import BucketoptError
from ..objectives.random_order import (  # noqa: F401  (the analytic epoch time: public here too)
    analytic_epoch_seconds,
    batch_time_atoms,
    bucket_time_atoms,
    expected_step_max,
)
from ..validate import check_number, check_positive_int, check_world_size, shown

SECONDS_PER_DAY = 86_400.0
PROFILE_KEYS = ("name", "description", "alpha", "beta", "gamma", "world_size", "token_budget",
                "provenance")


# A profile coefficient above this is no measurement (alpha: seconds per micro-batch; beta and
# gamma are far smaller); larger values overflow the predicted times of an epoch.
COEFFICIENT_LIMIT = 1e6
# A positive coefficient below this is no measurement either (a GPU that runs 1e30 tokens a
# second): predictions from such ones overflow (Ktok/s is infinite, JSON refuses it) and the
# certified DP's products of two costs underflow. 0 stays allowed: a term the model leaves out.
COEFFICIENT_FLOOR = 1e-30


def _coefficient(value, name: str, source: str = "") -> float:
    where = f" in {source}" if source else ""
    value = check_number(value, name, low=0.0, where=where)
    if value > COEFFICIENT_LIMIT:
        raise BucketoptError(
            f"`{name}`{where} is {value:g} seconds: a profile coefficient must be at most "
            f"{COEFFICIENT_LIMIT:g} (no GPU is that slow; check the profile's units).", param=name)
    if 0.0 < value < COEFFICIENT_FLOOR:
        raise BucketoptError(
            f"`{name}`{where} is {value:g} seconds: a positive profile coefficient must be at "
            f"least {COEFFICIENT_FLOOR:g}, or 0 (no GPU is that fast; check the profile's "
            "units).", param=name)
    return value


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
        object.__setattr__(self, "world_size", check_world_size(self.world_size))
        object.__setattr__(self, "epochs", check_positive_int(self.epochs, "epochs"))

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
        return replace(self, epochs=check_positive_int(epochs, "epochs"))

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
        from ..data.output import write_text

        path = Path(path)
        write_text(path, json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n",
                   what="the profile")
        return path


def profiles_dir():
    from importlib.resources import files

    return files("bucketopt") / "profiles"


def available_profiles() -> tuple:
    """Names of the profiles shipped with bucketopt."""
    try:
        entries = list(profiles_dir().iterdir())
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

    budget = data.get("token_budget")
    where = f" in {source}" if source else ""
    provenance = data.get("provenance", {})
    return Profile(
        name=str(data.get("name", Path(source).stem)),
        description=str(data.get("description", "")),
        world_size=check_world_size(data.get("world_size", 1), where=where),
        token_budget=None if budget is None else check_positive_int(budget, "token_budget",
                                                                    where=where),
        provenance=provenance if isinstance(provenance, dict) else {"note": str(provenance)},
        uncertainty=parse_uncertainty(data.get("uncertainty"), source),
        **coeffs,
    )


# The size past which a file cannot be a profile (they are a few kilobytes).
PROFILE_BYTES = 1 << 20


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
            f"{type(profile).__name__}.", param="profile"
        )
    text = str(profile)
    from ..data.guards import path_kind, read_json, short

    if text in available_profiles():  # the one JSON reader, for shipped files too
        data = read_json(profiles_dir() / f"{text}.json", f"profile {shown(text)}")
        return profile_from_dict(data, f"profile {shown(text)}")

    kind = path_kind(text, "profile")
    if kind == "other":
        raise BucketoptError(f"profile {short(text)} is not a regular file (a pipe, a socket or "
                             "a device).", param="profile")
    if kind != "file":
        names = ", ".join(available_profiles()) or "none"
        raise BucketoptError(
            f"profile {short(text)} is neither a shipped profile ({names}) nor a JSON file.",
            param="profile",
        )
    data = read_json(text, f"profile file {short(text)}", limit=PROFILE_BYTES)
    return profile_from_dict(data, f"profile file {short(text)}")


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
            "profile JSON written by `bucketopt calibrate -o`.",
            param=None,
        )
    prof = load_profile(profile)
    model = prof.cost_model(world_size=None if world_size is None else
                            check_world_size(world_size, "world_size (--gpus)"))
    if token_budget is None and budget_needed:
        if prof.token_budget is None:
            raise BucketoptError(
                f"profile {shown(prof.name)}"
                f" has no token_budget: pass token_budget= (--token-budget).", param="token_budget"
            )
        token_budget = prof.token_budget
        if hist is not None and hist.max_length > token_budget:
            raise BucketoptError(
                f"the profile's token_budget={token_budget} is smaller than the longest sample "
                f"({hist.max_length}); pass a larger token_budget= (--token-budget).",
                param="token_budget"
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


# What time_epoch() reads of an Epoch.
EPOCH_FIELDS = ("strategy", "n_batches", "total_real_tokens", "sizes", "padded_lens", "attention")


def time_epoch(epoch, cost_model: CostModel) -> EpochTiming:
    """Time of an :class:`~bucketopt.training.epoch.Epoch` in training order under ``cost_model``.

    Batches ``i*G .. i*G + G - 1`` form step ``i`` (a DistributedSampler-style split); a step
    lasts as long as its slowest micro-batch. Ktok/s counts real tokens over all GPUs.
    """
    # (duck-typed: cost sits below training, where Epoch lives)
    if not all(hasattr(epoch, name) for name in EPOCH_FIELDS):
        raise BucketoptError(f"`epoch` must be an Epoch (from bucketopt.simulate or "
                             f"epoch_batches); got {type(epoch).__name__}.", param="epoch")
    if not isinstance(cost_model, CostModel):
        raise BucketoptError(f"`cost_model` must be a CostModel (Profile.cost_model()); got "
                             f"{type(cost_model).__name__}.", param="cost_model")
    if epoch.n_batches == 0:
        raise BucketoptError("the epoch has no batches.", param="epoch")
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


def timing_fields(epochs, cost_model: CostModel) -> dict:
    """Mean ``ktok_per_s``, ``eta_days`` and ``wait_fraction`` over simulated epochs (a row of
    ``bucketopt compare``)."""
    timings = [time_epoch(e, cost_model) for e in epochs]
    return {
        "ktok_per_s": float(np.mean([t.ktok_per_s for t in timings])),
        "eta_days": float(np.mean([t.eta_days for t in timings])),
        "wait_fraction": float(np.mean([t.wait_fraction for t in timings])),
    }


MAX_SETS = 2000  # coefficient sets a profile may carry


def parse_uncertainty(value, source: str = "profile") -> dict | None:
    """Validate a profile's ``uncertainty`` field (None when absent).

    Examples
    --------
    >>> parse_uncertainty({"coefficient_sets": [[0.1, 1e-4, 0.0]], "coverage": 1.0})["coverage"]
    1.0
    """
    if value is None:
        return None
    if not isinstance(value, dict):
        raise BucketoptError(f"`uncertainty` in {source} must be a JSON object; got "
                             f"{type(value).__name__}.")
    sets = value.get("coefficient_sets")
    if not isinstance(sets, (list, tuple)) or not sets:
        raise BucketoptError(f"`uncertainty.coefficient_sets` in {source} must be a non-empty "
                             "list of [alpha, beta, gamma].")
    if len(sets) > MAX_SETS:
        raise BucketoptError(f"`uncertainty.coefficient_sets` in {source} holds {len(sets):,} "
                             f"sets; at most {MAX_SETS:,} are allowed.")
    clean = []
    for i, entry in enumerate(sets):
        if not isinstance(entry, (list, tuple)) or len(entry) != 3:
            raise BucketoptError(f"`uncertainty.coefficient_sets[{i}]` in {source} must be "
                                 f"[alpha, beta, gamma] (3 numbers); got {shown(entry)}.")
        # each number as a main coefficient is checked: finite, >= 0, at most
        # COEFFICIENT_LIMIT (a 400-digit integer or 1e7 seconds is no measurement)
        entry = [check_number(v, f"uncertainty.coefficient_sets[{i}][{j}]", low=0.0,
                              high=COEFFICIENT_LIMIT, where=f" in {source}", param=None)
                 for j, v in enumerate(entry)]
        if not all(math.isfinite(v) and v >= 0 for v in entry) or not any(
                v >= COEFFICIENT_FLOOR for v in entry):
            raise BucketoptError(f"`uncertainty.coefficient_sets[{i}]` in {source} must hold "
                                 f"finite numbers >= 0, not all 0 (nor below "
                                 f"{COEFFICIENT_FLOOR:g}); got {entry}.")
        # resampled fits put a term the data barely show at 0 or just above it: below the
        # profile's floor it is taken as 0 (a set is never refused for it)
        entry = [v if v >= COEFFICIENT_FLOOR else 0.0 for v in entry]
        clean.append(entry)
    coverage = value.get("coverage", 1.0)
    if isinstance(coverage, bool) or not isinstance(coverage, (int, float)) \
            or not 0 < coverage <= 1:
        raise BucketoptError(f"`uncertainty.coverage` in {source} must be a number in (0, 1]; "
                             f"got {shown(coverage)}.")
    out = {key: v for key, v in value.items() if key not in ("coefficient_sets", "coverage")}
    out.update(coverage=float(coverage), coefficient_sets=clean)
    return out
