"""The plan: one JSON artifact holding what a solve found, read by everything downstream.

``Solution.to_plan()`` (CLI: ``solve -o plan.json``, ``sweep --k K -o``, ``compare --strategy NAME
-o``) gives a JSON-ready dict; :func:`write_plan` writes it atomically, :func:`read_plan` reads
and validates one (:func:`load_plan` takes a dict or a path). ``compare --plan``, ``export
--plan``, :meth:`BucketBatchSampler.from_plan <bucketopt.BucketBatchSampler.from_plan>`,
``BucketedTrainer(..., plan=)`` and :meth:`StreamBatcher.from_plan
<bucketopt.training.streaming.StreamBatcher.from_plan>` take it.

A plan (``format`` "bucketopt-plan", ``version`` 1, ``kind`` "1d") holds:

- ``boundaries`` (inclusive upper edges), ``batch_sizes`` (one per bucket, or null),
  ``token_budget`` (or null), ``memory`` (the memory model {m0, m1, m2, capacity, headroom}
  when batch sizes came from one, else null);
- ``pad``, ``objective``, ``sync_buckets``, ``packing``, ``world_size``, ``epochs``;
- ``profile``: the hardware profile the predictions were scored with, inline (name,
  alpha, beta, gamma and its uncertainty sets; loadable by ``load_profile``), or null;
- ``constraints``: k, align, min_share, max_share, min_fill (null for boundaries evaluated);
- ``max_length`` and ``overflow`` (both null when unused);
- ``predictions``: counts, real_tokens, padded_tokens, padding_fraction, ktok_per_s,
  ktok_per_s_interval, eta_days, eta_days_interval (the last four null without a profile);
- ``optimality`` ({exact, lower_bound, gap}, or null for evaluated boundaries);
- ``fingerprint`` of the lengths it was made from, before any ``max_length`` policy:
  ``samples``, ``real_tokens`` and ``histogram_sha256`` (SHA-256 of the distinct lengths then
  their counts, each as little-endian int64 bytes);
- ``bucketopt_version`` (which bucketopt wrote it) and ``checksum``: ``"sha256:"`` + the
  SHA-256 of the other fields as canonical JSON, so that an edited or corrupted plan is refused.

Reading validates every field (type, range, and the relations between fields: batch sizes
follow the token budget / memory rule, counts add up to the fingerprint, intervals hold their
point), then the checksum; anything else is one :class:`BucketoptError` line naming the
field. A plan used with
lengths whose fingerprint differs is refused (:func:`check_lengths`) unless
``allow_other_lengths=True`` (CLI ``--allow-other-lengths``) accepts it knowingly, e.g. for a
later shard of the same data.

Examples
--------
>>> import bucketopt
>>> from bucketopt.plan import load_plan
>>> plan = bucketopt.solve([3, 4, 10, 11, 12], k=2, token_budget=24).to_plan()
>>> plan["boundaries"], plan["batch_sizes"], plan["fingerprint"]["samples"]
([4, 12], [6, 2], 5)
>>> load_plan(plan) == plan
True
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re

import numpy as np

from .cost.steps import KEYS as STEP_KEYS
from .errors import BucketoptError

FORMAT = "bucketopt-plan"
VERSION = 1
KINDS = ("1d", "2d")  # 2d: pairs of lengths, bins (the 2-D plan, below)
# A plan is a few kilobytes (a profile's uncertainty sets included); larger is refused.
PLAN_BYTES = 8 << 20
MAX_BUCKETS = 1 << 20
_INT_LIMIT = 2**62
_PACKINGS = ("fixed", "greedy", "varlen", "varlen-balanced")
_KEYS = ("format", "version", "kind", "boundaries", "batch_sizes", "token_budget", "memory",
         "pad", "objective", "sync_buckets", "packing", "world_size", "epochs", "profile",
         "constraints", "max_length", "overflow", "predictions", "optimality", "fingerprint",
         "bucketopt_version", "checksum")
_PREDICTION_KEYS = ("counts", "real_tokens", "padded_tokens", "padding_fraction", "ktok_per_s",
                    "ktok_per_s_interval", "eta_days", "eta_days_interval")
# Optional predictions (with a profile): the step-time distribution (bucketopt.cost.steps).
_STEP_KEYS = STEP_KEYS
_CONSTRAINT_KEYS = ("k", "align", "min_share", "max_share", "min_fill")
_FINGERPRINT_KEYS = ("samples", "real_tokens", "histogram_sha256")
_MEMORY_KEYS = ("m0", "m1", "m2", "capacity", "headroom")
_PROFILE_KEYS = ("name", "alpha", "beta", "gamma", "uncertainty")


# ------------------------------------------------------------------------------- fingerprint
def histogram_fingerprint(hist) -> dict:
    """``{"samples", "real_tokens", "histogram_sha256"}`` of a
    :class:`~bucketopt.data.histogram.Histogram`."""
    digest = hashlib.sha256()
    for array in (hist.values, hist.counts):
        data = np.ascontiguousarray(array, dtype="<i8")
        for lo in range(0, data.size, 1 << 22):  # 32 MB at a time: no full-size copy
            digest.update(memoryview(data[lo:lo + (1 << 22)]))
    return {"samples": int(hist.n), "real_tokens": int(hist.real_tokens),
            "histogram_sha256": digest.hexdigest()}


def lengths_fingerprint(lengths) -> dict:
    """The fingerprint of lengths (an array, a Histogram or a ``{length: count}`` mapping), as
    they are given (before any ``max_length`` policy).

    Examples
    --------
    >>> lengths_fingerprint([5, 3, 5]) == lengths_fingerprint({3: 1, 5: 2})
    True
    """
    from .data.histogram import as_histogram
    from .pairs.data import is_pairs

    if is_pairs(lengths):  # (n, 2): the pair histogram's (the 2-D plan, below)

        return pair_fingerprint(lengths)
    return histogram_fingerprint(as_histogram(lengths))


# Up to this many distinct lengths the fingerprint is computed at once (well under a
# millisecond per 10**4); beyond, when first asked for (only a plan needs it).
EAGER_DISTINCT = 1 << 16


class LazyFingerprint:
    """The fingerprint of a histogram: computed at once for a small one, else when first asked
    for (hashing 10**7 distinct lengths costs a few tenths of a second, and the histogram is
    held until then). Shared, never copied."""

    def __init__(self, hist):
        self._hist, self._value = hist, None
        if hist.values.size <= EAGER_DISTINCT:
            self()

    def __call__(self) -> dict:
        if self._value is None:
            self._value = histogram_fingerprint(self._hist)
            self._hist = None
        return dict(self._value)

    def __deepcopy__(self, memo):
        return self

    def __copy__(self):
        return self


def describe_fingerprint(fp: dict) -> str:
    return (f"{fp['samples']:,} samples, {fp['real_tokens']:,} tokens, histogram "
            f"{fp['histogram_sha256'][:12]}")


def check_lengths(plan: dict, lengths, *, allow_other_lengths=False) -> dict:
    """Refuse ``lengths`` whose fingerprint differs from the plan's (one line naming both),
    unless ``allow_other_lengths``; returns the fingerprint of ``lengths``."""
    if not isinstance(allow_other_lengths, (bool, np.bool_)):
        raise BucketoptError(f"allow_other_lengths must be True or False; got "
                             f"{allow_other_lengths!r:.60}.", param="allow_other_lengths")
    mine = lengths_fingerprint(lengths)
    theirs = plan["fingerprint"]
    if mine != theirs and not allow_other_lengths:
        raise BucketoptError(
            f"the plan was made for other lengths: the plan's {describe_fingerprint(theirs)}; "
            f"these lengths {describe_fingerprint(mine)}; to use it knowingly (a later shard "
            "of the same data) pass allow_other_lengths (--allow-other-lengths).",
            param="allow_other_lengths")
    return mine


# ------------------------------------------------------------------------------ writing
def solution_plan(solution) -> dict:
    """The plan of a :class:`~bucketopt.Solution` from :func:`~bucketopt.solve`,
    :func:`~bucketopt.sweep` or :func:`~bucketopt.evaluate` (see :meth:`Solution.to_plan`)."""
    from .version import __version__

    if getattr(solution, "bins", None) is not None:  # 2-D bins (the 2-D plan, below)

        return pair_solution_plan(solution)
    settings = solution.settings
    if not settings or "fingerprint" not in settings:
        raise BucketoptError("this Solution has no fingerprint of its lengths (it was not made "
                             "by solve, sweep or evaluate), so it cannot become a plan.",
                             param=None)
    extra = solution.extra
    profile = settings.get("profile")
    interval = solution.ktok_per_s_interval
    eta_interval = solution.eta_days_interval
    memory = extra.get("memory")
    if memory is not None:
        memory = {key: memory.get(key) for key in _MEMORY_KEYS}
    constraints = None
    if solution.k is not None:
        constraints = {"k": int(solution.k), "align": int(solution.align),
                       "min_share": float(solution.min_share),
                       "max_share": float(solution.max_share),
                       "min_fill": float(solution.min_fill)}
    plan = {
        "format": FORMAT, "version": VERSION, "kind": "1d",
        "boundaries": [int(b) for b in solution.boundaries],
        "batch_sizes": None if solution.batch_sizes is None
        else [int(b) for b in solution.batch_sizes],
        "token_budget": None if solution.token_budget is None else int(solution.token_budget),
        "memory": memory,
        "pad": solution.pad, "objective": solution.objective,
        "sync_buckets": settings.get("sync_buckets", True),
        "packing": "fixed",
        "world_size": int(settings.get("world_size") or 1),
        "epochs": int(settings.get("epochs") or 1),
        "profile": None if profile is None else dict(profile),
        "constraints": constraints,
        "max_length": settings.get("max_length"),
        "overflow": settings.get("overflow") if settings.get("max_length") is not None
        else None,
        "predictions": {
            **prediction_totals(solution),
            "ktok_per_s": None if solution.ktok_per_s is None else float(solution.ktok_per_s),
            "ktok_per_s_interval": None if interval is None else [float(v) for v in interval],
            "eta_days": None if solution.eta_days is None else float(solution.eta_days),
            "eta_days_interval": None if eta_interval is None
            else [float(v) for v in eta_interval],
            **{name: float(v) if not isinstance(v, (list, tuple)) else [float(x) for x in v]
               for key in _STEP_KEYS for name in (key, key + "_interval")
               if (v := extra.get(name)) is not None},
        },
        "optimality": solution.optimality,
        "fingerprint": solution.fingerprint,
        "bucketopt_version": __version__,
    }
    plan["checksum"] = plan_checksum(plan)
    return validate_plan(plan, "the plan")


def prediction_totals(solution) -> dict:
    """The counts and token totals of a plan's ``predictions`` (1-D and 2-D plans alike)."""
    padded = solution.padded_tokens
    return {"counts": [int(c) for c in solution.counts],
            "real_tokens": int(solution.real_tokens),
            "padded_tokens": int(padded) if isinstance(padded, (int, np.integer))
            else float(padded),
            "padding_fraction": float(solution.padding_fraction)}


