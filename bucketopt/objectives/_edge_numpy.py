"""The exact edge DP in numpy, for small inputs in a process that has not loaded the kernel.

The first numba call of a process costs 0.3-1 s (numba builds its compiler target even to load a
cached kernel), several times what ``bucketopt solve`` needs for the embedded example. So while
the compiled kernel is not loaded, every DP of at most :data:`SMALL_CELLS` cells runs here
instead (the first, the second and every later one alike: a small solve never pays the load):
the divide-and-conquer pass of ``_edge_kernels._edge_layers_dc`` (same windows, same smallest best
start), one recursion level of every segment at a time, O(g log g) vectorised work per layer.
tests/test_edge_dp.py holds its whole ``opt`` table equal to the textbook DP and the kernel.
"""

from __future__ import annotations

import sys

import numpy as np

from ..groups import INF

# kmax x (g + 1) at most this: about 10-30 ms here, where numba's start costs far more.
SMALL_CELLS = 1 << 18


# The edge DPs run in this process, by the path they took (EdgePadding.layers counts them).
RAN = {"numpy": 0, "kernel": 0}


def use_numpy(g: int, kmax: int) -> bool:
    """Small, and the compiled kernel not loaded in this process: then numpy is faster than
    loading it. The rule does not change from one call to the next: a small DP runs here until
    a large one (or a caller) has loaded the kernel, then there (20x faster than numpy once
    loaded). So a process of small solves never pays the kernel's load, and the second small
    solve costs what the third does."""
    if kmax * (g + 1) > SMALL_CELLS:
        return False
    kernels = sys.modules.get("bucketopt.objectives._edge_kernels")
    return kernels is None or not kernels.edge_layers.signatures


def edge_layers_numpy(edges, prefix_count, prefix_tokens, win_lo, win_hi, kmax):
    """``_edge_kernels.edge_layers``' contract: (opt int32 (kmax, g + 1), best int64 (kmax,))."""
    edges = np.asarray(edges, dtype=np.int64)
    pc = np.asarray(prefix_count, dtype=np.int64)
    pt = np.asarray(prefix_tokens, dtype=np.int64)
    win_lo = np.asarray(win_lo, dtype=np.int64)
    win_hi = np.asarray(win_hi, dtype=np.int64)
    g = edges.size - 1
    opt = np.full((kmax, g + 1), -1, dtype=np.int32)
    best = np.empty(kmax, dtype=np.int64)
    prev = np.full(g + 1, INF, dtype=np.int64)
    prev[0] = 0
    one = np.ones(1, dtype=np.int64)
    for k in range(kmax):
        cur = np.full(g + 1, INF, dtype=np.int64)
        cur[0] = 0
        # segments: groups jl..jh whose best start lies in ol..oh
        jl, jh = one * 1, one * g
        ol, oh = one * 0, one * (g - 1)
        while jl.size:
            live = jl <= jh
            jl, jh, ol, oh = jl[live], jh[live], ol[live], oh[live]
            if not jl.size:
                break
            mid = (jl + jh) // 2
            lo = np.maximum(ol, win_lo[mid])
            hi = np.minimum(np.minimum(oh, win_hi[mid]), mid - 1)
            cnt = np.maximum(hi - lo + 1, 0)
            has = cnt > 0
            left_hi = np.minimum(oh, win_hi[mid])
            right_lo = np.maximum(ol, win_lo[mid])
            if has.any():
                hc = cnt[has]
                seg = np.repeat(np.flatnonzero(has), hc)
                starts = np.r_[0, np.cumsum(hc)[:-1]]
                i = lo[seg] + (np.arange(seg.size) - np.repeat(starts, hc))
                j = mid[seg]
                v = prev[i] + edges[j] * (pc[j] - pc[i]) - (pt[j] - pt[i])
                low = np.minimum.reduceat(v, starts)
                at = np.flatnonzero(v == np.repeat(low, hc))
                first = at[np.r_[True, seg[at[1:]] != seg[at[:-1]]]]  # smallest best start
                bi = i[first]
                m = mid[has]
                cur[m] = np.minimum(low, INF)
                opt[k, m] = bi
                left_hi[has] = bi
                right_lo[has] = bi
            jl, jh, ol, oh = (np.r_[jl, mid + 1], np.r_[mid - 1, jh], np.r_[ol, right_lo],
                              np.r_[left_hi, oh])
        best[k] = cur[g]
        prev = cur
    return opt, best
