"""A ``bucketopt verify --json`` result, read and checked for the report.

The result holds what a short run of the plan's real batches measured beside what the cost model
predicted::

    {"device": "cpu", "steps": 40,
     "measured":  {"step_time_mean": 0.21, "step_time_p50": 0.2, "step_time_p90": 0.27,
                   "tokens_per_s": 41000.0, "peak_memory_bytes": null},
     "predicted": {"step_time_mean": {"value": 0.2, "interval": [0.18, 0.23]}, ...},
     "verdicts":  {"step_time_mean": {"inside": true, "off_by": 0.0}, ...},
     "warnings":  ["..."]}

Every key is optional (a figure the device cannot measure is null or absent); what is there is
checked: a wrong type or range is one :class:`~bucketopt.BucketoptError` line naming the field.
"""

from __future__ import annotations

import math
import os

from ..errors import BucketoptError

# The figures a verify result compares, in the order the report shows them.
FIGURES = ("step_time_mean", "step_time_p50", "step_time_p90", "tokens_per_s",
           "peak_memory_bytes")
# A verify result is a few kilobytes; past this it is not one.
VERIFY_BYTES = 1 << 20
_KEY_CHARS = 80


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value)


class _Check:
    def __init__(self, where: str):
        self.where = where

    def fail(self, field: str, rule: str, value) -> None:
        shown = repr(value)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        raise BucketoptError(f"{self.where}: {field} {rule}; got {shown}.", param="verify")

    def obj(self, value, field: str) -> dict:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.fail(field, "must be a JSON object", value)
        for key in value:
            if not key or len(key) > _KEY_CHARS:
                self.fail(field, f"keys must be names of 1 to {_KEY_CHARS} characters", key)
        return value

    def figure(self, value, field: str):
        """A measured or predicted figure: a number >= 0, or null."""
        if value is None:
            return None
        if not _number(value) or value < 0:
            self.fail(field, "must be a number >= 0 or null", value)
        return float(value) if isinstance(value, float) else value


def check_verify(data, where: str = "verify result") -> dict:
    """The verify result ``data`` (a dict, as ``bucketopt verify --json`` prints it), checked
    and normalised: every section present (empty when absent), predictions as
    ``{"value", "interval"}``, verdicts as ``{"inside", "off_by"}``."""
    c = _Check(where)
    if not isinstance(data, dict):
        c.fail("the result", "must be a JSON object", type(data).__name__)
    device = data.get("device")
    if device is not None and (not isinstance(device, str) or len(device) > 200):
        c.fail("device", "must be a string of at most 200 characters", device)
    steps = data.get("steps")
    if steps is not None and (not isinstance(steps, int) or isinstance(steps, bool)
                              or steps < 0):
        c.fail("steps", "must be an integer >= 0", steps)
    measured = {key: c.figure(value, f"measured.{key}")
                for key, value in c.obj(data.get("measured"), "measured").items()}
    predicted = {}
    for key, value in c.obj(data.get("predicted"), "predicted").items():
        field = f"predicted.{key}"
        if _number(value) or value is None:  # a bare number: the value, no interval
            value = {"value": value}
        value = c.obj(value, field)
        point = c.figure(value.get("value"), f"{field}.value")
        interval = value.get("interval")
        if interval is not None:
            if not isinstance(interval, list) or len(interval) != 2 \
                    or not all(_number(v) for v in interval):
                c.fail(f"{field}.interval", "must be [low, high], two numbers", interval)
            if not 0 <= interval[0] <= interval[1]:
                c.fail(f"{field}.interval", "must have 0 <= low <= high", interval)
            interval = [float(v) for v in interval]
        predicted[key] = {"value": point, "interval": interval}
    verdicts = {}
    for key, value in c.obj(data.get("verdicts"), "verdicts").items():
        field = f"verdicts.{key}"
        value = c.obj(value, field)
        inside = value.get("inside")
        if inside is not None and not isinstance(inside, bool):
            c.fail(f"{field}.inside", "must be true, false or null", inside)
        off_by = value.get("off_by")
        if off_by is not None and not _number(off_by):
            c.fail(f"{field}.off_by", "must be a number (a fraction) or null", off_by)
        verdicts[key] = {"inside": inside, "off_by": off_by}
    warnings = data.get("warnings") or []
    if not isinstance(warnings, list) or not all(isinstance(w, str) for w in warnings):
        c.fail("warnings", "must be a list of strings", warnings)
    if not measured and not predicted:
        c.fail("the result", "holds no measured or predicted figure (keys measured, "
                             "predicted)", sorted(data)[:8])
    return {"device": device, "steps": steps, "measured": measured, "predicted": predicted,
            "verdicts": verdicts, "warnings": list(warnings)}


def load_verify(source) -> dict:
    """A checked verify result from a dict or a JSON file path (at most 1 MiB)."""
    if isinstance(source, dict):
        return check_verify(source)
    if not isinstance(source, (str, os.PathLike)):
        raise BucketoptError(f"verify must be a dict or a path to a verify JSON; got "
                             f"{type(source).__name__}.", param="verify")
    from ..data.guards import read_json, short

    where = f"verify {short(os.fspath(source))}"
    return check_verify(read_json(source, where, limit=VERIFY_BYTES), where)


def figure_rows(verify: dict) -> list[str]:
    """The figures of ``verify`` in the report's order: the known ones first, then the rest."""
    keys = set(verify["measured"]) | set(verify["predicted"]) | set(verify["verdicts"])
    return [k for k in FIGURES if k in keys] + sorted(keys - set(FIGURES))
