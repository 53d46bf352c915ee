"""``bucketopt report``: one self-contained HTML page to look at and share.

The page holds the length distribution with the bucket edges, the plan's buckets (batch sizes,
padding, and Ktok/s with its interval under a profile), padding and Ktok/s against K, every
strategy compared with the recommended one marked, the certificate of optimality, and, given a
``bucketopt verify --json`` result, measured against predicted. It needs nothing at view time:
the figures are SVG images inside the page (``data:`` URIs), the style is inline, and there is
no script but the report's data, as JSON, in ``<script type="application/json"
id="bucketopt-data">``. Every number of the tables is rendered from that data, and its element
names where it sits (``data-path``, a JSON pointer into it), so a reader, or a test, can check
each figure shown against the JSON (``bucketopt report --json`` prints the same object).
"""

from __future__ import annotations

import base64
import html
import io
import json
from dataclasses import dataclass, field

from ..errors import BucketoptError
from .verify_result import figure_rows, load_verify

FORMAT = "bucketopt-report"
VERSION = 1
# The sweep a report draws: 1 to max(SWEEP_MIN, 2 k) buckets, at most SWEEP_MAX (k itself above).
SWEEP_MIN, SWEEP_MAX = 8, 32
PERCENTILES = (0, 10, 25, 50, 75, 90, 95, 99, 100)
# The order of the strategies' columns: (JSON key, header, format).
_STRATEGY_COLUMNS = (
    ("padding_fraction_analytic", "padding (analytic)", "pct"),
    ("padding_fraction_simulated", "padding (simulated)", "pct"),
    ("batches", "batches", "count"),
    ("ktok_per_s", "Ktok/s", "rate"),
    ("ktok_per_s_interval", "Ktok/s interval", "rate"),
    ("eta_days", "ETA (days)", "days"),
    ("wait_fraction", "wait", "pct"),
    ("step_mix_gap", "step mix gap", "gap3"),
    ("step_time_p50", "step time p50", "seconds"),
    ("step_time_p90", "step time p90", "seconds"),
)
_VERIFY_LABELS = {"step_time_mean": "step time, mean", "step_time_p50": "step time, p50",
                  "step_time_p90": "step time, p90", "tokens_per_s": "tokens/s",
                  "peak_memory_bytes": "peak memory"}


@dataclass(frozen=True)
class Report:
    """A report: ``data`` (JSON-ready, what the page shows) and its figures (SVG bytes by
    name). :meth:`to_html` renders the page, :meth:`write` writes it atomically."""

    data: dict
    figures: dict = field(default_factory=dict, repr=False)

    def to_html(self) -> str:
        return render_html(self.data, self.figures)

    def write(self, path) -> str:
        """Write the page to ``path`` (atomically); returns the path."""
        from ..data.output import write_text

        return write_text(path, self.to_html(), what="the report")


