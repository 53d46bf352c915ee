"""What an objective hands the certified DP, and what the DP hands back.

An objective the certified DP can prove (:func:`.dp.certified_layers`) offers four things,
declared with their contracts on :class:`bucketopt.objectives.base.Objective`:

- ``pricing()`` -> :class:`Pricing`: the arrays and numbers that price any bucket exactly
  (the lengths' prefix tables, the candidate groups, the batch sizes, the cost model);
- ``relaxation(cells)`` -> :class:`Relaxation`: lower bounds of every bucket, lines in the
  prefix sample count P[i] of its start, one row of lines per cell of starts;
- ``rows(cells)`` -> :class:`Rows`: the tighter bounds the exact layers read (the fewest-rows,
  full-steps, mean and top bounds);
- ``seed_chains(kmax, ks)``: good covers found elsewhere, where the DP places its cells.

The DP answers with an :class:`Optimality` for every k (exact, or a lower bound and a gap).
Every structure here is a ``NamedTuple`` of arrays and numbers, which the numba kernels take
as one argument and read by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

# The smallest normal float: a lower bound below it is reported as 0 (Optimality.bound).
SMALLEST_NORMAL = float(np.finfo(np.float64).tiny)
# The padding codes of Pricing.pad_code.
EDGE_PADDING = 0
DYNAMIC_PADDING = 1


class Pricing(NamedTuple):
    """The exact cost of any bucket (i, j] of candidate groups: the samples of groups i+1..j,
    padded (``pad_code``: :data:`EDGE_PADDING` to the edge, :data:`DYNAMIC_PADDING` to each
    batch's longest) and run in steps of ``world`` batches of ``sizes[j]`` rows, each step
    costing alpha + beta x (rows x length) + gamma x (rows x length^2) on its slowest rank
    (:mod:`bucketopt.objectives._time_kernels`)."""

    values: np.ndarray  # the distinct lengths, increasing (int64)
    pcv: np.ndarray  # samples of the lengths below values[v] (int64, one more entry)
    pq1: np.ndarray  # their sum of lengths (float64)
    pq2: np.ndarray  # and of squared lengths (float64)
    group_end: np.ndarray  # group j holds values[group_end[j - 1]:group_end[j]] (int64)
    edges: np.ndarray  # group j's edge (int64)
    sizes: np.ndarray  # rows a batch at group j's edge (int64)
    world: int  # ranks a step waits for
    alpha: float
    beta: float
    gamma: float
    pad_code: int
    lf_hi: np.ndarray  # log(a!) in two parts, for the walks (dynamic padding)
    lf_lo: np.ndarray
    pascal: np.ndarray  # binomials of the sweeps (objectives._batch_sweep.pascal_table)


class EdgePricing(Pricing):
    """:class:`Pricing` of edge padding: its type tells the kernels, as they compile, to price
    every bucket in O(1) (:func:`.pricing.by_padding`)."""

    __slots__ = ()


class DynamicPricing(Pricing):
    """:class:`Pricing` of dynamic padding: walks and sweeps (:func:`.pricing.by_padding`)."""

    __slots__ = ()


def make_pricing(arrays, group_end, edges, sizes, world, cost) -> Pricing:
    """The :class:`EdgePricing` or :class:`DynamicPricing` (by ``arrays.pad_code``) of the
    prefix tables ``arrays`` (a :class:`..synced.TimeArrays`), the candidate groups
    (``group_end``, ``edges``), their batch sizes, ``world`` ranks and a cost model ``cost``
    (alpha, beta, gamma)."""
    from .._batch_sweep import pascal_table

    kind = DynamicPricing if arrays.pad_code == DYNAMIC_PADDING else EdgePricing
    return kind(arrays.values, arrays.pcv, arrays.pq1, arrays.pq2, group_end, edges, sizes,
                   int(world), float(cost.alpha), float(cost.beta), float(cost.gamma),
                   int(arrays.pad_code), arrays.lf_hi, arrays.lf_lo, pascal_table())


class Windows(NamedTuple):
    """The share windows: the bucket (i, j] is allowed when lo[j] <= i <= hi[j] (int64)."""

    lo: np.ndarray
    hi: np.ndarray


class Lines(NamedTuple):
    """A lower bound A[c, j] - U[c, j] P[i] of every bucket (i, j] whose start i lies in cell c
    (the fewest-rows bound of :class:`Rows`)."""

    A: np.ndarray
    U: np.ndarray


class MeanLines(NamedTuple):
    """The mean bound M[j] - U[j] P[i] + R[i] of every bucket (i, j] (every row at its own
    length); M = -inf where an objective has none."""

    M: np.ndarray
    U: np.ndarray
    R: np.ndarray


class Relaxation(NamedTuple):
    """l(i, j) = max(A[c, j] - U[c, j] P[i], top(j, P[j] - P[i])) + R[i] for starts i in cell c
    (cells[c] <= i < cells[c + 1]) of buckets with at least split[j] samples; A2 in place of A
    for smaller ones. top: the top bound of the rows T (:func:`.relaxation.top_at`; -inf where
    an objective has none). Build it with :func:`make_relaxation`."""

    A: np.ndarray
    A2: np.ndarray
    split: np.ndarray
    U: np.ndarray
    R: np.ndarray
    T: np.ndarray
    cells: np.ndarray


def no_top(ends: int) -> np.ndarray:
    """The rows of the top bound of an objective that has none (-inf: no bound)."""
    T = np.zeros((4, ends))
    T[0] = -np.inf
    return T


def make_relaxation(cells, A, U, R, *, A2=None, split=None, T=None) -> Relaxation:
    """The :class:`Relaxation` of the lines A - U P + R (one row per cell; an objective with one
    row uses cell 0 alone), with A2 for buckets of fewer than ``split[j]`` samples (default:
    none, A everywhere) and the top bound's rows ``T`` (default: none), as contiguous arrays."""
    A, U, R = (np.ascontiguousarray(x, dtype=np.float64) for x in (A, U, R))
    if A2 is None:
        A2, split = A, np.zeros(A.shape[1])
    A2 = np.ascontiguousarray(A2, dtype=np.float64)
    split = np.ascontiguousarray(split, dtype=np.float64)
    T = no_top(A.shape[1]) if T is None else np.ascontiguousarray(T, dtype=np.float64)
    cells = np.asarray(cells[:A.shape[0]], dtype=np.int64)
    return Relaxation(A, A2, split, U, R, T, cells)


class Rows(NamedTuple):
    """Lower bounds of the buckets (i, j] whose start lies in cell c: the full-steps bound
    A[c, j] - U[c, j] P[i] for buckets of at least split[j] samples, the fewest-rows bound
    A2[c, j] - U2[c, j] P[i] for every bucket, the mean bound Mm[j] - Um[j] P[i] + R[i] (no
    padding) for every bucket, and the top bound (:func:`.relaxation.top_at` of the rows T;
    -inf where an objective has none) (docs/method.md)."""

    A: np.ndarray
    U: np.ndarray
    A2: np.ndarray
    U2: np.ndarray
    split: np.ndarray
    Mm: np.ndarray
    Um: np.ndarray
    R: np.ndarray
    T: np.ndarray

    @property
    def fewest(self) -> Lines:
        return Lines(self.A2, self.U2)

    @property
    def mean(self) -> MeanLines:
        return MeanLines(self.Mm, self.Um, self.R)


@dataclass(frozen=True)
class Optimality:
    """What is proven about a solution's value: ``lower_bound <= optimum <= value``.

    Every objective here (padded tokens, seconds) is at least 0, so a lower bound below 0 is
    reported as 0; with a bound of 0 and a positive value no relative gap is proven, and
    ``to_dict`` says ``"gap": null`` (JSON has no infinity)."""

    exact: bool
    lower_bound: float
    value: float

    @property
    def bound(self) -> float:
        # a bound below 0 or in the subnormal range (rounding noise) proves nothing above 0
        lower = float(self.lower_bound)
        return lower if lower >= SMALLEST_NORMAL else 0.0

    @property
    def gap(self) -> float:
        if self.exact:
            return 0.0
        if self.bound > 0:
            return max(self.value / self.bound - 1.0, 0.0)
        return 0.0 if self.value <= 0 else float("inf")

    def to_dict(self) -> dict:
        gap = self.gap
        return {"exact": bool(self.exact), "lower_bound": self.bound,
                "gap": float(gap) if np.isfinite(gap) else None}


def exact_value(value) -> Optimality:
    """The certificate of a value a DP proved optimal."""
    return Optimality(True, float(value), float(value))


def layers_asked(kmax: int, ks) -> list:
    """The layers ``Objective.layers(kmax, ks)`` is asked for: every k in ``ks`` capped at
    ``kmax``, once each and in order (1..kmax for None)."""
    return sorted({min(int(k), kmax) for k in (ks if ks is not None else range(1, kmax + 1))})
