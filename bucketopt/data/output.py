"""Writing results: atomically to files, and to standard output with failures reported.

:func:`atomic_writer` writes the new content to a file of its own in the target's folder, flushes
and fsyncs it, then renames it over the target (``os.replace``): the target keeps its old content
until the new one is complete. Where the system allows (Linux, ``O_TMPFILE``) that file has no
name while it is written and gets one only for the rename, so a write ended by anything (an
error, SIGINT, SIGTERM, even SIGKILL) leaves nothing behind; elsewhere it is a hidden
``.NAME.XXXXXXXX.tmp`` removed on any exception, and by :func:`remove_temporaries`, which the
command line's signal handlers call before they exit. A write that fails half-way (a full disk,
a file-size limit, ``/dev/full``) is one :class:`BucketoptError` line. A target that is not a
regular file (``/dev/null``, a terminal, a pipe) is written in place, as nothing can be renamed
over it.

:func:`check_not_input` refuses an output path that names one of the command's inputs (``export
-o lens.npy --lens lens.npy`` would destroy the data) before anything is read or written.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import signal
import stat
import threading

from ..errors import BucketoptError
from .guards import short

# Paths of the named temporary files of writes in progress (and other files to remove should the
# process be ended): :func:`remove_temporaries` removes them. A file is listed before it is made
# and unlisted once it is gone or renamed; those steps hold _LOCK, which remove_temporaries
# takes too, so a thread ending the process never runs between them (reentrant: a signal
# handler may run inside them, in the thread that holds it).
_TEMPORARIES: set[str] = set()
_LOCK = threading.RLock()


def remove_temporaries() -> None:
    """Remove every temporary file a write in progress holds. The command line's SIGINT and
    SIGTERM endings call it just before ``os._exit``, which runs no ``finally`` block."""
    with _LOCK:
        for path in list(_TEMPORARIES):
            with contextlib.suppress(OSError):
                os.unlink(path)
            _TEMPORARIES.discard(path)


def list_temporary(path) -> None:
    """List ``path``, a file of the command's own (the spooled copy of standard input), for
    :func:`remove_temporaries` until :func:`unlist_temporary`; the caller removes it itself."""
    with _LOCK:
        _TEMPORARIES.add(os.path.abspath(os.fsdecode(os.fspath(path))))


def unlist_temporary(path) -> None:
    with _LOCK:
        _TEMPORARIES.discard(os.path.abspath(os.fsdecode(os.fspath(path))))


@contextlib.contextmanager
def temporary_path(path):
    """Within the block, ``path`` is removed should the command line be interrupted (SIGINT,
    SIGTERM); the caller still removes it itself when the block ends."""
    list_temporary(path)
    try:
        yield path
    finally:
        unlist_temporary(path)


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
    if text.endswith(("/", os.sep)) or os.path.basename(text) in ("", ".", ".."):
        raise BucketoptError(f"could not write {what} {short(text)}: it names a folder, not a "
                             "file; give a file path.")
    if _is_special(text):
        try:
            with open(text, mode, **kwargs) as handle:
                yield handle
        except OSError as exc:
            raise _write_error(text, what, exc) from None
        return
    folder = os.path.dirname(os.path.abspath(text))
    name = os.path.basename(text)
    temp = None  # the named temporary file, where no anonymous one could be made
    try:
        fd = _anonymous_file(folder)
        if fd is None:
            fd, temp = _named_file(folder, name)
    except OSError as exc:
        raise _write_error(text, what, exc) from None
    try:
        with os.fdopen(fd, mode, **kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
            _keep_mode(text, handle.fileno())
            if temp is None:
                _publish(handle.fileno(), folder, name)
        if temp is not None:
            with _LOCK:
                os.replace(temp, text)
                _TEMPORARIES.discard(temp)
                temp = None
    except OSError as exc:
        raise _write_error(text, what, exc) from None
    finally:
        if temp is not None:
            with _LOCK:
                _remove(temp)
                _TEMPORARIES.discard(temp)


def _temp_name(name: str) -> str:
    return f".{name[:100]}.{secrets.token_hex(4)}.tmp"


def _anonymous_file(folder: str):
    """A file with no name in ``folder`` (Linux ``O_TMPFILE``), or None where the system or the
    file system makes none (or /proc, through which it gets its name, is missing)."""
    flag = getattr(os, "O_TMPFILE", None)
    if flag is None or not os.path.isdir("/proc/self/fd"):
        return None
    try:
        return os.open(folder, flag | os.O_WRONLY | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOSYS):
            return None
        raise


def _named_file(folder: str, name: str):
    """A new hidden file in ``folder``, listed in :data:`_TEMPORARIES` before it exists (a
    signal between its creation and its listing would leave it behind)."""
    for _ in range(100):
        temp = os.path.join(folder, _temp_name(name))
        with _LOCK:
            _TEMPORARIES.add(temp)
            try:
                return os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC,
                               0o600), temp
            except FileExistsError:
                _TEMPORARIES.discard(temp)
            except BaseException:
                _TEMPORARIES.discard(temp)
                raise
    raise FileExistsError(errno.EEXIST, "no free temporary file name", folder)


def _publish(fd: int, folder: str, name: str) -> None:
    """Give the anonymous file ``fd`` the name ``name`` in ``folder``, replacing what is there:
    linked under a temporary name, then renamed over the target, with SIGINT and SIGTERM held
    back in between (and the temporary name listed for :func:`remove_temporaries`)."""
    folder_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for _ in range(100):
            temp = _temp_name(name)
            path = os.path.join(folder, temp)
            try:
                with _LOCK, _signals_held():
                    _TEMPORARIES.add(path)
                    try:
                        os.link(f"/proc/self/fd/{fd}", temp, dst_dir_fd=folder_fd,
                                follow_symlinks=True)
                    except FileExistsError:
                        continue
                    try:
                        os.replace(temp, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
                    except BaseException:
                        with contextlib.suppress(OSError):
                            os.unlink(temp, dir_fd=folder_fd)
                        raise
                    return
            finally:
                with _LOCK:
                    _TEMPORARIES.discard(path)
        raise FileExistsError(errno.EEXIST, "no free temporary file name", folder)
    finally:
        os.close(folder_fd)


_HELD = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))


@contextlib.contextmanager
def _signals_held():
    """SIGINT, SIGTERM and SIGHUP wait (in this thread) until the block ends."""
    try:
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
    except (AttributeError, OSError, ValueError):
        previous = None
    try:
        yield
    finally:
        if previous is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _keep_mode(target: str, fd: int) -> None:
    """Give the new file the target's mode, or the one an ordinary write would have (a named
    temporary file is made 0600)."""
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    with contextlib.suppress(OSError):
        os.fchmod(fd, mode)


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
    list of paths, it reads (``-``, standard input, is no file). The output is looked at once,
    each input once (a folder of 100,000 shards is one stat a shard)."""
    if output is None:
        return
    try:
        found = os.stat(output)
        key = (found.st_dev, found.st_ino)
    except (OSError, ValueError, TypeError):
        key = None
    for flag, value in inputs:
        for path in _paths(value):
            if str(path) == "-":
                continue
            try:
                found = os.stat(path)
                same = key is not None and (found.st_dev, found.st_ino) == key
            except (OSError, ValueError, TypeError):  # a missing input: by its resolved path
                same = same_file(output, path)
            if not same:
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