# ------------------------------------------------------------------------------ building
def report(lengths, k=None, *, plan=None, verify=None, ks=None, seed=0, simulations=1,
           allow_other_lengths=False, source=None, figures=True, **solver_kwargs) -> Report:
    """The report of ``lengths`` planned with at most ``k`` buckets (what
    :func:`~bucketopt.solve` returns for the same options, which is also :func:`compare`'s
    ``bucketed`` row, or its ``bucketed-memory`` row with a memory model), or of a ``plan`` (a
    dict from ``Solution.to_plan()`` or a plan path, whose settings replace the solver options,
    as in ``compare --plan``).

    ``solver_kwargs``: ``token_budget``, ``pad``, ``objective``, ``profile``, ``world_size``,
    ``epochs``, ``min_share``, ``max_share``, ``align``, ``min_fill``, ``max_length``,
    ``overflow``, ``memory``, ``gpu_memory``, ``memory_headroom``, as :func:`compare` takes
    them. ``ks``: the ks of the sweep drawn (default 1 to max(8, 2 k), at most 32 unless k is
    more). ``verify``: a ``bucketopt verify --json`` result (a dict or a path), shown as
    measured against predicted. ``figures=False`` leaves the images out (the data alone).

    Examples
    --------
    >>> import numpy as np
    >>> from bucketopt.show.html_report import report
    >>> lengths = np.random.default_rng(0).integers(10, 500, size=2_000)
    >>> r = report(lengths, 3, token_budget=2_000, figures=False)
    >>> r.data["plan"]["boundaries"] == r.data["strategies"]["strategies"]["bucketed"]["boundaries"]
    True
    >>> "<section id=\\"certificate\\">" in r.to_html()
    True
    """
    from ..data.histogram import as_histogram
    from ..solver import solve, sweep
    from ..training.compare import compare

    if solver_kwargs.pop("exact", False):
        raise BucketoptError("exact applies to solve, sweep and export (a report shows "
                             "compare's plans, certified as solve's defaults are).",
                             param="exact")
    checked = None if verify is None else load_verify(verify)  # before any work
    common = dict(seed=seed, simulations=simulations, progress=False)
    if plan is not None:
        from ..plan import load_plan
        from ..solver import evaluate_plan

        if k is not None:
            raise BucketoptError("give k or a plan, not both (the plan holds its k).",
                                 param="k")
        given = sorted(key for key, value in solver_kwargs.items() if value is not None)
        if given:
            raise BucketoptError(f"a plan sets the solver settings; drop {', '.join(given)} "
                                 "(or drop the plan and give them).", param="plan")
        plan = load_plan(plan)
        solution = evaluate_plan(plan, lengths, allow_other_lengths=allow_other_lengths)
        optimality = plan["optimality"]
        comparison = compare(lengths, None, plan=plan, allow_other_lengths=True, **common)
        k = comparison.k
        sweep_kwargs = _plan_sweep_kwargs(plan)
        origin = "plan"
    else:
        if k is None:
            raise BucketoptError("a report needs k (the most buckets) or a plan.", param="k")
        kwargs = {key: value for key, value in solver_kwargs.items() if value is not None}
        # solve's default (one GPU); None: the profile's GPUs, as the command line passes it
        kwargs["world_size"] = solver_kwargs.get("world_size", 1)
        solution = solve(lengths, k, **kwargs)
        optimality = solution.optimality
        comparison = compare(lengths, k, **kwargs, **common)
        sweep_kwargs = dict(kwargs)
        for key in ("world_size", "epochs"):  # as solve resolved them (the profile's GPUs)
            if solution.extra.get(key) is not None:
                sweep_kwargs[key] = solution.extra[key]
        origin = "solved"
    if ks is None:
        ks = range(1, max(SWEEP_MIN, min(SWEEP_MAX, 2 * k), k) + 1)
    swept = sweep(lengths, list(ks), **sweep_kwargs)
    hist = as_histogram(lengths)
    data = {
        "format": FORMAT, "version": VERSION,
        "source": source,
        "plan_origin": origin,
        "distribution": distribution(hist),
        "plan": solution.to_dict(),
        "buckets": bucket_rows(solution),
        "certificate": certificate(optimality, solution.objective),
        "sweep": swept.to_dict(),
        "strategies": comparison.to_dict(),
        "verify": checked,
    }
    data = json.loads(json.dumps(data, allow_nan=False, default=_plain))
    images = {}
    if figures:
        images = draw_figures(hist, solution, swept, comparison, checked, sweep_kwargs)
    return Report(data, images)