def plan_checksum(plan: dict) -> str:
    """``"sha256:"`` + the SHA-256 of the plan's other fields as canonical JSON (sorted keys,
    no spaces): a plan edited by hand or corrupted no longer matches it."""
    body = {key: value for key, value in plan.items() if key != "checksum"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


_SCALAR = r"(?:-?[0-9][0-9.eE+-]*|null|true|false)"
_FLAT_LIST = re.compile(rf"\[\s*({_SCALAR}(?:,\s*{_SCALAR})*)\s*\]")


def plan_text(plan) -> str:
    """The plan as the JSON text :func:`write_plan` writes (validated first): indented, each
    list of numbers on one line."""
    plan = validate_plan(plan, "the plan")
    text = json.dumps(plan, indent=2, allow_nan=False)
    return _FLAT_LIST.sub(lambda m: "[" + ", ".join(
        part.strip() for part in m.group(1).split(",")) + "]", text) + "\n"


def write_plan(plan, path) -> str:
    """Write ``plan`` (a dict from :meth:`Solution.to_plan`, or a Solution) to ``path``
    atomically; returns the path."""
    from .data.output import write_text

    if hasattr(plan, "to_plan"):  # a Solution
        plan = plan.to_plan()
    return write_text(path, plan_text(plan), what="the plan")


def read_plan(path) -> dict:
    """Read and validate the plan at ``path`` (a UTF-8 byte-order mark is accepted; at most
    8 MiB)."""
    from .data.guards import read_json, short

    if not isinstance(path, (str, os.PathLike)):
        raise BucketoptError(f"plan must be a dict or a path to a plan JSON; got "
                             f"{type(path).__name__}.", param="plan")
    where = f"plan {short(str(path))}"
    return validate_plan(read_json(path, where, limit=PLAN_BYTES), where)


def load_plan(plan) -> dict:
    """A validated plan from a dict (as :meth:`Solution.to_plan` gives) or a path."""
    if isinstance(plan, dict):
        return validate_plan(plan, "plan")
    if hasattr(plan, "to_plan"):  # a Solution
        return plan.to_plan()
    if isinstance(plan, (str, os.PathLike)):
        return read_plan(plan)
    raise BucketoptError(f"plan must be a dict (Solution.to_plan()) or a path to a plan JSON; "
                         f"got {type(plan).__name__}.", param="plan")


# ----------------------------------------------------------------------------- validating
class _Checker:
    def __init__(self, where):
        self.where = where

    def fail(self, field, rule, value=None, *, show=True):
        got = ""
        if show:
            text = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
            got = f"; got {text[:60] + '...' if len(text) > 60 else text}"
        raise BucketoptError(f"{self.where}: field `{field}` {rule}{got}.", param="plan")

    def int(self, value, field, low=0, high=_INT_LIMIT, *, null=False):
        if value is None and null:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
                or not low <= value <= high:
            self.fail(field, f"must be an integer in [{low:,}, {high:,}]"
                             + (" or null" if null else ""), value)
        return int(value)

    def num(self, value, field, low=0.0, high=math.inf, *, null=False):
        if value is None and null:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer,
                                                            np.floating)) \
                or not math.isfinite(float(value)) or not low <= float(value) <= high:
            self.fail(field, f"must be a finite number in [{low:g}, {high:g}]"
                             + (" or null" if null else ""), value)
        return float(value) if isinstance(value, (float, np.floating)) else int(value)

    def choice(self, value, field, choices, *, null=False):
        if value is None and null:
            return None
        if isinstance(value, bool) or value not in choices:
            self.fail(field, "must be one of " + ", ".join(json.dumps(c) for c in choices)
                      + (" or null" if null else ""), value)
        return value

    def dict(self, value, field, keys, *, null=False, required=None):
        if value is None and null:
            return None
        if not isinstance(value, dict):
            self.fail(field, "must be a JSON object" + (" or null" if null else ""), value)
        unknown = [k for k in value if k not in keys]
        if unknown:
            self.fail(f"{field}.{str(unknown[0])[:40]}" if field else str(unknown[0])[:40],
                      "is not a field of a version-1 plan", show=False)
        for key in (keys if required is None else required):
            if key not in value:
                self.fail(f"{field}.{key}" if field else key, "is missing", show=False)
        return value

    def ints(self, value, field, size=None, low=1):
        if not isinstance(value, (list, tuple)) or not value or len(value) > MAX_BUCKETS:
            self.fail(field, f"must be a non-empty list of at most {MAX_BUCKETS:,} integers",
                      value)
        if size is not None and len(value) != size:
            self.fail(field, f"must hold one entry per bucket ({size})", value)
        return [self.int(v, f"{field}[{i}]", low) for i, v in enumerate(value)]

    def interval(self, value, field, point):
        if value is None:
            if point is not None:
                self.fail(field, "must be [low, high] when the point prediction is given",
                          value)
            return None
        if point is None:
            self.fail(field, "must be null without its point prediction", value)
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            self.fail(field, "must be [low, high]", value)
        low, high = (self.num(v, f"{field}[{i}]") for i, v in enumerate(value))
        slack = 1e-9 * max(abs(point), 1e-300)
        if not low - slack <= point <= high + slack:
            self.fail(field, f"must hold its point prediction {point:g}", value)
        return [float(low), float(high)]


