"""Packing levels for time (``objective="packed"``): K length ranges, each packed in its own rows.

Bucketed packing splits the documents by length into K levels (a, b] (the bucket convention:
inclusive upper edges), packs each level greedily into padding-free rows of at most T tokens
(a shuffle of the level, one row per micro-batch) and runs every data-parallel step on G rows of
one level. Steps whose ranks carry similar attention wait less: that is what levels buy.

The cost of a level is its expected seconds (:func:`level_seconds`), a closed form in the level's
moments n, sum d, ..., sum d^4, so the DP over levels is exact for it over every pair of
candidate edges (``level_layers_kernel``, O(K m^2)):

- rows: R = sum d / (T - u) + 1/2, with u = (rho - 1) / 2 the expected room a greedy row leaves
  (the document that does not fit straddles the capacity, size-biased: rho = sum d^2 / sum d)
  and the level's last row half full on average;
- a row takes alpha + beta * tokens + gamma * attention, on average
  alpha + (beta * sum d + gamma * sum d^2) / R;
- its spread: the room left varies (uniform within the size-biased straddler:
  var = E_sb[d^2] / 3 - (rho / 2)^2) and the attention of a row of about T tokens varies as a
  renewal-reward sum, var = (T / E[d]) * Var(d^2 - rho d);
  sigma^2 = (beta + gamma rho)^2 var_room + gamma^2 var_attention;
- a step is the slowest of G rows: mean + sigma * e_G, e_G the expected maximum of G standard
  normals (the normal approximation to the rows' time), over R / G steps.

With one level over all documents this is the analytic estimate of plain greedy packing of a shuffle
(:func:`bucketopt.training.packed.analytic_packed_seconds`); tests/test_packing_time.py checks it
against the mean of simulated epochs, and the DP against brute force over every boundary set. The
solver's ``solve()`` does not offer this objective (its Solution reports padded batches);
:func:`bucketopt.training.packed.packing_levels` runs it.
"""

from __future__ import annotations

import functools

import numpy as np

from .base import Objective


@functools.lru_cache(maxsize=64)
def expected_max_normal(draws: int) -> float:
    """E[max of ``draws`` independent standard normals] (0 for one draw)."""
    if draws <= 1:
        return 0.0
    from scipy.special import ndtr

    x = np.linspace(-12.0, 12.0, 48_001)
    pdf = np.exp(-0.5 * x * x) / np.sqrt(2.0 * np.pi)
    density = draws * pdf * ndtr(x) ** (draws - 1)
    return float(np.sum(x * density) * (x[1] - x[0]))


def moments_of(values, counts, capacity) -> np.ndarray:
    """Per value the five moments c * u**p, p = 0..4, of u = d / capacity (float64, (m, 5))."""
    u = np.asarray(values, dtype=np.float64) / float(capacity)
    c = np.asarray(counts, dtype=np.float64)
    return c[:, None] * u[:, None] ** np.arange(5)


def level_seconds(moments, capacity, alpha, beta, gamma, world_size) -> float:
    """Expected seconds of one level from its summed moments (see the module docstring).

    ``moments``: (5,) sums over the level of c * u**p, u = d / capacity. Empty level: 0.
    """
    from ._packed_kernels import level_seconds_kernel

    m0, m1, m2, m3, m4 = (float(v) for v in moments)
    return float(level_seconds_kernel(m0, m1, m2, m3, m4, float(capacity), alpha, beta, gamma,
                                expected_max_normal(int(world_size)), float(world_size)))


class PackedTime(Objective):
    """Expected seconds of bucketed packing (rows of ``token_budget`` tokens, G ranks)."""

    name = "packed"
    pad = "varlen"

    def __init__(self, cost_model):
        self.cost_model = cost_model

    def fit(self, groups, *, token_budget, win_lo, win_hi):
        # (a token budget that holds the longest level: packing_levels checks it, at its entry)
        hist = groups.hist
        per_value = moments_of(hist.values, hist.counts, token_budget)
        per_group = np.add.reduceat(per_value, groups.first_value, axis=0)
        self.prefix = np.vstack([np.zeros((1, 5)), np.cumsum(per_group, axis=0)])
        return super().fit(groups, token_budget=token_budget, win_lo=win_lo, win_hi=win_hi)

    def layers(self, kmax, ks=None):
        from ._packed_kernels import level_layers_kernel

        m = self.cost_model
        return level_layers_kernel(self.prefix, self.win_lo, self.win_hi, int(kmax),
                                   float(self.token_budget), m.alpha, m.beta, m.gamma,
                                   expected_max_normal(m.world_size), float(m.world_size))

    def level_cost(self, i: int, j: int) -> float:
        """Seconds of the level of groups i+1 .. j."""
        m = self.cost_model
        return level_seconds(self.prefix[j] - self.prefix[i], self.token_budget, m.alpha,
                             m.beta, m.gamma, m.world_size)

    def cost(self, edges) -> float:
        ends = np.searchsorted(self.groups.edges, np.asarray(edges, dtype=np.int64))
        starts = np.r_[0, ends[:-1]]
        return float(sum(self.level_cost(int(i), int(j)) for i, j in zip(starts, ends)))
