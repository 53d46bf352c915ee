"""The padding-free rows of ``bucketopt compare``: ``packed``, ``packed-balanced`` and
``packed-bucketed`` simulated and timed (:mod:`bucketopt.training.packed`), and the rule that
recommends a row (:func:`recommended_row`: with a profile, the fastest strategy whose step mix
is at least as diverse as the full shuffle).

``packed`` is greedy packing of a full shuffle, the baseline most trainers run (walk the
shuffled documents, open a new row when the next one does not fit): its
``packing_efficiency`` is what naive packing leaves of each row (about 78% for documents of up
to 512 tokens in rows of 512, over 99% for documents of a few thousand tokens in rows of
131,072). Best-fit decreasing (:func:`bucketopt.training.packing.pack_rows` with
``method="bfd"``) fills rows near ``rows_lower_bound`` but groups documents by length, so it is
a padding-floor tool, not a training order, and not a row here."""

from __future__ import annotations

import numpy as np

from ..data.histogram import validate_lengths
from ..errors import BucketoptError
from .diversity import measure
from .packed import (
    STRATEGIES,
    analytic_packed_seconds,
    level_align,
    packed_batches,
    packing_levels,
    simulate_packed,
)
from .rows import strategy_row


def packed_rows(lengths, k, *, token_budget, cost_model=None, world_size=1, grad_accum=1,
                seed=0, simulations=1, diversity=True, strategies=None,
                timing=True) -> tuple[dict, dict]:
    """The packed rows of ``bucketopt compare``: (rows, epochs), name -> row dict and name ->
    the simulated epochs.

    Without a cost model only ``"packed"`` is built (the other strategies plan for time: the
    balancing weights and the levels come from the cost model). ``world_size`` is the cost
    model's when one is given. Each row holds what :func:`bucketopt.training.rows.strategy_row`
    gives (padding 0: rows are padding-free; ``batches`` counts rows), ``packer``
    (``"greedy"``: every row packs the shuffled documents greedily, one open row at a time),
    the :func:`packing_fields` (``packing_efficiency``, ``rows_lower_bound``,
    ``attention_balance``; ``fill`` = ``packing_efficiency``), ``boundaries`` (the levels of
    ``packed-bucketed``), with a cost model
    ``ktok_per_s_analytic`` for ``packed`` and ``packed-bucketed`` and (``timing``) the
    simulated ``ktok_per_s``, ``eta_days``, ``wait_fraction`` and their intervals, and with
    ``diversity`` the ``step_mix_gap`` and ``epoch_churn`` of epochs 0 and 1 over
    ``world_size`` x ``grad_accum`` rows per step. Every row's ``kind`` is ``"packed"`` and its
    ``packing`` the strategy.
    """
    lengths = validate_lengths(lengths)
    g = cost_model.world_size if cost_model is not None else world_size
    if strategies is None:
        strategies = ("packed", "packed-balanced", "packed-bucketed") if cost_model is not None \
            else ("packed",)
    rows, epochs = {}, {}
    for name in strategies:
        if name not in STRATEGIES:
            raise BucketoptError(f"`strategies` must be among {', '.join(STRATEGIES)}; "
                                 f"got {name!r}.", param="strategies")
        if name != "packed" and cost_model is None and name != "packed-bfd":
            raise BucketoptError(f"strategy {name!r} plans for time: it needs a cost model.")
        levels = None
        if name == "packed-bucketed":
            align = level_align(lengths)
            levels = packing_levels(lengths, k, token_budget=token_budget,
                                    cost_model=cost_model, align=align)
        kw = dict(token_budget=token_budget, world_size=g, boundaries=levels, seed=seed,
                  cost_model=cost_model)
        eps = [simulate_packed(lengths, name, epoch=e, **kw) for e in range(simulations)]
        row = strategy_row(name, "packed", eps, boundaries=levels)
        row["packing"] = name
        row["packer"] = "greedy"  # every compare row packs greedily (balanced, or per level)
        row["world_size"] = g
        row.update(packing_fields(row, eps, token_budget, g))
        if diversity:
            pair = [packed_batches(lengths, name, epoch=e, **kw) for e in (0, 1)]
            d = measure(lengths, *pair, world_size=g, grad_accum=grad_accum)
            row.update(step_mix_gap=d.step_mix_gap, epoch_churn=d.epoch_churn,
                       diversity_ranks=g, grad_accum=grad_accum)
        if cost_model is not None and timing:
            from ..cost.costmodel import timing_fields
            from ..cost.intervals import epochs_intervals

            row.update(timing_fields(eps, cost_model))
            row.update(epochs_intervals(eps, cost_model))
        if cost_model is not None and name in ("packed", "packed-bucketed"):
            seconds = analytic_packed_seconds(lengths, levels, token_budget, cost_model)
            row["ktok_per_s_analytic"] = float(lengths.sum()) / seconds / 1e3
        if levels is not None:
            row["levels_align"] = align
        rows[name], epochs[name] = row, eps
    return rows, epochs


