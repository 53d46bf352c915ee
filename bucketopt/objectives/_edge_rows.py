"""The edge DP in bounded memory, for more (k x groups) cells than a table of starts can hold.

``_edge_kernels.edge_layers`` keeps ``opt``, one int32 start per (k, group): 2.56 GB at k = 64 on
10**7 distinct lengths. Here each layer is one pass: without share windows the kernels' convex-hull
pass for one lane (:func:`hull_layer`, O(g), with their own line pushes), else one
divide-and-conquer pass over the monotone argmin (:func:`edge_layer`: the same windows and the
same smallest best start as ``_edge_kernels._edge_layers_dc`` and ``_edge_numpy``); in memory
two layers of values, one row of starts and the line stack. Each row of starts goes to an
unnamed temporary file as it is made, and the backtrack reads back the one start per layer it
needs. :class:`PathStarts` then answers
``opt[layer, j]`` on those paths, which is all :func:`bucketopt.groups.backtrack` reads.
"""

from __future__ import annotations

import shutil
import tempfile

import numpy as np
from numba import njit

from ..errors import BucketoptError
from ..groups import INF
from ._edge_kernels import _hull_applies, _hull_push, _hull_query


@njit(cache=True, nogil=True)
def edge_layer(edges, prefix_count, prefix_tokens, win_lo, win_hi, prev, cur, arg):
    """One layer: cur[j] = min over allowed starts i of prev[i] + cost(i, j), arg[j] the smallest
    such i (-1 where none); cur[0] = 0 (at most k buckets)."""
    g = edges.size - 1
    for j in range(g + 1):
        cur[j] = INF
        arg[j] = -1
    cur[0] = 0
    # segments (jl, jh, ol, oh): groups jl..jh whose best start lies in ol..oh
    stack = np.empty((4 * 64 + 8, 4), dtype=np.int64)
    top = 0
    stack[0, 0], stack[0, 1], stack[0, 2], stack[0, 3] = 1, g, 0, g - 1
    top = 1
    while top > 0:
        top -= 1
        jl, jh, ol, oh = stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3]
        if jl > jh:
            continue
        mid = (jl + jh) // 2
        lo = max(ol, win_lo[mid])
        hi = min(min(oh, win_hi[mid]), mid - 1)
        left_hi = min(oh, win_hi[mid])
        right_lo = max(ol, win_lo[mid])
        if hi >= lo:
            e, pcj, ptj = edges[mid], prefix_count[mid], prefix_tokens[mid]
            bi = lo
            low = prev[lo] + e * (pcj - prefix_count[lo]) - (ptj - prefix_tokens[lo])
            for i in range(lo + 1, hi + 1):
                v = prev[i] + e * (pcj - prefix_count[i]) - (ptj - prefix_tokens[i])
                if v < low:  # strictly: the smallest best start
                    low = v
                    bi = i
            cur[mid] = min(low, INF)
            arg[mid] = bi
            left_hi = bi
            right_lo = bi
        # the larger half first on the stack, so it stays O(log g) deep
        if mid - jl > jh - mid:
            stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3] = jl, mid - 1, ol, left_hi
            top += 1
            stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3] = mid + 1, jh, right_lo, oh
            top += 1
        else:
            stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3] = mid + 1, jh, right_lo, oh
            top += 1
            stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3] = jl, mid - 1, ol, left_hi
            top += 1
    return cur[g]


