"""solve() and evaluate() on pairs of lengths (input, output): exact hierarchical 2-D bins.

A plan is a tuple of bins ``(dim0_edge, dim1_edge)`` in NeMo's order (ascending dim0 edge, then
dim1 edge). A sample (a, b) goes to the smallest dim0 edge >= a, then to the smallest dim1 edge
>= b among that dim0 edge's bins (NeMo's strict 2-D selection); a sample that fits no bin is
``unassigned``. bucketopt's own plans never leave one: each dim0 bucket's last dim1 edge is the
largest output of its samples.

What the DP proves (``Solution.optimality``): the minimum over every hierarchical bin set whose
edges are lengths that occur (each dim0 edge the largest input of its bucket, each dim1 edge
the largest output of its bin), with at most ``k`` bins in total, or at most K1 dim0 buckets of
at most K2 bins each on a grid. For edge padding and the static-shape time these tight edges
lose nothing (a higher edge only pads more); for dynamic padding the batch size depends on the
edges, and the proof, as in 1-D, covers edges drawn from the lengths.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import BucketoptError
from ..validate import check_int, check_positive_int, shown
from .data import PairHistogram, as_pair_histogram

PAIR_PADS = ("edge", "batch")
# The general (dynamic padding, time) DP costs about this many steps: refused beyond it.
GENERAL_WORK_LIMIT = 1e10
# Beyond this many steps (a few seconds) time is solved on its linear relaxation, with a proven
# gap, unless exact=True.
TIME_WORK_LIMIT = 2e9
_PROFILE_KEYS = ("alpha", "beta_in", "beta_out", "gamma_in", "gamma_out", "gamma_cross")


@dataclass(frozen=True)
class PairOptimality:
    """What the 2-D DP proves: ``lower_bound <= optimum <= value`` (exact: equal)."""

    exact: bool
    lower_bound: float
    value: float

    def to_dict(self) -> dict:
        gap = 0.0 if self.exact else (self.value / self.lower_bound - 1.0
                                      if self.lower_bound > 0 else None)
        return {"exact": bool(self.exact), "lower_bound": float(self.lower_bound), "gap": gap}


@dataclass(frozen=True)
class PairCostModel:
    """Seconds of one micro-batch of s pairs padded to (L_in, L_out) on one GPU:
    ``alpha + s (beta_in L_in + beta_out L_out + gamma_in L_in^2 + gamma_out L_out^2 +
    gamma_cross L_in L_out)``; the cross term is an encoder-decoder's cross-attention."""

    alpha: float
    beta_in: float
    beta_out: float
    gamma_in: float
    gamma_out: float
    gamma_cross: float
    world_size: int = 1
    token_budget: int | None = None
    name: str = "inline"

    def params(self, token_budget) -> np.ndarray:
        return np.array([float(token_budget), self.alpha, self.beta_in, self.beta_out,
                         self.gamma_in, self.gamma_out, self.gamma_cross,
                         float(self.world_size)])

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _profiles_dir() -> Path:
    return Path(__file__).with_name("profiles")


def available_pair_profiles() -> list:
    return sorted(p.stem for p in _profiles_dir().glob("*.json"))


def load_pair_profile(profile, world_size=None) -> PairCostModel:
    """A :class:`PairCostModel` from a shipped 2-D profile name (``encdec-example``), a dict or
    JSON file holding the six coefficients, or a 1-D profile (name, path or dict with alpha,
    beta, gamma) read as a decoder-only model on the concatenation: L = L_in + L_out, so
    beta_in = beta_out = beta, gamma_in = gamma_out = gamma and gamma_cross = 2 gamma."""
    if isinstance(profile, PairCostModel):
        model = profile
    else:
        name = "inline"
        if isinstance(profile, (str, Path)) and str(profile) in available_pair_profiles():
            name = str(profile)
            data = json.loads((_profiles_dir() / f"{name}.json").read_text())
        elif isinstance(profile, dict):
            data = dict(profile)
        else:
            from ..cost.costmodel import load_profile

            one = load_profile(profile)
            data = {"alpha": one.alpha, "beta": one.beta, "gamma": one.gamma,
                    "world_size": one.world_size, "token_budget": one.token_budget}
            name = getattr(one, "name", None) or str(profile)
        if all(key in data for key in _PROFILE_KEYS):
            coef = {key: data[key] for key in _PROFILE_KEYS}
        elif all(key in data for key in ("alpha", "beta", "gamma")):
            coef = {"alpha": data["alpha"], "beta_in": data["beta"], "beta_out": data["beta"],
                    "gamma_in": data["gamma"], "gamma_out": data["gamma"],
                    "gamma_cross": 2 * data["gamma"]}
        else:
            raise BucketoptError(
                "`profile` for pairs must hold alpha, beta_in, beta_out, gamma_in, gamma_out, "
                f"gamma_cross (or a 1-D profile's alpha, beta, gamma); got keys "
                f"{sorted(data)}.", param="profile")
        for key, value in coef.items():
            if not isinstance(value, (int, float)) or isinstance(value, bool) or \
                    not np.isfinite(value) or value < 0:
                raise BucketoptError(f"profile coefficient {key} must be a finite number >= 0; "
                                     f"got {shown(value)}.", param="profile")
        budget = data.get("token_budget")
        model = PairCostModel(**{k: float(v) for k, v in coef.items()},
                              world_size=int(data.get("world_size") or 1),
                              token_budget=None if budget is None else int(budget), name=name)
    if world_size is not None:
        model = dataclasses.replace(model, world_size=check_positive_int(world_size,
                                                                         "world_size"))
    return model


