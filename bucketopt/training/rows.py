"""One row of ``compare``: a strategy's padding, tokens and batches from its simulated epochs."""

from __future__ import annotations

import numpy as np


def strategy_row(name: str, kind: str, epochs, *, boundaries=None, analytic=None,
                 scale=None) -> dict:
    """One row: ``padding_fraction`` is the analytic expectation where it exists, else the mean
    of the simulated epochs; both are kept (``padding_fraction_analytic`` is None without one).

    ``scale``: ``(simulated_samples, real_tokens)`` when ``epochs`` were simulated on a
    subsample of that many samples of a dataset of ``real_tokens`` tokens: token and batch
    totals are scaled by the ratio of real tokens (shares and rates are kept as they are)."""
    fractions = [e.padding_fraction for e in epochs]
    simulated = float(np.mean(fractions))
    real = int(epochs[0].total_real_tokens)
    padded = float(np.mean([e.padded_tokens for e in epochs]))
    batches = float(np.mean([e.n_batches for e in epochs]))
    if scale is not None:
        simulated_samples, full_real = scale
        padded *= full_real / real
        batches *= full_real / real
        real = int(full_real)
    row = {
        "kind": kind,
        "boundaries": None if boundaries is None else [int(b) for b in boundaries],
        "padding_fraction": simulated if analytic is None else float(analytic.padding_fraction),
        "padding_fraction_analytic": None if analytic is None
        else float(analytic.padding_fraction),
        "padding_fraction_simulated": simulated,
        "padded_tokens_simulated": padded,
        "real_tokens": real,
        "batches": batches,
    }
    if scale is not None:
        row.update(simulated_samples=simulated_samples, scaled=True)
    if analytic is not None:
        row["padded_tokens_analytic"] = float(analytic.padded_tokens)
        row["batch_sizes"] = None if analytic.batch_sizes is None else list(analytic.batch_sizes)
    return row
