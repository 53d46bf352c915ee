"""The result type shared by solve(), evaluate() and sweep(), and the per-bucket statistics."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from .data.histogram import Histogram
from .errors import BucketoptError
from .validate import PADS, TOKEN_LIMIT, shown  # noqa: F401  (solution.PADS: a public name)


@dataclass(frozen=True)
class Solution:
    """Bucket boundaries and what they cost.

    ``boundaries`` are inclusive upper edges: bucket k holds lengths in (b_{k-1}, b_k], b_0 = 0.
    ``padded_tokens`` is exact (int) for ``pad="edge"`` and an expectation (float) for
    ``pad="batch"``. ``padding_fraction = padded / (real + padded)``.
    """

    boundaries: tuple
    counts: tuple
    batch_sizes: tuple | None
    real_tokens: int
    padded_tokens: int | float
    padding_fraction: float
    bucket_real_tokens: tuple = ()
    bucket_padded_tokens: tuple = ()
    n_samples: int = 0
    pad: str = "edge"
    objective: str = "padding"
    token_budget: int | None = None
    k: int | None = None
    align: int = 1
    min_share: float = 0.0
    max_share: float = 1.0
    min_fill: float = 0.0
    ktok_per_s: float | None = None
    eta_days: float | None = None
    fill: tuple = ()
    warnings: tuple = ()
    extra: dict = field(default_factory=dict, compare=False)
    # What is proven about the objective's value (solve and sweep): an Optimality, or a
    # function that computes one (a bound that costs a DP pass is computed when first asked
    # for); None for boundaries chosen elsewhere (evaluate). Read it as ``optimality``.
    certificate: object = field(default=None, compare=False, repr=False)
    # What a plan needs beyond the figures (solve, sweep and evaluate fill it): the lengths'
    # ``fingerprint`` (a dict, or a function computing it when first asked for), and the
    # ``sync_buckets``, ``world_size``, ``epochs``, ``profile`` (inline coefficients),
    # ``max_length`` and ``overflow`` it was made with. Not part of ``to_dict``.
    settings: dict = field(default_factory=dict, compare=False, repr=False)
    # 2-D plans (pairs of lengths): the bins (dim0_edge, dim1_edge) in NeMo's order; None in 1-D
    # (bucketopt.pairs). ``boundaries`` then holds the distinct dim0 edges.
    bins: tuple | None = None

    @property
    def fingerprint(self) -> dict | None:
        """``{"samples", "real_tokens", "histogram_sha256"}`` of the lengths this solution was
        made from (before any ``max_length`` policy); None when it was built by hand."""
        fp = self.settings.get("fingerprint")
        if fp is None:
            return None
        return dict(fp()) if callable(fp) else dict(fp)

    def to_plan(self) -> dict:
        """The plan, one JSON-ready dict (:mod:`bucketopt.plan`): boundaries, batch sizes,
        token budget and memory rule, pad, objective, sync, packing, world size, profile,
        predictions with intervals, optimality and the lengths' fingerprint.

        Examples
        --------
        >>> import bucketopt
        >>> plan = bucketopt.solve([3, 4, 10, 11, 12], k=2, token_budget=24).to_plan()
        >>> plan["boundaries"], plan["batch_sizes"], plan["pad"], plan["packing"]
        ([4, 12], [6, 2], 'edge', 'fixed')
        """
        from .plan import solution_plan

        return solution_plan(self)

    @property
    def optimality(self) -> dict | None:
        """{"exact": bool, "lower_bound": float, "gap": float or None}: lower_bound <= the
        optimum <= the objective's value of these boundaries, gap = value / lower_bound - 1
        (None where no positive bound is known; docs/method.md, "Certificates"); None for
        boundaries chosen elsewhere (evaluate)."""
        cert = self.certificate
        if cert is None:
            return None
        if callable(cert):
            cert = cert()
            object.__setattr__(self, "certificate", cert)
        return cert.to_dict()

    @property
    def ktok_per_s_interval(self) -> tuple | None:
        """(low, high) Ktok/s from the profile's coefficient uncertainty (docs/cost_model.md,
        "An interval on every prediction"); None without a profile.

        Examples
        --------
        >>> import bucketopt
        >>> sol = bucketopt.solve([100, 200, 300, 400], 2, token_budget=800,
        ...                       profile="rtx-pro-6000-blackwell")
        >>> low, high = sol.ktok_per_s_interval
        >>> low <= sol.ktok_per_s <= high
        True
        >>> bucketopt.solve([100, 200, 300, 400], 2).ktok_per_s_interval is None
        True
        """
        return self._interval("ktok_per_s_interval")

    @property
    def eta_days_interval(self) -> tuple | None:
        """(low, high) ETA in days, the Ktok/s interval turned around; None without a profile."""
        return self._interval("eta_days_interval")

    def _interval(self, key) -> tuple | None:
        span = self.extra.get(key)
        return None if span is None else tuple(float(v) for v in span)

    @property
    def peak_memory_bytes(self) -> tuple | None:
        """Predicted peak bytes of each bucket's full batch under the memory model (None
        without one)."""
        peaks = self.extra.get("peak_memory_bytes")
        return None if peaks is None else tuple(peaks)

    @property
    def unassigned(self) -> int:
        """Samples that fit no bin (2-D bins given to evaluate; 0 in 1-D and in every plan
        bucketopt makes)."""
        return int(self.extra.get("unassigned", 0))

    @property
    def shares(self) -> tuple:
        """Fraction of samples in each bucket."""
        n = self.n_samples or 1
        return tuple(c / n for c in self.counts)

    def to_dict(self) -> dict:
        """JSON-ready dictionary (plain Python types only)."""
        out = asdict(self)
        out["boundaries"] = list(self.boundaries)
        out["counts"] = list(self.counts)
        out["batch_sizes"] = None if self.batch_sizes is None else list(self.batch_sizes)
        out["bucket_real_tokens"] = list(self.bucket_real_tokens)
        out["bucket_padded_tokens"] = list(self.bucket_padded_tokens)
        out["shares"] = list(self.shares)
        out["fill"] = list(self.fill)
        out["warnings"] = list(self.warnings)
        extra = out.pop("extra")
        if self.bins is None:
            del out["bins"]
        else:
            out["bins"] = [list(b) for b in self.bins]
        del out["certificate"]
        del out["settings"]
        if self.certificate is not None:
            out["optimality"] = self.optimality
        for key in ("ktok_per_s", "eta_days"):
            if out[key] is None:
                del out[key]
        out.update(extra)
        return out

    def __repr__(self):
        edges = ", ".join(str(b) for b in self.boundaries)
        rate = "" if self.ktok_per_s is None else f", ktok_per_s={self.ktok_per_s:.1f}"
        return (
            f"Solution(boundaries=({edges}), padding_fraction={self.padding_fraction:.4f}, "
            f"pad={shown(self.pad)}{rate})"
        )


def check_boundaries(boundaries, hist: Histogram) -> np.ndarray:
    """Validate user boundaries: strictly increasing positive integers covering every length."""
    from .data.histogram import validate_lengths

    edges = validate_lengths(boundaries, name="boundaries", param="boundaries")
    if edges.size > 1 and np.any(np.diff(edges) <= 0):
        i = int(np.flatnonzero(np.diff(edges) <= 0)[0])
        raise BucketoptError(
            f"boundaries must be strictly increasing; got {int(edges[i])} then "
            f"{int(edges[i + 1])}.", param="boundaries"
        )
    if edges[-1] < hist.max_length:
        raise BucketoptError(
            f"boundaries end at {int(edges[-1])}, below the longest sample ({hist.max_length}); "
            "the last boundary must be >= every length.", param="boundaries"
        )
    if float(edges[-1]) * float(hist.n) >= TOKEN_LIMIT:
        raise BucketoptError(
            f"boundaries reach {int(edges[-1]):,}: {hist.n:,} samples padded to it exceed 2**60 "
            "tokens, beyond exact int64 totals; use boundaries near the longest length "
            f"({hist.max_length:,}).", param="boundaries")
    return edges


def batch_sizes_for(edges: np.ndarray, token_budget: int | None, memory=None):
    """Every bucket's batch size by the one rule (:func:`bucketopt.cost.memory.batch_sizes`):
    B_k = floor(T / b_k), or the memory model's B(b_k); None with neither."""
    from .cost.memory import batch_sizes

    return batch_sizes(edges, token_budget, memory)