def check_grid(grid):
    """``grid``: None or (K1, K2), two integers >= 1 (a string "6x2" is read too)."""
    if grid is None:
        return None
    if isinstance(grid, str):
        parts = grid.lower().replace("*", "x").split("x")
        try:
            grid = tuple(int(p) for p in parts)
        except ValueError:
            grid = (grid,)
    if not isinstance(grid, (tuple, list)) or len(grid) != 2:
        raise BucketoptError(f"`grid` must be (K1, K2), e.g. (6, 2) or '6x2'; got {shown(grid)}.",
                             param="grid")
    return (check_int(grid[0], "grid K1", low=1, high=100_000, param="grid"),
            check_int(grid[1], "grid K2", low=1, high=100_000, param="grid"))


def check_bins(bins):
    """Bins: (dim0_edge, dim1_edge) pairs of positive integers, ascending in NeMo's order (dim0,
    then dim1). A repeated bin is accepted (NeMo's estimator can print one): NeMo's selection
    fills the first copy only."""
    from .data import check_pairs

    arr = check_pairs(bins, name="bins", param="bins")
    for t in range(1, arr.shape[0]):
        if tuple(arr[t]) < tuple(arr[t - 1]):
            raise BucketoptError(
                f"bins must be ascending by dim0 edge, then dim1 edge (NeMo's order); got "
                f"{list(map(int, arr[t - 1]))} then {list(map(int, arr[t]))}.", param="bins")
    return arr


def assign_bins(a, b, bins: np.ndarray) -> np.ndarray:
    """The bin index of every pair (a[i], b[i]) by NeMo's strict 2-D selection; -1 where no bin
    holds it. Lengths and edges may be integers or numbers in a unit (seconds)."""
    a = np.asarray(a)
    b = np.asarray(b)
    bins = np.asarray(bins)
    dim0 = np.unique(bins[:, 0])
    starts = np.searchsorted(bins[:, 0], dim0, side="left")
    ends = np.searchsorted(bins[:, 0], dim0, side="right")
    g = np.searchsorted(dim0, a, side="left")
    out = np.full(a.size, -1, dtype=np.int64)
    for t in range(dim0.size):
        sel = np.flatnonzero(g == t)
        if sel.size == 0:
            continue
        sub = bins[starts[t]:ends[t], 1]
        pos = np.searchsorted(sub, b[sel], side="left")
        ok = pos < sub.size
        out[sel[ok]] = starts[t] + pos[ok]
    return out


