"""Memory models from dicts, JSON files and profiles (:func:`load_memory`); the rule they
give, B(b) = the largest s with m0 + m1 s b + m2 s b^2 <= headroom x capacity, lives with the
objectives that read it (:mod:`bucketopt.objectives.sizes`) and is re-exported here."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from ..errors import BucketoptError
from ..objectives.sizes import (  # noqa: F401  (public here too)
    GIB,
    HEADROOM,
    MAX_BYTES,
    TOKEN_LIMIT,
    MemoryModel,
    batch_sizes,
    check_headroom,
)


def _from_mapping(data: dict, source: str, capacity, headroom) -> MemoryModel:
    """A flat {m0, m1, m2, capacity} dict, a profile holding one under "memory", or a profile
    written by `bucketopt probe` on CUDA (its fit under provenance.probe.memory)."""
    if not isinstance(data, dict):
        raise BucketoptError(f"{source} must hold a JSON object; got {type(data).__name__}.")
    if "m0" not in data:
        inner = data.get("memory")
        if inner is None:
            inner = ((data.get("provenance") or {}).get("probe") or {}).get("memory") \
                if isinstance(data.get("provenance"), dict) else None
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
        if isinstance(gpu_memory, bool) or not isinstance(gpu_memory, (int, float, np.number)) \
                or not math.isfinite(float(gpu_memory)) or not 0 < float(gpu_memory) <= 1e9:
            raise BucketoptError(f"`gpu_memory` (--gpu-memory) must be a number of GB in "
                                 f"(0, 1e9]; got {gpu_memory!r}.", param="gpu_memory")
        capacity = float(gpu_memory) * GIB
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
        data = json.loads((profiles_dir() / f"{text}.json").read_text())
        return _from_mapping(data, f"profile {text!r}", capacity, headroom)
    path = Path(text)
    try:
        if not path.is_file():
            raise BucketoptError(f"memory {text[:200]!r} is neither a shipped profile nor a JSON "
                                 "file.", param="memory")
        if path.stat().st_size > 1 << 24:
            raise BucketoptError(f"memory file {text[:200]} is over 16 MB: not a memory model.",
                                 param="memory")
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise BucketoptError(f"memory file {text[:200]} is not readable JSON: {exc}",
                             param="memory") from None
    return _from_mapping(data, f"memory file {text[:200]}", capacity, headroom)
