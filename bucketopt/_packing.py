"""The greedy packing kernel: arrays and numbers in, arrays out.

Kept apart from ``_kernels.py`` (the solver's DP kernels) so the sampler and the diversity
metrics do not load the solver's kernels. Callers validate first; the kernel never sees None.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def greedy_starts(lengths, segment_start, token_budget):
    """Start positions of greedy batches over ``lengths`` taken in order.

    A sample joins the current batch while ``(count + 1) * max_len <= token_budget`` (``max_len``
    including the new sample); otherwise it opens a new batch. ``segment_start[i]`` forces a new
    batch at position ``i`` (batches never cross buckets). Every length must be <= the budget.
    Returns the int64 start of each batch (the first is 0).
    """
    n = lengths.size
    starts = np.empty(n, dtype=np.int64)
    n_batches = 0
    count = 0
    longest = 0
    for i in range(n):
        x = lengths[i]
        top = x if x > longest else longest
        if count > 0 and not segment_start[i] and (count + 1) * top <= token_budget:
            count += 1
            longest = top
        else:
            starts[n_batches] = i
            n_batches += 1
            count = 1
            longest = x
    return starts[:n_batches].copy()