def _bin_statistics(hist: PairHistogram, bins, token_budget, pad, model):
    """Per-bin counts, real and padded tokens (total and per dimension), batch sizes and
    predicted seconds, and the unassigned samples."""
    from ..orderstats import log_factorials
    from .bin_costs import KIND_TIME, marginal_max, rect_cost

    a, b, c = hist.entries()
    idx = assign_bins(a, b, bins)
    nb = bins.shape[0]
    counts = np.zeros(nb, dtype=np.int64)
    real = np.zeros((nb, 2), dtype=np.int64)
    padded = np.zeros((nb, 2), dtype=np.float64 if pad == "batch" else np.int64)
    sizes = None if token_budget is None else token_budget // (bins[:, 0] + bins[:, 1])
    seconds = None if model is None else np.zeros(nb)
    lf_hi, lf_lo = log_factorials(hist.n) if pad == "batch" else (None, None)
    for t in range(nb):
        sel = idx == t
        at, bt, ct = a[sel], b[sel], c[sel]
        n = int(ct.sum())
        counts[t] = n
        real[t] = (int(np.sum(at * ct)), int(np.sum(bt * ct)))
        e0, e1 = int(bins[t, 0]), int(bins[t, 1])
        if n == 0:
            continue
        if pad == "edge":
            padded[t] = (e0 * n - real[t, 0], e1 * n - real[t, 1])
        else:
            B = int(sizes[t])
            q, r = divmod(n, B)
            for d, vals in ((0, at), (1, bt)):
                values, inv = np.unique(vals, return_inverse=True)
                cnt = np.bincount(inv, weights=ct).astype(np.int64)
                top = values.size - 1
                scratch = np.empty((2, values.size + 1), dtype=np.int64)
                comp = 0.0
                if q:
                    comp += q * B * marginal_max(values, cnt, 0, top, B, lf_hi, lf_lo, scratch)
                if r:
                    comp += r * marginal_max(values, cnt, 0, top, r, lf_hi, lf_lo, scratch)
                padded[t, d] = comp - real[t, d]
        if model is not None:
            params = model.params(token_budget)
            empty = np.zeros(1, dtype=np.int64)
            seconds[t] = rect_cost(KIND_TIME, params, e0, e1, n, 0, (empty, empty), 0, -1,
                                   (empty, empty), 0, -1)
    lost = idx < 0
    unassigned = int(c[lost].sum())
    lost_tokens = int(np.sum((a[lost] + b[lost]) * c[lost]))
    return counts, real, padded, sizes, seconds, unassigned, lost_tokens


def make_pair_solution(hist: PairHistogram, bins, *, token_budget, pad, model=None, epochs=1,
                       objective="padding", k=None, grid=None, certificate=None,
                       unit="input,output"):
    from ..solution import Solution

    bins = np.asarray(bins, dtype=np.int64).reshape(-1, 2)
    counts, real, padded, sizes, seconds, unassigned, lost_tokens = _bin_statistics(
        hist, bins, token_budget, pad, model)
    real_total = int(real.sum())
    if pad == "edge":
        padded_total = int(padded.sum())
        per_bin = tuple(int(p) for p in padded.sum(axis=1))
        by_dim = [int(p) for p in padded.sum(axis=0)]
    else:
        padded_total = float(padded.sum())
        per_bin = tuple(float(p) for p in padded.sum(axis=1))
        by_dim = [float(p) for p in padded.sum(axis=0)]
    comp_dim = [real[:, d].sum() + by_dim[d] for d in (0, 1)]
    extra = {
        "bins": [[int(x), int(y)] for x, y in bins],
        "unassigned": unassigned,
        "unassigned_tokens": lost_tokens,
        "real_tokens_by_dim": [int(real[:, 0].sum()), int(real[:, 1].sum())],
        "padded_tokens_by_dim": by_dim,
        "padding_fraction_by_dim": [float(by_dim[d] / comp_dim[d]) if comp_dim[d] else 0.0
                                    for d in (0, 1)],
    }
    if grid is not None:
        extra["grid"] = list(grid)
    warnings = []
    if unassigned:
        warnings.append(f"{unassigned:,} sample(s) fit no bin (an input above every dim0 edge, or "
                        "an output above every dim1 edge of its dim0 bucket): a 2-D sampler "
                        "such as NeMo's drops them.")
    ktok = eta = None
    if seconds is not None:
        total = float(seconds.sum())
        extra["predicted_seconds_per_epoch"] = total
        extra["cost_model"] = model.to_dict()
        if total > 0:
            ktok = real_total / total / 1000.0
            eta = epochs * total / 86400.0
    total_tokens = real_total + padded_total
    from ..plan import pair_fingerprint

    settings = {"fingerprint": pair_fingerprint(hist), "epochs": epochs,
                "world_size": None if model is None else model.world_size,
                "lengths": unit}
    return Solution(
        boundaries=tuple(int(e) for e in np.unique(bins[:, 0])),
        counts=tuple(int(x) for x in counts),
        batch_sizes=None if sizes is None else tuple(int(s) for s in sizes),
        real_tokens=real_total, padded_tokens=padded_total,
        padding_fraction=float(padded_total / total_tokens) if total_tokens else 0.0,
        bucket_real_tokens=tuple(int(x) for x in real.sum(axis=1)),
        bucket_padded_tokens=per_bin, n_samples=hist.n, pad=pad, objective=objective,
        token_budget=token_budget, k=k, ktok_per_s=ktok, eta_days=eta,
        warnings=tuple(warnings), extra=extra, certificate=certificate, settings=settings,
        bins=tuple((int(x), int(y)) for x, y in bins))


