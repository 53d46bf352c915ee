"""Every check of an argument, and every limit, once (stumpy's ``core.check_*``).

Every public entry point that takes a number goes through :func:`check_int` (a count that must
be at least 1: :func:`check_positive_int`) or :func:`check_number`: one check per rule, one
wording (``"`name` must be an integer >= 1; got 0."``). Booleans and strings are refused
(``"0.5"`` is not coerced to 0.5), non-finite and out-of-range values name the parameter, the
rule and the value. :func:`shown` renders the offending value for the message without ever
building a huge string: a 5,000-digit integer, a 10-MB string or a list nested 100,000 deep come
out as a few dozen characters.

The one set of defaults of the planning entries (``DEFAULT_PAD``, ``DEFAULT_SYNC_BUCKETS``,
``DEFAULT_PACKING``, :func:`default_objective`) lives here, beside their checks.

The checks of the solver's and the samplers' settings live here too (:func:`check_k`,
:func:`check_align`, :func:`check_shares`, :func:`check_min_fill`, :func:`check_objective`,
:func:`check_exact`, :func:`check_sync`, :func:`check_pad`, :func:`check_ks`,
:func:`check_token_budget` with :func:`check_budget_scale`, and the rules between them:
:func:`check_batch_rule`, :func:`check_edge_fits`). :mod:`bucketopt.request` runs them, once,
at the entry of every planning call. This module sits in the bottom layer (``docs/layers.md``), so a
check that needs more reads it from its caller: :func:`check_objective` is given the registered
names, :func:`check_token_budget` reads a histogram's ``n``, ``min_length`` and ``max_length``.
The one check kept above it is :func:`bucketopt.solution.check_boundaries`: boundaries go
through the lengths' own choke point (:func:`bucketopt.data.histogram.validate_lengths`, which
knows the ``Histogram``), in the data layer.
"""

from __future__ import annotations

import itertools
import math
import reprlib

import numpy as np

from .errors import BucketoptError

# Padding and token totals are exact int64 sums. Every total is bounded by n * max_length, and the
# DP adds an "unreachable" sentinel of 2**61 on top of a cost, so we keep the bound below 2**60.
TOKEN_LIMIT = 2**60
# A token budget is refused when the batch size of the shortest samples, token_budget //
# min_length, exceeds both the number of samples and this many (a batch larger than the data
# set is harmless while it is small: tiny examples use budgets like that).
BATCH_SIZE_LIMIT = 1 << 16
# check_budget_scale accepts any budget up to this many times the longest sample.
BUDGET_OVER_LONGEST = 64
# k (at most k buckets) beyond this is refused: beyond the distinct lengths k changes nothing.
K_LIMIT = 2**62
# Seeds, epochs, positions and ranks are int64 in the plans and in saved states.
INT64_MAX = 2**63 - 1

# The one set of defaults of every entry that plans batches: solve, sweep, evaluate, compare,
# export and BucketBatchSampler (Python and the CLI read these, nothing restates them), so the
# same flags give the same plan everywhere:
# - pad: edge padding (every sample padded to its bucket's edge);
# - objective: time with a hardware profile, padding without one (:func:`default_objective`);
# - sync_buckets: True, the sampler's order (every rank takes the same bucket at each
#   micro-step), which the time objective plans for and every Ktok/s prediction assumes;
# - packing: "fixed", batches of B_k = floor(T / b_k) samples (or the memory model's sizes);
# - world size: 1 rank from Python (world_size=None: the profile's world size); the CLI's
#   commands pass None without --gpus, every one of them.
DEFAULT_PAD = "edge"
DEFAULT_WORLD_SIZE = 1
DEFAULT_SYNC_BUCKETS = True
DEFAULT_PACKING = "fixed"
# The paddings of a plan: to the bucket's edge, or to each batch's longest member.
PADS = ("edge", "batch")
# sweep() refuses more k values than this (the CLI's -k A:B spans at most as many).
MAX_SWEEP_KS = 4097


