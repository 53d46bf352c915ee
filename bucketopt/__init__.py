"""bucketopt: optimal length-bucket boundaries for variable-length training data.

Nothing runs at import: heavy modules (numba kernels, pyarrow, matplotlib) load on first use.
"""

from __future__ import annotations

from .errors import BucketoptError

# The public names load on first use (PEP 562), so that `bucketopt` itself imports no numpy: the
# CLI then loads everything inside its own error handling (Ctrl-C while it loads exits 130).
_LAZY = {
    "Calibration": ".cost.calibration", "calibrate": ".cost.calibration",
    "CostModel": ".cost.costmodel", "Profile": ".cost.costmodel",
    "load_profile": ".cost.costmodel", "time_epoch": ".cost.costmodel",
    "Histogram": ".data.histogram",
    "Comparison": ".training.compare", "compare": ".training.compare",
    "Solution": ".solution",
    "Sweep": ".solver", "evaluate": ".solver", "solve": ".solver", "sweep": ".solver",
    "BatchPlan": ".training.plans", "batch_plan": ".training.plans",
    "BucketBatchSampler": ".training.sampler",
    "simulate": ".training.simulate",
    "report": ".show.html_report",
    "verify": ".training.verify", "VerifyResult": ".training.verify",
}


def __getattr__(name):
    if name == "plan":  # the module of the plan file (bucketopt.plan.read_plan, ...)
        import importlib

        return importlib.import_module(".plan", __name__)
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'bucketopt' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


from .version import __version__  # noqa: E402

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
    "VerifyResult",
    "__version__",
    "batch_plan",
    "calibrate",
    "compare",
    "evaluate",
    "load_histogram",
    "load_lengths",
    "load_profile",
    "report",
    "simulate",
    "solve",
    "sweep",
    "time_epoch",
    "verify",
]


def load_lengths(source, *, column=None, columns=None, resolution=None):
    """Read sequence lengths from a file or directory; see
    :func:`bucketopt.data.io.load_lengths`. ``columns=(input, output)``, a ``.npy`` of shape
    (n, 2) or a text file of two integers a line give pairs: an (n, 2) array
    (:func:`bucketopt.pairs.load.load_pairs`); ``resolution`` takes a dimension measured in a
    unit (seconds) in whole steps of it (:func:`bucketopt.pairs.load.load_pairs_at`)."""
    from .pairs.load import is_pair_source, load_pairs, load_pairs_at

    if resolution is not None:
        return load_pairs_at(source, columns, resolution)
    if columns is not None or (column is None and is_pair_source(source)):
        if column is not None:
            from .errors import BucketoptError

            raise BucketoptError("give column= (one length) or columns= (pairs), not both.",
                                 param="columns")
        return load_pairs(source, columns)
    from .data.io import load_lengths as _load

    return _load(source, column=column)


def load_histogram(source, *, column=None, progress=None):
    """Fold a source's lengths into a Histogram (streaming); see :func:`.io.load_histogram`."""
    from .data.io import load_histogram as _load

    return _load(source, column=column, progress=progress)
