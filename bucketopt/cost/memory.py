"""Batch sizes from a memory model: the one place that defines every bucket's batch size.

Peak memory of one micro-batch of ``s`` rows padded to length ``b`` is modelled as
``m0 + m1 s b + m2 s b^2`` bytes (m0: weights, gradients, optimizer state; m1: activations per
token; m2: what grows with the square of the length, e.g. eager attention scores). A bucket
with upper edge ``b`` then holds B(b) = the largest ``s`` with
``m0 + m1 s b + m2 s b^2 <= headroom x capacity``, and ``s b <= T`` as well when a token budget
``T`` is also given. Without a memory model B(b) = floor(T / b). Either way B is a
non-increasing function of the edge, which is all the DPs need (docs/method.md).

:func:`batch_sizes` is the rule; everything that needs a bucket's batch size calls it (or reads
``Solution.batch_sizes``, which it filled).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import BucketoptError

# Default fraction of the card's memory a plan may fill (NeMo's OOMptimizer uses the same).
HEADROOM = 0.9
# Coefficients and capacities above this many bytes (an exabyte) are refused as nonsense.
MAX_BYTES = 1e18
# Batch sizes are capped so that s x b never passes 2**60 (int64 padded-token arithmetic).
TOKEN_LIMIT = 1 << 60
GIB = 1 << 30


def _bytes(value, name: str, source: str, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise BucketoptError(f"{source}: `{name}` must be a number of bytes; got {value!r}.")
    value = float(value)
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        rule = "> 0" if positive else ">= 0"
        raise BucketoptError(f"{source}: `{name}` must be a finite number of bytes {rule}; "
                             f"got {value!r}.")
    if value > MAX_BYTES:
        raise BucketoptError(f"{source}: `{name}`={value:.3g} bytes is above 1e18 (an exabyte): "
                             "give bytes, not bits or a product.")
    return value


def check_headroom(headroom) -> float:
    try:
        value = float(headroom)
    except (TypeError, ValueError):
        raise BucketoptError(f"`memory_headroom` must be a number in (0, 1]; got {headroom!r}.") \
            from None
    if isinstance(headroom, bool) or not (0.0 < value <= 1.0):
        raise BucketoptError(f"`memory_headroom` must be in (0, 1]; got {headroom!r}.")
    return value


@dataclass(frozen=True)
class MemoryModel:
    """Peak bytes ``m0 + m1 s b + m2 s b^2`` of a micro-batch of ``s`` rows of length ``b``, and
    the ``capacity`` (bytes) a plan may fill ``headroom`` of.

    Examples
    --------
    >>> mm = MemoryModel(m0=10e9, m1=1e5, m2=10.0, capacity=96e9)
    >>> mm.batch_size([1024, 4096]).tolist()
    [588, 69]
    >>> mm.peak_bytes(69, 4096) <= 0.9 * 96e9 < mm.peak_bytes(70, 4096)
    True
    """

    m0: float
    m1: float
    m2: float
    capacity: float
    headroom: float = HEADROOM
    source: str = field(default="memory", compare=False)

    def __post_init__(self):
        src = self.source
        for name in ("m0", "m1", "m2"):
            object.__setattr__(self, name, _bytes(getattr(self, name), name, src))
        object.__setattr__(self, "capacity", _bytes(self.capacity, "capacity", src,
                                                    positive=True))
        object.__setattr__(self, "headroom", check_headroom(self.headroom))
        if self.m1 == 0 and self.m2 == 0:
            raise BucketoptError(f"{src}: m1 and m2 are both 0: memory would not grow with the "
                                 "batch, so it cannot set a batch size.")
        if self.m0 >= self.usable:
            raise BucketoptError(
                f"{src}: the fixed part m0={self.m0:.4g} bytes does not fit headroom x capacity "
                f"= {self.headroom:g} x {self.capacity:.4g} = {self.usable:.4g} bytes: not even "
                "one sample fits.")

    @property
    def usable(self) -> float:
        """headroom x capacity, the bytes a micro-batch's peak may reach."""
        return self.headroom * self.capacity

    def peak_bytes(self, sizes, edges):
        """Predicted peak bytes of micro-batches of ``sizes`` rows padded to ``edges``."""
        s = np.asarray(sizes, dtype=np.float64)
        b = np.asarray(edges, dtype=np.float64)
        out = self.m0 + self.m1 * s * b + self.m2 * s * b * b
        return float(out) if out.ndim == 0 else out

    def batch_size(self, edges, token_budget=None) -> np.ndarray:
        """B(b) for every edge (int64): the largest s whose peak fits (0 where none does),
        at most ``token_budget // b`` when a budget is given, and never s b > 2**60."""
        b = np.maximum(np.asarray(edges, dtype=np.int64), 1)
        bf = b.astype(np.float64)
        per_row = self.m1 * bf + self.m2 * bf * bf
        room = self.usable - self.m0
        cap = TOKEN_LIMIT // b if token_budget is None else np.int64(token_budget) // b
        with np.errstate(over="ignore", divide="ignore"):
            q = np.floor(room / per_row)
        q = np.where(np.isfinite(q), np.minimum(q, 2.0**62), 2.0**62).astype(np.int64)
        guess = np.minimum(np.maximum(q, 0), cap).astype(np.int64)

        def fits(rows):  # the peak formula itself decides (0 rows always fit: m0 < usable)
            return (rows <= cap) & (self.peak_bytes(rows, bf) <= self.usable)

        # the float quotient is usually exact or one off, but (headroom x capacity - m0) can
        # lose digits: bisect from the guess's bracket [lo, hi), lo fits and hi does not
        at = fits(guess)
        lo = np.where(at, guess, 0)
        hi = np.where(at, np.where(fits(guess + 1), cap + 1, guess + 1), guess)
        hi = np.maximum(hi, lo + 1)
        while np.any(hi - lo > 1):
            mid = lo + (hi - lo) // 2
            ok = fits(mid)
            lo = np.where(ok, mid, lo)
            hi = np.where(ok, hi, mid)
        return lo.astype(np.int64)

    def longest_edge(self) -> int:
        """The longest edge at which one sample still fits (0 if none; at most 2**60)."""
        lo, hi = 0, TOKEN_LIMIT + 1  # one row of length lo fits (0: trivially), of hi not
        while hi - lo > 1:
            mid = lo + (hi - lo) // 2
            if self.peak_bytes(1, mid) <= self.usable:
                lo = mid
            else:
                hi = mid
        return lo

    def to_dict(self) -> dict:
        return {"m0": self.m0, "m1": self.m1, "m2": self.m2, "capacity": self.capacity,
                "headroom": self.headroom, "usable_bytes": self.usable}


