"""The O(g)-per-layer hull pass of the edge DP against the textbook DP and divide and conquer.

``edge_layers`` takes the hull pass when no share window binds; these tests call it on raw group
arrays (zero-count groups, i.e. duplicate prefix counts, equal edges and tie-heavy costs included)
and require the whole ``opt`` table, not just the optimum, to equal the reference: both must pick
the smallest best start.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bucketopt.data.histogram import Histogram
from bucketopt.groups import make_groups, share_windows
from bucketopt.objectives._edge_kernels import (
    _edge_layers_dc,
    _hull_applies,
    edge_layers,
)
from bucketopt.objectives._edge_numpy import edge_layers_numpy

from . import naive

SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def arrays(values, counts, below):
    """Group arrays for sorted ``values`` (the edges), ``counts`` per group and each group's
    lengths sitting ``below`` its edge; full windows (every start allowed)."""
    values = np.asarray(values, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.int64)
    below = np.minimum(np.asarray(below, dtype=np.int64), values)
    edges = np.r_[0, values].astype(np.int64)
    pc = np.r_[0, np.cumsum(counts)].astype(np.int64)
    pt = np.r_[0, np.cumsum(counts * (values - below))].astype(np.int64)
    g = values.size
    win_lo = np.zeros(g + 1, dtype=np.int64)
    win_hi = np.arange(-1, g, dtype=np.int64)
    return edges, pc, pt, win_lo, win_hi


def assert_same(a, b):
    np.testing.assert_array_equal(a[1], b[1])
    np.testing.assert_array_equal(a[0], b[0])


@st.composite
def groups(draw, max_value=12, max_count=4, scale=1):
    g = draw(st.integers(1, 14))
    values = sorted(draw(st.lists(st.integers(1, max_value), min_size=g, max_size=g)))
    counts = draw(st.lists(st.integers(0, max_count), min_size=g, max_size=g))
    below = draw(st.lists(st.integers(0, 2), min_size=g, max_size=g))
    s = draw(st.sampled_from([1, scale]))
    return [v * s for v in values], counts, [b * s for b in below]


@SETTINGS
@given(gr=groups(), k=st.integers(1, 16))
def test_hull_equals_textbook_dp_small(gr, k):
    """Small values and counts: equal edges, zero-count groups and ties everywhere."""
    args = arrays(*gr)
    assert _hull_applies(*args)
    assert_same(edge_layers(*args, k), naive.edge_layers_quadratic(*args, k))


@SETTINGS
@given(gr=groups(max_value=50, max_count=10**6, scale=10**6), k=st.integers(1, 8))
def test_hull_equals_textbook_dp_large_numbers(gr, k):
    """Token totals near the hull's exactness bound (2**57): the floor divisions stay exact."""
    args = arrays(*gr)
    edges, pc, _, _, _ = args
    if float(edges[-1]) * float(pc[-1]) < 2.0**57:
        assert _hull_applies(*args)
    assert_same(edge_layers(*args, k), naive.edge_layers_quadratic(*args, k))


@SETTINGS
@given(gr=groups(max_value=40, max_count=30, scale=2**40), k=st.integers(1, 12))
def test_hull_equals_textbook_dp_huge_edges(gr, k):
    """Edges near 2**45: crossing points past 2**40 take the exact integer division, those below
    the floating-point estimate with its integer correction; both must match the textbook DP."""
    args = arrays(*gr)
    assert _hull_applies(*args)
    assert_same(edge_layers(*args, k), naive.edge_layers_quadratic(*args, k))


def test_many_layers_in_lane_groups():
    """kmax - 1 = 8 q + r layers run in groups of up to 8 lanes: every remainder agrees."""
    rng = np.random.default_rng(7)
    lengths = np.rint(rng.lognormal(5, 0.8, size=3000)).astype(np.int64) + 1
    groups_ = make_groups(Histogram.from_lengths(lengths), 1)
    win_lo, win_hi = share_windows(groups_, 0.0, 1.0)
    args = (groups_.edges, groups_.prefix_count, groups_.prefix_tokens, win_lo, win_hi)
    for k in range(1, 27):
        assert_same(edge_layers(*args, k), _edge_layers_dc(*args, k))