def default_objective(profile) -> str:
    """The objective when none is given: ``"time"`` with a profile, ``"padding"`` without."""
    return "time" if profile is not None else "padding"


# Integers beyond this many bits are shown by their size, not their digits (str() of an integer
# over 4,300 digits raises ValueError, and long before that it fills the message).
_SHOWN_BITS = 128


class _Shown(reprlib.Repr):
    def __init__(self):
        super().__init__()
        self.maxlevel = 3
        self.maxstring = 40
        self.maxother = 40
        self.maxlist = self.maxtuple = self.maxdict = self.maxset = 6

    def repr_int(self, value, level):
        return _int_text(value)

    def repr_bool(self, value, level):
        return repr(value)


def _int_text(value) -> str:
    value = int(value)
    if value.bit_length() <= _SHOWN_BITS:
        return repr(value)
    digits = int(value.bit_length() * math.log10(2)) + 1
    return f"{'-' if value < 0 else ''}an integer of about {digits:,} digits"


_REPR = _Shown()


def shown(value, limit: int = 60) -> str:
    """A short ``repr`` of ``value`` for a message: bounded in size and in depth.

    Examples
    --------
    >>> shown(10 ** 5000)
    'an integer of about 5,001 digits'
    >>> len(shown("x" * 1000)) <= 60
    True
    """
    if isinstance(value, (bool, np.bool_)):
        return repr(bool(value))
    if isinstance(value, (int, np.integer)):
        return _int_text(value)
    try:
        text = _REPR.repr(value)
    except Exception:  # a hostile __repr__: say what it is instead
        text = f"<{type(value).__name__}>"
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


def _refused(name, where, rule, value, param) -> BucketoptError:
    return BucketoptError(f"`{name}`{where} must be {rule}; got {shown(value)}.", param=param)


def _param(name: str, param: str | None) -> str | None:
    """The parameter an error is about: ``param`` when given, else ``name`` if it is one."""
    if param != "":
        return param
    return name if name.isidentifier() else None


def _is_bool(value) -> bool:
    return isinstance(value, (bool, np.bool_))


def check_int(value, name: str, *, low: int | None = None, high: int | None = None,
              where: str = "", param: str | None = "") -> int:
    """``value`` as a Python int within [low, high], else a :class:`BucketoptError`.

    Takes ints, numpy integers and floats that are whole numbers (2.0); refuses booleans,
    strings and everything else. ``where`` is added after the name (" in profile.json").
    ``param``: the parameter the error carries (:attr:`BucketoptError.param`); by default
    ``name`` when it is an identifier, else none. A ``high`` of 2**60 or more is a limit of
    the int64 arithmetic, not part of the rule: the message names it only when it is crossed.

    Examples
    --------
    >>> check_int(4.0, "k", low=1)
    4
    >>> check_int(0, "epochs", low=1, high=INT64_MAX)
    Traceback (most recent call last):
    ...
    bucketopt.errors.BucketoptError: `epochs` must be an integer >= 1; got 0.
    """
    rule = _int_rule(low, high)
    param = _param(name, param)
    if _is_bool(value) or isinstance(value, (str, bytes)):
        raise _refused(name, where, rule, value, param)
    if isinstance(value, (float, np.floating)):
        if not (math.isfinite(value) and float(value).is_integer()):
            raise _refused(name, where, rule, value, param)
        value = int(value)
    if not isinstance(value, (int, np.integer)):
        raise _refused(name, where, rule, value, param)
    value = int(value)
    if low is not None and value < low:
        raise _refused(name, where, rule, value, param)
    if high is not None and value > high:
        raise BucketoptError(f"`{name}`{where} must be at most {_bound(high)}; got "
                             f"{shown(value)}.", param=param)
    return value


