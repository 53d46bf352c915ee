"""NeMo's 2-D bucketing, side by side with bucketopt's: its bin estimator as a named baseline,
and the lines its Lhotse dataloader config reads.

:func:`nemo_estimate_bins` re-implements ``estimate_duration_buckets`` of NeMo's
``scripts/speech_recognition/estimate_duration_bins_2d.py`` (the version with per-bucket
``max_tps`` thresholds and the ``--token_outlier_threshold`` z-score filter), step by step on the
same dtypes (float32 inputs, int32 outputs):

1. sort the pairs by (input, output); ``size_per_bucket`` = total input / K1;
2. walk the inputs, adding each to a running total; when the total *before* a sample exceeds
   ``size_per_bucket``, that sample's input (rounded to 3 decimals) becomes a dim0 edge and the
   sample *starts* the next range (so a sample whose input equals an edge is estimated with the
   range above it, while NeMo's selection, ``bisect_left``, puts it in the bucket below);
3. equal dim0 edges are merged, their sub-bucket counts added;
4. in each range, drop the samples whose tokens-per-input z-score exceeds the threshold (4),
   take the largest remaining ratio as the range's ``max_tps``, sort the rest by output and cut
   them into sub-buckets of about equal total output the same way (the sub-bucket's edge is the
   output of the first sample past the threshold), the last edge the largest kept output.

The estimator can therefore leave samples that fit no bin (an input at an edge whose output
exceeds the lower bucket's last sub-edge; the dropped outliers) and can repeat a bin; the
sampler drops such samples silently. ``evaluate`` counts them (``unassigned``).
"""

from __future__ import annotations

import numpy as np

from ..errors import BucketoptError


def _sort_pairs(first, second):
    # the script's joint record sort: by first, then second
    joint = np.rec.fromarrays([first, second])
    joint.sort()
    return joint.f0, joint.f1


def _non_outliers(ratios, threshold):
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (ratios - np.mean(ratios)) / np.std(ratios)
    return np.where(z <= threshold)


def nemo_estimate_bins(pairs, num_buckets=30, num_subbuckets=2, *,
                       token_outlier_threshold=4.0):
    """NeMo's 2-D bins for ``pairs`` (input, output): (bins, max_tps), both lists, in the
    order NeMo prints them (``bucket_duration_bins``, ``max_tps``). Inputs are read as float32
    (seconds in NeMo; tokens or frames here), outputs as int32."""
    from .data import check_pairs

    arr = check_pairs(pairs)
    if num_buckets < 2:
        raise BucketoptError("NeMo's estimator needs at least 2 buckets (it asserts "
                             f"num_buckets > 1); got {num_buckets}.", param="num_buckets")
    sizes = arr[:, 0].astype(np.float32)
    tokens = arr[:, 1].astype(np.int32)
    sizes, tokens = _sort_pairs(sizes, tokens)
    per_bucket = sizes.sum() / num_buckets
    max_input = round(sizes[-1], 3)
    bins, tps = [], []

    def sub_buckets(edge, start, end, count):
        all_tok, all_size = tokens[start:end], sizes[start:end]
        keep = _non_outliers(all_tok / all_size, token_outlier_threshold)
        tok, size = all_tok[keep], all_size[keep]
        if tok.size == 0:
            raise BucketoptError(
                f"NeMo's estimator fails here: every sample of its bucket <= {edge:g} is an "
                "outlier by its z-score (all share one output/input ratio), and the script "
                "takes the max of none.", param="pairs")
        top_ratio = (tok / size).max()
        tok, size = _sort_pairs(tok, size)
        per_sub = tok.sum() / count
        running = 0
        value = None
        for value in tok:
            if running > per_sub:
                bins.append((edge, value))
                tps.append(top_ratio)
                running = 0
            running += value
        bins.append((edge, value))
        tps.append(top_ratio)

    edges, starts = [], [0]
    total = 0.0
    for index, size in enumerate(sizes):
        if total > per_bucket:
            size = round(size, 3)
            edges.append(size)
            starts.append(index)
            total = 0.0
        total += size
    merged, start = 1, 0
    for i, (edge, index) in enumerate(zip(edges, starts[1:])):
        last = i == len(edges) - 1
        if (not last and edges[i + 1] == edge) or (last and max_input == edge):
            merged += 1
            continue
        sub_buckets(edge, start, index, num_subbuckets * merged)
        start = index
        merged = 1
    sub_buckets(max_input, start, len(sizes), num_subbuckets * merged)
    out = [(_number(a), int(b)) for a, b in bins]
    return out, [float(t) for t in tps]