def validate_plan(data, where: str = "plan") -> dict:
    """A checked, normalised copy of a plan dict: every field typed and ranged, the fields
    consistent with each other; anything else is one :class:`BucketoptError` naming the
    field."""
    c = _Checker(where)
    if not isinstance(data, dict):
        c.fail("(top level)", "must be a JSON object (a plan)", data)
    if data.get("format") != FORMAT:
        c.fail("format", f'must be "{FORMAT}" (this is not a bucketopt plan)',
               data.get("format"))
    version = data.get("version")
    if version != VERSION or isinstance(version, bool):
        c.fail("version", f"must be {VERSION} (this bucketopt reads version-{VERSION} plans; "
                          "a newer plan needs a newer bucketopt)", version)
    if data.get("kind") == "2d":  # pairs of lengths: bins (the 2-D plan, below)

        return validate_pair_plan(data, where)
    c.dict(data, "", _KEYS, required=[k for k in _KEYS if k != "bucketopt_version"])
    kind = data["kind"]
    if kind != "1d":
        c.fail("kind", 'must be "1d" (2-D plans need a newer bucketopt)', kind)
    out = {"format": FORMAT, "version": VERSION, "kind": "1d"}
    edges = c.ints(data["boundaries"], "boundaries")
    if any(b > 2**60 for b in edges):
        c.fail("boundaries", "must be at most 2**60", edges)
    if any(b <= a for a, b in zip(edges, edges[1:])):
        c.fail("boundaries", "must be strictly increasing", edges)
    out["boundaries"] = edges
    k = len(edges)
    sizes = None if data["batch_sizes"] is None else c.ints(data["batch_sizes"], "batch_sizes",
                                                            size=k)
    out["batch_sizes"] = sizes
    budget = c.int(data["token_budget"], "token_budget", 1, 2**60, null=True)
    out["token_budget"] = budget
    memory = c.dict(data["memory"], "memory", _MEMORY_KEYS, null=True)
    if memory is not None:
        memory = {key: c.num(memory[key], f"memory.{key}", 0.0, 1e18) for key in _MEMORY_KEYS}
        from .cost.memory import load_memory

        try:
            model = load_memory(dict(memory))
        except BucketoptError as exc:
            c.fail("memory", f"is not a memory model ({str(exc).rstrip('.')})", show=False)
    else:
        model = None
    out["memory"] = memory
    if budget is not None and budget < edges[-1] and memory is None:
        c.fail("token_budget", f"must be at least the last boundary ({edges[-1]:,})", budget)
    if sizes is not None:
        if budget is None and memory is None:
            c.fail("batch_sizes", "must be null without a token_budget or a memory model",
                   sizes)
        from .cost.memory import batch_sizes

        try:
            expected = batch_sizes(np.asarray(edges, dtype=np.int64), budget,
                                       model).tolist()
        except BucketoptError as exc:
            c.fail("batch_sizes", f"cannot be met ({str(exc).rstrip('.')})", show=False)
        if sizes != expected:
            rule = "the memory model's B(b)" if memory is not None else "token_budget // boundary"
            c.fail("batch_sizes", f"must follow {rule}: {expected[:8]}"
                                  f"{'...' if k > 8 else ''}", sizes)
    elif budget is not None or memory is not None:
        c.fail("batch_sizes", "must be given with a token_budget or a memory model", sizes)
    out["pad"] = c.choice(data["pad"], "pad", ("edge", "batch"))
    if out["pad"] == "batch" and sizes is None:
        c.fail("pad", '"batch" needs batch_sizes (a token_budget or a memory model)',
               out["pad"])
    from .objectives import names as objective_names

    out["objective"] = c.choice(data["objective"], "objective", tuple(objective_names()))
    sync = data["sync_buckets"]
    if sync not in (True, False, "step") or not isinstance(sync, (bool, str)):
        c.fail("sync_buckets", 'must be true, false or "step"', sync)
    out["sync_buckets"] = sync
    out["packing"] = c.choice(data["packing"], "packing", _PACKINGS)
    if out["packing"] != "fixed" and budget is None:
        c.fail("packing", f"{json.dumps(out['packing'])} needs a token_budget", out["packing"])
    out["world_size"] = c.int(data["world_size"], "world_size", 1, 2**60)
    out["epochs"] = c.int(data["epochs"], "epochs", 1, 2**60)
    out["profile"] = _profile(c, data["profile"])
    constraints = c.dict(data["constraints"], "constraints", _CONSTRAINT_KEYS, null=True)
    if constraints is not None:
        constraints = {
            "k": c.int(constraints["k"], "constraints.k", 1, 2**62),
            "align": c.int(constraints["align"], "constraints.align", 1, 2**60),
            "min_share": c.num(constraints["min_share"], "constraints.min_share", 0.0, 1.0),
            "max_share": c.num(constraints["max_share"], "constraints.max_share", 0.0, 1.0),
            "min_fill": c.num(constraints["min_fill"], "constraints.min_fill", 0.0, 1.0)}
        if constraints["k"] < k:
            c.fail("constraints.k", f"must be at least the number of buckets ({k})",
                   constraints["k"])
        if constraints["min_share"] > constraints["max_share"]:
            c.fail("constraints.min_share", "must not exceed constraints.max_share",
                   constraints["min_share"])
    out["constraints"] = constraints
    out["max_length"] = c.int(data["max_length"], "max_length", 1, 2**60, null=True)
    out["overflow"] = c.choice(data["overflow"], "overflow", ("truncate", "drop", "split"),
                               null=True)
    if (out["max_length"] is None) != (out["overflow"] is None):
        c.fail("overflow", "must be given exactly when max_length is", out["overflow"])
    if out["max_length"] is not None and edges[-1] > out["max_length"]:
        c.fail("boundaries", f"must end at most at max_length ({out['max_length']:,})", edges)
    out["predictions"] = _predictions(c, data["predictions"], k, out)
    out["optimality"] = _optimality(c, data["optimality"])
    if out["objective"] == "time" and out["profile"] is None:
        c.fail("profile", 'must be given with objective "time"', None)
    fp = c.dict(data["fingerprint"], "fingerprint", _FINGERPRINT_KEYS)
    fp = {"samples": c.int(fp["samples"], "fingerprint.samples", 1, 2**62),
          "real_tokens": c.int(fp["real_tokens"], "fingerprint.real_tokens", 1, 2**62),
          "histogram_sha256": fp["histogram_sha256"]}
    digest = fp["histogram_sha256"]
    if not isinstance(digest, str) or len(digest) != 64 \
            or any(ch not in "0123456789abcdef" for ch in digest):
        c.fail("fingerprint.histogram_sha256", "must be 64 lowercase hex digits", digest)
    if fp["real_tokens"] < fp["samples"]:
        c.fail("fingerprint.real_tokens", "must be at least fingerprint.samples",
               fp["real_tokens"])
    pred = out["predictions"]
    if out["max_length"] is None:  # nothing was cut, dropped or split: the totals agree
        if sum(pred["counts"]) != fp["samples"]:
            c.fail("predictions.counts", f"must add up to fingerprint.samples "
                                         f"({fp['samples']:,})", pred["counts"])
        if pred["real_tokens"] != fp["real_tokens"]:
            c.fail("predictions.real_tokens", f"must equal fingerprint.real_tokens "
                                              f"({fp['real_tokens']:,})", pred["real_tokens"])
    out["fingerprint"] = fp
    if "bucketopt_version" in data:  # which bucketopt wrote it (informative)
        version_text = data["bucketopt_version"]
        if not isinstance(version_text, str) or len(version_text) > 40:
            c.fail("bucketopt_version", "must be a version string", version_text)
        out["bucketopt_version"] = version_text
    checksum = data["checksum"]
    if checksum != plan_checksum(out):
        if not isinstance(checksum, str) or not checksum.startswith("sha256:"):
            c.fail("checksum", 'must be "sha256:" and 64 hex digits', checksum)
        c.fail("checksum", "does not match the plan's content: the plan was edited or "
                           "corrupted (write a new one with solve -o or Solution.to_plan(); "
                           "settings to change at use are arguments of from_plan)", show=False)
    out["checksum"] = checksum
    return out