def check_positive_int(value, name: str, *, where: str = "") -> int:
    """A count (GPUs, epochs, tokens, rows): :func:`check_int` with ``low=1`` and the token
    arithmetic's limit, :data:`TOKEN_LIMIT`.

    Examples
    --------
    >>> check_positive_int(8, "world_size")
    8
    """
    return check_int(value, name, low=1, high=TOKEN_LIMIT, where=where)


def _bound(value: int) -> str:
    if value > 1 << 20 and value & (value - 1) == 0:
        return f"2**{value.bit_length() - 1}"
    if value > 1 << 20 and value & (value + 1) == 0:
        return f"2**{value.bit_length()} - 1"
    return f"{value:,}" if value > 1 << 20 else str(value)


def _int_rule(low, high) -> str:
    if high is not None and high >= TOKEN_LIMIT:  # a limit of int64, stated only when crossed
        high = None
    if low is not None and high is not None:
        return f"an integer in [{low}, {_bound(high)}]"
    if low is not None:
        return f"an integer >= {low}"
    if high is not None:
        return f"an integer <= {high}"
    return "an integer"


def check_number(value, name: str, *, low: float | None = None, high: float | None = None,
                 where: str = "", low_open: bool = False, param: str | None = "") -> float:
    """``value`` as a finite float within [low, high] (``low_open``: (low, high]).

    Takes ints, floats and numpy numbers; refuses booleans, strings (``"0.5"`` is not coerced),
    NaN, infinities and integers too large for a float. ``param`` as in :func:`check_int`.

    Examples
    --------
    >>> check_number(1, "max_share", low=0, high=1)
    1.0
    """
    param = _param(name, param)
    rule = "a finite number"
    if low is not None and high is not None:
        rule = f"a number in {'(' if low_open else '['}{low:g}, {high:g}]"
    elif low is not None:
        rule = f"a finite number {'>' if low_open else '>='} {low:g}"
    elif high is not None:
        rule = f"a finite number <= {high:g}"
    if _is_bool(value) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise _refused(name, where, rule, value, param)
    try:
        number = float(value)
    except OverflowError:
        raise _refused(name, where, rule, value, param) from None
    if not math.isfinite(number):
        raise _refused(name, where, rule, value, param)
    too_low = low is not None and (number <= low if low_open else number < low)
    if too_low or (high is not None and number > high):
        raise _refused(name, where, rule, value, param)
    return number


def check_k(k, name: str = "k") -> int:
    """At most ``k`` buckets: an integer >= 1 (beyond :data:`K_LIMIT` refused: beyond the
    distinct lengths k changes nothing)."""
    return check_int(k, name, low=1, high=K_LIMIT)


def check_ks(ks) -> list:
    """The bucket counts of a sweep, sorted and without repeats: an integer K (1..K) or an
    iterable of integers >= 1, at most :data:`MAX_SWEEP_KS` of them."""
    if isinstance(ks, (int, np.integer)) and not isinstance(ks, bool):
        ks = range(1, int(ks) + 1)

    def refused():
        text = isinstance(ks, (str, bytes))
        hint = " (on the command line, -k A:B gives a range)" if text else ""
        return BucketoptError(f"`ks` must be an integer or a list of integers >= 1; got "
                              f"{shown(ks)}{hint}.", param="ks")

    if isinstance(ks, (str, bytes)):
        raise refused()
    try:
        ks = list(itertools.islice(ks, MAX_SWEEP_KS + 1))
    except TypeError:
        raise refused() from None
    if len(ks) > MAX_SWEEP_KS:
        raise BucketoptError(f"`ks` holds more than {MAX_SWEEP_KS:,} values.", param="ks")
    ks = sorted({check_k(k, "ks") for k in ks})
    if not ks:
        raise BucketoptError("`ks` is empty: give at least one k.", param="ks")
    return ks


def check_pad(pad) -> str:
    """How batches are padded: one of :data:`PADS`."""
    if not isinstance(pad, str) or pad not in PADS:
        raise BucketoptError(f"`pad` must be one of {', '.join(PADS)}; got {shown(pad)}.",
                             param="pad")
    return pad