def _resolve(lengths, pad, objective, token_budget, profile, world_size):
    hist = as_pair_histogram(lengths)
    if not isinstance(pad, str) or pad not in PAIR_PADS:
        raise BucketoptError(f"`pad` for pairs must be one of {', '.join(PAIR_PADS)}; got "
                             f"{shown(pad)}.", param="pad")
    model = None if profile is None else load_pair_profile(profile, world_size)
    if objective is None:
        objective = "time" if model is not None else "padding"
    if objective not in ("padding", "time"):
        raise BucketoptError(f"`objective` must be 'padding' or 'time'; got {shown(objective)}.",
                             param="objective")
    if objective == "time" and model is None:
        raise BucketoptError('objective="time" needs a profile (a cost model).', param="profile")
    if token_budget is None and model is not None:
        token_budget = model.token_budget
    if token_budget is not None:
        token_budget = check_positive_int(token_budget, "token_budget")
        a, b, _ = hist.entries()
        longest = int(np.max(a + b))
        if longest > token_budget:
            raise BucketoptError(f"token_budget={token_budget} is smaller than the longest pair "
                                 f"(input + output = {longest}).", param="token_budget")
    if pad == "batch" and token_budget is None:
        raise BucketoptError('pad="batch" needs a token_budget: each bin\'s batch size is '
                             "floor(token_budget / (dim0_edge + dim1_edge)).",
                             param="token_budget")
    if model is not None and token_budget is None:
        raise BucketoptError("a profile needs a token_budget for the batch sizes (neither the "
                             "call nor the profile gives one).", param="token_budget")
    if objective == "time" and pad == "batch":
        raise BucketoptError('objective="time" on pairs optimises static shapes: use '
                             'pad="edge" (dynamic padding is optimised with '
                             'objective="padding").', param="pad")
    return hist, objective, token_budget, model


