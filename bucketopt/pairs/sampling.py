"""2-D bins in :class:`~bucketopt.BucketBatchSampler`: each sample is mapped to its bin index,
and the 1-D machinery runs on those indices (bin t holds the samples whose index is t + 1, its
batch size token_budget // (dim0_edge + dim1_edge) or the one given). Every guarantee of the
1-D sampler carries over unchanged: every sample once per epoch, the same bucket on every rank,
exact and elastic resume (the state's fingerprint covers the bin of every sample and the batch
sizes)."""

from __future__ import annotations

import numpy as np

from ..errors import BucketoptError


def pair_buckets(lengths, bins, *, token_budget, batch_sizes, packing, max_length, memory):
    """(bin index + 1 of every sample, surrogate boundaries 1..n_bins, batch sizes) for the
    1-D sampler; one clear error for a sample without a bin or an option that does not apply."""
    from .data import check_pairs
    from .plans import assign_bins, check_bins

    if packing != "fixed":
        raise BucketoptError(f"2-D bins take packing='fixed' (one batch size per bin); got "
                             f"packing={packing!r}.", param="packing")
    for name, value in (("max_length", max_length), ("memory", memory)):
        if value is not None:
            raise BucketoptError(f"`{name}` does not apply to 2-D bins (pairs of lengths).",
                                 param=name)
    if bins is None:
        raise BucketoptError("2-D bins are required with pairs of lengths, e.g. "
                             "bucketopt.solve(pairs, k, token_budget=T).bins.", param="boundaries")
    pairs = check_pairs(lengths)
    bins = check_bins(bins)
    ids = assign_bins(pairs[:, 0], pairs[:, 1], bins)
    lost = int((ids < 0).sum())
    if lost:
        first = int(np.flatnonzero(ids < 0)[0])
        raise BucketoptError(
            f"{lost:,} sample(s) fit no bin (the first: index {first}, "
            f"{pairs[first].tolist()}): every sample needs a bin; use bins from "
            "bucketopt.solve on these pairs.", param="boundaries")
    if batch_sizes is None:
        if token_budget is None:
            raise BucketoptError("token_budget (or batch_sizes) is required: each bin's batch "
                                 "size is token_budget // (dim0_edge + dim1_edge).",
                                 param="token_budget")
        sizes = [int(token_budget) // int(a + b) for a, b in bins]
        if min(sizes) < 1:
            t = sizes.index(min(sizes))
            raise BucketoptError(f"token_budget={token_budget} holds no sample of the bin "
                                 f"{bins[t].tolist()}.", param="token_budget")
    else:
        sizes = batch_sizes
    return ids + 1, list(range(1, bins.shape[0] + 1)), sizes, pairs, bins


def stream_bins(plan, length):
    """What :class:`~bucketopt.training.streaming.StreamBatcher` needs to run a 2-D plan on a
    stream: ``(bin_length, boundaries, batch_sizes, token_budget)``, where ``bin_length(item)``
    is the bin index + 1 of the pair ``length(item)`` (NeMo's strict selection, one bisection
    per dimension) and the 1-D batcher runs on those indices. A pair that fits no bin stops the
    pass with one clear error, as an item above the last edge does in 1-D."""
    import bisect

    if plan["batch_sizes"] is None:
        raise BucketoptError("a 2-D plan streams with its batch sizes: solve it with a "
                             "token_budget.", param="plan")
    bins = [tuple(b) for b in plan["bins"]]
    dim0 = sorted({a for a, _ in bins})
    groups = [[(t, b) for t, (a, b) in enumerate(bins) if a == e] for e in dim0]
    outs = [[b for _, b in g] for g in groups]

    def bin_length(item):
        pair = length(item)
        try:
            a, b = pair
        except (TypeError, ValueError):
            raise BucketoptError(f"length(item) must give a pair (input, output) for a 2-D "
                                 f"plan; got {pair!r:.60}.", param="length") from None
        g = bisect.bisect_left(dim0, a)
        if g < len(dim0):
            s = bisect.bisect_left(outs[g], b)
            if s < len(outs[g]):
                return groups[g][s][0] + 1
        raise BucketoptError(f"an item of lengths ({a}, {b}) fits no bin of the plan (inputs up "
                             f"to {dim0[-1]}; outputs per input bucket up to its last edge).",
                             param="stream")

    sizes = [int(s) for s in plan["batch_sizes"]]
    edges = list(range(1, len(bins) + 1))
    return bin_length, edges, sizes, max(s * e for s, e in zip(sizes, edges))