_CHUNK = 1 << 20  # distinct lengths per step of bucket_statistics


def bucket_statistics(hist: Histogram, edges: np.ndarray, token_budget, pad: str, memory=None):
    """Per-bucket counts, real tokens and padded tokens for the given edges.

    ``pad`` and the batch-size rule were checked at the entry
    (:func:`bucketopt.request.build_request`). Returns (counts, real, padded, batch_sizes,
    fill) as numpy arrays (batch_sizes and fill may
    be None). ``fill``: expected padded tokens of each bucket's largest batch (min(B, N) rows)
    over the token budget (with a memory model and no budget: over B x edge, the most tokens
    a batch of the bucket can hold).
    """
    sizes = batch_sizes_for(edges, token_budget, memory)
    per_batch = token_budget if token_budget is not None else (
        None if sizes is None else (sizes * edges).astype(np.float64))
    k = edges.size
    counts = np.zeros(k, dtype=np.int64)
    real = np.zeros(k, dtype=np.int64)
    for at in range(0, hist.values.size, _CHUNK):  # bounded temporaries on 10**7 lengths
        values, many = hist.values[at:at + _CHUNK], hist.counts[at:at + _CHUNK]
        idx = np.searchsorted(edges, values, side="left")  # bucket of each distinct length
        np.add.at(counts, idx, many)
        np.add.at(real, idx, values * many)
    fill = None
    if pad == "edge":
        padded = edges * counts - real
        if sizes is not None:
            fill = np.minimum(sizes, counts) * edges / per_batch
    else:  # pad="batch" (checked at the entry, with its batch sizes: build_request)
        from .objectives.batchpad import expected_padding_and_fill

        padded, full = expected_padding_and_fill(hist, edges, sizes)
        fill = full / per_batch
    return counts, real, padded, sizes, fill


