"""Objectives: what the solver minimises, one module each (see :mod:`.base` for the seam).

==========  =======  ==========================================  ====================
objective   pad      the cost of a bucket                        module
==========  =======  ==========================================  ====================
padding     edge     padded tokens, every row at the edge        :mod:`.edge`
padding     batch    expected padded tokens, dynamic padding     :mod:`.batch`
time        both     expected seconds under a cost model         :mod:`.time`
packed      varlen   expected seconds of a packing level         :mod:`.packed`
==========  =======  ==========================================  ====================

Every objective is registered once, here or by :func:`register_objective` from anywhere: its
name, the paddings it serves and a builder. ``solve()``, ``sweep()`` and the CLI's
``--objective`` offer the public names (:func:`names`). ``packed`` chooses packing levels
(:func:`bucketopt.training.packed.packing_levels`); it is not public, since a Solution describes
padded batches.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import BucketoptError
from .base import Objective


@dataclass(frozen=True)
class Registration:
    """One registered objective: ``build(pad=, cost_model=, min_fill=, sync_buckets=, exact=,
    memory=)`` returns a fresh :class:`~.base.Objective`; ``check(pad=, min_fill=, ...)``
    (optional) raises a BucketoptError for options the objective refuses, before any data is
    read (:func:`bucketopt.request.build_request` runs it, once)."""

    name: str
    pads: tuple
    build: Callable[..., Objective]
    check: Callable[..., None] | None = None
    public: bool = True


_REGISTRY: dict[tuple[str, str], Registration] = {}


def register_objective(name: str, pads=("edge", "batch"), build=None, *, check=None,
                       public: bool = True):
    """Register an objective under ``name`` for each padding in ``pads``.

    ``build`` is called with keyword arguments ``pad``, ``cost_model``, ``min_fill``,
    ``sync_buckets``, ``exact`` and ``memory`` (the memory model the batch sizes come from, or
    None: B = floor(T / b)) and returns an :class:`~.base.Objective`. Without ``build``
    this is a decorator (of a builder, or of an Objective subclass whose constructor takes those
    keywords). A second registration of the same (name, pad) replaces the first.
    """
    pads = (pads,) if isinstance(pads, str) else tuple(pads)

    def add(builder):
        for pad in pads:
            _REGISTRY[name, pad] = Registration(name, pads, builder, check, public)
        return builder

    return add if build is None else add(build)


def names() -> tuple:
    """The public objective names, in the order they were registered."""
    return tuple(dict.fromkeys(r.name for r in _REGISTRY.values() if r.public))


def registration(objective: str, pad: str) -> Registration:
    try:
        return _REGISTRY[objective, pad]
    except KeyError:
        pads = [p for (n, p) in _REGISTRY if n == objective]
        raise BucketoptError(
            f'objective="{objective}" takes pad in {", ".join(pads)}; got {pad!r}.',
            param=None) from None


def make_objective(objective: str, pad: str, *, cost_model=None, min_fill: float = 0.0,
                   sync_buckets=True, exact=False, memory=None) -> Objective:
    """The registered objective for ``objective`` and ``pad``, its options already checked
    (:func:`bucketopt.request.build_request`); ``memory``: the memory model its batch sizes
    come from (None: B = floor(T / b))."""
    return registration(objective, pad).build(pad=pad, cost_model=cost_model, min_fill=min_fill,
                                              sync_buckets=sync_buckets, exact=exact,
                                              memory=memory)


# --- the built-in objectives (their modules load on first use) -------------------------------


def _padding_edge(*, min_fill, memory=None, **_):
    from .edge import EdgePadding

    return EdgePadding(min_fill=min_fill, memory=memory)


def _padding_batch(*, min_fill, exact, memory=None, **_):
    from .batch import BatchPadding

    return BatchPadding(min_fill=min_fill, exact=exact, memory=memory)


def _time(*, pad, cost_model, sync_buckets, exact, memory=None, **_):
    from .time import Time

    return Time(cost_model, pad=pad, sync_buckets=sync_buckets, exact=exact, memory=memory)


def _time_check(*, min_fill=0.0, **_):
    if min_fill > 0:
        raise BucketoptError('`min_fill` applies to objective="padding" (the time objective '
                             "already pays for every step).", param=None)


def _packed(*, cost_model, **_):
    from .packed import PackedTime

    return PackedTime(cost_model)


register_objective("padding", "edge", _padding_edge)
register_objective("padding", "batch", _padding_batch)
register_objective("time", ("edge", "batch"), _time, check=_time_check)
register_objective("packed", "varlen", _packed, public=False)

__all__ = ["Objective", "Registration", "make_objective", "names",
           "register_objective", "registration"]
