"""The plan file of a 2-D plan (``kind: "2d"``): the same format as 1-D plans
(:mod:`bucketopt.plan`: format, version, checksum, fingerprint, predictions, optimality) with
``bins`` in place of ``boundaries``.

Fields: ``bins`` ([[dim0_edge, dim1_edge], ...] in NeMo's order), ``batch_sizes`` (one per bin:
token_budget // (dim0_edge + dim1_edge), or null without a budget), ``token_budget``, ``pad``,
``objective``, ``grid`` ([K1, K2] or null), ``k`` (or null), ``sync_buckets`` (true: the
sampler's default), ``packing`` ("fixed"), ``world_size``, ``epochs``, ``profile`` (the pair
cost model's coefficients, or null), ``lengths`` (what the two dimensions are: "input,output";
for preference data the unit the plan was made for, docs/pairs.md), ``predictions`` (counts,
real_tokens, padded_tokens, padding_fraction, padding_fraction_by_dim, unassigned, ktok_per_s,
eta_days), ``optimality``, ``fingerprint`` (of the pairs: samples, real tokens of both
dimensions, SHA-256 of the pair histogram), ``bucketopt_version``, ``checksum``.
"""

from __future__ import annotations

import hashlib

import numpy as np

from ..errors import BucketoptError

KIND = "2d"
_KEYS = ("format", "version", "kind", "bins", "batch_sizes", "token_budget", "pad", "objective",
         "grid", "k", "sync_buckets", "packing", "world_size", "epochs", "profile", "lengths",
         "predictions", "optimality", "fingerprint", "bucketopt_version", "checksum")
_PREDICTION_KEYS = ("counts", "real_tokens", "padded_tokens", "padding_fraction",
                    "padding_fraction_by_dim", "unassigned", "ktok_per_s", "eta_days")
_PROFILE_KEYS = ("name", "alpha", "beta_in", "beta_out", "gamma_in", "gamma_out",
                 "gamma_cross", "world_size", "token_budget")


def pair_fingerprint(lengths) -> dict:
    """``{"samples", "real_tokens", "histogram_sha256"}`` of pairs (an (n, 2) array or a
    :class:`~bucketopt.pairs.data.PairHistogram`); the hash covers the distinct pairs and their
    counts, so the order of the samples does not matter."""
    from .data import as_pair_histogram

    hist = as_pair_histogram(lengths)
    a, b, c = hist.entries()
    digest = hashlib.sha256(b"bucketopt-pairs\0")
    for array in (a, b, c):
        digest.update(memoryview(np.ascontiguousarray(array, dtype="<i8")))
    return {"samples": hist.n, "real_tokens": hist.real_tokens,
            "histogram_sha256": digest.hexdigest()}


def pair_solution_plan(solution) -> dict:
    """The plan of a 2-D :class:`~bucketopt.Solution` (``solve`` or ``evaluate`` on pairs)."""
    from ..plan import FORMAT, VERSION, plan_checksum, prediction_totals
    from ..version import __version__

    settings = solution.settings
    if "fingerprint" not in settings:
        raise BucketoptError("this Solution has no fingerprint of its pairs (it was not made by "
                             "solve or evaluate), so it cannot become a plan.", param=None)
    extra = solution.extra
    model = extra.get("cost_model")
    plan = {
        "format": FORMAT, "version": VERSION, "kind": KIND,
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
        "profile": None if model is None else {key: model[key] for key in _PROFILE_KEYS},
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
    from ..plan import Checker, check_optimality, plan_checksum

    c = Checker(where)
    if "boundaries" in data and "bins" not in data:
        c.fail("kind", 'is "2d" (bins of pairs) but the plan holds 1-D boundaries', data["kind"])
    c.dict(data, "", _KEYS, required=[k for k in _KEYS if k != "bucketopt_version"])
    out = {"format": data["format"], "version": data["version"], "kind": KIND}
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
    profile = c.dict(data["profile"], "profile", _PROFILE_KEYS, null=True)
    out["profile"] = profile
    if not isinstance(data["lengths"], str) or len(data["lengths"]) > 200:
        c.fail("lengths", "must say what the two dimensions are (a short string)",
               data["lengths"])
    out["lengths"] = data["lengths"]
    pred = c.dict(data["predictions"], "predictions", _PREDICTION_KEYS)
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


def plan_lengths_and_sampler_kwargs(plan) -> dict:
    """The sampler's keyword arguments a 2-D plan gives."""
    return {"bins": [tuple(b) for b in plan["bins"]], "batch_sizes": plan["batch_sizes"],
            "token_budget": plan["token_budget"], "world_size": plan["world_size"]}
