"""The seam between the solver and what it minimises.

An objective knows the cost of one bucket and how to run the exact DP over it; the solver only
calls, in this order: ``fit`` (build the arrays once; the options were checked at the entry,
:func:`bucketopt.request.build_request`), ``layers`` (the DP: ``opt`` and
``best`` for every bucket count up to ``kmax``), then, for each solution it backtracks, ``refine``
(better boundaries, a last step some objectives need; by default None: the solution as it is).
``cost`` re-scores any
boundaries on the objective, which the tests hold equal to the DP's ``best``.

Adding an objective means one module here, its kernels, one line in ``bucketopt.objectives``'
registry, a docs page and a test parameter.
"""

from __future__ import annotations

import numpy as np

from ..groups import Groups


class Objective:
    """Base of every objective; subclasses set ``name`` and ``pad`` and implement ``layers``."""

    name = "objective"
    pad = "edge"
    # True when relaxation(cells) tightens with cells of starts (certified.certified_layers)
    relaxation_cells = False
    # The memory model the batch sizes come from (a constructor parameter of the objectives
    # that take one), or None: then B(b) = floor(T / b). Every objective reads batch sizes
    # through ``batch_sizes``.
    memory = None

    def candidates(self, groups: Groups, token_budget) -> Groups:
        """The candidate edges the DP may use (by default every group's)."""
        return groups

    def fit(self, groups: Groups, *, token_budget, win_lo, win_hi) -> Objective:
        self.groups = groups
        self.token_budget = token_budget
        self.win_lo = np.asarray(win_lo, dtype=np.int64)
        self.win_hi = np.asarray(win_hi, dtype=np.int64)
        return self

    def batch_sizes(self, edges) -> np.ndarray:
        """B(b) at every edge (int64; edges below 1 are read as 1), by the one rule of
        :func:`bucketopt.objectives.sizes.batch_sizes`. The DPs are exact for any B that does not
        increase with the edge (docs/method.md)."""
        from .sizes import batch_sizes

        sizes = batch_sizes(np.maximum(np.asarray(edges, dtype=np.int64), 1), self.token_budget,
                            self.memory)
        if self.memory is not None:  # a batch of B >= N rows takes the whole bucket: as B = n
            sizes = np.minimum(sizes, max(int(self.groups.hist.n), 1))
        return sizes

    def layers(self, kmax: int, ks=None) -> tuple[np.ndarray, np.ndarray]:
        """(opt, best): ``opt[k-1, j]`` the start of the last bucket of the best cover of groups
        1..j by at most k buckets (-1 if none), ``best[k-1]`` its cost for j = g."""
        raise NotImplementedError

    def cost(self, edges) -> float:
        """The objective's value for the boundaries ``edges`` (inclusive upper edges)."""
        raise NotImplementedError

    def refine(self, solution):
        """A polish of a backtracked ``solution`` (which carries its certificate): None to keep
        it (the default), or (boundaries, certificate): better boundaries (an int64 array the
        driver turns into the solution; None: the same ones) and what is proven of them."""
        return None

    def verify(self, solution, best) -> None:
        """Raise AssertionError when the backtracked ``solution`` contradicts the DP's optimum
        ``best`` (where the Solution's figures can say; by default nothing to check)."""

    def notes(self, certificate) -> tuple:
        """Warnings a solution with this :class:`~.certified.Optimality` carries (default none)."""
        return ()

    def sweep_rows_are_solves(self, kmax: int, ks) -> bool:
        """Whether every row of a sweep over ``ks`` (after ``layers(kmax, ks)``) is what
        ``solve()`` gives for its k; when not, the driver solves the recommended k alone."""
        return True

    def sweep_row_note(self) -> str | None:
        """None when every row of the last sweep has the boundaries ``solve()`` gives for its
        k (the certificate aside); else the warning its other rows carry (the recommended k is
        solved alone)."""
        return None

    # What the certified DP (:func:`.certified.certified_layers`) calls on an objective it
    # proves: pricing, relaxation, rows, seed_chains, kernels_ahead and cost
    # (.certified.protocol).

    def pricing(self):
        """The :class:`.certified.Pricing` that prices any bucket (i, j] of candidate groups
        exactly (:func:`.certified.make_pricing`); only objectives the certified DP proves
        implement it."""
        raise NotImplementedError

    def relaxation(self, cells):
        """The :class:`.certified.Relaxation`: lines in the prefix sample count of a bucket's
        start, one row per cell of starts (``cells``, increasing from 0), each at or below the
        cost of every bucket whose start lies in its cell (:func:`.certified.make_relaxation`).
        ``relaxation_cells`` False: one row, whatever the cells."""
        raise NotImplementedError

    def rows(self, cells):
        """The :class:`.certified.Rows` the exact layers bound buckets with, on the cells the
        relaxation kept (``relaxation(cells).cells``)."""
        raise NotImplementedError

    def kernels_ahead(self) -> list:
        """(kernel, arguments) of the numba kernels ``cost`` calls, with arguments of the types
        it calls them with: the certified DP compiles them in a second process while it
        compiles its own (:func:`bucketopt.jit.compile_ahead`; only a first run compiles). None
        by default."""
        return []

    def seed_chains(self, kmax: int, ks) -> dict:
        """k -> group ends of a good cover from a faster related problem, if any: the certified
        DP (certified.certified_layers) places cells at its boundaries."""
        return {}

    def optimality(self, k: int, best: float):
        """What is proven about layer k's optimum ``best``: an exact DP's by default."""
        from .certified import exact_value

        certificates = getattr(self, "certificates", None)
        if certificates is not None and k in certificates:
            return certificates[k]
        return exact_value(best)

    def describe(self) -> str:
        return f'objective="{self.name}", pad="{self.pad}"'
