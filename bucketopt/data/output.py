"""Writing results: atomically to files, and to standard output with failures reported.

:func:`atomic_writer` writes to a temporary file in the target's folder, flushes and fsyncs it,
then renames it over the target (``os.replace``): a write that fails half-way (a full disk, a
file-size limit, ``/dev/full``) leaves the target as it was and no temporary file behind, and
is one :class:`BucketoptError` line. A target that is not a regular file (``/dev/null``, a
terminal, a pipe) is written in place, as nothing can be renamed over it.

:func:`check_not_input` refuses an output path that names one of the command's inputs (``export
-o lens.npy --lens lens.npy`` would destroy the data) before anything is read or written.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile

from ..errors import BucketoptError
from .guards import short


def _is_special(path: str) -> bool:
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


@contextlib.contextmanager
def atomic_writer(path, *, mode: str = "w", what: str = "output"):
    """A file handle whose content replaces ``path`` only when the ``with`` block ends well.

    Examples
    --------
    >>> import os, tempfile
    >>> target = os.path.join(tempfile.mkdtemp(), "out.json")
    >>> with atomic_writer(target) as fh:
    ...     _ = fh.write("{}")
    >>> open(target).read()
    '{}'
    """
    text = os.fsdecode(os.fspath(path))
    kwargs = {"encoding": "utf-8", "newline": ""} if "b" not in mode else {}
    if _is_special(text):
        try:
            with open(text, mode, **kwargs) as handle:
                yield handle
        except OSError as exc:
            raise _write_error(text, what, exc) from None
        return
    folder = os.path.dirname(os.path.abspath(text))
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{os.path.basename(text)[:100]}.", suffix=".tmp",
                                    dir=folder)
    except OSError as exc:
        raise _write_error(text, what, exc) from None
    try:
        with os.fdopen(fd, mode, **kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        _keep_mode(text, temp)
        os.replace(temp, text)
    except OSError as exc:
        _remove(temp)
        raise _write_error(text, what, exc) from None
    except BaseException:
        _remove(temp)
        raise


def _keep_mode(target: str, temp: str) -> None:
    """Give the new file the mode an ordinary write would have (mkstemp makes it 0600)."""
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    with contextlib.suppress(OSError):
        os.chmod(temp, mode)


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _write_error(path: str, what: str, exc: OSError) -> BucketoptError:
    reason = exc.strerror or type(exc).__name__
    return BucketoptError(f"could not write {what} {short(path)}: {reason}; nothing was written.")


def write_text(path, text: str, *, what: str = "output") -> str:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_writer`); returns the path."""
    with atomic_writer(path, what=what) as handle:
        handle.write(text)
    return os.fspath(path)


def same_file(a, b) -> bool:
    """Whether two paths name the same file: the same device and inode (links followed), or,
    where one does not exist, the same path once links are resolved."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError, TypeError):
        try:
            return os.path.realpath(os.fspath(a)) == os.path.realpath(os.fspath(b))
        except (OSError, ValueError, TypeError):
            return False


def _paths(value):
    if value is None:
        return []
    if isinstance(value, (str, bytes, os.PathLike)):
        return [value]
    return list(value)


def check_not_input(output, output_flag: str, inputs) -> None:
    """Refuse an output path that names one of ``inputs``: pairs of a flag and the path, or the
    list of paths, it reads (``-``, standard input, is no file)."""
    if output is None:
        return
    for flag, value in inputs:
        for path in _paths(value):
            if str(path) == "-" or not same_file(output, path):
                continue
            given = os.path.abspath(os.fspath(output)) == os.path.abspath(os.fspath(path))
            which = "the file" if given else f"{short(os.fspath(path))}, a file"
            raise BucketoptError(
                f"{output_flag} {short(os.fspath(output))} is {which} {flag} reads: writing it "
                "would destroy the input; choose another output path.")


def check_not_read_next(output, output_flag: str, flag: str, source) -> None:
    """Refuse an output that the next read of ``source`` (a folder or a glob of shards) would
    take as one of its files, though it is none yet."""
    if output is None or source is None or str(source) == "-":
        return
    from .io import reads_new_file

    where = reads_new_file(source, output)
    if where is None:
        return
    folder = os.fspath(source)
    if where == "folder":
        place = f"is inside the {flag} folder {short(folder.rstrip(os.sep) + os.sep)}"
    else:
        place = f"matches the {flag} glob {short(folder)}"
    raise BucketoptError(f"{output_flag} {short(os.fspath(output))} {place}: the next read "
                         "would take it as a shard; write it elsewhere.")