def check_batch_rule(pad, token_budget, memory, min_fill=0.0) -> None:
    """Batch sizes must come from somewhere: ``pad="batch"`` (each batch padded to its longest
    member, an expectation over batches of B rows) needs a token budget or a memory model, and
    ``min_fill`` (a share of the budget) needs a token budget."""
    if pad == "batch" and token_budget is None and memory is None:
        raise BucketoptError('pad="batch" needs a token_budget or a memory model (the batch '
                             'size comes from it).', param=None)
    if min_fill > 0 and token_budget is None:
        raise BucketoptError("min_fill needs a token_budget (the fill is per batch).",
                             param=None)


def check_edge_fits(edge, token_budget, align: int = 1) -> None:
    """A bucket of edge b holds at least one sample under the budget: b <= token_budget (no
    budget: nothing to check). ``align`` > 1: the edge is the longest length rounded up to it,
    which the message says."""
    if token_budget is None or edge <= token_budget:
        return
    rounded = f" (align={align} rounds the last edge up to it)" if align > 1 else ""
    raise BucketoptError(f"bucket edge {int(edge)} exceeds token_budget={token_budget}{rounded}: "
                         "a batch of that bucket cannot hold even one sample.",
                         param="token_budget" if align <= 1 else None)


def check_align(align) -> int:
    """Edges on multiples of ``align``: an integer >= 1 (larger than :data:`TOKEN_LIMIT`, the
    edges would overflow int64)."""
    return check_positive_int(align, "align")


def check_shares(min_share, max_share) -> tuple[float, float]:
    out = [check_number(value, name, low=0.0, high=1.0)
           for name, value in (("min_share", min_share), ("max_share", max_share))]
    if out[0] > out[1]:
        raise BucketoptError(
            f"`min_share` ({out[0]}) must not exceed `max_share` ({out[1]}).",
            param=None,
        )
    return out[0], out[1]


def check_min_fill(min_fill) -> float:
    return check_number(min_fill, "min_fill", low=0.0, high=1.0)


def check_objective(objective, profile, names) -> str:
    """``None`` means time when a profile is given, padding otherwise; else one of ``names``
    (the registered objectives, :func:`bucketopt.objectives.names`: the registry sits above
    this module, so the caller passes them)."""
    if objective is None:
        return default_objective(profile)
    if objective not in names:
        raise BucketoptError(
            f"`objective` must be one of {', '.join(names)}; got {shown(objective)}.",
            param="objective")
    return objective


def check_exact(exact) -> bool:
    if not isinstance(exact, (bool, np.bool_)):
        raise BucketoptError(f"`exact` must be True or False; got {shown(exact)}.", param="exact")
    return bool(exact)


def check_sync(sync_buckets):
    if isinstance(sync_buckets, str) and sync_buckets == "step":
        return "step"
    if isinstance(sync_buckets, (bool, np.bool_)):
        return bool(sync_buckets)
    raise BucketoptError(f'`sync_buckets` must be True, False or "step"'
                         f'; got {shown(sync_buckets)}.', param="sync_buckets")


def check_token_budget(token_budget, hist=None):
    """Validate the per-micro-batch token budget (None means "no budget"); with ``hist`` (a
    :class:`~bucketopt.data.histogram.Histogram`: its ``n``, ``min_length`` and
    ``max_length`` are read), also against the data."""
    if token_budget is None:
        return None
    token_budget = check_positive_int(token_budget, "token_budget")  # int64 totals
    if hist is not None and hist.max_length > token_budget:
        raise BucketoptError(
            f"token_budget={token_budget} is smaller than the longest sample ({hist.max_length}).",
            param="token_budget"
        )
    if hist is not None:  # batch sizes in the trillions: refused before any allocation
        check_budget_scale(token_budget, hist)
    return token_budget


