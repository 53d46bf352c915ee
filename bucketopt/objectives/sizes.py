"""The batch-size rule: the one place that defines every bucket's batch size (every objective
reads it; loading a memory model from files and profiles is :mod:`bucketopt.cost.memory`).

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

import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import BucketoptError
from ..validate import TOKEN_LIMIT, check_edge_fits, check_number, shown

# Default fraction of the card's memory a plan may fill (NeMo's OOMptimizer uses the same).
HEADROOM = 0.9
# The largest card a memory model may describe, in GiB: the top of gpu_memory= (--gpu-memory).
MAX_GPU_GIB = 1e9
# Coefficients and capacities above this many bytes are refused as nonsense: the capacity of
# the largest gpu_memory= (1e9 GiB, about 1.07e18 bytes), so the two limits agree.
MAX_BYTES = MAX_GPU_GIB * (1 << 30)
# Batch sizes are capped so that s x b never passes TOKEN_LIMIT (2**60: int64 padded-token
# arithmetic; defined once, with the histogram's totals).
GIB = 1 << 30


def _bytes(value, name: str, source: str, *, positive: bool = False) -> float:
    rule = "> 0" if positive else ">= 0"
    if isinstance(value, (bool, np.bool_)) or \
            not isinstance(value, (int, float, np.integer, np.floating)):
        raise BucketoptError(f"{source}: `{name}` must be a number of bytes; got {shown(value)}.")
    try:
        value = float(value)
    except OverflowError:  # an integer of hundreds of digits
        value = math.inf
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        if value == math.inf:
            raise BucketoptError(f"{source}: `{name}` must be at most {MAX_BYTES:.4g} bytes "
                                 "(1e9 GiB); got an infinite or huge number.")
        raise BucketoptError(f"{source}: `{name}` must be a finite number of bytes {rule}; "
                             f"got {shown(value)}.")
    if value > MAX_BYTES:
        raise BucketoptError(f"{source}: `{name}`={value:.4g} bytes is above {MAX_BYTES:.4g} "
                             "(1e9 GiB, the largest card): give bytes, not bits or "
                             "a product.")
    return value


def check_headroom(headroom) -> float:
    """``memory_headroom``: a number in (0, 1]; a string ("0.5"), a bool, NaN or a huge integer
    is refused, never coerced."""
    return check_number(headroom, "memory_headroom", low=0.0, high=1.0, low_open=True)


@dataclass(frozen=True)
class MemoryModel:
    """Peak bytes ``m0 + m1 s b + m2 s b^2`` of a micro-batch of ``s`` rows of length ``b``, and
    the ``capacity`` (bytes) a plan may fill ``headroom`` of.

    Examples
    --------
    >>> mm = MemoryModel(m0=10e9, m1=1e5, m2=10.0, capacity=96e9)
    >>> mm.batch_size([1024, 4096]).tolist()
    [676, 132]
    >>> mm.peak_bytes(132, 4096) <= 0.9 * 96e9 < mm.peak_bytes(133, 4096)
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
            check_edge_fits(edges[np.flatnonzero(over)[0]], token_budget)
        return token_budget // edges
    sizes = memory.batch_size(edges, token_budget)
    if sizes.size and sizes.min() < 1:
        b = int(edges[np.flatnonzero(sizes < 1)[0]])
        check_edge_fits(b, token_budget)
        raise BucketoptError(
            f"bucket edge {b}: one sample of that length needs {memory.peak_bytes(1, b):.4g} "
            f"bytes, above headroom x capacity = {memory.usable:.4g} (the memory model's "
            f"longest edge is {memory.longest_edge():,}); use max_length= (--max-length) or a "
            "larger capacity.", param=None)
    return sizes
