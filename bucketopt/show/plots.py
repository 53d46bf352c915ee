"""Pictures of the trade-off: padding and throughput against K, and the length histogram with the
chosen edges and per-bucket batch sizes.

matplotlib is imported inside each function. Every ``plot_*`` function takes ``ax=None`` (a new
figure is made when it is None) and returns the Axes; nothing here calls ``pyplot.show()`` or
touches the global rcParams. :func:`save_figure` writes PNG, SVG or PDF by the file's extension.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import BucketoptError

FIGURE_FORMATS = (".png", ".svg", ".pdf")
OPTIMAL_COLOR = "#1f5fb4"
RULE_COLORS = ("#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22")
BUCKET_SHADES = ("#dbe7f6", "#f3f3f3")


def _new_axes(ax, figsize=(7.5, 4.5)):
    if ax is not None:
        return ax
    try:
        from matplotlib.figure import Figure
    except ImportError:  # pragma: no cover - matplotlib is a dependency
        raise BucketoptError("plots need matplotlib: pip install matplotlib") from None
    fig = Figure(figsize=figsize, layout="constrained")
    return fig.add_subplot()


def new_figure(nrows: int = 1, figsize=None):
    """A matplotlib Figure (not registered with pyplot) and its Axes, one per row."""
    try:
        from matplotlib.figure import Figure
    except ImportError:  # pragma: no cover
        raise BucketoptError("plots need matplotlib: pip install matplotlib") from None
    fig = Figure(figsize=figsize or (8, 4.5 * nrows), layout="constrained")
    axes = fig.subplots(nrows, 1, squeeze=False)[:, 0]
    return fig, list(axes)


def check_figure_path(path) -> Path:
    """The path as a Path if a figure can be written there (.png/.svg/.pdf, existing folder)."""
    import os

    text = os.fspath(path)
    if isinstance(text, str) and text.endswith(("/", os.sep)):  # Path() would drop the slash
        raise BucketoptError(f"cannot write {text!r}: it names a folder (it ends in "
                             f"{os.sep}); give a file path.")
    path = Path(path)
    if path.suffix.lower() not in FIGURE_FORMATS:
        raise BucketoptError(
            f"a plot file must end in {', '.join(FIGURE_FORMATS)}; got {str(path)!r}."
        )
    if not path.parent.is_dir():
        raise BucketoptError(
            f"cannot write {str(path)!r}: folder {str(path.parent)!r} does not exist.")
    return path


def save_figure(fig_or_ax, path) -> Path:
    """Write a Figure (or the Figure of an Axes) to ``path``: .png, .svg or .pdf."""
    path = check_figure_path(path)
    suffix = path.suffix.lower()
    fig = getattr(fig_or_ax, "figure", fig_or_ax)
    from ..data.output import atomic_writer

    with atomic_writer(path, mode="wb", what="the plot") as handle:
        fig.savefig(handle, dpi=150, format=suffix[1:])
    return path


def _percent_axis(ax):
    from matplotlib.ticker import FuncFormatter

    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _pos: f"{y:g}%"))


def _k_axis(ax, ks):
    from matplotlib.ticker import MaxNLocator

    ax.set_xlabel("number of buckets K")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=min(16, len(ks) + 1)))
    ax.set_xlim(min(ks) - 0.5, max(ks) + 0.5)
    ax.grid(True, color="#dddddd", linewidth=0.8)
    ax.set_axisbelow(True)


def rule_curves(sweep, lengths, rules=None, *, profile=None, world_size=None, epochs=1) -> dict:
    """The rules of thumb evaluated at every k of ``sweep``.

    Returns name -> ``{"ks": [...], "padding_fraction": [...], "ktok_per_s": [...] or None}``;
    throughput figures come with a ``profile`` (the one the sweep used). Uses
    :func:`bucketopt.heuristics.rule_of_thumb`; returns {} when that module is absent. A rule
    whose edges do not fit the sweep's token budget at some k is left out at that k.
    """
    try:
        from ..heuristics import RULES, rule_of_thumb
    except ImportError:
        return {}
    from ..data.histogram import as_histogram
    from ..solver import evaluate

    hist = as_histogram(lengths)
    first = sweep.solutions[0]
    names = list(RULES) if rules is None else list(rules)
    timing = {} if profile is None else dict(profile=profile, world_size=world_size,
                                             epochs=epochs)
    curves = {}
    for name in names:
        ks, fractions, rates = [], [], []
        for k in sweep.ks:
            try:
                edges = rule_of_thumb(name, hist, k, token_budget=first.token_budget)
                edges = getattr(edges, "boundaries", edges)
                sol = evaluate(hist, edges, token_budget=first.token_budget, pad=first.pad,
                               **timing)
            except BucketoptError:
                continue
            ks.append(k)
            fractions.append(sol.padding_fraction)
            rates.append(sol.ktok_per_s)
        if ks:
            curves[name] = {"ks": ks, "padding_fraction": fractions,
                            "ktok_per_s": rates if profile is not None else None}
    return curves


def _curves(sweep, lengths, rules, **timing) -> dict:
    """``rules`` as given to the plot functions: names, [] for none, or rule_curves() output."""
    if isinstance(rules, dict):
        return rules
    if lengths is None or rules == []:
        return {}
    return rule_curves(sweep, lengths, rules, **timing)


def _rule_style(i):
    return dict(linestyle="--", marker=".", markersize=5, linewidth=1.4,
                color=RULE_COLORS[i % len(RULE_COLORS)])


def plot_padding_vs_k(sweep, lengths=None, *, rules=None, ax=None):
    """Padding waste of the optimum at every K, against the rules of thumb.

    Parameters
    ----------
    sweep : Sweep
        From :func:`bucketopt.sweep`.
    lengths : array-like or Histogram, optional
        The lengths the sweep ran on; needed to draw the rules of thumb.
    rules : list of str or dict, optional
        Rule names from ``bucketopt.heuristics.RULES`` (default: all), ``[]`` for none, or the
        output of :func:`rule_curves`.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib Axes

    Examples
    --------
    >>> import bucketopt
    >>> from bucketopt.show.plots import plot_padding_vs_k
    >>> s = bucketopt.sweep([3, 4, 10, 11, 12, 40], ks=[1, 2, 3])
    >>> plot_padding_vs_k(s).get_xlabel()
    'number of buckets K'
    """
    ax = _new_axes(ax)
    ks = list(sweep.ks)
    opt = [100 * s.padding_fraction for s in sweep.solutions]
    for i, (name, curve) in enumerate(_curves(sweep, lengths, rules).items()):
        ax.plot(curve["ks"], [100 * f for f in curve["padding_fraction"]], **_rule_style(i),
                label=f"rule of thumb: {name.replace('_', ' ')}")
    ax.plot(ks, opt, marker="o", markersize=4, linewidth=2.4, color=OPTIMAL_COLOR,
            label=_optimum_label(sweep), zorder=3)
    # The optimum is the lowest curve: its value goes in the legend, not in a box over the rules.
    _mark_recommended(ax, sweep, 100 * sweep[sweep.recommended_k].padding_fraction,
                      f"{100 * sweep[sweep.recommended_k].padding_fraction:.1f}%", box=False)
    kind = "expected dynamic padding" if sweep.solutions[0].pad == "batch" else "edge padding"
    ax.set_ylabel(f"padding ({kind}),\n% of computed tokens")
    ax.set_ylim(bottom=0)
    _percent_axis(ax)
    _k_axis(ax, ks)
    ax.set_title("Padding waste vs number of buckets")
    ax.legend(loc="upper right", fontsize=9, framealpha=0.9)
    return ax


def _optimum_label(sweep) -> str:
    objective = getattr(sweep.solutions[0], "objective", "padding")
    return "bucketopt optimum" if objective == "padding" else f"bucketopt, {objective}-optimal"


def _mark_recommended(ax, sweep, y, value_text, *, box=True):
    k = sweep.recommended_k
    ax.axvline(k, color="#444444", linestyle=":", linewidth=1.2, zorder=1)
    ax.plot([k], [y], marker="o", markersize=10, markerfacecolor="none",
            markeredgecolor="black", markeredgewidth=1.6, linestyle="none", zorder=4,
            clip_on=False, label=f"recommended K = {k}" + ("" if box else f": {value_text}"))
    if not box:
        return
    right_half = k > (min(sweep.ks) + max(sweep.ks)) / 2
    ax.annotate(f"K = {k}: {value_text}", xy=(k, y), xytext=(-14 if right_half else 14, 16),
                textcoords="offset points", ha="right" if right_half else "left", fontsize=9,
                arrowprops=dict(arrowstyle="-", color="#444444", linewidth=0.8),
                bbox=dict(boxstyle="round,pad=0.25", facecolor="white", edgecolor="#999999"))


def plot_throughput_vs_k(sweep, lengths=None, *, profile=None, world_size=None, epochs=1,
                         rules=None, ax=None, legend_rules=True):
    """Predicted throughput (Ktok/s of real tokens) of the optimum at every K; needs a sweep
    run with a profile.

    The recommended K is marked with its Ktok/s and ETA. Given ``lengths`` and the ``profile``
    (with ``world_size`` and ``epochs``) the sweep used, the rules of thumb are drawn too;
    ``legend_rules=False`` leaves them out of the legend (when a padding panel beside it already
    names their colours).

    Returns
    -------
    matplotlib Axes
    """
    rates = [s.ktok_per_s for s in sweep.solutions]
    if any(r is None for r in rates):
        raise BucketoptError("a throughput plot needs a profile (sweep(..., profile=NAME)).",
                             param="profile")
    ax = _new_axes(ax)
    ks = list(sweep.ks)
    curves = _curves(sweep, lengths if profile is not None or isinstance(rules, dict) else None,
                     rules, profile=profile, world_size=world_size, epochs=epochs)
    low = list(rates)
    for i, (name, curve) in enumerate(curves.items()):
        if curve.get("ktok_per_s") is None:
            continue
        ax.plot(curve["ks"], curve["ktok_per_s"], **_rule_style(i),
                label=f"rule of thumb: {name.replace('_', ' ')}")
        low += curve["ktok_per_s"]
    ax.plot(ks, rates, marker="o", markersize=4, linewidth=2.4, color=OPTIMAL_COLOR,
            label=_optimum_label(sweep) + " (predicted)", zorder=3)
    rec = sweep[sweep.recommended_k]
    text = f"{rec.ktok_per_s:.1f} Ktok/s"
    if rec.eta_days is not None:
        text += f", ETA {rec.eta_days:.2f} days"
    _mark_recommended(ax, sweep, rec.ktok_per_s, text)
    ax.set_ylabel("predicted throughput\n" + _rate_label(rec.extra.get("world_size")))
    lo, hi = min(low), max(rates + low)
    pad = 0.08 * (hi - lo) if hi > lo else 0.05 * hi
    ax.set_ylim(max(0.0, lo - pad), hi + 2.5 * pad)
    _k_axis(ax, ks)
    ax.set_title("Predicted throughput vs number of buckets")
    handles, labels = ax.get_legend_handles_labels()
    if not legend_rules:
        kept = [(h, lab) for h, lab in zip(handles, labels) if not lab.startswith("rule of")]
        handles, labels = [h for h, _ in kept], [lab for _, lab in kept]
    ax.legend(handles, labels, loc="lower right", fontsize=9, framealpha=0.9)
    return ax


def plot_sweep(sweep, lengths=None, *, rules=None, profile=None, world_size=None, epochs=1):
    """The sweep as one figure: padding vs K, plus Ktok/s vs K when the sweep has a profile.

    Given ``lengths`` the rules of thumb are drawn; on the throughput panel too when the
    ``profile`` (and ``world_size``, ``epochs``) the sweep used is given.

    Returns
    -------
    matplotlib Figure
    """
    has_rate = all(s.ktok_per_s is not None for s in sweep.solutions)
    fig, axes = new_figure(2 if has_rate else 1)
    timing = dict(profile=profile, world_size=world_size, epochs=epochs) if has_rate else {}
    curves = _curves(sweep, lengths, rules, **timing)
    plot_padding_vs_k(sweep, lengths, rules=curves, ax=axes[0])
    if has_rate:
        plot_throughput_vs_k(sweep, lengths, rules=curves, ax=axes[1], legend_rules=False)
    import textwrap

    fig.suptitle("\n".join(textwrap.wrap(sweep.reason, 95)), fontsize=10)
    return fig


def _share_text(share: float) -> str:
    if share >= 0.01 or share == 0:
        return f"{100 * share:.0f}%"
    return f"{100 * share:.1f}%" if share >= 0.001 else "<0.1%"


def plot_histogram(lengths, solution=None, *, bins=120, xscale="auto", ax=None):
    """The length histogram, with the bucket edges and per-bucket batch sizes drawn on it.

    Parameters
    ----------
    lengths : array-like of int or Histogram
    solution : Solution, optional
        Its ``boundaries`` are drawn as vertical lines (and as ticks on the top axis), the buckets
        shaded in turn, and each bucket labelled with its share of samples and batch size B
        (when a token budget gave one).
    bins : int
        Number of histogram bins.
    xscale : {"auto", "linear", "log"}
        ``"auto"`` uses log-spaced bins and a log axis when the longest length exceeds 20 times
        the median (a heavy tail), a linear axis otherwise.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib Axes

    Examples
    --------
    >>> import bucketopt
    >>> from bucketopt.show.plots import plot_histogram
    >>> lengths = [3, 4, 10, 11, 12, 40]
    >>> ax = plot_histogram(lengths, bucketopt.solve(lengths, k=2, token_budget=80))
    >>> ax.get_xlabel()
    'sequence length (tokens)'
    """
    from matplotlib.ticker import FuncFormatter

    from ..data.histogram import as_histogram

    if xscale not in ("auto", "linear", "log"):
        raise BucketoptError(f"`xscale` must be 'auto', 'linear' or 'log'; got {xscale!r}.",
                             param="xscale")
    hist = as_histogram(lengths)
    ax = _new_axes(ax, figsize=(9, 4.8))
    hi = hist.max_length if solution is None else max(hist.max_length, solution.boundaries[-1])
    median = hist.values[np.searchsorted(np.cumsum(hist.counts), (hist.n + 1) // 2)]
    log = xscale == "log" or (xscale == "auto" and hi > 20 * median)
    if log:
        x0 = max(1.0, hist.values[0] * 0.95)
        edges = np.geomspace(x0, hi * 1.02, int(bins) + 1)
        ax.set_xscale("log")

        def pos(x):
            return np.log(max(float(x), x0))
    else:
        x0 = 0.0
        edges = np.linspace(0, hi, int(bins) + 1)

        def pos(x):
            return float(x)
    span = pos(edges[-1]) - pos(x0)
    counts, _ = np.histogram(hist.values, bins=edges, weights=hist.counts)
    if solution is not None:
        lo = x0
        for i, b in enumerate(solution.boundaries):
            ax.axvspan(lo, b, color=BUCKET_SHADES[i % 2], zorder=0, linewidth=0)
            lo = b
    ax.stairs(counts, edges, fill=True, color="#4c72b0", alpha=0.85, zorder=2,
              label=f"{hist.n:,} samples")
    ymax = counts.max() if counts.size and counts.max() > 0 else 1
    ax.set_ylim(0, ymax * (1.5 if solution is not None else 1.08))
    if solution is not None:
        rows = (1.46, 1.31, 1.16)
        lo = x0
        narrow_row = 0
        for i, b in enumerate(solution.boundaries):
            ax.axvline(b, color="#c0392b", linewidth=1.3, zorder=3,
                       label="bucket edge (inclusive)" if i == 0 else None)
            lines = [_share_text(solution.shares[i])]
            if solution.batch_sizes is not None:
                lines.append(f"B={solution.batch_sizes[i]}")
            narrow = (pos(b) - pos(lo)) < span / 14
            if narrow:  # cycle three rows so neighbouring labels do not collide
                y = ymax * rows[narrow_row % 3]
                narrow_row += 1
            else:
                y, narrow_row = ymax * rows[0], 0
            mid = np.sqrt(lo * b) if log else (lo + b) / 2
            ax.text(mid, y, "\n".join(lines), ha="center", va="top",
                    fontsize=7.5 if narrow else 8.5, zorder=4,
                    bbox=dict(boxstyle="round,pad=0.15", facecolor="white", edgecolor="none",
                              alpha=0.75))
            lo = b
        top = ax.secondary_xaxis("top")
        top.set_xticks(list(solution.boundaries),
                       [f"{b:,}" for b in solution.boundaries], rotation=60, fontsize=8)
        top.xaxis.set_minor_locator(_null_locator())
        top.tick_params(colors="#c0392b", length=3)
        top.set_xlabel("bucket edges (tokens); in each bucket: share of samples, batch size B",
                       fontsize=9)
        head = f"{len(solution.boundaries)} buckets, {100 * solution.padding_fraction:.1f}% padding"
        if solution.token_budget is not None:
            head += f", token budget {solution.token_budget:,}"
        ax.set_title(f"Length distribution with the chosen buckets: {head}", fontsize=10,
                     pad=8)
    else:
        ax.set_title("Length distribution", fontsize=10)
    if log:
        ax.set_xlim(x0, edges[-1])
        ax.set_xlabel("sequence length (tokens, log scale)")
        ax.set_ylabel("samples per bin\n(log-spaced bins)")
    else:
        ax.set_xlim(0, hi * 1.01)
        ax.set_xlabel("sequence length (tokens)")
        ax.set_ylabel(f"samples per {hi / bins:,.0f}-token bin")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: f"{x:,.0f}"))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _pos: f"{y:,.0f}"))
    ax.legend(loc="center right", fontsize=9, framealpha=0.9)
    return ax


def _null_locator():
    from matplotlib.ticker import NullLocator

    return NullLocator()


def plot_strategies(strategies: dict, *, metric=None, ax=None, title=None,
                    annotate_padding=True, world_size=None):
    """Horizontal bars, one per strategy: padding or predicted throughput.

    Parameters
    ----------
    strategies : dict
        name -> dict with ``padding_fraction`` and optionally ``ktok_per_s`` / ``eta_days``: the
        shape of ``bucketopt compare --json``'s ``strategies`` object.
    metric : {"padding", "throughput"}, optional
        Default: throughput when any strategy has a ``ktok_per_s``, padding otherwise. A strategy
        without a throughput figure gets no bar and says so.
    ax : matplotlib Axes, optional
    title : str, optional
    annotate_padding : bool
        Throughput bars also state the padding (off when a padding chart stands beside them).
    world_size : int, optional
        The GPUs the predicted Ktok/s is the total over, named on the axis (default: a row's
        ``world_size``, as compare's packed rows carry).

    Bars of bucketopt's own plans (rows whose ``bucketopt`` is true, as ``compare`` marks them;
    rows without that key: ``bucketed``, the ``sampler`` row or a name with "optimal") are blue,
    the others grey; the row whose ``recommended`` is true is hatched, edged and labelled.

    Returns
    -------
    matplotlib Axes
    """
    if not strategies:
        raise BucketoptError("nothing to plot: no strategies.", param="strategies")
    names = list(strategies)
    rows = [strategies[n] for n in names]
    has_rate = any(r.get("ktok_per_s") is not None for r in rows)
    if metric is None:
        metric = "throughput" if has_rate else "padding"
    if metric not in ("padding", "throughput"):
        raise BucketoptError(f"`metric` must be 'padding' or 'throughput'; got {metric!r}.",
                             param="metric")
    if metric == "throughput" and not has_rate:
        raise BucketoptError("a throughput chart needs ktok_per_s figures (a profile).")
    ax = _new_axes(ax, figsize=(8, 0.5 * len(names) + 1.6))
    pads = [100 * float(r["padding_fraction"]) for r in rows]
    if metric == "throughput":
        values = [0.0 if r.get("ktok_per_s") is None else float(r["ktok_per_s"]) for r in rows]
    else:
        values = pads
    y = np.arange(len(names))
    colors = [OPTIMAL_COLOR if is_bucketopt_row(n, r) else "#8c8c8c"
              for n, r in zip(names, rows)]
    bars = ax.barh(y, values, color=colors, alpha=0.9)
    for bar, r in zip(bars, rows):
        if r.get("recommended"):
            bar.set_hatch("//")
            bar.set_edgecolor("black")
            bar.set_linewidth(1.5)
    ax.set_yticks(y, [n.replace("_", " ") for n in names])
    for tick, r in zip(ax.get_yticklabels(), rows):
        if r.get("recommended"):
            tick.set_fontweight("bold")
    if not ax.yaxis_inverted():  # first strategy on top (a shared y axis is inverted once)
        ax.invert_yaxis()
    for bar, r, p in zip(bars, rows, pads):
        if metric == "throughput":
            if r.get("ktok_per_s") is None:
                label = "not timed" + (f", {p:.1f}% padding" if annotate_padding else "")
            else:
                label = f"{bar.get_width():.1f} Ktok/s"
                if annotate_padding:
                    label += f", {p:.1f}% padding"
                if r.get("eta_days") is not None:
                    label += f", ETA {float(r['eta_days']):.2f} d"
        else:
            label = f"{p:.1f}%"
        if r.get("recommended"):
            label += "  (recommended)"
        ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, "  " + label,
                va="center", fontsize=9)
    top = max(values)
    room = (1.9 if annotate_padding else 1.55) if metric == "throughput" else 1.3
    ax.set_xlim(0, top * room if top > 0 else 1)
    if metric == "throughput":
        if world_size is None:  # compare's packed rows carry it
            world_size = next((r["world_size"] for r in rows if r.get("world_size")), None)
        ax.set_xlabel("predicted throughput " + _rate_label(world_size))
    else:
        ax.set_xlabel("padding, % of computed tokens")
        _percent_x(ax)
    ax.grid(True, axis="x", color="#dddddd", linewidth=0.8)
    ax.set_axisbelow(True)
    ax.set_title(title or "Batching strategies compared", fontsize=10)
    return ax


def is_bucketopt_row(name, row) -> bool:
    """Whether a ``compare`` row is one of bucketopt's own plans (drawn blue): its ``bucketopt``
    flag, or for rows without one, ``bucketed``, the ``sampler`` row or a name with
    "optimal"."""
    if "bucketopt" in row:
        return bool(row["bucketopt"])
    return name == "bucketed" or "optimal" in name or row.get("kind") in ("bucketed",
                                                                          "bucketed:sampler")


def plot_comparison(strategies: dict, *, title=None, world_size=None):
    """``bucketopt compare`` as one figure: padding per strategy, and predicted Ktok/s beside it
    when the strategies have throughput figures. bucketopt's plans are blue, the others grey,
    the recommended row hatched (:func:`plot_strategies`).

    Returns
    -------
    matplotlib Figure
    """
    if not strategies:
        raise BucketoptError("nothing to plot: no strategies.", param="strategies")
    has_rate = any(r.get("ktok_per_s") is not None for r in strategies.values())
    try:
        from matplotlib.figure import Figure
    except ImportError:  # pragma: no cover
        raise BucketoptError("plots need matplotlib: pip install matplotlib") from None
    height = 0.45 * len(strategies) + 1.8
    fig = Figure(figsize=(13 if has_rate else 8, height), layout="constrained")
    axes = fig.subplots(1, 2 if has_rate else 1, sharey=True, squeeze=False)[0]
    plot_strategies(strategies, metric="padding", ax=axes[0], title="Padding")
    if has_rate:
        plot_strategies(strategies, metric="throughput", ax=axes[1],
                        title="Predicted throughput and ETA", annotate_padding=False,
                        world_size=world_size)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def _rate_label(world_size) -> str:
    """``(Ktok/s of real tokens, total over 8 GPUs)``: what an axis of predicted Ktok/s counts."""
    from .report import rate_scope

    return ("(Ktok/s of real tokens)" if world_size is None
            else f"(Ktok/s of real tokens, {rate_scope(world_size)})")


def _percent_x(ax):
    from matplotlib.ticker import FuncFormatter

    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: f"{x:g}%"))
