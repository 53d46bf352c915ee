"""Bucket boundaries in the forms other tools take.

bucketopt's convention is **inclusive upper edges**: bucket k holds lengths in (b_{k-1}, b_k],
b_0 = 0 (see :class:`bucketopt.Solution`). Each tool below states its own rule; every converter
cites it and tests/test_export.py checks the conversion against a reimplementation of that rule on
random integer lengths (off by one is the classic bug here).

Lengths are integers (tokens), so an exclusive upper bound u for "x < u" is our edge + 1.

Formats
-------
``sampler``  bucketopt's own :class:`~bucketopt.training.sampler.BucketBatchSampler` (inclusive
edges).
``lhotse``   ``lhotse.dataset.DynamicBucketingSampler(duration_bins=...)``: inclusive upper
             edges since Lhotse 1.27 (``bisect_left``), exclusive bounds before (``bisect_right``);
             the installed version is detected, ``lhotse_version=`` overrides it.
``nemo``     NeMo Lhotse dataloader config ``bucket_duration_bins`` / ``bucket_batch_size``:
             inclusive upper bounds, one batch size per bin.
``tf``       ``tf.data.experimental.bucket_by_sequence_length``: exclusive bounds, one more batch
             size than boundaries.

tests/test_export_tools.py runs the ``lhotse`` and ``nemo`` exports through Lhotse's own bucket
assignment (its ``DynamicBucketingSampler`` on real ``CutSet`` objects) where Lhotse is installed,
and the ``sampler`` export through :class:`~bucketopt.training.sampler.BucketBatchSampler` itself.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import BucketoptError
from ..solution import Solution
from ..validate import shown

FORMATS = ("sampler", "lhotse", "nemo", "tf")
SAMPLER_FORMAT = "bucketopt.training.sampler/1"
# Lhotse 1.27.0 moved bucket selection into ``SamplingConstraint.select_bucket`` and from
# ``bisect_right`` to ``bisect_left`` (read from the released wheels 1.16.0 ... 1.33.0).
LHOTSE_INCLUSIVE_SINCE = (1, 27)


def _check_solution(solution) -> Solution:
    if not isinstance(solution, Solution):
        raise BucketoptError(
            "expected a bucketopt.Solution (from solve() or evaluate()); got "
            f"{type(solution).__name__}."
        )
    return solution


def _batch_sizes(solution: Solution, fmt: str) -> list[int]:
    if solution.batch_sizes is None:
        raise BucketoptError(
            f"the {fmt} export needs per-bucket batch sizes: solve or evaluate with a token_budget "
            "(CLI: --token-budget T).",
            param="token_budget",
        )
    return [int(b) for b in solution.batch_sizes]


def to_sampler_json(solution) -> dict:
    """The configuration of :class:`bucketopt.training.sampler.BucketBatchSampler`.

    ``boundaries`` keep bucketopt's inclusive upper edges unchanged: length x goes to the first
    bucket whose edge is >= x (``numpy.searchsorted(boundaries, x, side="left")``).

    Examples
    --------
    >>> import bucketopt
    >>> from bucketopt.show.export import to_sampler_json
    >>> cfg = to_sampler_json(bucketopt.solve([3, 4, 10, 11, 12], k=2, token_budget=24))
    >>> cfg["boundaries"], cfg["batch_sizes"], cfg["token_budget"]
    ([4, 12], [6, 2], 24)
    """
    sol = _check_solution(solution)
    return {
        "format": SAMPLER_FORMAT,
        "boundaries": [int(b) for b in sol.boundaries],
        "token_budget": sol.token_budget,
        "batch_sizes": None if sol.batch_sizes is None else [int(b) for b in sol.batch_sizes],
        "pad": sol.pad,
        "counts": [int(c) for c in sol.counts],
        "padding_fraction": sol.padding_fraction,
    }


# A sampler config is a few hundred bytes; a larger file is refused before it is read.
CONFIG_BYTES = 1 << 20


def sampler_kwargs(config) -> dict:
    """``boundaries`` and ``token_budget`` (and ``batch_sizes`` when the plan's differ from
    floor(T / b): a plan solved with a memory model) from a sampler JSON (dict or path), ready
    for ``BucketBatchSampler(lengths, **sampler_kwargs(cfg))``: the sampler's batch sizes are
    the plan's."""
    if isinstance(config, (str, Path)):
        from ..data.guards import read_json, short

        config = read_json(config, f"sampler config {short(config)}", limit=CONFIG_BYTES)
    if not isinstance(config, dict) or config.get("format") != SAMPLER_FORMAT:
        raise BucketoptError(
            f"not a bucketopt sampler config (expected format {shown(SAMPLER_FORMAT)}).")
    edges, budget = config.get("boundaries"), config.get("token_budget")
    if (not isinstance(edges, list) or not edges
            or not all(isinstance(b, int) and not isinstance(b, bool) and b >= 1 for b in edges)
            or any(a >= b for a, b in zip(edges, edges[1:]))):
        raise BucketoptError("sampler config: `boundaries` must be a list of strictly increasing "
                             f"integers >= 1; got {str(edges)[:80]}.", param="boundaries")
    sizes = config.get("batch_sizes")
    if budget is None and isinstance(sizes, list):  # a plan whose batch sizes came from memory
        if len(sizes) != len(edges) or not all(
                isinstance(b, int) and not isinstance(b, bool) and b >= 1 for b in sizes):
            raise BucketoptError("sampler config: `batch_sizes` must hold one integer >= 1 per "
                                 f"boundary; got {str(sizes)[:80]}.", param="batch_sizes")
        return {"boundaries": tuple(edges), "batch_sizes": tuple(sizes)}
    if not isinstance(budget, int) or isinstance(budget, bool) or budget < 1:
        raise BucketoptError(
            f"sampler config: `token_budget` must be an integer >= 1; got {str(budget)[:40]}.",
            param="token_budget")
    out = {"boundaries": tuple(edges), "token_budget": budget}
    if isinstance(sizes, list) and sizes != [budget // b for b in edges]:
        # a plan solved with a memory model and a budget: its own sizes, within the budget (the
        # sampler then batches exactly as the plan says, never floor(T / b))
        if len(sizes) != len(edges) or not all(
                isinstance(b, int) and not isinstance(b, bool) and b >= 1 for b in sizes):
            raise BucketoptError("sampler config: `batch_sizes` must hold one integer >= 1 per "
                                 f"boundary; got {str(sizes)[:80]}.", param="batch_sizes")
        out["batch_sizes"] = tuple(sizes)
    return out


def installed_lhotse_version() -> str | None:
    """The version of the installed Lhotse (read from its metadata, not imported), or None."""
    from importlib import metadata

    try:
        return metadata.version("lhotse")
    except metadata.PackageNotFoundError:
        return None


def lhotse_release(version) -> tuple[int, int]:
    """(major, minor) of a Lhotse version string (``"v1.33.0"`` -> ``(1, 33)``); a
    :class:`BucketoptError` naming ``lhotse_version`` otherwise.

    Examples
    --------
    >>> lhotse_release("1.33.0")
    (1, 33)
    """
    match = re.match(r"\s*v?(\d+)\.(\d+)", version) if isinstance(version, str) else None
    if match is None:
        raise BucketoptError(
            f"`lhotse_version` must be a version string like '1.33.0'; got {shown(version)}.",
            param="lhotse_version")
    return int(match.group(1)), int(match.group(2))


def to_lhotse(solution, *, lhotse_version: str | None = None) -> dict:
    """Keyword arguments for ``lhotse.dataset.DynamicBucketingSampler``.

    Lhotse's rule, read from its source: the sampler makes ``len(duration_bins) + 1`` buckets and
    a cut goes to bucket ``constraint.select_bucket(duration_bins, cut)``, which since Lhotse 1.27
    is ``bisect_left(duration_bins, length)`` (``lhotse/dataset/sampling/base.py``): bucket i
    holds ``duration_bins[i-1] < d <= duration_bins[i]``, the bins are inclusive upper edges, our
    own convention, so ``duration_bins = [b_1, ..., b_{K-1}]`` (the last edge is dropped: Lhotse's
    last bucket is open-ended). Lhotse 1.26 and older used ``bisect_right(duration_bins, d)``
    (``lhotse/dataset/sampling/dynamic_bucketing.py``), exclusive bounds: for integer lengths
    ``duration_bins = [b_1 + 1, ..., b_{K-1} + 1]``. (The docstring of Lhotse's
    ``estimate_duration_buckets`` still describes the old, exclusive rule.)

    Parameters
    ----------
    lhotse_version : str, optional
        The Lhotse release the bins are for, e.g. ``"1.33.0"``. Default: the installed Lhotse's
        version, else the current rule (1.27 and later).

    Measure lengths in the same unit as the solve (tokens, e.g. with a token-counting
    constraint); Lhotse's default constraint measures seconds. Lhotse takes no per-bucket batch
    sizes here: use ``max_duration``/``max_tokens``, or NeMo's ``bucket_batch_size``
    (:func:`to_nemo`).

    Examples
    --------
    >>> import bucketopt
    >>> from bucketopt.show.export import to_lhotse
    >>> to_lhotse(bucketopt.solve([3, 4, 10, 11, 12], k=2), lhotse_version="1.33.0")
    {'duration_bins': [4], 'num_buckets': 2}
    >>> to_lhotse(bucketopt.solve([3, 4, 10, 11, 12], k=2), lhotse_version="1.26.0")
    {'duration_bins': [5], 'num_buckets': 2}
    """
    sol = _check_solution(solution)
    shift = 0 if _lhotse_inclusive(lhotse_version) else 1
    return {
        "duration_bins": [int(b) + shift for b in sol.boundaries[:-1]],
        "num_buckets": len(sol.boundaries),
    }


def lhotse_target(lhotse_version: str | None = None) -> str:
    """One line saying which Lhotse rule an export follows, and why."""
    given = lhotse_version
    if given is None:
        lhotse_version = installed_lhotse_version()
    rule = ("Lhotse >= 1.27 (bisect_left: bins are inclusive upper edges)"
            if _lhotse_inclusive(lhotse_version) else
            "Lhotse <= 1.26 (bisect_right: bins are edges + 1)")
    if lhotse_version is None:
        return f"bins for {rule}; no Lhotse installed, so the current rule"
    return f"bins for {rule}; Lhotse {lhotse_version} {'installed' if given is None else 'given'}"


def _lhotse_inclusive(lhotse_version) -> bool:
    """True when the Lhotse release (given, else installed, else current) uses bisect_left."""
    if lhotse_version is None:
        lhotse_version = installed_lhotse_version()
    return lhotse_version is None or lhotse_release(lhotse_version) >= LHOTSE_INCLUSIVE_SINCE


def to_nemo(solution, *, lhotse_version: str | None = None) -> dict:
    """NeMo's Lhotse dataloader config keys ``bucket_duration_bins`` and ``bucket_batch_size``.

    NeMo's rule (``nemo/collections/common/data/lhotse/sampling.py``,
    ``FixedBucketBatchSizeConstraint2D``): ``bucket_duration_bins`` are the per-bucket *maximum*
    lengths and an example goes to the smallest bucket that fits it, found with
    ``bisect_left(bucket_duration_bins, length)``; an example above the last bin fits no bucket
    and is filtered out. ``bucket_batch_size`` has one entry per bin. For 1-D bins NeMo's class
    defers to Lhotse's ``FixedBucketBatchSizeConstraint`` (``select_bucket`` = ``bisect_left``;
    ``batch_sizes[bucket]`` samples per batch), which tests/test_export_tools.py runs inside
    Lhotse's ``DynamicBucketingSampler`` where Lhotse is installed; NeMo passes the same bins as
    the sampler's ``duration_bins``. That is bucketopt's own
    inclusive convention, so the edges pass through unchanged, the last one included. Set
    ``use_multimodal_sampling`` (token counts) when the lengths are tokens; for audio the bins are
    seconds. Under Lhotse 1.26 or older that constraint used ``bisect_right`` (a sample of exactly
    a bin's length went one bucket up), so for ``lhotse_version`` < 1.27 (given, else the
    installed Lhotse's) the bins are the edges + 1, as in :func:`to_lhotse`.

    Examples
    --------
    >>> import bucketopt
    >>> from bucketopt.show.export import to_nemo
    >>> to_nemo(bucketopt.solve([3, 4, 10, 11, 12], k=2, token_budget=24), lhotse_version="1.33")
    {'bucket_duration_bins': [4, 12], 'bucket_batch_size': [6, 2]}
    """
    sol = _check_solution(solution)
    shift = 0 if _lhotse_inclusive(lhotse_version) else 1
    return {
        "bucket_duration_bins": [int(b) + shift for b in sol.boundaries],
        "bucket_batch_size": _batch_sizes(sol, "nemo"),
    }


def to_tf_data(solution, *, pad_to_bucket_boundary: bool = False) -> dict:
    """Keyword arguments for ``tf.data.experimental.bucket_by_sequence_length``.

    TensorFlow's rule. The API docs: "bucket_boundaries: list<int>, upper length boundaries of
    the buckets"; "bucket_batch_sizes: list<int>, batch size per bucket. Length should be
    len(bucket_boundaries) + 1"; "pad_to_bucket_boundary: ... If True, will pad dimensions with
    unknown size to bucket boundary minus 1 (i.e., the maximum length in each bucket), and caller
    must ensure that the source Dataset does not contain any elements with length longer than
    max(bucket_boundaries)". The implementation (``tensorflow/python/data/experimental/ops/
    grouping.py``, ``element_to_bucket_id``): ``buckets_min = [int32 min] + bucket_boundaries``,
    ``buckets_max = bucket_boundaries + [int32 max]``, bucket = the first i with
    ``buckets_min[i] <= length < buckets_max[i]``. So the buckets are ``[0, b_0), [b_0, b_1), ...,
    [b_last, inf)``: exclusive upper bounds. tests/test_export.py checks the export against a
    re-implementation of exactly that formula (TensorFlow itself is too heavy to install).

    - ``pad_to_bucket_boundary=False`` (dynamic padding): ``bucket_boundaries = [b_1 + 1, ...,
      b_{K-1} + 1]``, K batch sizes; TF's last bucket is bucketopt's last bucket.
    - ``pad_to_bucket_boundary=True`` (static shapes, bucketopt's ``pad="edge"``):
      ``bucket_boundaries = [b_1 + 1, ..., b_K + 1]`` so TF pads bucket k to exactly b_k; the
      K + 1-th batch size belongs to TF's open-ended overflow bucket, which no sample of the
      solved data reaches; it repeats the last bucket's batch size.

    Examples
    --------
    >>> import bucketopt
    >>> from bucketopt.show.export import to_tf_data
    >>> to_tf_data(bucketopt.solve([3, 4, 10, 11, 12], k=2, token_budget=24))
    {'bucket_boundaries': [5], 'bucket_batch_sizes': [6, 2], 'pad_to_bucket_boundary': False}
    """
    sol = _check_solution(solution)
    sizes = _batch_sizes(sol, "tf")
    edges = [int(b) + 1 for b in sol.boundaries]
    if pad_to_bucket_boundary:
        boundaries, sizes = edges, [*sizes, sizes[-1]]
    else:
        boundaries = edges[:-1]
    return {
        "bucket_boundaries": boundaries,
        "bucket_batch_sizes": sizes,
        "pad_to_bucket_boundary": bool(pad_to_bucket_boundary),
    }


def export(solution, fmt: str, **options) -> dict:
    """Dispatch on the format name: one of ``sampler``, ``lhotse``, ``nemo``, ``tf``."""
    converters = {"sampler": to_sampler_json, "lhotse": to_lhotse, "nemo": to_nemo,
                  "tf": to_tf_data}
    if fmt not in converters:
        raise BucketoptError(f"`format` must be one of {', '.join(FORMATS)}; got {shown(fmt)}.",
                             param="fmt")
    return converters[fmt](solution, **options)
