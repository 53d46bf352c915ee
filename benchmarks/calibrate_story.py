"""Fit the shipped ``rtx-pro-6000-blackwell`` profile to the story's published run.

The story trained on 8x RTX PRO 6000 Blackwell for 6 epochs over 902,087 samples and published
three throughputs (globally sorted greedy batches ~32 Ktok/s, full shuffle then greedy packing
~12 Ktok/s, length-bucketed shuffle with optimised k=6 boundaries 25.1 Ktok/s) and a 5.1-day ETA
for the bucketed run. Its cost coefficients and its token budget were not published.

- **alpha** (per-micro-batch overhead) is set from its physical basis, not fitted: the four
  figures cannot see it (see the identifiability analysis this script prints, and
  docs/cost_model.md). ``ALPHA_RANGE`` is the plausible range, ``ALPHA`` its middle.
- For every token budget T on a grid the script simulates the three strategies on the embedded
  reconstruction (``seed_like()``), fits beta, gamma >= 0 (alpha fixed) so that the predicted
  Ktok/s (slowest of 8 ranks per step) and the ETA match the four published figures in relative
  least squares, and keeps the T with the smallest residuals.
- **Identifiability**: the sensitivity of the four predictions to each coefficient (d log
  prediction / d log coefficient), its singular values, and the least identified direction.
- **The consistent set**: every (alpha, beta, gamma) on a grid around the fit, alpha over
  ``ALPHA_RANGE``, whose four predictions all lie within the published figures' rounding plus
  the reconstruction's own error (``RECONSTRUCTION``). A spread-out subset of it becomes the
  profile's ``uncertainty`` (coverage 1: predictions report the whole range), so every
  prediction made with the profile carries an interval.

It then checks the fit on other simulation seeds and on a second reconstruction
(``piecewise_linear_like()``), prints what the coefficients mean against the card's 504 TFLOPS /
1.79 TB/s, and with ``--write`` stores the profile in
``bucketopt/profiles/rtx-pro-6000-blackwell.json``. Run:

    python benchmarks/calibrate_story.py [--write]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

import bucketopt
from bucketopt.cost.costmodel import CostModel, Profile, time_epoch
from bucketopt.datasets import piecewise_linear_like, seed_like

PUBLISHED = {"sorted": 32.0, "shuffle": 12.0, "bucketed": 25.1}  # Ktok/s
ETA_DAYS = 5.1  # bucketed run, 6 epochs
EPOCHS = 6
GPUS = 8
K = 6
# 128k tokens per micro-batch is the most we consider plausible on a 96 GB card (see
# docs/cost_model.md: the four figures alone keep preferring larger budgets).
BUDGETS = (16_384, 32_768, 49_152, 65_536, 81_920, 98_304, 114_688, 131_072)
SCALE = np.array([1.0, 1e-4, 1e-8])  # fit in units of s, 1e-4 s/token, 1e-8 s/token^2
# alpha, the per-micro-batch overhead, from its physical basis (docs/cost_model.md): the part of
# the gradient all-reduce over 8 GPUs on PCIe 5 without NVLink that the backward does not hide
# (bf16 gradients of a drafter of a few hundred million to ~1B parameters: 1-2 GB through a
# ring at ~20 GB/s bus bandwidth, ~0.05-0.2 s), the AdamW step (~16-28 bytes per parameter at
# 1.79 TB/s: ~10 ms), kernel launches of the target forward and the drafter forward/backward
# (~thousands of kernels: ~10-50 ms) and host-side batch assembly and copies.
ALPHA_RANGE = (0.03, 0.3)  # seconds per micro-batch
ALPHA = 0.1
# Rounding of each published figure ("~32" and "~12" to the unit, 25.1 and 5.1 to the last
# digit), as a relative half-width.
ROUNDING = {"sorted": 0.5 / 32, "shuffle": 0.5 / 12, "bucketed": 0.05 / 25.1, "eta": 0.05 / 5.1}
# The reconstruction's own error: the two reconstructions of the published distribution
# (seed_like, piecewise_linear_like) predict figures up to 2.6% apart under the same
# coefficients, and on seed_like's token count 25.1 Ktok/s for 6 epochs is 5.22 days, not 5.1
# (the published pair disagrees by 2.3%). A coefficient set is consistent when every figure is
# within its rounding plus this.
RECONSTRUCTION = 0.03
# The consistent set is searched along the directions the figures identify: the ratio
# gamma / beta (the weakly identified trade-off; log steps around the fit's ratio) and the
# overall scale (log steps around the scale that gives 25.1 Ktok/s bucketed). The grid is wide
# enough that no consistent point lies on its edge (the script checks and says so).
RATIO_STEPS = np.linspace(-4.0, 4.0, 161)
SCALE_STEPS = np.linspace(-0.06, 0.06, 25)
ALPHA_STEPS = np.geomspace(*ALPHA_RANGE, 5)
MAX_SETS = 120  # coefficient sets stored in the profile
CARD_TFLOPS = 504e12
CARD_BYTES_PER_S = 1.79e12
PROFILE_PATH = Path(__file__).resolve().parents[1] / "bucketopt" / "profiles" / \
    "rtx-pro-6000-blackwell.json"


def story_epochs(lengths, token_budget, seed=0):
    """The three published strategies, simulated as ``bucketopt compare`` does: the bucketed one
    on solve()'s k=6 optimum for dynamic padding, batches of T // edge padded to their longest."""
    from bucketopt.training.simulate import simulate

    boundaries = bucketopt.solve(lengths, K, token_budget=token_budget, pad="batch").boundaries
    return {name: simulate(lengths, name, token_budget=token_budget,
                           boundaries=boundaries if name == "bucketed" else None, seed=seed)
            for name in PUBLISHED}