def _profile(c, value):
    profile = c.dict(value, "profile", _PROFILE_KEYS, null=True)
    if profile is None:
        return None
    name = profile["name"]
    if not isinstance(name, str) or not 0 < len(name) <= 200:
        c.fail("profile.name", "must be a name of 1 to 200 characters", name)
    out = {"name": name}
    for key in ("alpha", "beta", "gamma"):
        out[key] = c.num(profile[key], f"profile.{key}", 0.0, 1e6)
    if out["alpha"] == out["beta"] == out["gamma"] == 0:
        c.fail("profile", "has alpha, beta and gamma all 0", show=False)
    unc = profile["uncertainty"]
    if unc is not None:
        from .cost.costmodel import parse_uncertainty

        try:
            unc = parse_uncertainty(unc, "the plan's profile")
        except BucketoptError as exc:
            c.fail("profile.uncertainty", f"is not valid ({str(exc).rstrip('.')})", show=False)
        unc = json.loads(json.dumps(unc))  # plain lists
    out["uncertainty"] = unc
    try:
        from .cost.costmodel import profile_from_dict

        profile_from_dict(dict(out))
    except BucketoptError as exc:
        c.fail("profile", f"is not a profile ({str(exc).rstrip('.')})", show=False)
    return out


def _predictions(c, value, k, plan):
    p = c.dict(value, "predictions",
               _PREDICTION_KEYS + tuple(n for k in _STEP_KEYS for n in (k, k + "_interval")),
               required=_PREDICTION_KEYS)
    out = {"counts": c.ints(p["counts"], "predictions.counts", size=k, low=0)}
    out["real_tokens"] = c.int(p["real_tokens"], "predictions.real_tokens", 1, 2**62)
    padded = p["padded_tokens"]
    if plan["pad"] == "edge":
        out["padded_tokens"] = c.int(padded, "predictions.padded_tokens", 0, 2**62)
    else:
        out["padded_tokens"] = c.num(padded, "predictions.padded_tokens", 0.0, 2.0**62)
    fraction = c.num(p["padding_fraction"], "predictions.padding_fraction", 0.0, 1.0)
    total = out["real_tokens"] + out["padded_tokens"]
    if not math.isclose(fraction, out["padded_tokens"] / total, rel_tol=1e-9, abs_tol=1e-12):
        c.fail("predictions.padding_fraction", "must be padded_tokens / (real_tokens + "
                                               "padded_tokens)", fraction)
    out["padding_fraction"] = float(fraction)
    for key in ("ktok_per_s", "eta_days"):
        out[key] = c.num(p[key], f"predictions.{key}", 0.0, 1e300, null=True)
        if out[key] is not None:
            out[key] = float(out[key])
            if out[key] <= 0:
                c.fail(f"predictions.{key}", "must be positive", out[key])
        out[key + "_interval"] = c.interval(p[key + "_interval"], f"predictions.{key}_interval",
                                            out[key])
    if (out["ktok_per_s"] is None) != (plan["profile"] is None):
        c.fail("predictions.ktok_per_s", "must be given exactly when a profile is",
               out["ktok_per_s"])
    if (out["eta_days"] is None) != (out["ktok_per_s"] is None):
        c.fail("predictions.eta_days", "must be given exactly when ktok_per_s is",
               out["eta_days"])
    for key in _STEP_KEYS:  # optional: seconds >= 0, each with its interval
        if key not in p:
            continue
        if out["ktok_per_s"] is None:
            c.fail(f"predictions.{key}", "must be given only with a profile", p[key])
        out[key] = float(c.num(p[key], f"predictions.{key}", 0.0, 1e300))
        out[key + "_interval"] = c.interval(p.get(key + "_interval"),
                                            f"predictions.{key}_interval", out[key])
    return out


