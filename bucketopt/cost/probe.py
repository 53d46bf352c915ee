"""probe(): time real training steps of your model and fit a profile from them.

The cost model is only as good as its coefficients. ``probe`` measures them on the machine that
will train: it builds the model, then times real training steps (forward, backward, optimizer
step; the device synchronised before and after, so asynchronous kernels are counted) over a
designed set of shapes (s, L):

- padded lengths L on a geometric grid from ``max_length / 32`` up to ``max_length`` (multiples
  of 8), so the quadratic (attention) term is seen;
- for every L, batches of ``s = token_budget // L`` rows (on the budget: the shapes training
  runs), about a fifth of that, and 1 row (under the budget: the small batches that expose the
  per-step overhead alpha);
- untimed warm-up first: ``warmup`` steps on the largest shape (allocator, optimizer state),
  then one untimed step of every shape (the first step of a new shape pays for allocations and
  kernel selection);
- then rounds, each visiting every shape once in a fresh random order, so that drift on a
  shared machine (another job, thermal throttling) spreads over all shapes instead of biasing
  some of them. Repeats are pooled by their median. Without ``time_limit`` there are
  ``repeats`` rounds (3 by default); with one, rounds continue until the next step would
  overrun it (at most ``repeats`` when given).

The measurements go through :func:`bucketopt.calibrate` (robust fit, k-fold held-out error over
the shapes, bootstrap intervals), and the result holds the CSV rows and a
:class:`~bucketopt.cost.costmodel.Profile` whose ``uncertainty`` gives every later prediction an
interval. On CUDA the peak memory of every shape is recorded and the largest token budget whose
peak fits ``memory_fraction`` of the card is reported (the longest length is the worst case at a
given budget), as NeMo's OOMptimizer does for batch sizes.

torch is an optional dependency: without it, one clear error.
"""

from __future__ import annotations

import csv
import importlib
import importlib.util
import math
import os
import platform
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..errors import BucketoptError
from ..progress import Stage
from ..validate import shown

DEVICES = ("cpu", "cuda", "mps")
DTYPES = ("float32", "bfloat16")
LENGTHS = 6  # padded lengths on the grid
SHORTEST = 32  # the grid starts at max_length / 32
REPEATS = 3  # rounds without a time limit
MAX_ROUNDS = 1000
WARMUP = 2
MAX_WARMUP = MAX_ROUNDS  # untimed warm-up steps: capped as the timed rounds are
MEMORY_FRACTION = 0.9
MAX_SHAPES = 400
FIT_RESERVE_S = 2.0  # seconds kept for the fit when a time limit applies
# The most tokens of one probed micro-batch (and longest length): far above any real
# micro-batch; int64 ids of this many tokens take 16 GiB.
PROBE_TOKEN_LIMIT = 2**31
PROGRESS_DELAY_S = 1.0  # the progress line's first draw
PROGRESS_EVERY_S = 10.0  # off a terminal: a plain line this often (docs/cost_model.md)
CSV_COLUMNS = ("batch_size", "padded_len", "seconds", "round", "peak_memory_bytes")


@dataclass(frozen=True)
class ProbeResult:
    """What :func:`probe` measured and fitted.

    ``measurements``: one dict per timed step (batch_size, padded_len, seconds, round,
    peak_memory_bytes); ``calibration``: the fit (:class:`bucketopt.Calibration`);
    ``profile``: a profile for ``--profile``; ``memory``: the CUDA memory fit (else None);
    ``warnings``: one line when the fit is too poor to plan with (:mod:`bucketopt.cost.fitcheck`).
    """

    model: str
    device: str
    device_name: str
    dtype: str
    token_budget: int
    max_length: int
    shapes: tuple
    measurements: tuple = field(repr=False)
    calibration: object = field(repr=False)
    profile: object = field(repr=False)
    rounds: int = 0
    elapsed_s: float = 0.0
    stopped_by_time_limit: bool = False
    memory: dict | None = None
    holdout: dict | None = None  # shapes timed alongside but never fitted (``holdout=``)
    warnings: tuple = ()  # a poor fit, with its likely cause (bucketopt.cost.fitcheck)
    pool: str = "low"  # how repeats of a shape were pooled (calibration.POOLS)
    claimed_error: float | None = None  # the relative error the fit claims for one step
    scatter: dict | None = None  # repeats' spread and round-to-round drift (fitcheck.scatter)

    @property
    def heldout(self) -> dict | None:
        """The k-fold held-out relative error of the fit (over shapes)."""
        return self.calibration.heldout

    def write_measurements(self, path) -> Path:
        """Write the timed steps as the CSV ``bucketopt calibrate`` reads."""
        from ..data.output import atomic_writer

        path = Path(path)
        with atomic_writer(path, what="the measurements") as fh:
            writer = csv.writer(fh)
            writer.writerow(CSV_COLUMNS)
            for row in self.measurements:
                peak = row["peak_memory_bytes"]
                writer.writerow([row["batch_size"], row["padded_len"], repr(row["seconds"]),
                                 row["round"], "" if peak is None else peak])
        return path

    def to_dict(self) -> dict:
        cal = self.calibration
        return {
            "model": self.model, "device": self.device, "device_name": self.device_name,
            "dtype": self.dtype, "token_budget": self.token_budget,
            "max_length": self.max_length, "shapes": [list(s) for s in self.shapes],
            "n_measurements": len(self.measurements), "rounds": self.rounds,
            "elapsed_s": self.elapsed_s, "stopped_by_time_limit": self.stopped_by_time_limit,
            "alpha": cal.alpha, "beta": cal.beta, "gamma": cal.gamma,
            "heldout": cal.heldout, "calibration": cal.to_dict(), "memory": self.memory,
            "memory_measured": self.memory is not None,
            **({} if self.memory is not None else {"memory_note": (
                f"peak memory is not measured on {self.device} (it is read on CUDA only): "
                "give a memory model by hand (memory=, --memory)")}),
            "holdout": self.holdout, "warnings": list(self.warnings), "pool": self.pool,
            "claimed_error": self.claimed_error, "scatter": self.scatter,
        }


