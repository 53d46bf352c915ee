"""The shipped exact solver against the textbook O(k m^2) DP, side by side in one process.

Both DPs are numba-compiled with the same contract (bucketopt._kernels.edge_layers and
edge_layers_quadratic), so the ratio measures the algorithm, not Python overhead. Run:

    python benchmarks/solver.py
"""

from __future__ import annotations

import numpy as np
from _timing import best_of

import bucketopt
from bucketopt._kernels import edge_layers, edge_layers_quadratic
from bucketopt.histogram import Histogram
from bucketopt.solver import make_groups, share_windows


def histogram_with_m_distinct(m: int, seed: int = 0) -> Histogram:
    rng = np.random.default_rng(seed)
    values = np.arange(1, m + 1, dtype=np.int64) * 3 + rng.integers(0, 3, size=m)
    counts = np.rint(1 + 400 * rng.lognormal(0, 1, size=m)).astype(np.int64)
    return Histogram(values, counts)




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
    compare(2_048, 6)
    compare(8_192, 6)
    compare(8_192, 6, min_share=0.05, max_share=0.4)
    compare(8_192, 16)
    compare(131_072, 32, quadratic=False)
    compare(131_072, 32, min_share=0.01, max_share=0.1, quadratic=False)


if __name__ == "__main__":
    main()
