"""Memory models from dicts, JSON files and profiles (:func:`load_memory`); the rule they
give, B(b) = the largest s with m0 + m1 s b + m2 s b^2 <= headroom x capacity, lives with the
objectives that read it (:mod:`bucketopt.objectives.sizes`) and is re-exported here."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..data.guards import path_kind, read_json, short
from ..errors import BucketoptError
from ..objectives.sizes import (  # noqa: F401  (public here too)
    GIB,
    HEADROOM,
    MAX_BYTES,
    MAX_GPU_GIB,
    TOKEN_LIMIT,
    MemoryModel,
    batch_sizes,
    check_headroom,
)
from ..validate import check_number, shown


def _from_mapping(data: dict, source: str, capacity, headroom) -> MemoryModel:
    """A flat {m0, m1, m2, capacity} dict, a profile holding one under "memory", or a profile
    written by `bucketopt probe` on CUDA (its fit under provenance.probe.memory)."""
    if not isinstance(data, dict):
        raise BucketoptError(f"{source} must hold a JSON object; got {type(data).__name__}.")
    if "m0" not in data:
        inner = data.get("memory")
        if inner is None:
            inner = _dig(data, "provenance", "probe", "memory")
        if isinstance(inner, dict) and "fit_bytes" in inner:  # probe's memory report
            fit = inner["fit_bytes"] if isinstance(inner["fit_bytes"], dict) else {}
            inner = {"m0": fit.get("m0"), "m1": fit.get("m1_per_token"),
                     "m2": fit.get("m2_per_token_x_length"),
                     "capacity": inner.get("total_bytes")}
        if not isinstance(inner, dict):
            raise BucketoptError(
                f"{source} holds no memory fit: give a JSON or dict with m0, m1, m2 (bytes) and "
                "capacity, or a profile written by `bucketopt probe` on a GPU.")
        data = inner
    missing = [k for k in ("m0", "m1", "m2") if data.get(k) is None]
    if missing:
        raise BucketoptError(f"{source} lacks the key(s) {', '.join(missing)} (bytes).")
    if capacity is None:
        capacity = data.get("capacity")
        if capacity is None:
            raise BucketoptError(f"{source} has no `capacity`: give the card's memory in GB "
                                 "with gpu_memory= (--gpu-memory).", param=None)
    if headroom is None:
        headroom = data.get("headroom", HEADROOM)
        if not _is_number(headroom):  # a string "0.5" in the file: refused, never coerced
            raise BucketoptError(f"{source}: `headroom` must be a number in (0, 1]; got "
                                 f"{shown(headroom)}.", param=None)
    return MemoryModel(data["m0"], data["m1"], data["m2"], capacity, headroom, source)


def load_memory(memory, *, gpu_memory=None, headroom=None) -> MemoryModel | None:
    """A :class:`MemoryModel` from a dict, a JSON path, a profile name or path holding a memory
    fit, or a MemoryModel; ``gpu_memory`` (GB, 2**30 bytes) overrides its capacity,
    ``headroom`` (default 0.9) its headroom. None gives None.

    Examples
    --------
    >>> load_memory({"m0": 1e9, "m1": 1e4, "m2": 0, "capacity": 8e9}).batch_size([1000]).tolist()
    [620]
    """
    if memory is None:
        if gpu_memory is not None:
            raise BucketoptError("`gpu_memory` (--gpu-memory) needs a memory model "
                                 "(memory=, --memory).", param="gpu_memory")
        return None
    capacity = None
    if gpu_memory is not None:
        try:
            capacity = check_number(gpu_memory, "gpu_memory", low=0.0, high=MAX_GPU_GIB,
                                    low_open=True) * GIB
        except BucketoptError:
            raise BucketoptError(f"`gpu_memory` (--gpu-memory) must be a number of GB in "
                                 f"(0, 1e9]; got {shown(gpu_memory)}.",
                                 param="gpu_memory") from None
    if headroom is not None:
        headroom = check_headroom(headroom)
    if isinstance(memory, MemoryModel):
        if capacity is None and headroom is None:
            return memory
        return MemoryModel(memory.m0, memory.m1, memory.m2,
                           memory.capacity if capacity is None else capacity,
                           memory.headroom if headroom is None else headroom, memory.source)
    if isinstance(memory, dict):
        return _from_mapping(memory, "memory", capacity, headroom)
    if callable(getattr(memory, "batch_size", None)) and not isinstance(memory, (str, Path)):
        # any rule object with batch_size(edges, token_budget) -> non-increasing int64 array,
        # peak_bytes(sizes, edges) and to_dict() (tests give batch-size tables this way)
        if capacity is not None or headroom is not None:
            raise BucketoptError("gpu_memory and memory_headroom apply to a memory model with "
                                 "m0, m1, m2 and capacity.", param=None)
        return memory
    if not isinstance(memory, (str, Path)):
        raise BucketoptError(f"`memory` must be a dict, a JSON file path or a profile name; got "
                             f"{type(memory).__name__}.", param="memory")
    text = str(memory)
    from .costmodel import available_profiles, profiles_dir

    if text in available_profiles():
        data = read_json(profiles_dir() / f"{text}.json", f"profile {text!r}")
        return _from_mapping(data, f"profile {text!r}", capacity, headroom)
    if path_kind(text, f"memory {short(text)}") == "missing":
        raise BucketoptError(f"memory {short(text)} is neither a shipped profile nor a JSON "
                             "file.", param="memory")
    try:  # the one JSON reader: a byte-order mark, the size, the digits and the depth
        data = read_json(text, f"memory file {short(text)}", limit=MEMORY_BYTES)
    except BucketoptError as exc:
        raise BucketoptError(str(exc), param="memory") from None
    return _from_mapping(data, f"memory file {short(text)}", capacity, headroom)


# A memory model's JSON is a few hundred bytes; past this size a file is not one.
MEMORY_BYTES = 1 << 24


def _is_number(value) -> bool:
    return not isinstance(value, (bool, np.bool_)) and \
        isinstance(value, (int, float, np.integer, np.floating))


def _dig(data, *keys):
    """data[keys[0]][keys[1]]... where every level is a dict, else None."""
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data