def step_features(epoch):
    """(steps, G, 3) array of [1, s*L, s*L^2] per micro-batch; empty ranks are zero rows."""
    s = epoch.sizes.astype(np.float64)
    length = epoch.padded_lens.astype(np.float64)
    f = np.stack([np.ones_like(s), s * length, s * length * length], axis=1)
    steps = -(-f.shape[0] // GPUS)
    out = np.zeros((steps * GPUS, 3))
    out[: f.shape[0]] = f
    return out.reshape(steps, GPUS, 3)


def predictions(features, real_tokens, coef):
    """Predicted Ktok/s per strategy and the bucketed ETA (days) for coefficients ``coef``."""
    out = {}
    for name, f in features.items():
        seconds = float((f @ coef).max(axis=1).sum())
        out[name] = real_tokens[name] / seconds / 1e3
    out["eta_days"] = EPOCHS * real_tokens["bucketed"] / (out["bucketed"] * 1e3) / 86_400
    return out


def residuals(pred):
    res = [pred[name] / PUBLISHED[name] - 1 for name in PUBLISHED]
    return np.array([*res, pred["eta_days"] / ETA_DAYS - 1])


def many_predictions(features, real_tokens, coefs, chunk=256):
    """(n, 4) predictions [sorted, shuffle, bucketed Ktok/s, ETA days] for n coefficient sets."""
    coefs = np.atleast_2d(coefs)
    out = np.empty((coefs.shape[0], 4))
    for i in range(0, coefs.shape[0], chunk):
        c = coefs[i:i + chunk]
        for j, name in enumerate(PUBLISHED):
            f = features[name]  # (steps, G, 3)
            seconds = np.einsum("sgk,nk->sgn", f, c).max(axis=1).sum(axis=0)
            out[i:i + chunk, j] = real_tokens[name] / seconds / 1e3
    out[:, 3] = EPOCHS * real_tokens["bucketed"] / (out[:, 2] * 1e3) / 86_400
    return out


def many_residuals(pred):
    published = np.array([*PUBLISHED.values(), ETA_DAYS])
    return pred / published - 1


def fit(features, real_tokens, alpha=ALPHA):
    """beta, gamma >= 0 minimising the squared relative residuals, alpha fixed (multi-start)."""
    from scipy.optimize import least_squares

    def fun(x):
        return residuals(predictions(features, real_tokens,
                                     np.array([alpha, x[0] * SCALE[1], x[1] * SCALE[2]])))

    best = None
    for x0 in ([1.0, 1.0], [0.1, 3.0], [2.0, 0.1], [0.01, 5.0]):
        r = least_squares(fun, x0, bounds=(0.0, np.inf), x_scale="jac")
        if best is None or r.cost < best.cost:
            best = r
    # A coefficient the fit drives to the bound is exactly 0 (not 1e-18 of round-off).
    x = np.where(best.x < 1e-9, 0.0, best.x)
    return np.array([alpha, x[0] * SCALE[1], x[1] * SCALE[2]])


def tolerance():
    """Relative half-width of the consistency band per figure (rounding + reconstruction)."""
    return np.array([ROUNDING[k] for k in ("sorted", "shuffle", "bucketed", "eta")]) \
        + RECONSTRUCTION


def identifiability(features, real_tokens, coef):
    """d log(prediction) / d log(coefficient) at ``coef`` (central differences), its singular
    values and right singular vectors."""
    names = ("alpha", "beta", "gamma")
    sens = np.zeros((4, 3))
    for j in range(3):
        step = np.zeros(3)
        step[j] = 0.05 * (coef[j] if coef[j] > 0 else 1e-3)
        up = many_predictions(features, real_tokens, coef + step)[0]
        down = many_predictions(features, real_tokens, np.maximum(coef - step, 0))[0]
        width = np.log(coef[j] + step[j]) - np.log(max(coef[j] - step[j], 1e-300))
        sens[:, j] = (np.log(up) - np.log(down)) / width
    _, sv, vt = np.linalg.svd(sens)
    lines = ["sensitivity d log(prediction) / d log(coefficient) at the fit:",
             f"{'':<10}" + "".join(f"{n:>10}" for n in names)]
    for label, row in zip(("sorted", "shuffle", "bucketed", "ETA"), sens):
        lines.append(f"{label:<10}" + "".join(f"{v:>10.4f}" for v in row))
    lines.append("singular values: " + ", ".join(f"{v:.4g}" for v in sv))
    lines.append("least identified direction (log alpha, log beta, log gamma): "
                 + ", ".join(f"{v:+.3f}" for v in vt[-1]))
    return sens, sv, vt, "\n".join(lines)


def consistent_set(features, real_tokens):
    """Every grid point (alpha over ALPHA_RANGE; for each, gamma / beta around the fit's ratio
    and the scale around 25.1 Ktok/s bucketed) whose four predictions lie within the
    consistency band: (coefs, predictions)."""
    tol = tolerance()
    keep_c, keep_p = [], []
    for alpha in ALPHA_STEPS:
        centre = fit(features, real_tokens, alpha)
        ratio = centre[2] / centre[1] * np.exp(RATIO_STEPS)  # gamma / beta
        scale = np.full(ratio.size, centre[1])  # beta; solve for 25.1 Ktok/s bucketed
        for _ in range(4):  # throughput ~ 1 / scale when alpha is small: fixed point
            c = np.stack([np.full(ratio.size, alpha), scale, scale * ratio], axis=1)
            scale = scale * many_predictions(features, real_tokens, c)[:, 2] / PUBLISHED[
                "bucketed"]
        s, r = np.meshgrid(np.exp(SCALE_STEPS), np.arange(ratio.size))
        beta = (scale[r] * s).ravel()
        coefs = np.stack([np.full(beta.size, alpha), beta, beta * ratio[r.ravel()]], axis=1)
        pred = many_predictions(features, real_tokens, coefs)
        ok = (np.abs(many_residuals(pred)) <= tol).all(axis=1)
        grid = ok.reshape(s.shape)
        if grid[0].any() or grid[-1].any() or grid[:, 0].any() or grid[:, -1].any():
            print(f"warning: at alpha={alpha:.3g} the consistent set reaches the grid's edge; "
                  "widen RATIO_STEPS / SCALE_STEPS")
        keep_c.append(coefs[ok])
        keep_p.append(pred[ok])
    return np.concatenate(keep_c), np.concatenate(keep_p)


def spread_subset(coefs, pred, limit=MAX_SETS, seed=0):
    """The extremes of every prediction and coefficient, plus a seeded sample of the rest."""
    chosen = []
    for column in (*pred.T, *coefs.T):
        chosen += [int(np.argmin(column)), int(np.argmax(column))]
    chosen = list(dict.fromkeys(chosen))
    rest = np.setdiff1d(np.arange(coefs.shape[0]), chosen)
    room = max(0, limit - len(chosen))
    if rest.size:
        chosen += np.random.default_rng(seed).choice(rest, min(room, rest.size),
                                                     replace=False).tolist()
    return coefs[np.array(chosen)]


def row(label, pred):
    res = residuals(pred) * 100
    return (f"{label:<34} sorted {pred['sorted']:6.2f} ({res[0]:+5.1f}%)  shuffle "
            f"{pred['shuffle']:6.2f} ({res[1]:+5.1f}%)  bucketed {pred['bucketed']:6.2f} "
            f"({res[2]:+5.1f}%)  ETA {pred['eta_days']:5.2f} d ({res[3]:+5.1f}%)")


def evaluate_on(lengths, token_budget, coef, seed):
    epochs = story_epochs(lengths, token_budget, seed)
    model = CostModel(*coef, world_size=GPUS, epochs=EPOCHS)
    timings = {name: time_epoch(ep, model) for name, ep in epochs.items()}
    pred = {name: t.ktok_per_s for name, t in timings.items()}
    pred["eta_days"] = timings["bucketed"].eta_days
    return pred, timings


def physics(coef, token_budget):
    alpha, beta, gamma = coef
    lines = [
        f"alpha = {alpha:.4g} s per micro-batch",
        f"beta  = {beta:.4g} s per padded token: {1 / beta if beta else float('inf'):,.0f} "
        "tokens/s per GPU for the linear part;",
        f"        at 504 TFLOPS that is {beta * CARD_TFLOPS / 1e9:,.1f} GFLOP per token at 100% "
        f"MFU ({0.4 * beta * CARD_TFLOPS / 1e9:,.1f} at 40%)",
        f"gamma = {gamma:.4g} s per token per unit of length: at L=2048 the quadratic term is "
        f"{gamma * 2048 / beta * 100 if beta else float('inf'):.0f}% of the linear one, at "
        f"L=8192 {gamma * 8192 / beta * 100 if beta else float('inf'):.0f}%;",
        f"        {gamma * CARD_BYTES_PER_S / 1e3:,.1f} kB of memory traffic per (token, "
        f"context position) at 1.79 TB/s, or {gamma * CARD_TFLOPS / 1e6:,.1f} MFLOP at 504 "
        "TFLOPS",
        f"micro-batch of {token_budget:,} tokens at L=2048: "
        f"{alpha + beta * token_budget + gamma * token_budget * 2048:.2f} s",
    ]
    return "\n".join(lines)


def fast_path_gaps(coef, token_budget):
    from bucketopt.cost.intervals import annotate
    from bucketopt.data.histogram import Histogram
    from bucketopt.training.simulate import simulate

    for label, data in (("seed_like", seed_like()), ("piecewise_linear_like",
                                                      piecewise_linear_like())):
        hist = Histogram.from_lengths(data)
        boundaries = bucketopt.solve(hist, K, token_budget=token_budget).boundaries
        for pad in ("edge", "batch"):
            for gpus in (1, GPUS):
                model = CostModel(*coef, world_size=gpus, epochs=EPOCHS)
                sol = bucketopt.evaluate(hist, boundaries, token_budget=token_budget, pad=pad)
                fast = annotate(sol, hist, model).ktok_per_s
                sims = [time_epoch(simulate(data, "bucketed", token_budget=token_budget,
                                            boundaries=boundaries, seed=s, pad=pad), model)
                        for s in range(3)]
                sim = float(np.mean([t.ktok_per_s for t in sims]))
                print(f"{label:<22} pad={pad:<5} G={gpus}: analytic {fast:7.3f}  simulated "
                      f"{sim:7.3f} Ktok/s  gap {(fast / sim - 1) * 100:+.2f}%")


def time_objective(coef, token_budget):
    import time

    profile = {"alpha": coef[0], "beta": coef[1], "gamma": coef[2], "world_size": GPUS,
               "token_budget": token_budget, "name": "fit"}
    data = seed_like()
    bucketopt.solve(data[:1000], 2, objective="time", profile=profile)  # compile the kernels
    rows = []
    for label, objective, gpus in (("padding", "padding", None), ("time, DP only", "time", 1),
                                   ("time", "time", None)):
        start = time.perf_counter()
        sol = bucketopt.solve(data, K, objective=objective, profile=profile, world_size=gpus,
                              epochs=EPOCHS)
        took = time.perf_counter() - start
        if gpus == 1:  # the DP's boundaries (the surrogate does not depend on G), timed on 8
            sol = bucketopt.evaluate(data, sol.boundaries, profile=profile, world_size=None,
                                     epochs=EPOCHS)
        rows.append(f"{label:<14} {sol.boundaries}  padding {sol.padding_fraction * 100:5.2f}%  "
                    f"{sol.ktok_per_s:6.2f} Ktok/s  ETA {sol.eta_days:5.2f} d  ({took:.2f} s)")
    print("\n".join(rows))


def story_check(profile):
    """Intervals of ``bucketopt compare`` (k=6, 8 GPUs, 6 epochs, ``--pad batch --objective
    padding``: the story's method) with ``profile``, on seed_like(): do they contain the
    published figures? The story's batches ran in random order: the bucketed row's simulated
    figures (its own Ktok/s is solve's, for the synced sampler)."""
    from bucketopt.training.compare import compare

    rows = compare(seed_like(), K, profile=profile.to_dict(), world_size=GPUS,
                   epochs=EPOCHS, pad="batch", objective="padding").strategies
    out = {}
    for name, published in PUBLISHED.items():
        run = "_simulated" if "ktok_per_s_simulated" in rows[name] else ""
        low, high = rows[name]["ktok_per_s_interval" + run]
        out[name] = {"ktok_per_s": rows[name]["ktok_per_s" + run], "interval": [low, high],
                     "published": published, "contains": bool(low <= published <= high)}
    low, high = rows["bucketed"]["eta_days_interval_simulated"]
    out["eta_days"] = {"eta_days": rows["bucketed"]["eta_days_simulated"], "interval": [low, high],
                       "published": ETA_DAYS, "contains": bool(low <= ETA_DAYS <= high)}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="store the fitted profile")
    args = parser.parse_args(argv)

    lengths = seed_like()
    fits = []
    tol = tolerance()
    print(f"fit per token budget on seed_like(), {GPUS} GPUs, seed 0, alpha = {ALPHA} s "
          "(fixed; see the identifiability analysis below):")
    for budget in BUDGETS:
        epochs = story_epochs(lengths, budget, seed=0)
        features = {name: step_features(ep) for name, ep in epochs.items()}
        real = {name: ep.total_real_tokens for name, ep in epochs.items()}
        coef = fit(features, real)
        pred = predictions(features, real, coef)
        res = residuals(pred)
        score = float(np.sum(res ** 2))
        inside = bool((np.abs(res) <= tol).all())
        fits.append((score, budget, coef, res.tolist(), features, real, inside))
        print(row(f"T={budget:>7,}  b={coef[1]:.3g} g={coef[2]:.3g}", pred)
              + ("  in band" if inside else ""))
    score, budget, coef, _, features, real, _ = min(fits, key=lambda f: f[0])
    rms = float(np.sqrt(score / 4))
    print(f"\nbest token budget T={budget:,} (rms relative residual {rms * 100:.2f}%); budgets "
          "whose best fit is inside the consistency band: "
          + ", ".join(f"{f[1]:,}" for f in fits if f[6]))
    print(physics(coef, budget))

    print(f"\nidentifiability (T = {budget:,}):")
    sens, sv, vt, text = identifiability(features, real, coef)
    print(text)
    coefs, preds = consistent_set(features, real)
    grid_points = len(ALPHA_STEPS) * RATIO_STEPS.size * SCALE_STEPS.size
    print(f"\nconsistent set: {coefs.shape[0]:,} of {grid_points:,} grid points within "
          f"rounding + {RECONSTRUCTION:.0%} of all four figures (band per figure: "
          + ", ".join(f"{k} +-{t:.2%}" for k, t in zip(("sorted", "shuffle", "bucketed", "ETA"),
                                                      tol)) + ")")
    if coefs.shape[0] == 0:
        print("no coefficient set is consistent: widen the band or the grid")
        return 1
    ranges = {}
    for k, name in enumerate(("alpha", "beta", "gamma")):
        ranges[name] = [float(coefs[:, k].min()), float(coefs[:, k].max())]
        print(f"  {name:<8} [{ranges[name][0]:.4g}, {ranges[name][1]:.4g}]")
    for k, name in enumerate(("sorted", "shuffle", "bucketed", "eta_days")):
        ranges[name] = [float(preds[:, k].min()), float(preds[:, k].max())]
        print(f"  {name:<8} [{ranges[name][0]:.4g}, {ranges[name][1]:.4g}]")
    subset = spread_subset(coefs, preds)
    uncertainty = {
        "method": ("coefficient sets consistent with the published figures (each within its "
                   f"rounding + {RECONSTRUCTION:.0%} for the reconstruction), alpha over its "
                   f"physical range {list(ALPHA_RANGE)} s, at the profile's token_budget; "
                   "benchmarks/calibrate_story.py"),
        "coverage": 1.0,
        "coefficient_sets": [[float(v) for v in c] for c in subset],
    }

    print("\nchecks (same coefficients, same T):")
    checks = {}
    for label, data, seed in (("seed_like, seed 0 (fit)", lengths, 0),
                              ("seed_like, seed 1", lengths, 1),
                              ("seed_like, seed 2", lengths, 2),
                              ("piecewise_linear_like, seed 0", piecewise_linear_like(), 0)):
        pred, timings = evaluate_on(data, budget, coef, seed)
        checks[label] = {"predicted": pred, "residuals": residuals(pred).tolist()}
        print(row(label, pred))
    waits = {n: round(t.wait_fraction, 3) for n, t in timings.items()}
    print(f"share of GPU time waiting for the slowest rank (piecewise-linear): {waits}")
    print("\nanalytic fast path (annotate) vs simulated bucketed epochs (mean of 3 seeds):")
    fast_path_gaps(coef, budget)
    print("\nobjective='time' vs objective='padding' (edge padding, k=6, seed_like):")
    time_objective(coef, budget)

    profile = Profile(
        name="rtx-pro-6000-blackwell",
        description=("8x NVIDIA RTX PRO 6000 Blackwell (96 GB GDDR7, PCIe 5, no NVLink), "
                     "data parallel; fitted to the story's published run (DFlash drafter "
                     "training, 902,087 samples, 6 epochs). Not measured on a GPU."),
        alpha=float(coef[0]), beta=float(coef[1]), gamma=float(coef[2]),
        world_size=GPUS, token_budget=int(budget),
        provenance={
            "method": ("benchmarks/calibrate_story.py: simulate sorted / shuffle / bucketed "
                       "epochs (k=6 boundaries of solve(pad='batch'), as bucketopt compare) "
                       "of bucketopt.datasets.seed_like() for each token budget "
                       f"in {list(BUDGETS)}, alpha fixed at {ALPHA} s from its physical basis, "
                       "fit beta, gamma >= 0 to the four published figures in relative least "
                       "squares with the step waiting for the slowest of 8 ranks; keep the "
                       "best budget."),
            "measured_on_gpu": False,
            "alpha_basis": ("per-micro-batch overhead: exposed gradient all-reduce over 8 GPUs "
                            "on PCIe 5 without NVLink, AdamW step, kernel launches, host-side "
                            f"batch assembly; plausible range {list(ALPHA_RANGE)} s. The "
                            "published figures cannot identify it (docs/cost_model.md)."),
            "published": {"ktok_per_s": PUBLISHED, "eta_days": ETA_DAYS, "epochs": EPOCHS,
                          "gpus": GPUS, "samples": 902_087},
            "token_budget": "not published; chosen by the fit",
            "rms_relative_residual": rms,
            "residuals_per_budget": {
                str(b): {"alpha": float(c[0]), "beta": float(c[1]), "gamma": float(c[2]),
                         "sorted": r[0], "shuffle": r[1], "bucketed": r[2], "eta": r[3],
                         "in_band": inside}
                for _, b, c, r, _f, _r, inside in fits},
            "identifiability": {
                "sensitivity_dlog_pred_dlog_coef": sens.tolist(),
                "rows": ["sorted", "shuffle", "bucketed", "eta_days"],
                "columns": ["alpha", "beta", "gamma"],
                "singular_values": sv.tolist(),
                "least_identified_direction": vt[-1].tolist(),
            },
            "consistent_set": {"points": int(coefs.shape[0]), "ranges": ranges,
                               "band": dict(zip(("sorted", "shuffle", "bucketed", "eta"),
                                                tol.tolist()))},
            "checks": checks,
            "docs": "docs/cost_model.md",
        },
        uncertainty=uncertainty,
    )
    print("\nintervals of bucketopt compare -k 6 --profile <this> --gpus 8 --epochs 6 on "
          "seed_like():")
    story = story_check(profile)
    for name, entry in story.items():
        value = entry.get("ktok_per_s", entry.get("eta_days"))
        print(f"  {name:<9} {value:7.3f}  interval [{entry['interval'][0]:.3f}, "
              f"{entry['interval'][1]:.3f}]  published {entry['published']}  "
              f"{'contains it' if entry['contains'] else 'DOES NOT contain it'}")
    profile.provenance["story_intervals"] = story
    if args.write:
        profile.save(PROFILE_PATH)
        print(f"\nwrote {PROFILE_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
