"""Two-dimensional buckets: pairs of lengths (input, output), exact hierarchical 2-D bins.

``bucketopt.solve(pairs, k, grid=...)`` and ``bucketopt.evaluate(pairs, bins)`` come here when
the lengths are an ``(n, 2)`` array (docs/pairs.md).
"""

from .data import PairHistogram, as_pair_histogram, check_pairs, is_pairs
from .plans import (
    PairCostModel,
    assign_bins,
    evaluate_pairs,
    load_pair_profile,
    solve_pairs,
)

__all__ = ["PairCostModel", "PairHistogram", "as_pair_histogram", "assign_bins",
           "check_pairs", "evaluate_pairs", "is_pairs", "load_pair_profile", "solve_pairs"]
