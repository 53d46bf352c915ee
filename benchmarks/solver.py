"""The shipped exact edge DP against its references, side by side in one process.

- The large rows (m distinct lengths, K buckets): ``edge_layers`` (an O(m) monotone convex-hull
  pass per layer when no share window binds, up to 8 layers advancing together) against the
  divide-and-conquer pass it replaces (O(m log m) per layer, still used under share windows) and
  against one memory pass over the K x m table: a numba kernel that allocates a K x (m+1) int64
  table and writes every entry once, the least any DP filling that table can do.
- The small rows: ``solve()`` against the textbook O(k m^2) DP.

All DPs are numba-compiled with the same contract, so the ratios measure the algorithm, not
Python overhead. Times are the best of several runs after compilation. Run:

    python benchmarks/solver.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from _timing import best_of
from numba import njit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's bucketopt
import bucketopt
from bucketopt.data.histogram import Histogram
from bucketopt.groups import INF
from bucketopt.objectives._edge_kernels import _edge_layers_dc, edge_layers
from bucketopt.solver import make_groups, share_windows


def histogram_with_m_distinct(m: int, seed: int = 0) -> Histogram:
    rng = np.random.default_rng(seed)
    values = np.arange(1, m + 1, dtype=np.int64) * 3 + rng.integers(0, 3, size=m)
    counts = np.rint(1 + 400 * rng.lognormal(0, 1, size=m)).astype(np.int64)
    return Histogram(values, counts)


@njit(cache=True)
def memory_pass(row, k):
    """A fresh K x (m+1) int64 table, every entry written once from a row read once per layer."""
    table = np.empty((k, row.size), dtype=np.int64)
    for layer in range(k):
        for j in range(row.size):
            table[layer, j] = row[j] + layer
    return table


@njit(cache=True)
def edge_layers_quadratic(edges, prefix_count, prefix_tokens, win_lo, win_hi, kmax):
    """The textbook O(k g^2) DP with the contract of ``edge_layers``: the yardstick of the small
    rows (tests/naive.py holds the same DP in numpy, the tests' reference)."""
    g = edges.size - 1
    opt = np.full((kmax, g + 1), -1, dtype=np.int32)
    best = np.empty(kmax, dtype=np.int64)
    prev = np.full(g + 1, INF, dtype=np.int64)
    prev[0] = 0
    cur = np.empty(g + 1, dtype=np.int64)
    for k in range(kmax):
        cur[:] = INF
        cur[0] = 0
        for j in range(1, g + 1):
            best_v = 3 * INF
            best_i = -1
            for i in range(win_lo[j], min(win_hi[j], j - 1) + 1):
                v = prev[i] + (edges[j] * (prefix_count[j] - prefix_count[i])
                               - (prefix_tokens[j] - prefix_tokens[i]))
                if v < best_v:
                    best_v = v
                    best_i = i
            if best_i >= 0:
                cur[j] = min(best_v, INF)
                opt[k, j] = best_i
        best[k] = cur[g]
        prev, cur = cur, prev
    return opt, best


def large_row(m: int, k: int, goal_s: float, repeat: int = 3, dc: bool = True) -> dict:
    """The hull pass, the divide-and-conquer pass and one memory pass, same histogram, one run.

    Returns seconds of each (best of ``repeat``) and the hull's time over the memory pass."""
    groups = make_groups(histogram_with_m_distinct(m), 1)
    win_lo, win_hi = share_windows(groups, 0.0, 1.0)
    args = (groups.edges, groups.prefix_count, groups.prefix_tokens, win_lo, win_hi, k)
    memory_pass(groups.prefix_count, 1)
    edge_layers(*args[:-1], 1)
    _edge_layers_dc(*args[:-1], 1)
    t_mem, _ = best_of(lambda: memory_pass(groups.prefix_count, k), repeat)
    t_new, new = best_of(lambda: edge_layers(*args), repeat)
    out = {"m": m, "k": k, "hull_s": t_new, "memory_pass_s": t_mem,
           "hull_over_memory_pass": t_new / t_mem, "goal_s": goal_s}
    line = (f"exact edge DP, m = {m:,}, K = {k}: hull {t_new:7.3f} s  "
            f"memory pass over the K x m table {t_mem:6.3f} s  "
            f"hull / memory pass {t_new / t_mem:5.1f}x (goal <= 10x)  "
            f"goal under {goal_s:g} s: {'met' if t_new < goal_s else 'NOT met'}")
    if dc:
        t_old, old = best_of(lambda: _edge_layers_dc(*args), max(1, repeat - 1))
        same = np.array_equal(new[0], old[0]) and np.array_equal(new[1], old[1])
        out.update(dc_s=t_old, same_opt_table=bool(same))
        line += (f"  divide and conquer {t_old:7.3f} s ({t_old / t_new:4.1f}x slower)  "
                 f"same opt table: {same}")
    print(line, flush=True)
    return out


def compare(m: int, k: int, min_share: float = 0.0, max_share: float = 1.0, quadratic=True):
    hist = histogram_with_m_distinct(m)
    groups = make_groups(hist, 1)
    win_lo, win_hi = share_windows(groups, min_share, max_share)
    args = (groups.edges, groups.prefix_count, groups.prefix_tokens, win_lo, win_hi, k)
    edge_layers(*args)  # compile / load from cache
    fast_kernel, _ = best_of(lambda: edge_layers(*args), 5)
    fast_solve, _ = best_of(
        lambda: bucketopt.solve(hist, k, min_share=min_share, max_share=max_share), 5
    )
    line = (f"m={m:>7,} k={k:>2} shares=[{min_share:g},{max_share:g}]  "
            f"solve(): {fast_solve * 1e3:8.2f} ms  kernel: {fast_kernel * 1e3:8.2f} ms")
    if quadratic:
        edge_layers_quadratic(*args)
        slow, _ = best_of(lambda: edge_layers_quadratic(*args), 2)
        same = np.array_equal(edge_layers(*args)[1], edge_layers_quadratic(*args)[1])
        line += (f"  textbook DP: {slow * 1e3:9.2f} ms  ratio textbook/solve(): "
                 f"{slow / fast_solve:6.1f}x  same optimum: {same}")
    print(line, flush=True)


def main():
    print("edge padding, exact optimum; times are the best of several runs after compilation")
    large_row(131_072, 32, 0.05, repeat=5)
    large_row(1_048_576, 64, 1.0)
    compare(2_048, 6)
    compare(8_192, 6)
    compare(8_192, 6, min_share=0.05, max_share=0.4)
    compare(8_192, 16)
    compare(131_072, 32, quadratic=False)
    compare(131_072, 32, min_share=0.01, max_share=0.1, quadratic=False)


if __name__ == "__main__":
    main()