def solve_pairs(lengths, k, *, grid=None, token_budget=None, pad="edge", objective=None,
                profile=None, world_size=None, epochs=1, exact=False, unit="input,output"):
    """The exact 2-D plan: at most ``k`` bins distributed optimally among the dim0 buckets, or
    ``grid=(K1, K2)``. ``Solution.bins`` holds the bins; every sample has one.

    Edge padding is always exact. Dynamic padding runs the exact rectangle DP up to
    :data:`GENERAL_WORK_LIMIT` steps and is refused beyond it; time runs it up to
    :data:`TIME_WORK_LIMIT` steps and beyond it is solved on its linear relaxation (each bin's
    ceil(N / B) batches counted as N / B), whose optimum bounds the time optimum from below:
    ``optimality`` then holds that bound and the proven gap (at most alpha x bins / world size
    over the bound). ``exact=True`` runs the exact DP whatever it costs.
    ``unit``: what the two dimensions are, written in the plan's ``lengths`` field (e.g.
    ``"prompt,max(chosen,rejected)"`` for preference pairs, bucketopt.pairs.preference)."""
    from ..orderstats import log_factorials
    from .bin_costs import EDGE, FINF, INF, KIND_BATCH, KIND_TIME, LINEAR_TIME
    from .hierarchical_dp import cuts, outer_dp

    grid = check_grid(grid)
    if grid is None or k is not None:
        k = check_int(k, "k", low=1, high=100_000)
    if not isinstance(unit, str) or not 0 < len(unit) <= 200:
        raise BucketoptError(f"`unit` must say what the two dimensions are (a short string); "
                             f"got {shown(unit)}.", param="unit")
    hist, objective, token_budget, model = _resolve(lengths, pad, objective, token_budget,
                                                    profile, world_size)
    epochs = check_positive_int(epochs, "epochs")
    ma, mb = hist.a_values.size, hist.b_values.size
    layers, k2 = (grid[0], grid[1]) if grid is not None else (k, k)
    layers = min(layers, ma if grid is not None else hist.distinct)
    k2 = min(k2, mb)
    is_grid = grid is not None
    args = (hist.a_values, hist.b_values, hist.a_ptr, hist.a_b, hist.a_count)
    cols = (hist.b_ptr, hist.b_a, hist.b_count)
    params = np.zeros(8)
    if pad == "edge" and objective == "padding":
        mode = EDGE
    else:
        # steps of the rectangle DP: per input range, every output interval's cost (dynamic
        # padding scans both marginals; time needs the count alone) and the inner layers
        scan = (ma + mb) if pad == "batch" else 1
        work = ma * ma / 2 * (mb * mb * scan + mb * mb * min(k2, mb))
        params = model.params(token_budget) if model is not None else np.array(
            [float(token_budget), 0, 0, 0, 0, 0, 0, 1.0])
        mode = KIND_BATCH if pad == "batch" else KIND_TIME
        if mode == KIND_BATCH:  # the order statistics' log(k!) table rides along
            params = np.concatenate([params, *log_factorials(hist.n)])
        if mode == KIND_TIME and work > TIME_WORK_LIMIT and not exact:
            mode = LINEAR_TIME  # fast, with a proven gap (exact=True: the exact DP)
        elif work > GENERAL_WORK_LIMIT and not exact:
            raise BucketoptError(
                f"pad={shown(pad)} with objective={shown(objective)} on {ma:,} distinct "
                f"inputs x {mb:,} distinct outputs is beyond the exact 2-D DP's work limit "
                f"({work:.2g} steps); coarsen the lengths (e.g. round them up to multiples "
                'of 8), optimise edge padding (pad="edge", objective="padding"), or pass '
                "exact=True (--exact) to run it whatever it costs.", param="pad")
    big = INF if mode == EDGE else FINF
    F = np.full((ma + 1, layers + 1), big)
    F[0, :] = 0
    arg_i, arg_m = outer_dp(args, cols, k2, is_grid, mode, params, F, big)
    best = F[ma, layers]
    if best >= big:
        raise BucketoptError("no 2-D plan fits the token budget: some bin's input + output "
                             "edges exceed it; raise token_budget.", param="token_budget")
    bins = []
    j, layer = ma, layers
    while j > 0:
        i, m = int(arg_i[j, layer]), int(arg_m[j, layer])
        subs = cuts(i, j - 1, m, args, cols, mode, params, big)
        bins[:0] = [(int(hist.a_values[j - 1]), int(e)) for e in subs]
        layer -= 1 if is_grid else m
        j = i
    relaxed = mode == LINEAR_TIME
    bound = float(best)
    sol = make_pair_solution(hist, bins, token_budget=token_budget, pad=pad, model=model,
                             epochs=epochs, objective=objective, k=k, grid=grid, unit=unit)
    value = (sol.extra["predicted_seconds_per_epoch"] if objective == "time"
             else sol.padded_tokens)
    if relaxed:  # the relaxation's optimum bounds the time optimum; its plan is within the gap
        alpha_room = params[1] * len(bins) / params[7]
        slack = 1e-9 * max(abs(value), abs(bound)) + 1e-12  # float rounding of the sums
        if not bound <= value + slack or value > bound + alpha_room + slack:
            raise AssertionError(f"relaxed bound {bound} and plan time {value} disagree")
        cert = PairOptimality(value <= bound, min(bound, value), value)
    else:
        if abs(value - bound) > 1e-6 * max(1.0, abs(bound)):  # the DP's value is the plan's
            raise AssertionError(f"2-D DP value {bound} differs from its plan's {value}")
        cert = PairOptimality(True, bound, value)
    return dataclasses.replace(sol, certificate=cert)


def evaluate_pairs(lengths, bins, *, token_budget=None, pad="edge", profile=None,
                   world_size=None, epochs=1):
    """The statistics of given bins on pairs; ``Solution.unassigned`` counts the samples that
    fit no bin (they are left out of every figure)."""
    bins = check_bins(bins)
    hist, objective, token_budget, model = _resolve(lengths, pad, None, token_budget, profile,
                                                    world_size)
    if token_budget is not None:
        widest = int(np.max(bins[:, 0] + bins[:, 1]))
        if widest > token_budget:
            raise BucketoptError(f"token_budget={token_budget} holds no sample of the bin "
                                 f"{[int(x) for x in bins[np.argmax(bins.sum(axis=1))]]}.",
                                 param="token_budget")
    epochs = check_positive_int(epochs, "epochs")
    return make_pair_solution(hist, bins, token_budget=token_budget, pad=pad, model=model,
                              epochs=epochs, objective=objective)