def packing_fields(row, epochs, token_budget, world_size) -> dict:
    """What packing made of the rows of ``epochs`` (padding-free
    :class:`~bucketopt.training.epoch.Epoch` objects; means over them):

    - ``packing_efficiency``: real tokens / (rows x ``token_budget``), the share of the rows'
      capacity that holds tokens (``fill`` is the same figure, its older name);
    - ``rows_lower_bound``: ``ceil(real tokens / token_budget)``, the fewest rows any packing
      needs, for ``row["real_tokens"]`` (the whole dataset's when the epochs ran on a
      subsample), beside ``batches`` (the rows);
    - ``attention_balance``: :func:`bucketopt.training.packing.attention_balance` over
      ``world_size`` ranks (1: every step's ranks carry equal attention).
    """
    from .packing import attention_balance

    efficiency = float(np.mean([e.total_real_tokens / (e.n_batches * token_budget)
                                for e in epochs]))
    return {"packing_efficiency": efficiency, "fill": efficiency,
            "rows_lower_bound": -(-int(row["real_tokens"]) // int(token_budget)),
            "attention_balance": float(np.mean([attention_balance(e.attention, world_size)
                                                for e in epochs]))}


def recommended_row(rows) -> str | None:
    """The row ``bucketopt compare`` recommends, by one rule (its table, its JSON and its plot
    read this):

    - with Ktok/s figures (a profile): :func:`fastest_diverse`, the fastest row whose step mix
      is at least as diverse as the full shuffle's;
    - without them: the row with the least padding among those whose step mix gap is at most
      the shuffle's;
    - without step mix figures (``diversity=False``): the fastest row (with a profile), else
      the one with the least padding, among every row but ``sorted`` (whose batches never
      change from one epoch to the next).

    Ties go to the earlier row. None when no row qualifies.
    """
    timed = any(row.get("ktok_per_s") is not None for row in rows.values())
    shuffle = rows.get("shuffle", {}).get("step_mix_gap")
    if shuffle is not None:
        if timed:
            return fastest_diverse(rows)
        pool = {name: row for name, row in rows.items()
                if row.get("step_mix_gap") is not None
                and row["step_mix_gap"] <= shuffle + 1e-12}
    else:
        pool = {name: row for name, row in rows.items() if name != "sorted"}
    best, score = None, None
    for name, row in pool.items():
        value = (-row["ktok_per_s"] if row.get("ktok_per_s") is not None else None) if timed \
            else row.get("padding_fraction")
        if value is not None and (score is None or value < score):
            best, score = name, value
    return best


def fastest_diverse(rows) -> str | None:
    """The name of the fastest row (``ktok_per_s``) whose ``step_mix_gap`` is at most the
    ``shuffle`` row's (its optimizer steps mix lengths at least as well as a full shuffle), or
    None when the rows lack the figures."""
    shuffle = rows.get("shuffle", {}).get("step_mix_gap")
    if shuffle is None:
        return None
    best, rate = None, -1.0
    for name, row in rows.items():
        gap, speed = row.get("step_mix_gap"), row.get("ktok_per_s")
        if gap is None or speed is None or gap > shuffle + 1e-12:
            continue
        if speed > rate:
            best, rate = name, speed
    return best
