"""``bucketopt inspect``: what a lengths source holds, and its length distribution.

Schema, the column used (and why), n, min / max / mean, P0..P100 and a power-of-two length
histogram: the story's ``seq_len`` query as one command. The read streams, so it works on data
of any size.

The histogram's bins are ``(lo, hi]``, the convention of bucket boundaries everywhere in
bucketopt (a bin's count is what a bucket with edges lo, hi would hold). Percentiles are lengths
that occur: P_q is the smallest length with at least q% of the samples at or below it
(numpy's ``method="inverted_cdf"``).
"""

from __future__ import annotations

import numpy as np

from .common import add_output_args, emit_json

PERCENTILES = (0, 10, 25, 50, 75, 90, 95, 99, 100)


def add_parser(sub) -> None:
    p = sub.add_parser("inspect", help="schema and length distribution of a source",
                       description="Schema, chosen column, percentiles and length histogram of "
                                   "a lengths source (file, directory, glob, Hugging Face "
                                   "save_to_disk directory, or length,count histogram).")
    p.add_argument("path", metavar="PATH", help="the source to inspect")
    p.add_argument("--column", metavar="NAME", help="column holding the lengths")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress line on stderr")
    add_output_args(p)
    p.set_defaults(run=run)


def power_of_two_bins(hist) -> list[dict]:
    """Counts in (2^j, 2^(j+1)] bins covering the histogram's range (the first bin is (0, 1]
    when the shortest length is 1)."""
    top = (hist.max_length - 1).bit_length()  # 2**top >= the longest length
    if hist.min_length == 1:
        edges = [0] + [1 << j for j in range(top + 1)]
    else:
        low = (hist.min_length - 1).bit_length() - 1  # 2**low < the shortest length
        edges = [1 << j for j in range(low, top + 1)]
    cum = np.concatenate([[0], np.cumsum(hist.counts)])
    positions = np.searchsorted(hist.values, edges, side="right")
    n = hist.n
    bins = []
    for j in range(len(edges) - 1):
        count = int(cum[positions[j + 1]] - cum[positions[j]])
        bins.append({"lo": edges[j], "hi": edges[j + 1], "count": count, "share": count / n})
    return bins


def summary(source, hist) -> dict:
    """The JSON-ready description of a source and its histogram."""
    percentiles = hist.percentile(PERCENTILES, method="inverted_cdf")
    return {
        "source": source.label,
        "format": source.format,
        "files": len(source.files),
        "schema": [{"name": name, "type": type_} for name, type_ in source.schema],
        "column": {
            "name": source.column.name,
            "kind": source.column.kind,
            "type": source.column.type,
            "reason": source.column.reason,
            "count_column": source.column.count_column,
        },
        "note": source.note,
        "n": hist.n,
        "distinct": hist.m,
        "min": hist.min_length,
        "max": hist.max_length,
        "mean": hist.real_tokens / hist.n,
        "real_tokens": hist.real_tokens,
        "percentiles": {f"P{p}": int(v) for p, v in zip(PERCENTILES, percentiles)},
        "histogram": power_of_two_bins(hist),
    }


def run(args) -> int:
    from ..data.io import open_source
    from ..show.report import table

    source = open_source(args.path, column=args.column)  # checks the path itself
    hist = source.histogram(progress=False if args.quiet else None)
    info = summary(source, hist)
    if args.json:
        emit_json(info)
        return 0
    head = f"source: {source.label} ({source.format}"
    head += f", {len(source.files)} files" if len(source.files) > 1 else ""
    print(head + ")" + (f"; {source.note}" if source.note else ""))
    used = {source.column.name, source.column.count_column}
    rows = [[name or "(values)", type_, "<- used" if name in used else ""]
            for name, type_ in source.schema]
    print(table(["column", "type", ""], rows, align="lll"))
    print(f"lengths: {source.column.describe()}")
    print(f"n = {info['n']:,}   min = {info['min']:,}   max = {info['max']:,}   "
          f"mean = {info['mean']:,.1f}   distinct = {info['distinct']:,}   "
          f"tokens = {info['real_tokens']:,}")
    print("  ".join(f"{p} {v:,}" for p, v in info["percentiles"].items()))
    peak = max(b["count"] for b in info["histogram"])
    rows = [[f"({b['lo']:,}, {b['hi']:,}]", f"{b['count']:,}", f"{100 * b['share']:.1f}%",
             "#" * round(30 * b["count"] / peak)] for b in info["histogram"]]
    print(table(["length", "samples", "share", ""], rows, align="lrrl"))
    return 0