def _optimality(c, value):
    opt = c.dict(value, "optimality", ("exact", "lower_bound", "gap"), null=True)
    if opt is None:
        return None
    if not isinstance(opt["exact"], bool):
        c.fail("optimality.exact", "must be true or false", opt["exact"])
    out = {"exact": opt["exact"],
           "lower_bound": c.num(opt["lower_bound"], "optimality.lower_bound", 0.0, 1e300,
                                null=True),
           "gap": c.num(opt["gap"], "optimality.gap", 0.0, 1e300, null=True)}
    for key in ("lower_bound", "gap"):
        if out[key] is not None:
            out[key] = float(out[key])
    if out["exact"] and out["gap"] not in (None, 0.0):
        c.fail("optimality.gap", "must be 0 when exact is true", out["gap"])
    return out


# The field checker and the optimality check, for the other kinds of plan (the 2-D plan, below)
Checker = _Checker
check_optimality = _optimality


# --------------------------------------------------------------------------- reading back
def plan_solver_kwargs(plan: dict) -> dict:
    """The keyword arguments of :func:`~bucketopt.evaluate` that re-score the plan's
    boundaries as they were scored (profile, world size, epochs, sync, memory, overflow)."""
    kwargs = dict(token_budget=plan["token_budget"], pad=plan["pad"],
                  sync_buckets=plan["sync_buckets"], max_length=plan["max_length"],
                  overflow=plan["overflow"] or "truncate")
    if plan["profile"] is not None:
        kwargs.update(profile=dict(plan["profile"]), world_size=plan["world_size"],
                      epochs=plan["epochs"])
    if plan["memory"] is not None:
        kwargs["memory"] = dict(plan["memory"])
    return kwargs


