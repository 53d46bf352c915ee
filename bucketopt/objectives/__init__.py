"""Objectives: what the solver minimises, one module each (see :mod:`.base` for the seam).

==========  =======  ==========================================  ====================
objective   pad      the cost of a bucket                        module
==========  =======  ==========================================  ====================
padding     edge     padded tokens, every row at the edge        :mod:`.edge`
padding     batch    expected padded tokens, dynamic padding     :mod:`.batch`
time        both     expected seconds under a cost model         :mod:`.time`
packed      varlen   expected seconds of a packing level         :mod:`.packed`
==========  =======  ==========================================  ====================

``packed`` chooses packing levels (:func:`bucketopt.training.packed.packing_levels`); it is not in
:data:`NAMES`, the objectives ``solve()`` offers, whose Solution describes padded batches.
"""

from __future__ import annotations

from .base import Objective

NAMES = ("padding", "time")


def make_objective(objective: str, pad: str, *, cost_model=None, min_fill: float = 0.0,
                   sync_buckets=True, exact=False) -> Objective:
    """The registered objective for ``objective`` and ``pad``."""
    if objective == "packed":
        from .packed import PackedTime

        return PackedTime(cost_model)
    if objective == "time":
        from .time import Time

        return Time(cost_model, pad=pad, sync_buckets=sync_buckets, exact=exact)
    if pad == "edge":
        from .edge import EdgePadding

        return EdgePadding(min_fill=min_fill)
    from .batch import BatchPadding

    return BatchPadding(min_fill=min_fill, exact=exact)


__all__ = ["NAMES", "Objective", "make_objective"]