def _plain(value):
    """numpy scalars and tuples as JSON takes them."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"not JSON-ready: {type(value).__name__}")


def _plan_sweep_kwargs(plan: dict) -> dict:
    """sweep()'s keyword arguments that solve the plan's settings for other ks."""
    from ..plan import plan_solver_kwargs

    kwargs = plan_solver_kwargs(plan)
    kwargs["objective"] = plan["objective"]
    cons = plan["constraints"] or {}
    for key in ("min_share", "max_share", "align", "min_fill"):
        if key in cons:
            kwargs[key] = cons[key]
    return kwargs


def distribution(hist) -> dict:
    """Samples, tokens and percentiles (each a length that occurs: inverted CDF)."""
    values = hist.percentile(list(PERCENTILES), method="inverted_cdf")
    return {"samples": int(hist.n), "real_tokens": int(hist.real_tokens),
            "distinct_lengths": int(hist.m), "mean": float(hist.real_tokens / hist.n),
            "percentiles": {f"P{q}": int(v) for q, v in zip(PERCENTILES, values)}}


def bucket_rows(solution) -> list:
    """One row per bucket: its range, samples, share, batch size, fill, tokens and padding."""
    rows, lower = [], 0
    peaks = solution.peak_memory_bytes
    for i, edge in enumerate(solution.boundaries):
        real = solution.bucket_real_tokens[i]
        padded = solution.bucket_padded_tokens[i]
        rows.append({
            "lower": int(lower), "edge": int(edge), "samples": int(solution.counts[i]),
            "share": float(solution.shares[i]),
            "batch_size": None if solution.batch_sizes is None else int(solution.batch_sizes[i]),
            "fill": float(solution.fill[i]) if solution.fill else None,
            "real_tokens": real, "padded_tokens": padded,
            "padding_fraction": padded / (real + padded) if real + padded else 0.0,
            "peak_memory_bytes": None if peaks is None else float(peaks[i]),
        })
        lower = edge
    return rows


def certificate(optimality, objective: str) -> dict:
    """What is proven of the plan: exact, or a lower bound and the gap to it (None: nothing)."""
    from .report import describe_optimality

    if optimality is None:
        return {"exact": None, "lower_bound": None, "gap": None,
                "text": "no certificate: these boundaries were not solved by bucketopt (a rule "
                        "of thumb, or chosen by hand)"}
    return {**optimality, "text": describe_optimality(optimality, objective)}


# ------------------------------------------------------------------------------ figures
def _svg(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    return buffer.getvalue()


def draw_figures(hist, solution, swept, comparison, verify, sweep_kwargs) -> dict:
    """SVG bytes of each figure: distribution, sweep, strategies and (with a verify result)
    verify."""
    from .plots import plot_comparison, plot_histogram, plot_sweep

    out = {"distribution": _svg(plot_histogram(hist, solution).figure)}
    timing = {key: sweep_kwargs.get(key) for key in ("profile", "world_size")}
    out["sweep"] = _svg(plot_sweep(swept, hist, epochs=sweep_kwargs.get("epochs") or 1,
                                   **timing))
    out["strategies"] = _svg(plot_comparison(
        comparison.strategies, world_size=(comparison.timing or {}).get("world_size"),
        title="blue: bucketopt's plans; grey: the others; hatched: recommended"))
    if verify is not None:
        fig = plot_verify(verify)
        if fig is not None:
            out["verify"] = _svg(fig)
    return out


def plot_verify(verify: dict):
    """Measured over predicted for each figure that has both, with the predicted interval
    (over the prediction) as a bar; None when no figure has both."""
    from .plots import new_figure

    rows = [key for key in figure_rows(verify)
            if verify["measured"].get(key) is not None
            and (verify["predicted"].get(key) or {}).get("value")]
    if not rows:
        return None
    fig, (ax,) = new_figure(1, figsize=(7.5, 0.55 * len(rows) + 1.4))
    for y, key in enumerate(rows):
        pred = verify["predicted"][key]
        point = pred["value"]
        if pred["interval"] is not None:
            low, high = (v / point for v in pred["interval"])
            ax.plot([low, high], [y, y], color="#1f5fb4", linewidth=6, alpha=0.35,
                    solid_capstyle="butt", label="predicted interval" if y == 0 else None)
        ax.plot([1.0], [y], "|", color="#1f5fb4", markersize=16,
                label="predicted" if y == 0 else None)
        ax.plot([verify["measured"][key] / point], [y], "o", color="#d62728",
                label="measured" if y == 0 else None)
    ax.set_yticks(range(len(rows)), [_VERIFY_LABELS.get(key, key) for key in rows])
    ax.invert_yaxis()
    ax.set_xlabel("value / prediction")
    ax.grid(True, axis="x", color="#dddddd")
    ax.legend(loc="best", fontsize=8)
    return fig


# ------------------------------------------------------------------------------ rendering
def _pointer(*parts) -> str:
    """A JSON pointer (RFC 6901) to ``parts``."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


