"""Checks of scalar arguments, and a bounded way to show a bad value in a message.

Every public entry point that takes a number goes through :func:`check_int` or
:func:`check_number`: booleans and strings are refused (``"0.5"`` is not coerced to 0.5),
non-finite and out-of-range values name the parameter, the rule and the value. :func:`shown`
renders the offending value for the message without ever building a huge string: a 5,000-digit
integer, a 10-MB string or a list nested 100,000 deep come out as a few dozen characters.
"""

from __future__ import annotations

import math
import reprlib

import numpy as np

from .errors import BucketoptError

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
    ``name`` when it is an identifier, else none.

    Examples
    --------
    >>> check_int(4.0, "k", low=1)
    4
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


def _bound(value: int) -> str:
    if value > 1 << 20 and value & (value - 1) == 0:
        return f"2**{value.bit_length() - 1}"
    return f"{value:,}" if value > 1 << 20 else str(value)


def _int_rule(low, high) -> str:
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