def design_shapes(token_budget: int, max_length: int, *, lengths: int = LENGTHS) -> list:
    """The (batch_size, padded_len) shapes :func:`probe` times.

    Examples
    --------
    >>> design_shapes(4096, 512)[:3]
    [(1, 16), (51, 16), (256, 16)]
    """
    token_budget = _positive(token_budget, "token_budget (--token-budget)", PROBE_TOKEN_LIMIT)
    max_length = _positive(max_length, "max_length (--max-length)", PROBE_TOKEN_LIMIT)
    if max_length > token_budget:
        raise BucketoptError(f"max_length={max_length} (--max-length) exceeds token_budget="
                             f"{token_budget} (--token-budget): no batch of that length fits.",
                             param=None)
    low = max(1, max_length // SHORTEST)
    grid = np.geomspace(low, max_length, num=lengths)
    align = 8 if max_length >= 64 else 1
    lens = sorted({max(align, round(x / align) * align) for x in grid[:-1]} | {max_length})
    lens = [x for x in lens if x <= max_length]
    shapes = set()
    for length in lens:
        top = token_budget // length
        for size in (1, max(1, round(top / 5)), top):
            shapes.add((max(1, min(size, top)), length))
    out = sorted(shapes, key=lambda sl: (sl[1], sl[0]))
    if len(out) > MAX_SHAPES:  # pragma: no cover - the grid above is small
        raise BucketoptError(f"the probe design holds {len(out)} shapes; at most {MAX_SHAPES}.")
    return out


def _positive(value, name, limit) -> int:
    # name: "token_budget (--token-budget)" names a parameter; "shapes batch_size" an entry
    param = name.split(" (--")[0] if " (--" in name else None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise BucketoptError(f"{name} must be an integer >= 1; got {value!r}.", param=param)
    if value > limit:
        raise BucketoptError(f"{name} must be at most {limit:,}; got {value:,}.", param=param)
    return int(value)


def _torch():
    try:
        import torch
    except ImportError:
        raise BucketoptError("probe needs torch, which is not installed: pip install torch "
                             "(see https://pytorch.org for the build that matches your "
                             "accelerator).") from None
    return torch


def load_model(spec):
    """(module, loss function, label, vocab size or None) from a ``--model`` SPEC.

    SPEC is ``module:function`` (a dotted module or a ``.py`` file; ``function()`` returns a
    ``torch.nn.Module`` whose ``forward(input_ids)`` gives a scalar loss, an object with
    ``.loss`` or logits) or ``hf:CONFIG`` (a local transformers config file or directory; the
    model is ``AutoModelForCausalLM.from_config`` with random weights).
    """
    torch = _torch()
    if isinstance(spec, torch.nn.Module):
        return spec, _generic_loss, type(spec).__name__, _vocab_of(spec)
    if callable(spec) and not isinstance(spec, str):
        module = _call_factory(spec, getattr(spec, "__name__", "model factory"))
        return module, _generic_loss, getattr(spec, "__name__", "model"), _vocab_of(module)
    if not isinstance(spec, str) or ":" not in spec:
        raise BucketoptError("model= (--model) must be 'module:function' or 'hf:CONFIG'; got "
                             f"{spec!r}.", param="model")
    if spec.startswith("hf:"):
        return _load_hf(spec[3:])
    module_name, _, function = spec.rpartition(":")
    if not module_name or not function.isidentifier():
        raise BucketoptError("model= (--model) must be 'module:function' (function a Python "
                             f"name) or 'hf:CONFIG'; got {spec!r}.", param="model")
    mod = _import(module_name, spec)
    factory = getattr(mod, function, None)
    if not callable(factory):
        raise BucketoptError(f"model= (--model) {spec!r}: {module_name} has no function "
                             f"{function!r}.", param="model")
    module = _call_factory(factory, spec)
    return module, _generic_loss, spec, _vocab_of(module)


def model_files(spec) -> list[Path]:
    """The files a ``--model`` SPEC reads, found without importing anything: the module's file
    for ``module:function`` (a ``.py`` path, or a dotted module looked up in the working folder
    and ``sys.path``), the config file for ``hf:CONFIG`` (a folder's ``config.json``). [] where
    none is found (loading the model then says why)."""
    if not isinstance(spec, str) or ":" not in spec:
        return []
    if spec.startswith("hf:"):
        path = Path(spec[3:])
        if path.is_dir():
            return [path / "config.json"]
        return [path] if spec[3:] else []
    module_name = spec.rpartition(":")[0]
    if module_name.endswith(".py") or "/" in module_name or "\\" in module_name:
        return [Path(module_name)]
    parts = module_name.split(".")
    if not all(part.isidentifier() for part in parts):
        return []
    for entry in [os.getcwd(), *sys.path]:
        base = Path(entry or os.getcwd()).joinpath(*parts)
        for candidate in (base.with_name(base.name + ".py"), base / "__init__.py"):
            try:
                if candidate.is_file():
                    return [candidate]
            except OSError:
                continue
    return []


def _import(module_name, spec):
    try:
        if module_name.endswith(".py") or "/" in module_name or "\\" in module_name:
            path = Path(module_name)
            if not path.is_file():
                raise BucketoptError(f"model= (--model) {spec!r}: file {path} does not exist.",
                                     param="model")
            loader_spec = importlib.util.spec_from_file_location(path.stem, path)
            mod = importlib.util.module_from_spec(loader_spec)
            loader_spec.loader.exec_module(mod)
            return mod
        if "" not in sys.path and str(Path.cwd()) not in sys.path:
            sys.path.insert(0, str(Path.cwd()))  # `bucketopt probe --model mymodel:build`
        return importlib.import_module(module_name)
    except BucketoptError:
        raise
    except Exception as exc:  # the user's module: any failure is one line
        raise BucketoptError(f"model= (--model) {spec!r}: importing {module_name} failed: "
                             f"{type(exc).__name__}: {exc}", param="model") from None


def _call_factory(factory, label):
    torch = _torch()
    try:
        module = factory()
    except Exception as exc:
        raise BucketoptError(f"model= (--model) {label!r}: building the model failed: "
                             f"{type(exc).__name__}: {exc}", param="model") from None
    if not isinstance(module, torch.nn.Module):
        raise BucketoptError(f"model= (--model) {label!r} must return a torch.nn.Module; got "
                             f"{type(module).__name__}.", param="model")
    return module


def _load_hf(config):
    try:
        import transformers
    except ImportError:
        raise BucketoptError("model='hf:CONFIG' (--model) needs transformers: pip install "
                             "transformers.", param="model") from None
    path = Path(config)
    if not path.exists():
        raise BucketoptError(f"model= (--model) 'hf:{config}': no such config file or "
                             "directory (a local transformers config.json is needed).",
                             param="model")
    try:
        if path.is_file():
            cfg = transformers.AutoConfig.from_pretrained(str(path.parent), local_files_only=True) \
                if path.name == "config.json" else _config_from_file(transformers, path)
        else:
            cfg = transformers.AutoConfig.from_pretrained(str(path), local_files_only=True)
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    except Exception as exc:
        raise BucketoptError(f"model= (--model) 'hf:{config}': building the model failed: "
                             f"{type(exc).__name__}: {exc}", param="model") from None
    return model, _hf_loss, f"hf:{config}", getattr(cfg, "vocab_size", None)


def _config_from_file(transformers, path):

    from ..data.guards import read_json

    data = read_json(path, f"model= (--model) 'hf:{path}'", limit=16 << 20)
    if not isinstance(data, dict) or "model_type" not in data:
        raise BucketoptError(f"model= (--model) 'hf:{path}': the config needs a model_type.",
                             param="model")
    data = dict(data)
    return transformers.AutoConfig.for_model(data.pop("model_type"), **data)


def _vocab_of(module):
    config = getattr(module, "config", None)
    vocab = getattr(config, "vocab_size", None) or getattr(module, "vocab_size", None)
    if vocab:
        return int(vocab)
    torch = _torch()
    for sub in module.modules():
        if isinstance(sub, torch.nn.Embedding):
            return int(sub.num_embeddings)
    return None


def _generic_loss(model, ids):
    torch = _torch()
    out = model(ids)
    loss = getattr(out, "loss", None) if not isinstance(out, torch.Tensor) else out
    if isinstance(loss, torch.Tensor) and loss.ndim == 3 and loss.shape[:2] == ids.shape \
            and loss.shape[2] > int(ids.max()):
        # logits: next-token cross-entropy, as a language-model training step computes (rows
        # of one token have no next token: they predict themselves, the same work)
        if ids.shape[1] < 2:
            return torch.nn.functional.cross_entropy(loss.flatten(0, 1).float(), ids.flatten())
        return torch.nn.functional.cross_entropy(loss[:, :-1].flatten(0, 1).float(),
                                                 ids[:, 1:].flatten())
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        raise BucketoptError("the model's forward(input_ids) must return a scalar loss, an "
                             "object with .loss, or logits of shape (batch, length, vocab); got "
                             f"{type(out).__name__}"
                             + (f" of shape {tuple(out.shape)}" if hasattr(out, "shape") else "")
                             + ".", param="model")
    return loss.reshape(())


def check_loss(loss, size, length) -> None:
    """Refuse a loss that is not finite (nan or inf): such a model trains to nothing and its
    step times say nothing (one line, naming the shape)."""
    torch = _torch()
    value = loss.detach()
    if not bool(torch.isfinite(value).all()):
        raise BucketoptError(
            f"the model's loss is {float(value.float().reshape(-1)[0])} at batch_size={size}, "
            f"padded_len={length}: a model whose loss is not finite (nan or inf) cannot be "
            "trained, so its steps are not timed; check the model (--model), its "
            "initialisation and dtype.", param="model")


def _hf_loss(model, ids):
    if ids.shape[1] < 2:  # no next token to predict: the rows predict themselves
        logits = model(input_ids=ids).logits
        return _torch().nn.functional.cross_entropy(logits.flatten(0, 1).float(), ids.flatten())
    return model(input_ids=ids, labels=ids).loss


class _Status:
    """What the probe has done so far, as the text of its progress line (bucketopt.progress.Stage
    draws it: redrawn on a terminal, a plain line every PROGRESS_EVERY_S seconds elsewhere)."""

    def __init__(self, total, rounds, time_limit):
        self.total, self.rounds, self.time_limit = total, rounds, time_limit
        self.phase, self.round, self.done, self.last = "warming up", 0, 0, None

    def __call__(self) -> str:
        limit = f" (limit {self.time_limit:.0f} s)" if self.time_limit else ""
        if self.phase != "timing":
            return self.phase + limit
        bounded = self.rounds < MAX_ROUNDS
        of = f"/{self.rounds}" if bounded else ""
        steps = f"/{self.total}" if bounded else ""
        last = self.last
        shape = f", last {last[0]}x{last[1]} {last[2] * 1e3:.1f} ms" if last else ""
        return f"round {self.round}{of}, {self.done}{steps} steps timed{limit}{shape}"


def _device(torch, device):
    if device not in DEVICES:
        raise BucketoptError(f"device= (--device) must be one of {', '.join(DEVICES)}; got "
                             f"{device!r}.", param="device")
    if device == "cuda" and not torch.cuda.is_available():
        raise BucketoptError("device='cuda' (--device cuda): torch sees no CUDA device "
                             "(torch.cuda.is_available() is False).", param="device")
    if device == "mps" and not (getattr(torch.backends, "mps", None)
                                and torch.backends.mps.is_available()):
        raise BucketoptError("device='mps' (--device mps): the MPS backend is not available.",
                             param="device")
    return torch.device(device)


def _device_name(torch, device, threads) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "mps":
        return "Apple MPS"
    name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"CPU: {name}, {threads} thread{'s' if threads != 1 else ''}"


def _load_average() -> float | None:
    """The 1-minute load average (None where the system keeps none)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def _sync(torch, device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def memory_budget(batch_sizes, padded_lens, peak_bytes, *, total_bytes, fraction, max_length):
    """The largest token budget whose peak memory fits ``fraction`` of ``total_bytes``.

    Peak memory is fitted as ``m0 + m1 s L + m2 s L^2`` (non-negative least squares on the
    measured peaks); at a budget T the longest rows are the worst case, ``s L = T`` at
    ``L = max_length``, so ``T = (fraction x total - m0) / (m1 + m2 max_length)``.

    Examples
    --------
    >>> s = [1, 4, 16, 1, 4, 16]; L = [128, 128, 128, 512, 512, 512]
    >>> peak = [1e9 + 1e4 * a * b for a, b in zip(s, L)]
    >>> memory_budget(s, L, peak, total_bytes=2e9, fraction=0.5, max_length=512)["max_token_budget"]
    0
    >>> memory_budget(s, L, peak, total_bytes=4e9, fraction=0.5, max_length=512)["max_token_budget"]
    100000
    """
    from scipy.optimize import nnls

    s = np.asarray(batch_sizes, dtype=np.float64)
    length = np.asarray(padded_lens, dtype=np.float64)
    peak = np.asarray(peak_bytes, dtype=np.float64)
    design = np.stack([np.ones_like(s), s * length, s * length * length], axis=1)
    norms = np.linalg.norm(design, axis=0)
    norms[norms == 0] = 1.0
    coef, _ = nnls(design / norms, peak)
    m0, m1, m2 = coef / norms
    room = fraction * float(total_bytes) - m0
    per_token = m1 + m2 * max_length
    if room <= 0:
        budget = 0
    elif per_token <= 0:
        budget = None
    else:
        budget = int(room / per_token)
    predicted = m0 + m1 * s * length + m2 * s * length * length
    shapes = {}
    for a, b, measured, guess in zip(s, length, peak, predicted):
        shapes.setdefault((int(a), int(b)), []).append((float(measured), float(guess)))
    per_shape = [{"batch_size": a, "padded_len": b,
                  "measured_peak_bytes": float(np.median([x[0] for x in v])),
                  "predicted_peak_bytes": v[0][1],
                  "rel_error": v[0][1] / float(np.median([x[0] for x in v])) - 1
                  if np.median([x[0] for x in v]) > 0 else None}
                 for (a, b), v in sorted(shapes.items())]
    largest = None
    if room > 0 and per_token > 0:  # the memory model's batch size at every probed length
        from .memory import MemoryModel

        try:
            model = MemoryModel(m0, m1, m2, float(total_bytes), fraction)
            probed = sorted({int(b) for b in length})
            largest = {str(b): int(x) for b, x in zip(probed, model.batch_size(probed))}
        except BucketoptError:
            largest = None
    errors = [abs(e["rel_error"]) for e in per_shape if e["rel_error"] is not None]
    return {"total_bytes": int(total_bytes), "fraction": float(fraction),
            "fit_bytes": {"m0": float(m0), "m1_per_token": float(m1),
                          "m2_per_token_x_length": float(m2)},
            "max_token_budget": budget, "at_length": int(max_length),
            "largest_measured_peak_bytes": int(peak.max()) if peak.size else 0,
            "shapes": per_shape,
            "max_rel_error": max(errors) if errors else None,
            "largest_batch_per_length": largest}


def _verify(step, memory, torch) -> list:
    """Run each probed length's largest predicted batch once and record its real peak
    (OOMptimizer-style). CUDA only; an out-of-memory step is reported, not raised."""
    out = []
    for length, size in sorted((int(b), int(x)) for b, x in
                               (memory.get("largest_batch_per_length") or {}).items()):
        if size < 1:
            continue
        fit = memory["fit_bytes"]
        predicted = (fit["m0"] + fit["m1_per_token"] * size * length
                     + fit["m2_per_token_x_length"] * size * length * length)
        entry = {"padded_len": length, "batch_size": size, "predicted_peak_bytes": predicted}
        try:
            _seconds, peak = step(size, length)
            entry.update(measured_peak_bytes=int(peak), oom=False,
                         fits=peak <= memory["fraction"] * memory["total_bytes"])
        except Exception as exc:  # the step itself failed: out of memory, most often
            if "out of memory" not in str(exc).lower():
                raise
            torch.cuda.empty_cache()
            entry.update(measured_peak_bytes=None, oom=True, fits=False)
        out.append(entry)
    return out


@dataclass(frozen=True)
class TimingFit:
    """The cost model fitted to timed steps as :func:`probe` fits it (:func:`fit_timings`):
    ``calibration`` (:class:`bucketopt.Calibration`), the relative error it claims for one
    step (``claimed_error``), the repeats' ``scatter`` (:func:`bucketopt.cost.fitcheck.scatter`)
    and ``warnings`` (a poor fit, unsteady timings)."""

    calibration: object = field(repr=False)
    claimed_error: float
    scatter: dict | None
    warnings: tuple = ()

    def profile(self, *, name, description="", world_size=1, token_budget=None,
                provenance=None):
        """A :class:`~bucketopt.cost.costmodel.Profile` of the fit whose
        ``provenance.probe`` holds the claimed error (what
        :func:`bucketopt.training.verify.claimed_error_of` reads), the scatter and the
        warnings, beside ``provenance`` given."""
        profile = self.calibration.to_profile(name=name, description=description,
                                              world_size=world_size,
                                              token_budget=token_budget)
        merged = dict(profile.provenance)
        merged["probe"] = {**(provenance or {}), "claimed_error": self.claimed_error,
                           "scatter": self.scatter, "warnings": list(self.warnings)}
        return replace(profile, provenance=merged)


def _check_growth(rows, quantile, rounds):
    from .fitcheck import growth_problem

    # read from 3 rounds on (the fast quarter of 3 repeats drops a step another process slowed
    # down)
    flat = growth_problem(rows, quantile) if rounds >= 3 else None
    if flat is not None:
        raise BucketoptError(
            f"{flat}: the timed step does not do the batch's work (a model that ignores "
            "its input, or a device that was not synchronised), so no profile can be "
            "fitted; check --model.", param="model")


def fit_timings(rows, shapes=None, *, pool="low", bootstrap=None, rounds=None, device="cpu",
                threads=1, load=None, cores=None, checked=False) -> TimingFit:
    """Fit the cost model to timed steps exactly as :func:`probe` fits its own: for step times
    measured by other means (a training step of several processes, each timing its share).

    ``rows``: one dict per timed step with ``batch_size``, ``padded_len``, ``seconds`` and
    ``round`` (the interleaved round it ran in); ``shapes``: the designed shapes the claimed
    error is read over (default: those in ``rows``); ``rounds``: complete rounds timed
    (default: the distinct ``round`` values), the step times' growth with the batch being
    checked from 3 on; ``device``, ``threads``, ``load`` (the highest load average seen),
    ``cores``: the machine, named by a poor fit's likely cause. Repeats of a shape are pooled by
    ``pool`` ("low": their 25th percentile; "median").

    Examples
    --------
    >>> rows = [{"batch_size": s, "padded_len": L, "round": r,
    ...          "seconds": 0.002 + 1e-6 * s * L + 1e-9 * s * L * L}
    ...         for r in range(3) for s, L in design_shapes(512, 512)]
    >>> fit = fit_timings(rows)
    >>> round(fit.calibration.alpha * 1e3, 3), fit.warnings
    (2.0, ())
    """
    from .calibration import BOOTSTRAP, POOLS, calibrate
    from .fitcheck import claimed_error, fit_warnings, scatter, timing_warnings

    if pool not in POOLS:
        raise BucketoptError(f"pool= must be one of {', '.join(POOLS)}; got {shown(pool)}.",
                             param="pool")
    rows = list(rows)
    quantile = POOLS[pool]
    if rounds is None:
        rounds = len({row["round"] for row in rows})
    if not checked:
        _check_growth(rows, quantile, rounds)
    if shapes is None:
        shapes = sorted({(row["batch_size"], row["padded_len"]) for row in rows})
    cal = calibrate([r["batch_size"] for r in rows], [r["padded_len"] for r in rows],
                    [r["seconds"] for r in rows],
                    bootstrap=BOOTSTRAP if bootstrap is None else bootstrap, pool=pool)
    warnings = fit_warnings(cal, device=device, threads=threads, load=load, cores=cores,
                            rounds=rounds)
    claim = claimed_error(cal, shapes)
    spread = scatter(rows, quantile)
    warnings = warnings + timing_warnings(spread, claim)
    return TimingFit(calibration=cal, claimed_error=claim, scatter=spread,
                     warnings=tuple(warnings))


class Trainer:
    """A model ready to train, as probe and verify time it: ``step(size, length)`` trains one
    micro-batch of random token ids (zero_grad, forward, backward, AdamW step, the device
    synchronised before and after) and returns (seconds, CUDA peak bytes or None). A loss
    that is not finite, or a step that fails (out of memory), is one :class:`BucketoptError`.

    ``model`` is what :func:`load_model` takes; ``vocab_size`` overrides the model's."""

    def __init__(self, model, *, device="cpu", dtype="float32", lr=1e-5, vocab_size=None,
                 seed=0):
        torch = self.torch = _torch()
        dev = self.device = _device(torch, device)
        net, self.loss_fn, self.label, vocab = load_model(model)
        vocab = vocab_size if vocab_size is not None else vocab
        if vocab is None:
            raise BucketoptError("could not find the model's vocabulary size (no "
                                 "config.vocab_size and no nn.Embedding): pass vocab_size= "
                                 "(--vocab-size).", param="vocab_size")
        self.vocab = _positive(vocab, "vocab_size (--vocab-size)", 2**31)
        try:
            self.net = net.to(device=dev, dtype=getattr(torch, dtype))
            self.net.train()
            self.optimizer = torch.optim.AdamW(
                [p for p in self.net.parameters() if p.requires_grad], lr=lr)
        except Exception as exc:
            raise BucketoptError(f"could not move the model to {device} ({dtype}): "
                                 f"{type(exc).__name__}: {exc}") from None
        if not self.optimizer.param_groups[0]["params"]:
            raise BucketoptError("the model has no trainable parameters: nothing to train.",
                                 param="model")
        self.gen = torch.Generator(device="cpu").manual_seed(int(seed))

    def _step(self, size, length):
        torch, dev = self.torch, self.device
        ids = torch.randint(0, self.vocab, (size, length), generator=self.gen).to(dev)
        _sync(torch, dev)
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats(dev)
        t0 = time.perf_counter()
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.net, ids)
        loss.backward()
        self.optimizer.step()
        _sync(torch, dev)
        seconds = time.perf_counter() - t0
        peak = int(torch.cuda.max_memory_allocated(dev)) if dev.type == "cuda" else None
        check_loss(loss, size, length)
        return seconds, peak

    def device_name(self) -> str:
        """The device in words (a CPU: its model and the torch threads now set)."""
        return _device_name(self.torch, self.device, self.torch.get_num_threads())

    def step(self, size, length):
        """Train one (size, length) batch: (seconds, CUDA peak bytes or None)."""
        try:
            return self._step(size, length)
        except BucketoptError:
            raise
        except Exception as exc:
            hint = ""
            if "out of memory" in str(exc).lower():
                hint = "; lower token_budget (--token-budget)"
            raise BucketoptError(f"the training step failed at batch_size={size}, padded_len="
                                 f"{length}: {type(exc).__name__}: {str(exc).splitlines()[0]}"
                                 f"{hint}") from None