def make_solution(hist: Histogram, edges, *, token_budget, pad, memory=None, **meta) -> Solution:
    """Compute the statistics of ``edges`` on ``hist`` and wrap them in a :class:`Solution`.

    ``memory``: a :class:`bucketopt.cost.memory.MemoryModel`; the batch sizes then come from it
    and every bucket's predicted peak bytes (of a full batch) are in ``peak_memory_bytes``."""
    edges = np.asarray(edges, dtype=np.int64)
    counts, real, padded, sizes, fill = bucket_statistics(hist, edges, token_budget, pad, memory)
    extra = dict(meta.pop("extra", {}))
    if memory is not None:
        extra["memory"] = memory.to_dict()
        extra["peak_memory_bytes"] = [float(x) for x in memory.peak_bytes(sizes, edges)]
    real_total = int(real.sum())
    if pad == "edge":
        padded_total = int(padded.sum())
        bucket_padded = tuple(int(p) for p in padded)
    else:
        padded_total = float(np.sum(padded))
        bucket_padded = tuple(float(p) for p in padded)
    return Solution(
        boundaries=tuple(int(b) for b in edges),
        counts=tuple(int(c) for c in counts),
        batch_sizes=None if sizes is None else tuple(int(s) for s in sizes),
        real_tokens=real_total,
        padded_tokens=padded_total,
        padding_fraction=float(padded_total / (real_total + padded_total)),
        bucket_real_tokens=tuple(int(r) for r in real),
        bucket_padded_tokens=bucket_padded,
        n_samples=hist.n,
        pad=pad,
        token_budget=token_budget,
        fill=() if fill is None else tuple(float(f) for f in fill),
        extra=extra,
        **meta,
    )