# --- 2-D plans ---------------------------------------------------------------------------
# The plan file of a 2-D plan (``kind: "2d"``): the same format as 1-D plans above (format,
# version, checksum, fingerprint, predictions, optimality) with ``bins`` in place of
# ``boundaries``.
#
# Fields: ``bins`` ([[dim0_edge, dim1_edge], ...] in NeMo's order), ``batch_sizes`` (one per bin:
# token_budget // (dim0_edge + dim1_edge), or null without a budget), ``token_budget``, ``pad``,
# ``objective``, ``grid`` ([K1, K2] or null), ``k`` (or null), ``sync_buckets`` (true: the
# sampler's default), ``packing`` ("fixed"), ``world_size``, ``epochs``, ``profile`` (the pair
# cost model's coefficients, or null), ``lengths`` (what the two dimensions are: "input,output";
# for preference data the unit the plan was made for, docs/pairs.md), ``predictions`` (counts,
# real_tokens, padded_tokens, padding_fraction, padding_fraction_by_dim, unassigned, ktok_per_s,
# eta_days), ``optimality``, ``fingerprint`` (of the pairs: samples, real tokens of both
# dimensions, SHA-256 of the pair histogram), ``bucketopt_version``, ``checksum``.


PAIR_KIND = "2d"
_PAIR_KEYS = ("format", "version", "kind", "bins", "batch_sizes", "token_budget", "pad",
              "objective", "grid", "k", "sync_buckets", "packing", "world_size", "epochs",
              "profile", "lengths", "predictions", "optimality", "fingerprint",
              "bucketopt_version", "checksum")