# How each kind of figure is shown (the tests read the units back: %, GiB, MiB, s, tok/s).
_FORMATS = {
    "count": "{:,.0f}".format,
    "pct": lambda v: f"{v * 100:.2f}%",
    "signed_pct": lambda v: f"{v * 100:+.1f}%",
    "rate": "{:,.1f}".format,
    "days": "{:.2f}".format,
    "gap3": "{:.3f}".format,
    "general": "{:,.6g}".format,
    "sci": "{:.3e}".format,
    "seconds": "{:.4g} s".format,
    "bytes": lambda v: f"{v / 2**30:.2f} GiB" if v >= 2**30 else f"{v / 2**20:,.1f} MiB",
    "tokens_per_s": "{:,.0f} tok/s".format,
}


def _fmt(value, kind: str) -> str:
    return _FORMATS[kind](value)


def _num(value, kind: str, *path, tag: str = "span") -> str:
    """``value`` formatted, in an element naming its place in the data; "-" when None. A
    [low, high] interval is shown as such."""
    if value is None:
        return "-" if tag == "span" else f"<{tag}>-</{tag}>"
    if isinstance(value, list):
        text = "[" + ", ".join(_fmt(v, kind) for v in value) + "]"
    else:
        text = _fmt(value, kind)
    cls = ' class="num"' if tag == "td" else ""
    return f'<{tag}{cls} data-path="{html.escape(_pointer(*path))}">{html.escape(text)}</{tag}>'


def _td(value, kind, *path) -> str:
    return _num(value, kind, *path, tag="td")


def _table(headers, rows, cls="") -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    head = f"<thead><tr>{head}</tr></thead>" if headers else ""
    body = "\n".join(rows)
    return f'<table class="{cls}">{head}\n<tbody>\n{body}\n</tbody></table>'



def _image(figures, name, alt) -> str:
    svg = figures.get(name)
    if svg is None:
        return ""
    encoded = base64.b64encode(svg).decode("ascii")
    return (f'<figure id="figure-{name}"><img alt="{html.escape(alt)}" '
            f'src="data:image/svg+xml;base64,{encoded}"></figure>')


def _settings_line(data) -> str:
    plan = data["plan"]
    parts = [f"{len(plan['boundaries'])} bucket(s)"]
    if plan.get("k") is not None:
        parts.append(f"at most k={plan['k']}")
    if plan.get("token_budget") is not None:
        parts.append(f"token budget {plan['token_budget']:,}")
    parts.append(f"pad={plan['pad']}")
    parts.append(f"objective={plan['objective']}")
    if plan.get("profile") is not None:
        parts.append(f"profile {plan['profile']}, {plan.get('world_size')} GPU(s), "
                     f"{plan.get('epochs')} epoch(s)")
    if data["plan_origin"] == "plan":
        parts.append("from a plan file")
    return ", ".join(parts)


def _distribution_section(data, figures) -> str:
    dist = data["distribution"]
    cells = [_td(dist["samples"], "count", "distribution", "samples"),
             _td(dist["real_tokens"], "count", "distribution", "real_tokens"),
             _td(dist["mean"], "rate", "distribution", "mean")]
    cells += [_td(v, "count", "distribution", "percentiles", name)
              for name, v in dist["percentiles"].items()]
    headers = ["samples", "tokens", "mean", *dist["percentiles"]]
    edges = ", ".join(_num(b, "count", "plan", "boundaries", i)
                      for i, b in enumerate(data["plan"]["boundaries"]))
    return ("<section id=\"distribution\"><h2>Length distribution and bucket edges</h2>\n"
            + _table(headers, ["<tr>" + "".join(cells) + "</tr>"])
            + f"\n<p>Bucket edges (inclusive upper edges): {edges}</p>\n"
            + _image(figures, "distribution", "length histogram with the bucket edges")
            + "</section>")