def test_outside_exactness_bound_falls_back():
    args = arrays([10**9, 2 * 10**9], [10**8, 10**8], [0, 5])
    assert not _hull_applies(*args)
    assert_same(edge_layers(*args, 2), naive.edge_layers_quadratic(*args, 2))


def test_share_window_takes_divide_and_conquer():
    args = list(arrays([1, 2, 3, 4], [1, 1, 1, 1], [0, 0, 0, 0]))
    args[3] = np.array([0, 0, 0, 1, 2], dtype=np.int64)  # at most two groups per bucket
    assert not _hull_applies(*args)
    assert_same(edge_layers(*args, 3), naive.edge_layers_quadratic(*args, 3))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 24), align=st.sampled_from([1, 8]),
       zeros=st.booleans())
def test_hull_equals_divide_and_conquer_large(seed, k, align, zeros):
    """Thousands of groups (the textbook DP would be slow): the whole opt table agrees."""
    rng = np.random.default_rng(seed)
    lengths = np.rint(rng.lognormal(6, 1.0, size=rng.integers(100, 20_000))).astype(np.int64) + 1
    groups_ = make_groups(Histogram.from_lengths(lengths), align)
    win_lo, win_hi = share_windows(groups_, 0.0, 1.0)
    edges, pc, pt = groups_.edges, groups_.prefix_count, groups_.prefix_tokens
    if zeros:  # interleave empty groups: duplicate prefix counts, edges between the real ones
        g = edges.size - 1
        edges = np.r_[0, np.repeat(edges[1:], 2)]
        edges[1::2] -= rng.integers(0, 2, size=g)
        pc = np.r_[0, np.repeat(pc[1:], 2)]
        pc[1::2] = np.r_[0, groups_.prefix_count[1:-1]]
        pt = np.r_[0, np.repeat(pt[1:], 2)]
        pt[1::2] = np.r_[0, groups_.prefix_tokens[1:-1]]
        win_lo = np.zeros(edges.size, dtype=np.int64)
        win_hi = np.arange(-1, edges.size - 1, dtype=np.int64)
    args = (edges, pc, pt, win_lo, win_hi)
    assert _hull_applies(*args)
    assert_same(edge_layers(*args, k), _edge_layers_dc(*args, k))


@st.composite
def windowed(draw):
    """Group arrays with random monotone share windows (or none)."""
    edges, pc, pt, win_lo, win_hi = arrays(*draw(groups()))
    g = edges.size - 1
    if draw(st.booleans()):
        lo_steps = draw(st.lists(st.integers(0, 2), min_size=g, max_size=g))
        span = draw(st.integers(1, g))
        win_lo = np.r_[0, np.minimum(np.cumsum(lo_steps), np.arange(g))].astype(np.int64)
        win_lo = np.maximum.accumulate(np.maximum(win_lo, np.arange(g + 1) - span))
        win_hi = np.r_[-1, np.arange(g) - draw(st.integers(0, 2))].astype(np.int64)
        win_hi = np.maximum.accumulate(np.maximum(win_hi, -1))
    return edges, pc, pt, win_lo, win_hi


@SETTINGS
@given(args=windowed(), k=st.integers(1, 10))
def test_numpy_pass_equals_textbook_dp(args, k):
    """The numpy divide and conquer (small inputs before numba starts): the whole opt table."""
    assert_same(edge_layers_numpy(*args, k), naive.edge_layers_quadratic(*args, k))


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 12),
       shares=st.sampled_from([(0.0, 1.0), (0.02, 0.5), (0.1, 0.3)]))
def test_numpy_pass_equals_kernel_large(seed, k, shares):
    rng = np.random.default_rng(seed)
    lengths = np.rint(rng.lognormal(6, 1.0, size=rng.integers(100, 20_000))).astype(np.int64) + 1
    groups_ = make_groups(Histogram.from_lengths(lengths), 1)
    win_lo, win_hi = share_windows(groups_, *shares)
    args = (groups_.edges, groups_.prefix_count, groups_.prefix_tokens, win_lo, win_hi)
    assert_same(edge_layers_numpy(*args, k), edge_layers(*args, k))