def check_budget_scale(token_budget: int, hist, name: str = "token_budget") -> None:
    """Refuse a budget whose batch sizes exceed the number of samples by a large factor.

    A budget the longest sample needs (at most BUDGET_OVER_LONGEST times it) is always accepted:
    a corpus of files from 5 tokens to 2 million needs a 2-million-token budget, and its short
    files then make batches of 400,000 (every batch of such a bucket is the whole bucket).
    """
    largest = token_budget // hist.min_length
    if largest > max(hist.n, BATCH_SIZE_LIMIT) and \
            token_budget > BUDGET_OVER_LONGEST * hist.max_length:
        top = max(hist.n, BATCH_SIZE_LIMIT) * hist.min_length
        raise BucketoptError(
            f"{name}={token_budget} allows batches of {largest:,} samples of the shortest length "
            f"({hist.min_length}), more than the {hist.n:,} samples there are: no batch could "
            f"ever be full; use {name} <= {max(top, BUDGET_OVER_LONGEST * hist.max_length):,}.",
            param=name
        )


# --- saved states: one declarative check per schema --------------------------------------------
# A state (a sampler's or a batcher's ``state_dict()``, a Trainer's ``trainer_state.json``) is
# checked whole when it is loaded, in time linear in its size: a field that would fail later
# (while iterating, mid-training) is refused at once, naming the field. Each schema is a dict
# field name -> checker(value, name) -> normalised value; the checkers below are the pieces.



def _state_error(name: str, rule: str, value, param: str) -> BucketoptError:
    return BucketoptError(f"state field `{name}` must be {rule}; got {shown(value)}.", param=param)


def state_int(low: int = 0, high: int = INT64_MAX, *, param: str = "state"):
    """A checker of an integer field: a Python or numpy integer (never a bool, a float, a string
    or an array) in [low, high]."""
    top = "2**63 - 1" if high == INT64_MAX else _bound(high)
    rule = f"an integer in [{low}, {top}]"

    def check(value, name):
        if _is_bool(value) or not isinstance(value, (int, np.integer)):
            raise _state_error(name, rule, value, param)
        value = int(value)
        if value < low or value > high:
            raise _state_error(name, rule, value, param)
        return value
    return check


def state_bool(*, param: str = "state"):
    """A checker of a True/False field (a numpy bool too; never 0, 1 or a string)."""
    def check(value, name):
        if not _is_bool(value):
            raise _state_error(name, "True or False", value, param)
        return bool(value)
    return check


def state_list(item, *, length: int | None = None, most: int | None = None,
               param: str = "state"):
    """A checker of a list (or tuple) field whose entries each pass ``item`` (a checker);
    ``length``: exactly that many entries, ``most``: at most that many. Never an array or a
    string: a state is JSON-ready."""
    def check(value, name):
        if not isinstance(value, (list, tuple)):
            raise _state_error(name, "a list", value, param)
        if length is not None and len(value) != length:
            raise _state_error(name, f"a list of {length} entries", value, param)
        if most is not None and len(value) > most:
            raise _state_error(name, f"a list of at most {most:,} entries", value, param)
        return [item(entry, f"{name}[{i}]") for i, entry in enumerate(value)]
    return check


def state_optional(inner):
    """``inner``, or None."""
    def check(value, name):
        return None if value is None else inner(value, name)
    return check


def state_fields(schema: dict, *, optional: dict | None = None, param: str = "state",
                 extra: bool = True):
    """A checker of a dict field (a nested schema): every key of ``schema`` present and checked;
    ``optional`` keys checked when present (their default when not); unknown keys refused
    unless ``extra``."""
    optional = optional or {}

    def check(value, name):
        return check_fields(value, schema, name, optional=optional, param=param, extra=extra)
    return check