def _plan_section(data) -> str:
    plan, buckets = data["plan"], data["buckets"]
    has_peak = any(b["peak_memory_bytes"] is not None for b in buckets)
    headers = ["bucket", "samples", "share", "batch size", "fill", "tokens", "padded tokens",
               "padding"] + (["peak memory"] if has_peak else [])
    rows = []
    for i, b in enumerate(buckets):
        where = ("buckets", i)
        edge = _num(b["edge"], "count", *where, "edge")
        cells = [f"<td>({b['lower']:,}, {edge}]</td>",
                 _td(b["samples"], "count", *where, "samples"),
                 _td(b["share"], "pct", *where, "share"),
                 _td(b["batch_size"], "count", *where, "batch_size"),
                 _td(b["fill"], "pct", *where, "fill"),
                 _td(b["real_tokens"], "count", *where, "real_tokens"),
                 _td(b["padded_tokens"], "count", *where, "padded_tokens"),
                 _td(b["padding_fraction"], "pct", *where, "padding_fraction")]
        if has_peak:
            cells.append(_td(b["peak_memory_bytes"], "bytes", *where, "peak_memory_bytes"))
        rows.append("<tr>" + "".join(cells) + "</tr>")
    total = ["<th>total</th>", _td(plan["n_samples"], "count", "plan", "n_samples"),
             "<td></td>", "<td></td>", "<td></td>",
             _td(plan["real_tokens"], "count", "plan", "real_tokens"),
             _td(plan["padded_tokens"], "count", "plan", "padded_tokens"),
             _td(plan["padding_fraction"], "pct", "plan", "padding_fraction")]
    rows.append('<tr class="total">' + "".join(total) + ("<td></td>" if has_peak else "")
                + "</tr>")
    out = ["<section id=\"plan\"><h2>The plan</h2>",
           f"<p>{html.escape(_settings_line(data))}.</p>", _table(headers, rows)]
    predictions = []
    for key, label, kind in (("ktok_per_s", "predicted throughput, Ktok/s (real tokens, all "
                                            "GPUs)", "rate"),
                             ("eta_days", "ETA, days", "days"),
                             ("step_time_p50", "step time p50", "seconds"),
                             ("step_time_p90", "step time p90", "seconds")):
        if plan.get(key) is None:
            continue
        interval = plan.get(f"{key}_interval")
        predictions.append(f"<tr><th>{html.escape(label)}</th>"
                           + _td(plan[key], kind, "plan", key)
                           + (_td(interval, kind, "plan", f"{key}_interval")
                              if interval is not None else "<td>-</td>") + "</tr>")
    if predictions:
        out.append(_table(["prediction", "value", "interval"], predictions, "predictions"))
    else:
        out.append("<p>No throughput prediction: give a profile (--profile) for Ktok/s, ETA "
                   "and their intervals.</p>")
    for note in plan.get("warnings") or []:
        out.append(f'<p class="note">note: {html.escape(note)}</p>')
    out.append("</section>")
    return "\n".join(out)


def _sweep_section(data, figures) -> str:
    sweep = data["sweep"]
    has_rate = all(r.get("ktok_per_s") is not None for r in sweep["rows"])
    headers = ["k", "buckets", "padding"] + (["Ktok/s", "Ktok/s interval"] if has_rate else [])
    rows = []
    for i, (k, row) in enumerate(zip(sweep["ks"], sweep["rows"])):
        mark = k == sweep["recommended_k"]
        cells = [f"<td>{k}{' (recommended)' if mark else ''}</td>",
                 f"<td>{len(row['boundaries'])}</td>",
                 _td(row["padding_fraction"], "pct", "sweep", "rows", i, "padding_fraction")]
        if has_rate:
            cells += [_td(row["ktok_per_s"], "rate", "sweep", "rows", i, "ktok_per_s"),
                      _td(row.get("ktok_per_s_interval"), "rate", "sweep", "rows", i,
                          "ktok_per_s_interval")]
        cls = ' class="recommended"' if mark else ""
        rows.append(f'<tr{cls} data-k="{k}">' + "".join(cells) + "</tr>")
    return ("<section id=\"sweep\"><h2>Padding and Ktok/s against K</h2>\n"
            f"<p>recommended: k={sweep['recommended_k']}. {html.escape(sweep['reason'])}</p>\n"
            + _image(figures, "sweep", "padding and Ktok/s against the number of buckets K")
            + _table(headers, rows) + "</section>")