_PAIR_PREDICTION_KEYS = ("counts", "real_tokens", "padded_tokens", "padding_fraction",
                         "padding_fraction_by_dim", "unassigned", "ktok_per_s", "eta_days")
_PAIR_PROFILE_KEYS = ("name", "alpha", "beta_in", "beta_out", "gamma_in", "gamma_out",
                      "gamma_cross", "world_size", "token_budget")


def pair_fingerprint(lengths) -> dict:
    """``{"samples", "real_tokens", "histogram_sha256"}`` of pairs (an (n, 2) array or a
    :class:`~bucketopt.pairs.data.PairHistogram`); the hash covers the distinct pairs and their
    counts, so the order of the samples does not matter."""
    from .pairs.data import as_pair_histogram

    hist = as_pair_histogram(lengths)
    a, b, c = hist.entries()
    digest = hashlib.sha256(b"bucketopt-pairs\0")
    for array in (a, b, c):
        digest.update(memoryview(np.ascontiguousarray(array, dtype="<i8")))
    return {"samples": hist.n, "real_tokens": hist.real_tokens,
            "histogram_sha256": digest.hexdigest()}


def pair_solution_plan(solution) -> dict:
    """The plan of a 2-D :class:`~bucketopt.Solution` (``solve`` or ``evaluate`` on pairs)."""
    from .version import __version__

    settings = solution.settings
    if "fingerprint" not in settings:
        raise BucketoptError("this Solution has no fingerprint of its pairs (it was not made by "
                             "solve or evaluate), so it cannot become a plan.", param=None)
    extra = solution.extra
    model = extra.get("cost_model")
    plan = {
        "format": FORMAT, "version": VERSION, "kind": PAIR_KIND,
        "bins": [[int(a), int(b)] for a, b in solution.bins],
        "batch_sizes": None if solution.batch_sizes is None
        else [int(s) for s in solution.batch_sizes],
        "token_budget": None if solution.token_budget is None else int(solution.token_budget),
        "pad": solution.pad, "objective": solution.objective,
        "grid": None if extra.get("grid") is None else [int(g) for g in extra["grid"]],
        "k": None if solution.k is None else int(solution.k),
        "sync_buckets": True, "packing": "fixed",
        "world_size": int(settings.get("world_size") or 1),
        "epochs": int(settings.get("epochs") or 1),
        "profile": None if model is None else {key: model[key] for key in _PAIR_PROFILE_KEYS},
        "lengths": settings.get("lengths", "input,output"),
        "predictions": {
            **prediction_totals(solution),
            "padding_fraction_by_dim": [float(x) for x in extra["padding_fraction_by_dim"]],
            "unassigned": int(solution.unassigned),
            "ktok_per_s": None if solution.ktok_per_s is None else float(solution.ktok_per_s),
            "eta_days": None if solution.eta_days is None else float(solution.eta_days),
        },
        "optimality": solution.optimality,
        "fingerprint": solution.fingerprint,
        "bucketopt_version": __version__,
    }
    plan["checksum"] = plan_checksum(plan)
    return validate_pair_plan(plan, "the plan")