def _from_mapping(data: dict, source: str, capacity, headroom) -> MemoryModel:
    """A flat {m0, m1, m2, capacity} dict, a profile holding one under "memory", or a profile
    written by `bucketopt probe` on CUDA (its fit under provenance.probe.memory)."""
    if not isinstance(data, dict):
        raise BucketoptError(f"{source} must hold a JSON object; got {type(data).__name__}.")
    if "m0" not in data:
        inner = data.get("memory")
        if inner is None:
            inner = ((data.get("provenance") or {}).get("probe") or {}).get("memory") \
                if isinstance(data.get("provenance"), dict) else None
        if isinstance(inner, dict) and "fit_bytes" in inner:  # probe's memory report
            fit = inner["fit_bytes"] if isinstance(inner["fit_bytes"], dict) else {}
            inner = {"m0": fit.get("m0"), "m1": fit.get("m1_per_token"),
                     "m2": fit.get("m2_per_token_x_length"),
                     "capacity": inner.get("total_bytes")}
        if not isinstance(inner, dict):
            raise BucketoptError(
                f"{source} holds no memory fit: give a JSON or dict with m0, m1, m2 (bytes) and "
                "capacity, or a profile written by `bucketopt probe` on a GPU.")
        data = inner
    missing = [k for k in ("m0", "m1", "m2") if data.get(k) is None]
    if missing:
        raise BucketoptError(f"{source} lacks the key(s) {', '.join(missing)} (bytes).")
    if capacity is None:
        capacity = data.get("capacity")
        if capacity is None:
            raise BucketoptError(f"{source} has no `capacity`: give the card's memory "
                                 "(gpu_memory= in GB, --gpu-memory GB).")
    if headroom is None:
        headroom = data.get("headroom", HEADROOM)
    return MemoryModel(data["m0"], data["m1"], data["m2"], capacity, headroom, source)


