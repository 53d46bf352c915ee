"""bucketopt: optimal length-bucket boundaries for variable-length training data.

Nothing runs at import: heavy modules (numba kernels, pyarrow, matplotlib) load on first use.
"""

from __future__ import annotations

from .errors import BucketoptError
from .histogram import Histogram
from .solution import Solution
from .solver import Sweep, evaluate, solve, sweep

__version__ = "0.1.0"

__all__ = [
    "BucketoptError",
    "Histogram",
    "Solution",
    "Sweep",
    "__version__",
    "evaluate",
    "load_lengths",
    "solve",
    "sweep",
]


def load_lengths(source, *, column=None):
    """Read sequence lengths from a file or directory; see :func:`bucketopt.io.load_lengths`."""
    from .io import load_lengths as _load

    return _load(source, column=column)