def validate_pair_plan(data, where: str = "plan") -> dict:
    """A checked copy of a 2-D plan (every field typed and consistent, the checksum matching);
    anything else is one :class:`BucketoptError` naming the field."""

    c = Checker(where)
    if "boundaries" in data and "bins" not in data:
        c.fail("kind", 'is "2d" (bins of pairs) but the plan holds 1-D boundaries', data["kind"])
    c.dict(data, "", _PAIR_KEYS, required=[k for k in _PAIR_KEYS if k != "bucketopt_version"])
    out = {"format": data["format"], "version": data["version"], "kind": PAIR_KIND}
    bins = data["bins"]
    if not isinstance(bins, list) or not bins or not all(
            isinstance(b, list) and len(b) == 2 for b in bins):
        c.fail("bins", "must be a non-empty list of [dim0_edge, dim1_edge]", bins)
    bins = [[c.int(x, f"bins[{i}]", 1), c.int(y, f"bins[{i}]", 1)] for i, (x, y) in
            enumerate(bins)]
    if any(tuple(q) < tuple(p) for p, q in zip(bins, bins[1:])):
        c.fail("bins", "must be ascending by dim0 edge, then dim1 edge", bins)
    out["bins"] = bins
    budget = c.int(data["token_budget"], "token_budget", 1, 2**60, null=True)
    sizes = data["batch_sizes"]
    if budget is None:
        if sizes is not None:
            c.fail("batch_sizes", "must be null without a token_budget", sizes)
    else:
        sizes = c.ints(sizes, "batch_sizes", size=len(bins))
        expected = [budget // (x + y) for x, y in bins]
        if sizes != expected:
            c.fail("batch_sizes", "must follow token_budget // (dim0_edge + dim1_edge)", sizes)
    out["batch_sizes"] = sizes
    out["token_budget"] = budget
    out["pad"] = c.choice(data["pad"], "pad", ("edge", "batch"))
    out["objective"] = c.choice(data["objective"], "objective", ("padding", "time"))
    grid = data["grid"]
    if grid is not None and (not isinstance(grid, list) or len(grid) != 2):
        c.fail("grid", "must be [K1, K2] or null", grid)
    out["grid"] = None if grid is None else [c.int(g, "grid", 1) for g in grid]
    out["k"] = c.int(data["k"], "k", 1, 2**62, null=True)
    if data["sync_buckets"] is not True:
        c.fail("sync_buckets", "must be true (2-D plans run synced buckets)",
               data["sync_buckets"])
    out["sync_buckets"] = True
    out["packing"] = c.choice(data["packing"], "packing", ("fixed",))
    out["world_size"] = c.int(data["world_size"], "world_size", 1, 2**60)
    out["epochs"] = c.int(data["epochs"], "epochs", 1, 2**60)
    profile = c.dict(data["profile"], "profile", _PAIR_PROFILE_KEYS, null=True)
    out["profile"] = profile
    if not isinstance(data["lengths"], str) or len(data["lengths"]) > 200:
        c.fail("lengths", "must say what the two dimensions are (a short string)",
               data["lengths"])
    out["lengths"] = data["lengths"]
    pred = c.dict(data["predictions"], "predictions", _PAIR_PREDICTION_KEYS)
    counts = c.ints(pred["counts"], "predictions.counts", size=len(bins), low=0)
    out["predictions"] = {**pred, "counts": counts}
    out["optimality"] = check_optimality(c, data["optimality"])
    fp = c.dict(data["fingerprint"], "fingerprint", ("samples", "real_tokens",
                                                     "histogram_sha256"))
    fp = {"samples": c.int(fp["samples"], "fingerprint.samples", 1),
          "real_tokens": c.int(fp["real_tokens"], "fingerprint.real_tokens", 1),
          "histogram_sha256": fp["histogram_sha256"]}
    digest = fp["histogram_sha256"]
    if not isinstance(digest, str) or len(digest) != 64 or any(
            ch not in "0123456789abcdef" for ch in digest):
        c.fail("fingerprint.histogram_sha256", "must be 64 lowercase hex digits", digest)
    if sum(counts) + c.int(pred["unassigned"], "predictions.unassigned", 0) != fp["samples"]:
        c.fail("predictions.counts", "with predictions.unassigned must add up to "
                                     f"fingerprint.samples ({fp['samples']:,})", counts)
    out["fingerprint"] = fp
    if "bucketopt_version" in data:
        out["bucketopt_version"] = data["bucketopt_version"]
    if data["checksum"] != plan_checksum(out):
        c.fail("checksum", "does not match the plan's content: the plan was edited or "
                           "corrupted (write a new one with solve -o or Solution.to_plan())",
               show=False)
    out["checksum"] = data["checksum"]
    return out
