"""``bucketopt calibrate``: fit the cost model to measured micro-batch times, write a profile."""

from __future__ import annotations

from .common import _int, add_output_args, emit_json, note


def add_parser(sub) -> None:
    p = sub.add_parser(
        "calibrate", help="fit the GPU cost model to measured step times",
        description="Fit alpha, beta, gamma >= 0 of t = alpha + beta*s*L + gamma*s*L^2 to measured "
                    "micro-batch times (CSV columns batch_size,padded_len,seconds) by least "
                    "squares on relative error (repeats pooled, soft-L1 robust loss; k-fold "
                    "held-out error, bootstrap intervals, outlier rows); optionally write a "
                    "profile for --profile.")
    p.add_argument("--measurements", metavar="CSV", required=True,
                   help="CSV with a header and columns batch_size, padded_len, seconds")
    p.add_argument("-o", "--output", metavar="FILE", help="write the profile JSON to FILE")
    p.add_argument("--name", default="calibrated", help="profile name (default: calibrated)")
    p.add_argument("--description", default="", help="profile description")
    p.add_argument("--gpus", type=_int, default=1, metavar="G",
                   help="data-parallel GPUs stored in the profile (default: 1)")
    p.add_argument("--token-budget", type=_int, metavar="T",
                   help="token budget stored in the profile (default: the largest measured "
                        "batch_size x padded_len)")
    p.add_argument("--folds", type=_int, default=5, metavar="K",
                   help="folds of the held-out error over the distinct shapes (default: 5)")
    p.add_argument("--bootstrap", type=_int, default=200, metavar="N",
                   help="bootstrap resamples for the coefficient intervals (default: 200)")
    p.add_argument("--pool", choices=("median", "low"), default="median",
                   help="how repeats of a shape are pooled: their median (default) or their "
                        "25th percentile, the least load-inflated figure (what probe uses)")
    p.add_argument("--quiet", "-q", action="store_true", help="no notes on stderr")
    add_output_args(p)
    p.set_defaults(run=run)


def run(args) -> int:
    from ..cost.calibration import calibrate, read_measurements
    from ..show.report import table
    from ..validate import check_positive_int as _positive_int

    sizes, lens, seconds = read_measurements(args.measurements)
    fit = calibrate(sizes, lens, seconds, folds=args.folds, bootstrap=args.bootstrap,
                    pool=args.pool)
    gpus = _positive_int(args.gpus, "--gpus")
    budget = args.token_budget
    if budget is None:
        budget = int((sizes * lens).max())
    budget = _positive_int(budget, "--token-budget")
    out = fit.to_dict()
    if args.output:
        profile = fit.to_profile(name=args.name, description=args.description, world_size=gpus,
                                 token_budget=budget, source=args.measurements)
        out["profile"] = str(profile.save(args.output))
        note(args, f"wrote profile {args.output} (use it with --profile {args.output})")
    if args.json:
        emit_json(out)
        return 0
    units = {"alpha": "s per micro-batch", "beta": "s per padded token",
             "gamma": "s per padded token x padded length"}
    rows = []
    for key, unit in units.items():
        span = fit.intervals.get(key)
        rows.append([key, f"{getattr(fit, key):.6g}",
                     f"[{span[0]:.4g}, {span[1]:.4g}]" if span else "-", unit])
    print(f"fit on {fit.n_measurements} measurements ({fit.n_shapes} distinct shapes, repeats "
          f"pooled by their median) from {args.measurements}")
    print(table(["coefficient", "value", "95% interval", "unit"], rows, align="lrrl"))
    print(f"R^2 {fit.r2:.4f}; relative error: median {fit.median_rel_error * 100:.2f}%, "
          f"max {fit.max_rel_error * 100:.2f}%, rms {fit.rms_rel_error * 100:.2f}% "
          f"(robust {fit.loss} loss, scale {fit.scale * 100:.2f}%)")
    if fit.outliers and fit.r2_inliers is not None:
        print(f"R^2 without the outlier rows {fit.r2_inliers:.4f}")
    if fit.heldout:
        h = fit.heldout
        print(f"held-out ({h['folds']}-fold over shapes): median "
              f"{h['median_rel_error'] * 100:.2f}%, 90th percentile "
              f"{h['p90_rel_error'] * 100:.2f}%, max {h['max_rel_error'] * 100:.2f}%")
    if fit.outliers:
        shown = ", ".join(f"#{o['row'] + 1} ({o['batch_size']}x{o['padded_len']}: "
                          f"{o['rel_error'] * 100:+.0f}%)" for o in fit.outliers[:8])
        more = f" and {len(fit.outliers) - 8} more" if len(fit.outliers) > 8 else ""
        print(f"outlier measurements (discounted by the robust fit): {shown}{more}")
    if "profile" in out:
        print(f"profile: {out['profile']}")
    return 0