def _number(x):
    value = float(x)
    return int(value) if value.is_integer() else value


def max_tps_of(pairs, bins) -> list:
    """The smallest per-bin ``max_tps`` (output / input) that drops none of ``pairs``: each
    bin's largest ratio among the samples it holds (0 for an empty bin)."""
    from .data import PairHistogram
    from .plans import assign_bins

    if isinstance(pairs, PairHistogram):  # the distinct pairs: the ratios are theirs
        arr = np.stack(pairs.entries()[:2], axis=1)
    else:
        arr = np.asarray(pairs)
    idx = assign_bins(arr[:, 0], arr[:, 1], np.asarray(bins))
    ratio = arr[:, 1] / arr[:, 0]
    out = []
    for t in range(len(bins)):
        sel = idx == t
        out.append(float(ratio[sel].max()) if sel.any() else 0.0)
    return out


def nemo_lines(bins, batch_sizes=None, max_tps=None) -> str:
    """The config lines NeMo's dataloader reads (Hydra overrides, as NeMo's 2-D estimator
    prints them): ``bucket_duration_bins=[[a,b],...]``, ``bucket_batch_size=[...]`` and, when
    given, ``max_tps=[...]``; each value is a JSON list."""
    lines = ["bucket_duration_bins=[" + ",".join(f"[{_text(a)},{_text(b)}]" for a, b in bins)
             + "]"]
    if batch_sizes is not None:
        lines.append("bucket_batch_size=[" + ",".join(str(int(s)) for s in batch_sizes) + "]")
    if max_tps is not None:
        lines.append("max_tps=[" + ",".join(repr(float(t)) for t in max_tps) + "]")
    return "\n".join(lines) + "\n"


def _text(x) -> str:
    return str(_number(x))


def to_nemo_pairs(solution, *, pairs=None, max_tps=False) -> dict:
    """NeMo's keys for a 2-D plan: ``bucket_duration_bins`` (pairs), ``bucket_batch_size`` and,
    with ``max_tps=True`` (needs ``pairs``), ``max_tps`` set so that no sample is dropped."""
    if solution.batch_sizes is None:
        raise BucketoptError("the nemo export needs per-bin batch sizes: solve or evaluate with "
                             "a token_budget (CLI: --token-budget T).", param="token_budget")
    out = {"bucket_duration_bins": [[int(a), int(b)] for a, b in solution.bins],
           "bucket_batch_size": [int(s) for s in solution.batch_sizes]}
    if max_tps:
        if pairs is None:
            raise BucketoptError("max_tps needs the lengths (--lens).", param="max_tps")
        out["max_tps"] = max_tps_of(pairs, solution.bins)
    return out


def cover_all(pairs, bins) -> list:
    """``bins`` raised just enough to hold every sample: each dim0 bucket's last dim1 edge
    becomes at least the largest output among its samples, and a dim0 bucket is added when
    inputs exceed the last dim0 edge. A bin set NeMo's selection then drops nothing from."""
    arr = np.asarray(pairs)
    out = [[a, b] for a, b in bins]
    dim0 = sorted({a for a, _ in out})
    group = np.searchsorted(np.asarray(dim0, dtype=np.float64), arr[:, 0], side="left")
    for g, edge in enumerate(dim0):
        sel = group == g
        if sel.any():
            last = max(t for t, (a, _) in enumerate(out) if a == edge)
            out[last][1] = max(out[last][1], int(arr[sel, 1].max()))
    if (group == len(dim0)).any():
        out.append([int(arr[:, 0].max()), int(arr[:, 1].max())])
    return [(_number(a), int(b)) for a, b in out]


def fits_grid(bins, grid) -> bool:
    """True when ``bins`` has at most K1 dim0 edges and at most K2 bins under each."""
    dim0 = [a for a, _ in bins]
    return len(set(dim0)) <= grid[0] and max(dim0.count(a) for a in set(dim0)) <= grid[1]
