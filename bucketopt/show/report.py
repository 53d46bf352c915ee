"""Plain-text tables for people (the CLI without --json)."""

from __future__ import annotations

from ..solution import Solution


def _fmt_int(x) -> str:
    return f"{round(x):,}"


def gpus_text(world_size) -> str:
    """``1 GPU`` or ``8 GPUs``."""
    return "1 GPU" if world_size == 1 else f"{world_size:,} GPUs"


def rate_scope(world_size) -> str:
    """What a predicted Ktok/s counts: real tokens per second, ``total over 8 GPUs``."""
    return f"total over {gpus_text(world_size)}"


def rate_header(world_size) -> str:
    """The header of a predicted Ktok/s column: ``Ktok/s (total, 8 GPUs)`` (``Ktok/s`` when the
    number of GPUs is not known)."""
    return "Ktok/s" if world_size is None else f"Ktok/s (total, {gpus_text(world_size)})"


def table(headers, rows, align=None) -> str:
    """A fixed-width text table; ``align`` is a string of 'l'/'r' per column."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    align = align or "l" + "r" * (len(headers) - 1)
    lines = []
    for n, row in enumerate(cells):
        parts = [c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(row, widths, align)]
        lines.append("  ".join(parts).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def describe_optimality(optimality: dict, objective: str = "padding") -> str:
    """"exact optimum" or "within X of the optimum (certified)", with the bound."""
    what = "expected epoch seconds" if objective == "time" else "padded tokens"
    if optimality["exact"]:
        return f"exact optimum (proven: no boundary set has lower {what})"
    if optimality["gap"] is None:
        return f"not proven optimal (no positive lower bound of the {what} is known)"
    return (f"within {optimality['gap']:.2e} of the optimum (certified: {what} >= "
            f"{optimality['lower_bound']:,.6g} for every boundary set)")


def solution_table(sol: Solution) -> str:
    headers = ["bucket", "samples", "share", "tokens", "batch size", "fill", "padded tokens",
               "padding"]
    peaks = sol.peak_memory_bytes
    if peaks is not None:
        headers.insert(5, "peak GB")
    rows = []
    lo = 0
    for i, edge in enumerate(sol.boundaries):
        real = sol.bucket_real_tokens[i]
        padded = sol.bucket_padded_tokens[i]
        frac = padded / (real + padded) if real + padded else 0.0
        rows.append([
            f"({lo}, {edge}]",
            _fmt_int(sol.counts[i]),
            f"{sol.shares[i] * 100:.1f}%",
            _fmt_int(real),
            "-" if sol.batch_sizes is None else _fmt_int(sol.batch_sizes[i]),
            f"{sol.fill[i] * 100:.0f}%" if sol.fill else "-",
            _fmt_int(padded),
            f"{frac * 100:.1f}%",
        ])
        if peaks is not None:
            rows[-1].insert(5, f"{peaks[i] / 2**30:.1f}")
        lo = edge
    rows.append(["total", _fmt_int(sol.n_samples), "100.0%", _fmt_int(sol.real_tokens), "", "",
                 _fmt_int(sol.padded_tokens), f"{sol.padding_fraction * 100:.2f}%"])
    if peaks is not None:
        rows[-1].insert(5, "")
    kind = "expected dynamic padding" if sol.pad == "batch" else "edge padding"
    head = f"{len(sol.boundaries)} bucket(s), {kind}"
    if sol.k is not None:
        head += f", optimal over at most k={sol.k} ({sol.objective})"
    if sol.token_budget is not None:
        head += f", token budget {sol.token_budget:,}"
    lines = [head, table(headers, rows)]
    lines.append("boundaries (inclusive upper edges): " + ", ".join(map(str, sol.boundaries)))
    if sol.optimality is not None:
        lines.append("optimality: " + describe_optimality(sol.optimality, sol.objective))
    if sol.fill:
        lines.append("fill: expected padded tokens of each bucket's largest batch over the "
                     + ("token budget" if sol.token_budget is not None
                        else "tokens its batch can hold (batch size x edge)"))
    memory = sol.extra.get("memory")
    if peaks is not None and memory is not None:
        lines.append(
            f"batch sizes from the memory model m0 + m1 s b + m2 s b^2 (m0 {memory['m0']:.4g}, "
            f"m1 {memory['m1']:.4g}, m2 {memory['m2']:.4g} bytes) within "
            f"{memory['headroom']:g} x {memory['capacity'] / 2**30:.1f} GB; peak GB: the "
            "predicted peak of a full batch")
    if sol.ktok_per_s is not None:
        rate = sol.extra.get("ktok_per_s_interval")
        eta = sol.extra.get("eta_days_interval")
        ranks = sol.extra.get("world_size")
        lines.append(f"predicted throughput: {sol.ktok_per_s:.1f} Ktok/s"
                     + (f" [{rate[0]:.1f}, {rate[1]:.1f}]" if rate else "")
                     + ("" if ranks is None else f" (real tokens, {rate_scope(ranks)})")
                     + ("" if sol.eta_days is None else f", ETA {sol.eta_days:.2f} days")
                     + (f" [{eta[0]:.2f}, {eta[1]:.2f}]" if eta else ""))
        if "profile" in sol.extra:
            x = sol.extra
            order = ("one bucket per micro-step on every rank" if x.get("sync_buckets") is True
                     else "batches in random order")
            lines.append(f"(profile {x['profile']}, {x['world_size']} GPU(s), {x['epochs']} "
                         f"epoch(s), {order}, each step waits for the slowest rank)")
        step = step_time_line(sol.extra)
        if step:
            lines.append(step)
    return "\n".join(lines)


def seconds_text(value) -> str:
    """Seconds for people: ms under one second."""
    return f"{value * 1e3:.3g} ms" if value < 1 else f"{value:.3g} s"


def step_time_line(fields) -> str | None:
    """``predicted step time: p50 ... [lo, hi], p90 ..., rank wait ...`` from the
    ``step_time_*`` / ``rank_wait_s`` keys of a prediction (None without them)."""
    if fields.get("step_time_p50") is None:
        return None
    parts = []
    for key, label in (("step_time_p50", "p50"), ("step_time_p90", "p90"),
                       ("rank_wait_s", "expected rank wait")):
        span = fields.get(key + "_interval")
        parts.append(f"{label} {seconds_text(fields[key])}"
                     + (f" [{seconds_text(span[0])}, {seconds_text(span[1])}]" if span else ""))
    return "predicted step time: " + ", ".join(parts)