def check_fields(state, schema: dict, name: str = "state", *, optional: dict | None = None,
                 param: str = "state", extra: bool = True) -> dict:
    """``state`` (a dict) with every field of ``schema`` (field -> checker) checked and
    normalised; ``optional``: field -> (checker, default). One :class:`BucketoptError` naming
    the first bad field; the whole check reads each value once (linear in the state's size).

    Examples
    --------
    >>> check_fields({"epoch": 2}, {"epoch": state_int()})
    {'epoch': 2}
    """
    from collections.abc import Mapping

    if not isinstance(state, Mapping):
        what = "a dict" if name == "state" else f"`{name}` must be a dict"
        if name == "state":
            raise BucketoptError(f"state must be {what}; got {shown(state)}.", param=param)
        raise BucketoptError(f"state field {what}; got {shown(state)}.", param=param)
    optional = optional or {}
    prefix = "" if name == "state" else f"{name}."
    missing = [key for key in schema if key not in state]
    if missing:
        raise BucketoptError(f"state lacks the field(s) {', '.join(prefix + k for k in missing)}"
                             "; pass a dict returned by state_dict().", param=param)
    if not extra:
        unknown = [key for key in state if key not in schema and key not in optional]
        if unknown:
            key = unknown[0] if isinstance(unknown[0], str) and len(unknown[0]) < 40 \
                else shown(unknown[0])
            raise BucketoptError(f"state field `{prefix}{key}` is not one of "
                                 f"{', '.join(prefix + k for k in (*schema, *optional))}.",
                                 param=param)
    out = {key: check(state[key], prefix + key) for key, check in schema.items()}
    for key, (check, default) in optional.items():
        out[key] = check(state[key], prefix + key) if key in state else default
    return out


# --- counts beyond meaning ---------------------------------------------------------------------

# Data-parallel ranks (GPUs) a plan, a prediction or a sampler may span: the largest clusters
# today train on tens of thousands of GPUs. A larger count is refused at once (a step of 2**60
# ranks would size arrays by it: "array is too big" or gigabytes of nothing).
WORLD_SIZE_LIMIT = 1 << 16


def check_world_size(value, name: str = "world_size", *, where: str = "",
                     param: str | None = "world_size") -> int:
    """``value`` as a world size: an integer in [1, WORLD_SIZE_LIMIT] (65,536 GPUs), the one
    check wherever a world size enters (solve, evaluate, compare, the samplers, profiles)."""
    return check_int(value, name, low=1, high=WORLD_SIZE_LIMIT, where=where, param=param)


def state_text(most: int = 256, *, param: str = "state"):
    """A checker of a text field (a str of at most ``most`` characters)."""
    def check(value, name):
        if not isinstance(value, str) or len(value) > most:
            raise _state_error(name, f"a string of at most {most} characters", value, param)
        return value
    return check


# The DPs of batch padding and of the time objective hold some 1 KB a candidate edge (prices,
# relaxation cells, layers): 1.1 GB at 10**6 distinct lengths, 3 GB at 3 x 10**6. Beyond this
# many they are refused at once (edge padding, O(k m) in int32 and two layers, is not).
MAX_DP_GROUPS = 1_000_000


def check_dp_scale(g: int, pad: str, objective: str, align: int) -> None:
    """Refuse, before any allocation of the DP, an objective whose DP would not fit beside the
    data on ``g`` candidate edges: one line saying what to do."""
    if g <= MAX_DP_GROUPS or (pad == "edge" and objective == "padding"):
        return
    what = "the time objective" if objective == "time" else f'pad="{pad}"'
    raise BucketoptError(
        f"{what} on {g:,} distinct lengths needs more memory than a solve should take (about "
        f"1 KB each); at most {MAX_DP_GROUPS:,} are solved: merge nearby lengths with "
        f"align={_align_for(g, align)}, cap them with max_length=, or solve "
        'pad="edge", which takes any number.', param=None)


def _align_for(g: int, align: int) -> int:
    """An align that brings ``g`` groups at ``align`` under MAX_DP_GROUPS (a power of 2)."""
    need = align * -(-g // MAX_DP_GROUPS)
    return 1 << (need - 1).bit_length()