# A bucket whose largest batch is expected to fill less than this share of the token budget
# gets a note: its steps run far below the budget (the padding objective cannot see that).
LOW_FILL = 0.5


def with_notes(solution: Solution, overflow=None) -> Solution:
    """``solution`` with its ``warnings`` (low-fill buckets) and the ``max_length`` report."""
    from dataclasses import replace

    notes = list(solution.warnings)
    low = [k for k, (f, c) in enumerate(zip(solution.fill, solution.counts))
           if c and f < LOW_FILL]
    if low and solution.objective == "padding":
        parts = []
        for k in low:
            lower = solution.boundaries[k - 1] if k else 0
            size = solution.batch_sizes[k] if solution.batch_sizes else None
            parts.append(f"({lower:,}, {solution.boundaries[k]:,}] (batch size {size}, "
                         f"{solution.fill[k]:.0%} full, {solution.counts[k]:,} samples)")
        notes.append(
            "bucket(s) " + "; ".join(parts) + f" fill less than {LOW_FILL:.0%} of the " + (
                "token budget" if solution.token_budget is not None
                else "tokens their batch can hold") + " per batch: many small steps. Remedies: "
            "optimise time (--objective time --profile NAME), --min-fill F, more buckets (-k), "
            "or --max-length N.")
    extra = dict(solution.extra)
    if overflow is not None:
        from .data.overflow import describe

        extra["overflow"] = overflow
        if overflow["samples_over"]:
            notes.append(describe(overflow))
    return replace(solution, warnings=tuple(notes), extra=extra)


def solution_from_plan(plan):
    """A :class:`~bucketopt.Solution` holding the plan's boundaries, batch sizes and
    predictions (no lengths needed: for exports)."""
    from .plan import load_plan

    plan = load_plan(plan)
    pred = plan["predictions"]
    total = pred["real_tokens"] + pred["padded_tokens"]
    extra = {}
    if plan["memory"] is not None:
        extra["memory"] = dict(plan["memory"])
    for key in ("ktok_per_s_interval", "eta_days_interval"):
        if pred[key] is not None:
            extra[key] = list(pred[key])
    from .cost.steps import KEYS as STEP_KEYS

    for key in STEP_KEYS:  # the predicted step-time distribution, where the plan holds it
        if pred.get(key) is not None:
            extra[key] = pred[key]
            extra[key + "_interval"] = list(pred[key + "_interval"])
    cons = plan["constraints"] or {}
    return Solution(
        boundaries=tuple(plan["boundaries"]), counts=tuple(pred["counts"]),
        batch_sizes=None if plan["batch_sizes"] is None else tuple(plan["batch_sizes"]),
        real_tokens=pred["real_tokens"], padded_tokens=pred["padded_tokens"],
        padding_fraction=pred["padded_tokens"] / total, n_samples=sum(pred["counts"]),
        pad=plan["pad"], objective=plan["objective"], token_budget=plan["token_budget"],
        k=cons.get("k"), align=cons.get("align", 1), min_share=cons.get("min_share", 0.0),
        max_share=cons.get("max_share", 1.0), min_fill=cons.get("min_fill", 0.0),
        ktok_per_s=pred["ktok_per_s"], eta_days=pred["eta_days"], extra=extra,
        settings={"fingerprint": dict(plan["fingerprint"]), "profile": plan["profile"],
                  "world_size": plan["world_size"], "epochs": plan["epochs"],
                  "sync_buckets": plan["sync_buckets"], "max_length": plan["max_length"],
                  "overflow": plan["overflow"]})
