"""bucketopt: optimal length-bucket boundaries for variable-length training data.

Nothing runs at import: heavy modules (numba kernels, pyarrow, matplotlib) load on first use.
"""

from __future__ import annotations

from .cost.calibration import Calibration, calibrate
from .cost.costmodel import CostModel, Profile, load_profile, time_epoch
from .data.histogram import Histogram
from .errors import BucketoptError
from .show.comparison import Comparison, compare
from .solution import Solution
from .solver import Sweep, evaluate, solve, sweep
from .training.plans import BatchPlan, batch_plan
from .training.sampler import BucketBatchSampler
from .training.simulate import simulate

__version__ = "0.1.0"

__all__ = [
    "BatchPlan",
    "BucketBatchSampler",
    "BucketoptError",
    "Calibration",
    "Comparison",
    "CostModel",
    "Histogram",
    "Profile",
    "Solution",
    "Sweep",
    "__version__",
    "batch_plan",
    "calibrate",
    "compare",
    "evaluate",
    "load_histogram",
    "load_lengths",
    "load_profile",
    "simulate",
    "solve",
    "sweep",
    "time_epoch",
]


def load_lengths(source, *, column=None):
    """Read sequence lengths from a file or directory; see
    :func:`bucketopt.data.io.load_lengths`."""
    from .data.io import load_lengths as _load

    return _load(source, column=column)


def load_histogram(source, *, column=None, progress=None):
    """Fold a source's lengths into a Histogram (streaming); see :func:`.io.load_histogram`."""
    from .data.io import load_histogram as _load

    return _load(source, column=column, progress=progress)
