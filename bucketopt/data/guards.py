"""Cheap checks that run before any data is read or any work is done.

Paths: :func:`path_kind` stats a path once and turns every way that can fail (a name longer than
the system allows, a symbolic-link loop, no permission, an empty string) into one line naming
the path, instead of an ``OSError`` traceback or a wrong "no such file". :func:`short` keeps a
hostile 5,000-character path from filling the message.

(The check of a token budget against the data, :func:`bucketopt.validate.check_budget_scale`,
lives with every other check of an argument.)
"""

from __future__ import annotations

import errno
import os
import stat

from ..errors import BucketoptError

# The magic bytes of compressed files, to say "decompress it first" instead of a format error.
COMPRESSED_MAGIC = ((b"\x1f\x8b", "gzip"), (b"BZh", "bzip2"), (b"\xfd7zXZ\x00", "xz"),
                    (b"\x28\xb5\x2f\xfd", "zstd"), (b"\x04\x22\x4d\x18", "lz4"))


def short(text, limit: int = 80) -> str:
    """``repr`` of a path, shortened in the middle past ``limit`` characters."""
    text = os.fspath(text) if isinstance(text, os.PathLike) else str(text)
    if len(text) <= limit:
        return repr(text)
    keep = (limit - 5) // 2
    return repr(f"{text[:keep]}...{text[-keep:]}") + f" ({len(text):,} characters)"


def name(text) -> str:
    """A file name for a message: as it is when every character prints, else quoted by
    :func:`short` (a name holding a newline stays on the message's one line)."""
    text = os.fspath(text) if isinstance(text, os.PathLike) else str(text)
    return text if text.isprintable() and len(text) <= 80 else short(text)


def path_kind(text, what: str = "path") -> str:
    """'file', 'dir', 'other' (a device, a pipe, a socket) or 'missing' for a path.

    Raises :class:`BucketoptError` for an empty path, a name too long for the file system, a
    symbolic-link loop and a permission failure, each named for what it is.
    """
    text = os.fspath(text)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if not text or not text.strip():
        raise BucketoptError(f"{what} is an empty path: give a file, a directory or a glob.")
    if "\x00" in text:
        raise BucketoptError(f"{what} {short(text)} holds a NUL character: not a valid path.")
    try:
        mode = os.stat(text).st_mode
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            try:
                os.lstat(text)
            except OSError:
                return "missing"
            raise BucketoptError(
                f"{what} {short(text)} is a symbolic link to a missing file.") from None
        if exc.errno == errno.ENAMETOOLONG:
            raise BucketoptError(
                f"{what} {short(text)} is too long a path for the file system "
                "(at most 255 characters per name and 4,096 in all).") from None
        if exc.errno == errno.ELOOP:
            raise BucketoptError(
                f"{what} {short(text)} is a loop of symbolic links.") from None
        if exc.errno == errno.EACCES:
            raise BucketoptError(f"{what} {short(text)}: permission denied.") from None
        raise BucketoptError(
            f"{what} {short(text)} could not be opened ({exc.strerror or exc}).") from None
    except ValueError:  # e.g. an embedded NUL from another route
        raise BucketoptError(f"{what} {short(text)} is not a valid path.") from None
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    return "other"


def compressed_kind(head: bytes) -> str | None:
    """The compression format whose magic bytes ``head`` starts with, else None."""
    for magic, name in COMPRESSED_MAGIC:
        if head.startswith(magic):
            return name
    return None


def path_size(text) -> int:
    """The size in bytes of an existing file (0 where it cannot be read)."""
    try:
        return os.stat(text).st_size
    except (OSError, ValueError):
        return 0


# Text and JSON read whole (profiles, states, configs, measurements) are refused past this size:
# such files are kilobytes, and a 1 GB one must not be read into memory to find that out.
TEXT_LIMIT = 64 << 20


def check_readable_file(path, what: str, *, limit: int | None = TEXT_LIMIT) -> int:
    """Refuse what cannot be read whole: a missing path, a directory, a FIFO or a device (opening
    a FIFO blocks until a writer comes), a file over ``limit`` bytes. Returns the size."""
    kind = path_kind(path, what)
    if kind == "missing":
        raise BucketoptError(f"{what} does not exist.")
    if kind == "dir":
        raise BucketoptError(f"{what} is a directory; give a file.")
    if kind == "other":
        raise BucketoptError(f"{what} is not a regular file (a pipe, a socket or a device).")
    size = path_size(path)
    if limit is not None and size > limit:
        raise BucketoptError(
            f"{what} is {size:,} bytes, over the {limit:,} bytes such a file can hold; not read.")
    return size


def read_text(path, what: str, *, limit: int | None = TEXT_LIMIT) -> str:
    """The text of a small UTF-8 file (a byte-order mark is skipped), checked before it is
    opened by :func:`check_readable_file`; every failure is one :class:`BucketoptError` line."""
    check_readable_file(path, what, limit=limit)
    try:
        with open(path, "rb") as handle:
            raw = handle.read(limit + 1 if limit is not None else -1)
    except OSError as exc:
        raise BucketoptError(f"{what} could not be read ({exc.strerror or exc}).") from None
    if limit is not None and len(raw) > limit:  # grew while we looked
        raise BucketoptError(f"{what} is over the {limit:,} bytes such a file can hold.")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise BucketoptError(f"{what} is not UTF-8 text.") from None


def read_json(path, what: str, *, limit: int | None = TEXT_LIMIT):
    """A small JSON file, parsed; a number of thousands of digits, nesting deeper than Python
    can parse, NaN or bad syntax are each one :class:`BucketoptError` line."""
    text = read_text(path, what, limit=limit)
    return parse_json(text, what)


def parse_json(text: str, what: str):
    import json

    def constant(name):
        raise ValueError(f"{name} is not a JSON number")

    try:
        return json.loads(text, parse_constant=constant)
    except json.JSONDecodeError as exc:
        raise BucketoptError(f"{what} is not valid JSON ({exc.msg} at line {exc.lineno}, "
                             f"column {exc.colno}).") from None
    except RecursionError:
        raise BucketoptError(f"{what} is not valid JSON (nested too deeply).") from None
    except ValueError as exc:  # an integer of more than 4,300 digits, NaN, Infinity
        reason = str(exc).split(";")[0][:100]
        raise BucketoptError(f"{what} is not valid JSON ({reason}).") from None