def probe(model, *, token_budget, max_length, device="cpu", dtype="float32", time_limit=None,
          repeats=None, warmup=WARMUP, seed=0, vocab_size=None, lr=1e-5,
          memory_fraction=MEMORY_FRACTION, name=None, progress=None, shapes=None,
          bootstrap=None, threads=None, holdout=None, verify=False,
          pool="low") -> ProbeResult:
    """Time real training steps of ``model`` and fit the cost model to them.

    Parameters
    ----------
    model : str, torch.nn.Module or callable
        ``"module:function"``, ``"path/to/file.py:function"`` or ``"hf:CONFIG"`` (see
        :func:`load_model`), a module, or a function returning one.
    token_budget, max_length : int
        The micro-batch token budget and the longest padded length to probe.
    device : {"cpu", "cuda", "mps"}
    dtype : {"float32", "bfloat16"}
    time_limit : float, optional
        Seconds for the whole probe (building the model and the fit included); steps stop when
        the next one would overrun it.
    repeats : int, optional
        Rounds over all shapes (each in a fresh random order). Default: 3 without
        ``time_limit``, as many as fit with one.
    warmup : int
        Untimed steps on the largest shape before the untimed round over every shape (at most
        1,000, as ``repeats``).
    threads : int, optional
        CPU threads for torch during the probe (``torch.set_num_threads``; restored after).
        On a shared machine one thread per process often times more steadily.
    vocab_size : int, optional
        Token ids are drawn below it (default: the model's config or first embedding).
    shapes : list of (batch_size, padded_len), optional
        Time these instead of :func:`design_shapes`.
    holdout : list of (batch_size, padded_len), optional
        Validation shapes, timed in the same interleaved rounds (so under the same machine
        conditions) but never given to the fit, nor written to the measurements: the result's
        ``holdout`` compares their measured median with the profile's prediction.
    progress : bool, optional
        The progress line on stderr (None: on a terminal).
    pool : {"low", "median"}
        How the repeats of a shape are pooled before the fit: "low" (the default), their 25th
        percentile, the figure other processes' load inflates least; "median".

    Examples
    --------
    >>> import torch                                            # doctest: +SKIP
    >>> net = torch.nn.Sequential(torch.nn.Embedding(100, 16),
    ...                           torch.nn.Linear(16, 100))     # doctest: +SKIP
    >>> result = probe(net, token_budget=512, max_length=64)    # doctest: +SKIP
    >>> result.profile.save("cpu.json")                         # doctest: +SKIP
    """
    start = time.monotonic()
    token_budget = _positive(token_budget, "token_budget (--token-budget)", PROBE_TOKEN_LIMIT)
    max_length = _positive(max_length, "max_length (--max-length)", PROBE_TOKEN_LIMIT)
    if repeats is not None:
        repeats = _positive(repeats, "repeats (--repeats)", MAX_ROUNDS)
    rounds = repeats if repeats is not None else (REPEATS if time_limit is None else MAX_ROUNDS)
    if threads is not None:
        threads = _positive(threads, "threads (--threads)", 4096)
    if isinstance(warmup, bool) or not isinstance(warmup, (int, np.integer)) or warmup < 0:
        raise BucketoptError(f"warmup (--warmup) must be an integer >= 0; got {shown(warmup)}.",
                             param="warmup")
    if warmup > MAX_WARMUP:  # untimed steps: a billion of them would never end
        raise BucketoptError(f"warmup (--warmup) must be at most {MAX_WARMUP:,} steps; got "
                             f"{shown(warmup)}.", param="warmup")
    if time_limit is not None and (
            isinstance(time_limit, bool) or not isinstance(time_limit, (int, float))
            or not math.isfinite(time_limit) or time_limit <= 0):
        raise BucketoptError(f"time_limit (--time-limit) must be a number of seconds > 0; "
                             f"got {time_limit!r}.", param="time_limit")
    from .calibration import POOLS

    if pool not in POOLS:
        raise BucketoptError(f"pool= must be one of {', '.join(POOLS)}; got {shown(pool)}.",
                             param="pool")
    quantile = POOLS[pool]
    if dtype not in DTYPES:
        raise BucketoptError(f"dtype= (--dtype) must be one of {', '.join(DTYPES)}; got "
                             f"{dtype!r}.", param="dtype")
    if verify and str(device) != "cuda" and not str(device).startswith("cuda:"):
        raise BucketoptError("probe --verify runs the predicted largest batches and reads their "
                             "peak memory on CUDA: memory is not measured on "
                             f"{device!r} (use --device cuda).")
    if isinstance(memory_fraction, bool) or not isinstance(memory_fraction, (int, float)) \
            or not 0 < memory_fraction <= 1:
        raise BucketoptError(f"memory_fraction (--memory-fraction) must be in (0, 1]; got "
                             f"{memory_fraction!r}.", param="memory_fraction")
    if shapes is None:
        shapes = design_shapes(token_budget, max_length)
    else:
        shapes = [(_positive(s, "shapes batch_size", PROBE_TOKEN_LIMIT),
                   _positive(L, "shapes padded_len", max_length)) for s, L in shapes]
        if any(s * L > token_budget for s, L in shapes):
            raise BucketoptError("every shape must hold at most token_budget tokens.",
                                 param="token_budget")
    holdout = [] if holdout is None else [
        (_positive(s, "holdout batch_size", PROBE_TOKEN_LIMIT),
         _positive(L, "holdout padded_len", PROBE_TOKEN_LIMIT)) for s, L in holdout]
    fitted = set(shapes)
    plan = list(shapes) + [s for s in dict.fromkeys(holdout) if s not in fitted]
    trainer = Trainer(model, device=device, dtype=dtype, lr=lr, vocab_size=vocab_size,
                      seed=seed)
    torch, dev, label = trainer.torch, trainer.device, trainer.label
    guarded = trainer.step

    old_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    rng = np.random.default_rng(seed)
    status = _Status(len(shapes) * rounds, rounds, time_limit)
    if progress is None:  # the Python default: only on a terminal (the CLI: unless -q)
        progress = bool(getattr(sys.stderr, "isatty", None) and sys.stderr.isatty())
    rows, last, stopped, rounds_done = [], None, False, 0
    held = {s: [] for s in plan if s not in fitted}
    estimate = {}
    reserve = FIT_RESERVE_S + (0.02 * time_limit if time_limit else 0.0)
    load = [_load_average()]
    try:
        # Read while the probe's own thread setting holds (it is restored after).
        threads_used = torch.get_num_threads()
        device_name = _device_name(torch, dev, threads_used)
        with Stage("probe", enabled=bool(progress), delay=PROGRESS_DELAY_S,
                   every=PROGRESS_EVERY_S, status=status):
            largest = max(shapes, key=lambda sl: (sl[0] * sl[1] * sl[1], sl[0] * sl[1]))
            for _ in range(int(warmup)):
                if time_limit is not None and time.monotonic() - start + estimate.get(
                        largest, 0.0) + reserve > time_limit:
                    break
                seconds, _peak = guarded(*largest)
                estimate[largest] = seconds
            for i in rng.permutation(len(plan)):  # the first step of each shape, untimed
                if time_limit is not None and time.monotonic() - start + max(
                        estimate.values(), default=0.0) + reserve > time_limit:
                    break
                estimate[plan[i]] = guarded(*plan[i])[0]
            status.phase = "timing"
            for r in range(rounds):
                status.round = r + 1
                for i in rng.permutation(len(plan)):
                    shape = plan[i]
                    if time_limit is not None:
                        guess = estimate.get(shape, max(estimate.values(), default=0.0))
                        if time.monotonic() - start + guess + reserve > time_limit:
                            stopped = True
                            break
                    seconds, peak = guarded(*shape)
                    estimate[shape] = seconds
                    if shape not in fitted:
                        held[shape].append(float(seconds))
                        continue
                    rows.append({"batch_size": shape[0], "padded_len": shape[1],
                                 "seconds": float(seconds), "round": r + 1,
                                 "peak_memory_bytes": peak})
                    last = (shape[0], shape[1], seconds)
                    status.done, status.last = len(rows), last
                if stopped:
                    break
                rounds_done = r + 1
            load.append(_load_average())
            measured_shapes = {(row["batch_size"], row["padded_len"]) for row in rows}
            _check_growth(rows, quantile, rounds_done)
            if len(rows) < 6 or len(measured_shapes) < 3:
                raise BucketoptError(
                    f"the probe timed {len(rows)} steps over {len(measured_shapes)} shapes before "
                    f"time_limit={time_limit} s (--time-limit) ran out; the fit needs at least 6 "
                    "over 3 shapes: raise --time-limit, or lower --token-budget / --max-length.",
                    param="time_limit",
                )
            status.phase = "fitting"
            known = [x for x in load if x is not None]
            fit = fit_timings(rows, shapes, pool=pool, bootstrap=bootstrap, rounds=rounds_done,
                              device=dev.type, threads=threads_used,
                              load=max(known) if known else None, cores=os.cpu_count(),
                              checked=True)
            cal = fit.calibration
    finally:
        torch.set_num_threads(old_threads)
    if progress:
        sys.stderr.write(f"probe: {time.monotonic() - start:.0f} s, "
                         f"{rounds_done} round(s), {len(rows)} steps "
                         f"timed" + (" (time limit reached)" if stopped else "") + "\n")
        sys.stderr.flush()
    from .fitcheck import timing_warnings

    holdout_report = None
    if held:
        entries = []
        for (size, length), times in held.items():
            if not times:
                continue
            measured = float(np.quantile(times, quantile))  # pooled as the fit's shapes
            predicted = cal.alpha + size * length * (cal.beta + cal.gamma * length)
            entries.append({"batch_size": size, "padded_len": length, "repeats": len(times),
                            "measured_s": measured, "measured_median_s": float(np.median(times)),
                            "predicted_s": float(predicted),
                            "rel_error": float(predicted / measured - 1)})
        errors = np.abs([e["rel_error"] for e in entries]) if entries else np.empty(0)
        holdout_report = {
            "shapes": entries,
            "median_rel_error": float(np.median(errors)) if errors.size else None,
            "max_rel_error": float(errors.max()) if errors.size else None,
        }
    claim, spread = fit.claimed_error, fit.scatter
    warnings = list(fit.warnings) + timing_warnings(None, claim, holdout_report)
    memory = None
    if dev.type == "cuda":
        total_bytes = torch.cuda.get_device_properties(dev).total_memory
        memory = memory_budget([r["batch_size"] for r in rows], [r["padded_len"] for r in rows],
                               [r["peak_memory_bytes"] for r in rows], total_bytes=total_bytes,
                               fraction=memory_fraction, max_length=max_length)
        if verify:
            memory["verify"] = _verify(trainer._step, memory, torch)
    elapsed = time.monotonic() - start
    profile_name = name or f"probe-{dev.type}"
    profile = cal.to_profile(name=profile_name,
                             description=f"{label} on {device_name}, {dtype}, measured by "
                                         "bucketopt probe (one device, no data parallelism)",
                             world_size=1, token_budget=token_budget)
    provenance = dict(profile.provenance)
    provenance["probe"] = {
        "model": label, "device": dev.type, "device_name": device_name, "dtype": dtype,
        "torch": torch.__version__, "python": platform.python_version(),
        "token_budget": token_budget, "max_length": max_length, "shapes": len(shapes),
        "rounds": rounds_done, "warmup": int(warmup), "seed": int(seed),
        "threads": threads_used,
        "elapsed_s": elapsed, "stopped_by_time_limit": stopped, "memory": memory,
        "warnings": warnings, "pool": pool, "claimed_error": claim, "scatter": spread,
        "step": "zero_grad + forward + backward + AdamW step, device synchronised",
    }
    profile = replace(profile, provenance=provenance)
    return ProbeResult(model=label, device=dev.type, device_name=device_name, dtype=dtype,
                       token_budget=token_budget, max_length=max_length,
                       shapes=tuple(tuple(s) for s in shapes), measurements=tuple(rows),
                       calibration=cal, profile=profile, rounds=rounds_done,
                       elapsed_s=elapsed, stopped_by_time_limit=stopped, memory=memory,
                       holdout=holdout_report, warnings=tuple(warnings), pool=pool,
                       claimed_error=claim, scatter=spread)
