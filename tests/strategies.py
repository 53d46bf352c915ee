"""Hypothesis strategies shared by the test modules."""

from hypothesis import strategies as st

from bucketopt.cost.costmodel import COEFFICIENT_FLOOR


def coefficient(high: float):
    """A profile coefficient up to ``high``: 0 (a term left out) or at least the profile's
    floor (smaller positive ones are refused)."""
    return st.one_of(st.just(0.0), st.floats(COEFFICIENT_FLOOR, high))


# (alpha, beta, gamma), not all 0
coefficients = st.tuples(coefficient(1), coefficient(1), coefficient(0.2)).filter(any)