def load_memory(memory, *, gpu_memory=None, headroom=None) -> MemoryModel | None:
    """A :class:`MemoryModel` from a dict, a JSON path, a profile name or path holding a memory
    fit, or a MemoryModel; ``gpu_memory`` (GB, 2**30 bytes) overrides its capacity,
    ``headroom`` (default 0.9) its headroom. None gives None.

    Examples
    --------
    >>> load_memory({"m0": 1e9, "m1": 1e4, "m2": 0, "capacity": 8e9}).batch_size([1000]).tolist()
    [620]
    """
    if memory is None:
        if gpu_memory is not None:
            raise BucketoptError("`gpu_memory` (--gpu-memory) needs a memory model "
                                 "(memory=, --memory).")
        return None
    capacity = None
    if gpu_memory is not None:
        if isinstance(gpu_memory, bool) or not isinstance(gpu_memory, (int, float, np.number)) \
                or not math.isfinite(float(gpu_memory)) or not 0 < float(gpu_memory) <= 1e9:
            raise BucketoptError(f"`gpu_memory` (--gpu-memory) must be a number of GB in "
                                 f"(0, 1e9]; got {gpu_memory!r}.")
        capacity = float(gpu_memory) * GIB
    if isinstance(memory, MemoryModel):
        if capacity is None and headroom is None:
            return memory
        return MemoryModel(memory.m0, memory.m1, memory.m2,
                           memory.capacity if capacity is None else capacity,
                           memory.headroom if headroom is None else headroom, memory.source)
    if isinstance(memory, dict):
        return _from_mapping(memory, "memory", capacity, headroom)
    if callable(getattr(memory, "batch_size", None)) and not isinstance(memory, (str, Path)):
        # any rule object with batch_size(edges, token_budget) -> non-increasing int64 array,
        # peak_bytes(sizes, edges) and to_dict() (tests give batch-size tables this way)
        if capacity is not None or headroom is not None:
            raise BucketoptError("gpu_memory and memory_headroom apply to a memory model with "
                                 "m0, m1, m2 and capacity.")
        return memory
    if not isinstance(memory, (str, Path)):
        raise BucketoptError(f"`memory` must be a dict, a JSON file path or a profile name; got "
                             f"{type(memory).__name__}.")
    text = str(memory)
    from .costmodel import _profiles_dir, available_profiles

    if text in available_profiles():
        data = json.loads((_profiles_dir() / f"{text}.json").read_text())
        return _from_mapping(data, f"profile {text!r}", capacity, headroom)
    path = Path(text)
    try:
        if not path.is_file():
            raise BucketoptError(f"memory {text[:200]!r} is neither a shipped profile nor a JSON "
                                 "file.")
        if path.stat().st_size > 1 << 24:
            raise BucketoptError(f"memory file {text[:200]} is over 16 MB: not a memory model.")
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise BucketoptError(f"memory file {text[:200]} is not readable JSON: {exc}") from None
    return _from_mapping(data, f"memory file {text[:200]}", capacity, headroom)


def batch_sizes(edges, token_budget=None, memory: MemoryModel | None = None):
    """The batch size of a bucket at every edge (int64 array), or None with neither rule.

    Without ``memory``: floor(T / b), an edge above T an error. With it: the memory model's
    B(b) (and at most floor(T / b) when ``token_budget`` is given too); an edge where not one
    sample fits is an error.
    """
    edges = np.asarray(edges, dtype=np.int64)
    if memory is None:
        if token_budget is None:
            return None
        over = edges > token_budget
        if over.any():
            b = int(edges[np.flatnonzero(over)[0]])
            raise BucketoptError(
                f"bucket edge {b} exceeds token_budget={token_budget}: a batch of that bucket "
                "cannot hold even one sample.")
        return token_budget // edges
    sizes = memory.batch_size(edges, token_budget)
    if sizes.size and sizes.min() < 1:
        b = int(edges[np.flatnonzero(sizes < 1)[0]])
        if token_budget is not None and b > token_budget:
            raise BucketoptError(
                f"bucket edge {b} exceeds token_budget={token_budget}: a batch of that bucket "
                "cannot hold even one sample.")
        raise BucketoptError(
            f"bucket edge {b}: one sample of that length needs {memory.peak_bytes(1, b):.4g} "
            f"bytes, above headroom x capacity = {memory.usable:.4g} (the memory model's "
            f"longest edge is {memory.longest_edge():,}); use max_length= (--max-length) or a "
            "larger capacity.")
    return sizes