@njit(cache=True, nogil=True)
def hull_layer(edges, prefix_count, prefix_tokens, prev, cur, arg, h, first):
    """One layer without share windows (where ``_edge_kernels._hull_applies``): the monotone
    convex-hull pass of ``_edge_kernels._edge_layers_hull`` for one lane, with its own
    ``_hull_push`` / ``_hull_query``, so the same values and the same smallest best starts, in
    O(g). ``first``: layer 1 (one bucket from 0). ``h``: the line stack, 4 int64 a line."""
    g = edges.size - 1
    cur[0] = 0
    arg[0] = -1
    if first:
        for j in range(1, g + 1):
            cur[j] = edges[j] * prefix_count[j] - prefix_tokens[j]
            arg[j] = 0
        return cur[g]
    top = edges[g] + 1
    ftop = float(top)
    h[0] = 0
    h[1] = 0
    h[2] = 0
    h[3] = 0  # line 0: the empty prefix
    n, p = 4, 0
    if g >= 1:
        cur[1] = edges[1] * prefix_count[1] - prefix_tokens[1]
        arg[1] = 0
    for j in range(2, g + 1):
        i = j - 1
        x = edges[j]
        n = _hull_push(h, n, p, prefix_count[i], prev[i] + prefix_tokens[i], i, top, ftop)
        p = _hull_query(h, n, p, x)
        cur[j] = h[p + 1] - h[p] * x + x * prefix_count[j] - prefix_tokens[j]
        arg[j] = h[p + 3]
    return cur[g]


class PathStarts:
    """``opt[layer, j]`` on the backtracked paths of the asked layers (all backtrack reads)."""

    def __init__(self, starts: dict):
        self.starts = starts

    def __getitem__(self, key):
        return self.starts.get(key, -1)


def edge_layers_rows(edges, prefix_count, prefix_tokens, win_lo, win_hi, kmax, asked,
                     progress=None):
    """(PathStarts, best) with ``_edge_kernels.edge_layers``' contract for the layers in
    ``asked``; memory: three arrays of the groups, whatever ``kmax``."""
    g = edges.size - 1
    row_bytes = 4 * (g + 1)
    try:
        folder = tempfile.gettempdir()
    except OSError as exc:  # TMPDIR, TEMP, TMP, /tmp, /var/tmp... none can be written
        raise BucketoptError(f"no temporary folder to keep the DP's rows in ({exc}); set TMPDIR "
                             "to a writable folder.") from None
    need = row_bytes * kmax
    if shutil.disk_usage(folder).free < need + (1 << 30):
        raise BucketoptError(
            f"k={kmax} over {g:,} candidate edges keeps {need / 1e9:,.1f} GB of bucket starts on "
            f"disk ({folder}), more than is free there; set TMPDIR to a larger disk, use a "
            "smaller k, or merge nearby lengths with align=.", param=None)
    edges, pc, pt = (np.ascontiguousarray(a, dtype=np.int64)
                     for a in (edges, prefix_count, prefix_tokens))
    lo, hi = (np.ascontiguousarray(a, dtype=np.int64) for a in (win_lo, win_hi))
    prev = np.full(g + 1, INF, dtype=np.int64)
    prev[0] = 0
    cur = np.empty(g + 1, dtype=np.int64)
    arg = np.empty(g + 1, dtype=np.int32)
    best = np.empty(kmax, dtype=np.int64)
    hull = _hull_applies(edges, pc, pt, lo, hi)
    h = np.empty(4 * (g + 1) + 4 if hull else 4, dtype=np.int64)  # pages touched as it grows
    with tempfile.TemporaryFile(dir=folder) as rows:  # unnamed: gone however the run ends
        for k in range(kmax):
            if hull:
                best[k] = hull_layer(edges, pc, pt, prev, cur, arg, h, k == 0)
            else:
                best[k] = edge_layer(edges, pc, pt, lo, hi, prev, cur, arg)
            arg.tofile(rows)
            prev, cur = cur, prev
            if progress is not None:
                progress(k + 1, kmax)
        starts = {}
        for k in asked:
            if best[k - 1] >= INF:
                continue
            j, layer = g, k - 1
            while j > 0 and layer >= 0:
                rows.seek((layer * (g + 1) + j) * 4)
                i = int(np.frombuffer(rows.read(4), dtype=np.int32)[0])
                starts[(layer, j)] = i
                if i < 0:
                    break
                j, layer = i, layer - 1
    return PathStarts(starts), best
