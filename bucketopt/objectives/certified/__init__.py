"""The certified DP: an exact DP over buckets whose optimum comes with its proof, for costs that
are not Monge (docs/method.md, "The algorithm: a certified DP").

Its modules, in the order a solve runs them:

- :mod:`.protocol`: what an objective hands the DP (:class:`.protocol.Pricing`,
  :class:`.protocol.Relaxation`, :class:`.protocol.Rows`) and what it gets back
  (:class:`.protocol.Optimality`);
- :mod:`.dp`: the driver, :func:`.dp.certified_layers` (the cells of starts, the seed and
  relaxed chains, the work limit and the certificates), :func:`.dp.backward_pass` and
  :func:`.dp.polish`;
- :mod:`.relaxation`: the relaxed DP over line bounds, :func:`.relaxation.relaxed_layers`
  (forward and backward passes), and the moments the bounds of a cell read
  (:func:`.relaxation.prefix_moments`);
- :mod:`.layers`: the exact layers, :func:`.layers.forward_layer`, which price only the buckets
  the bounds leave, the exact top of the lengths (:func:`.layers.exact_tail`) and the polish's
  step (:func:`.layers.window_chain`);
- :mod:`.pricing`: the exact cost of a bucket (:func:`.pricing.pair_cost`, by walks) and of a
  rectangle of buckets (:func:`.pricing.rect_costs`, by sweeps), and the bound from a
  reference's moments (:func:`.pricing.tilde`);
- :mod:`.hulls`: lower convex hulls of DP points, for the bound queries.
"""

from __future__ import annotations

from .dp import (
    ROUNDING,
    WORK_LIMIT,
    backward_pass,
    certified_layers,
    in_worker,
    polish,
    relaxed_bounds,
)
from .protocol import (
    Lines,
    MeanLines,
    Optimality,
    Pricing,
    Relaxation,
    Rows,
    Windows,
    exact_value,
    layers_asked,
    make_pricing,
    make_relaxation,
)

__all__ = [
    "ROUNDING",
    "WORK_LIMIT",
    "Lines",
    "MeanLines",
    "Optimality",
    "Pricing",
    "Relaxation",
    "Rows",
    "Windows",
    "backward_pass",
    "certified_layers",
    "exact_value",
    "in_worker",
    "layers_asked",
    "make_pricing",
    "make_relaxation",
    "polish",
    "relaxed_bounds",
]