def _strategies_section(data, figures) -> str:
    comparison = data["strategies"]
    rows_data = comparison["strategies"]
    columns = [c for c in _STRATEGY_COLUMNS
               if any(r.get(c[0]) is not None for r in rows_data.values())]
    headers = ["strategy", "boundaries", *(c[1] for c in columns)]
    rows = []
    for name, row in rows_data.items():
        mark = name == comparison.get("recommended")
        label = html.escape(name) + (' <strong class="badge">recommended</strong>'
                                     if mark else "")
        edges = row.get("boundaries")
        edges = "-" if edges is None else ", ".join(map(str, edges))
        cells = [f"<td>{label}</td>", f'<td class="edges">{html.escape(edges)}</td>']
        cells += [_td(row.get(key), kind, "strategies", "strategies", name, key)
                  for key, _, kind in columns]
        cls = ' class="recommended"' if mark else ""
        rows.append(f'<tr{cls} data-strategy="{html.escape(name)}">' + "".join(cells)
                    + "</tr>")
    best = comparison.get("recommended")
    line = ("no strategy qualifies for a recommendation" if best is None else
            f"recommended: <strong>{html.escape(best)}</strong> (the fastest, or with no "
            "profile the least padding, of the strategies whose step mix is at least as "
            "diverse as the full shuffle's)")
    return ("<section id=\"strategies\"><h2>Strategies compared</h2>\n"
            f"<p>{line}.</p>\n" + _table(headers, rows, "strategies")
            + _image(figures, "strategies", "padding and Ktok/s of every strategy")
            + "</section>")


def _certificate_section(data) -> str:
    cert = data["certificate"]
    verdicts = {None: "none", True: "exact optimum", False: "bound"}
    verdict = verdicts[cert["exact"]]
    rows = [f"<tr><th>optimality</th><td class=\"verdict\">{verdict}</td></tr>",
            "<tr><th>lower bound</th>" + _td(cert["lower_bound"], "general", "certificate",
                                              "lower_bound") + "</tr>",
            "<tr><th>gap</th>" + _td(cert["gap"], "sci", "certificate", "gap") + "</tr>"]
    return ("<section id=\"certificate\"><h2>Certificate</h2>\n"
            f"<p>{html.escape(cert['text'])}.</p>\n" + _table([], rows, "certificate")
            + "</section>")


def _verify_kind(key) -> str:
    if key.startswith("step_time"):
        return "seconds"
    return {"tokens_per_s": "tokens_per_s", "peak_memory_bytes": "bytes"}.get(key, "sci")


