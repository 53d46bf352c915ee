"""NeMo's equal-mass 2-D grids and bucketopt's exact plans side by side on one set of pairs.

For every grid (K1, K2) (default NeMo's 30 x 2 and 6 x 2) the rows are:

- ``nemo-K1xK2``: NeMo's estimator's bins (:func:`bucketopt.pairs.nemo.nemo_estimate_bins`) as
  NeMo's sampler uses them: its padding counts the samples its bins keep; ``unassigned`` the
  ones they drop (and ``unassigned_with_max_tps`` with its printed ``max_tps`` filter on);
- ``bucketopt-K1xK2``: the exact plan on the same grid;
- ``bucketopt-kN``: the exact plan with N bins in total (N = the NeMo row's bin count),
  distributed freely among the input buckets;

and with ``k``, ``bucketopt-kK``. Every row: bins, padding (total and per dimension),
unassigned samples, batch sizes with a token budget, predicted seconds and Ktok/s with a
profile. ``recommended`` names the bucketopt row with the least padding (the most Ktok/s with a
profile).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import BucketoptError

DEFAULT_GRIDS = ((30, 2), (6, 2))


@dataclass
class PairComparison:
    strategies: dict
    recommended: str | None
    token_budget: int | None
    pad: str
    solutions: dict = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict:
        return {"kind": "2d", "pad": self.pad, "token_budget": self.token_budget,
                "recommended": self.recommended, "strategies": self.strategies}


def _row(sol, *, bucketopt: bool, note: str | None = None) -> dict:
    row = {
        "bins": [list(b) for b in sol.bins],
        "num_bins": len(sol.bins),
        "padded_tokens": sol.padded_tokens,
        "real_tokens": sol.real_tokens,
        "padding_fraction": sol.padding_fraction,
        "padding_fraction_by_dim": sol.extra["padding_fraction_by_dim"],
        "unassigned": sol.unassigned,
        "batch_sizes": None if sol.batch_sizes is None else list(sol.batch_sizes),
        "bucketopt": bucketopt,
        "optimality": sol.optimality,
    }
    if sol.ktok_per_s is not None:
        row.update(ktok_per_s=sol.ktok_per_s, eta_days=sol.eta_days,
                   predicted_seconds_per_epoch=sol.extra["predicted_seconds_per_epoch"])
    if note:
        row["note"] = note
    return row


def _solve(pairs, k, grid, options):
    """The exact plan, or with dynamic padding beyond the exact DP's reach, the exact edge plan
    scored under dynamic padding (said in the row's note, never called exact)."""
    from .plans import evaluate_pairs, solve_pairs

    try:
        return solve_pairs(pairs, k, grid=grid, **options), None
    except BucketoptError as exc:
        if "work limit" not in str(exc):
            raise
    edge = solve_pairs(pairs, k, grid=grid, **{**options, "pad": "edge", "objective": "padding"})
    sol = evaluate_pairs(pairs, edge.bins, **{key: v for key, v in options.items()
                                               if key != "objective"})
    what = "predicted time" if sol.ktok_per_s is not None and options.get("pad") == "edge" \
        else "dynamic padding"
    return sol, (f"{what} of the edge-padding optimum (the exact DP of this objective is "
                 "beyond its work limit here)")


def compare_pairs(pairs, k=None, *, grids=DEFAULT_GRIDS, token_budget=None, pad="edge",
                  profile=None, world_size=None, epochs=1, objective=None) -> PairComparison:
    """NeMo's grids and bucketopt's plans side by side (see the module's list)."""
    from .data import check_pairs
    from .nemo import nemo_estimate_bins
    from .plans import check_grid, evaluate_pairs

    pairs = check_pairs(pairs)
    grids = [check_grid(g) for g in grids]
    score = dict(token_budget=token_budget, pad=pad, profile=profile, world_size=world_size,
                 epochs=epochs)
    options = {**score, "objective": objective}
    rows, sols = {}, {}
    for grid in grids:
        name = f"{grid[0]}x{grid[1]}"
        try:
            bins, tps = nemo_estimate_bins(pairs, *grid)
        except BucketoptError as exc:
            rows[f"nemo-{name}"] = {"bucketopt": False, "error": str(exc)}
            bins = None
        if bins is not None:
            theirs = evaluate_pairs(pairs, bins, **score)
            row = _row(theirs, bucketopt=False,
                       note="padding of the samples its bins keep" if theirs.unassigned
                       else None)
            row["max_tps"] = tps
            row["unassigned_with_max_tps"] = _dropped_with_tps(pairs, bins, tps)
            rows[f"nemo-{name}"] = row
        sol, note = _solve(pairs, None, grid, options)
        rows[f"bucketopt-{name}"] = _row(sol, bucketopt=True, note=note)
        sols[f"bucketopt-{name}"] = sol
        if bins is not None:
            n = len(bins)
            if f"bucketopt-k{n}" not in rows:
                sol, note = _solve(pairs, n, None, options)
                rows[f"bucketopt-k{n}"] = _row(sol, bucketopt=True, note=note)
                sols[f"bucketopt-k{n}"] = sol
    if k is not None and f"bucketopt-k{k}" not in rows:
        sol, note = _solve(pairs, k, None, options)
        rows[f"bucketopt-k{k}"] = _row(sol, bucketopt=True, note=note)
        sols[f"bucketopt-k{k}"] = sol
    ours = [name for name, row in rows.items() if row.get("bucketopt")]
    timed = all("ktok_per_s" in rows[name] for name in ours)
    best = (max(ours, key=lambda n: rows[n]["ktok_per_s"]) if timed
            else min(ours, key=lambda n: rows[n]["padding_fraction"]))
    for name, row in rows.items():
        row["recommended"] = name == best
    budget = next((s.token_budget for s in sols.values()), token_budget)
    return PairComparison(rows, best, budget, pad, sols)


def _dropped_with_tps(pairs, bins, tps) -> int:
    from .plans import assign_bins

    idx = assign_bins(pairs[:, 0], pairs[:, 1], np.asarray(bins))
    ok = idx >= 0
    ratio = pairs[:, 1] / pairs[:, 0]
    over = np.zeros(len(pairs), dtype=bool)
    over[ok] = ratio[ok] > np.asarray(tps)[idx[ok]]
    return int((~ok).sum() + over.sum())


def comparison_table(comp: PairComparison) -> str:
    lines = [f"{'':3}{'strategy':<18} {'bins':>5} {'padding':>8} {'input':>8} {'output':>8} "
             f"{'unassigned':>11}" + (f" {'Ktok/s':>9}" if any(
                 "ktok_per_s" in r for r in comp.strategies.values()) else "")]
    for name, row in comp.strategies.items():
        mark = "=> " if row.get("recommended") else "   "
        if "error" in row:
            lines.append(f"{mark}{name:<18} {row['error']}")
            continue
        by_dim = row["padding_fraction_by_dim"]
        rate = f" {row['ktok_per_s']:>9.1f}" if "ktok_per_s" in row else ""
        lines.append(f"{mark}{name:<18} {row['num_bins']:>5} {row['padding_fraction']:>8.2%} "
                     f"{by_dim[0]:>8.2%} {by_dim[1]:>8.2%} {row['unassigned']:>11,}{rate}")
    lines.append("padding: share of computed tokens (total, input, output); nemo rows: padding "
                 "of the samples their bins keep; => recommended")
    return "\n".join(lines)