def _verify_section(data, figures) -> str:
    verify = data["verify"]
    if verify is None:
        return ("<section id=\"verify\"><h2>Measured against predicted</h2>\n<p>No "
                "measurement given: run <code>bucketopt verify ... --json &gt; verify.json"
                "</code> on your hardware and pass <code>--verify verify.json</code>.</p>"
                "</section>")
    rows = []
    for key in figure_rows(verify):
        kind = _verify_kind(key)
        pred = verify["predicted"].get(key) or {}
        verdict = verify["verdicts"].get(key) or {}
        if verdict.get("inside") is True:
            text = '<span class="inside">inside</span>'
        elif verdict.get("inside") is False:
            off = verdict.get("off_by")
            text = '<span class="outside">outside</span>' + (
                "" if off is None else " by " + _num(off, "signed_pct", "verify", "verdicts",
                                                      key, "off_by"))
        else:
            text = "-"
        rows.append(f'<tr data-figure="{html.escape(key)}"><th>'
                    f"{html.escape(_VERIFY_LABELS.get(key, key))}</th>"
                    + _td(verify["measured"].get(key), kind, "verify", "measured", key)
                    + _td(pred.get("value"), kind, "verify", "predicted", key, "value")
                    + _td(pred.get("interval"), kind, "verify", "predicted", key, "interval")
                    + f"<td>{text}</td></tr>")
    head = []
    if verify["device"] is not None:
        head.append(f"device {html.escape(verify['device'])}")
    if verify["steps"] is not None:
        head.append(f"{verify['steps']:,} step(s) measured")
    out = ["<section id=\"verify\"><h2>Measured against predicted</h2>",
           f"<p>{', '.join(head) or 'a verify result'}.</p>",
           _table(["figure", "measured", "predicted", "interval", "verdict"], rows, "verify")]
    for warning in verify["warnings"]:
        out.append(f'<p class="warning">warning: {html.escape(warning)}</p>')
    out.append(_image(figures, "verify", "measured over predicted, with the predicted interval"))
    out.append("</section>")
    return "\n".join(out)


_STYLE = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d1d1f;
       max-width: 1180px; margin: 0 auto; padding: 1.5em 2em 4em; background: #fff; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #d0d7de;
     padding-bottom: 0.25em; }
.meta { color: #57606a; margin-top: 0; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.92em; }
th, td { border: 1px solid #d0d7de; padding: 0.3em 0.6em; text-align: left; }
thead th { background: #f6f8fa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.edges { max-width: 22em; font-size: 0.85em; color: #57606a; }
tr.total th, tr.total td { font-weight: 600; background: #f6f8fa; }
tr.recommended td { background: #fff8c5; }
.badge { background: #1f5fb4; color: #fff; border-radius: 3px; padding: 0 0.4em;
         font-size: 0.8em; font-weight: 600; }
.inside { color: #1a7f37; font-weight: 600; }
.outside { color: #cf222e; font-weight: 600; }
.warning, .note { color: #9a6700; }
figure { margin: 1em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #eaeef2; }
nav a { margin-right: 1em; }
@media print { nav { display: none; } section { break-inside: avoid-page; } }
"""


def render_html(data: dict, figures: dict | None = None) -> str:
    """The page of a report's ``data`` and ``figures`` (SVG bytes by name)."""
    from ..version import __version__

    figures = figures or {}
    payload = json.dumps(data, allow_nan=False, separators=(",", ":"))
    # nothing in the data can end the script element or open markup: <, > and & as JSON's
    # \u escapes (the same strings to JSON.parse)
    for char in "<>&":
        payload = payload.replace(char, f"\\u{ord(char):04x}")
    source = data.get("source")
    title = "bucketopt report" + (f": {source}" if source else "")
    nav = "".join(f'<a href="#{anchor}">{label}</a>' for anchor, label in (
        ("distribution", "distribution"), ("plan", "plan"), ("sweep", "K"),
        ("strategies", "strategies"), ("certificate", "certificate"),
        ("verify", "measured")))
    sections = [_distribution_section(data, figures), _plan_section(data),
                _sweep_section(data, figures), _strategies_section(data, figures),
                _certificate_section(data), _verify_section(data, figures)]
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<meta name=\"generator\" content=\"bucketopt {html.escape(__version__)}\">\n"
        f"<title>{html.escape(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
        f"<h1>{html.escape(title)}</h1>\n"
        f"<p class=\"meta\">{html.escape(_settings_line(data))}; bucketopt "
        f"{html.escape(__version__)}</p>\n<nav>{nav}</nav>\n"
        + "\n".join(sections)
        + f'\n<script type="application/json" id="bucketopt-data">{payload}</script>\n'
        "</body>\n</html>\n")
