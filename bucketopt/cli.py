"""The ``bucketopt`` command line: one subcommand per module in ``bucketopt/commands/``.

``main(argv)`` returns the exit code: 0 on success, 2 on bad input (one line on stderr, never a
traceback).
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import re
import sys
import threading

from . import __version__
from .data.guards import short
from .data.output import (  # imported here: an ending may come mid-import
    remove_temporaries,
    unlist_temporary,
)
from .errors import BucketoptError

# name -> module in bucketopt.commands; each module has add_parser(subparsers) and run(args)
# (commands.common and commands.pairs are helpers of several commands, not commands).
COMMANDS = ("solve", "sweep", "export", "inspect", "calibrate", "compare", "probe", "verify",
            "report")


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit code 2
        # "bucketopt: error: " is printed by main(); name the subcommand, not the program again
        where = self.prog.split(" ", 1)[1] if " " in self.prog else None
        if message.startswith(("unrecognized arguments", "the following arguments")):
            usage = " ".join(self.format_usage().split())
            message = f"{message}; {usage}"
        raise BucketoptError(f"{where}: {message}" if where else message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="bucketopt",
        description="Optimal length-bucket boundaries for variable-length training data.",
    )
    parser.add_argument("--version", action="version", version=f"bucketopt {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        importlib.import_module(f".commands.{name}", __package__).add_parser(sub)
    return parser


_VALUE = r"(\"[^\"]*\"|'[^']*'|[^\s,;)]*[^\s,;).])"


def cli_message(message: str, flags, param: str | None = None, flag: str | None = None) -> str:
    """Reword an API message for the command line: ``token_budget=4096`` -> ``--token-budget
    4096``, `` `align` `` -> ``--align``, ``pass drop_last=True or ...`` (no such flag) -> the
    rest. ``flags``: the option strings of the command that ran. ``param``, ``flag``: the
    parameter the error is about (:attr:`BucketoptError.param`) and its flag in this command
    (:func:`param_flag`): then that parameter is named by its flag, with nothing guessed.
    Without them (an error about several parameters, or about none) the names the message
    holds are reworded by the flags the parser gives them (:func:`parameter_flags`)."""
    if param and flag:
        return _named(message, param, flag)
    return _guessed(message, flags)


# Python parameter -> the parser's dest, where they differ (-k of sweep has dest k_range).
PARAM_DESTS = {"world_size": ("gpus",), "k": ("k", "k_range"), "ks": ("k", "k_range")}


def param_flag(subparser, param: str | None) -> str | None:
    """The option string of ``subparser`` that sets ``param`` (its long form), or None."""
    if not param or subparser is None:
        return None
    options = {a.dest: a.option_strings for a in subparser._actions if a.option_strings}
    for dest in PARAM_DESTS.get(param, (param,)):
        if dest in options:
            strings = options[dest]
            return next((o for o in strings if o.startswith("--")), strings[0])
    return None


def _named(message: str, param: str, flag: str) -> str:
    """``message`` with the mentions of ``param`` (`` `param` ``, ``param=VALUE``, a bare
    ``param``) in the flag's form: the error says which parameter it is about."""
    for said in (f"`{param}` ({flag})", f"{param}= ({flag})", f"{param} ({flag})",
                 f"{param} (CLI: {flag})", f"{param}=/{flag}"):
        message = message.replace(said, flag)
    message = message.replace(f"`{param}`", flag)
    words = re.escape(param)
    message = re.sub(rf"(?<![\w/.-]){words}=" + _VALUE + "?",
                     lambda m: f"{flag} {m.group(1).strip(chr(34) + chr(39))}" if m.group(1)
                     else flag, message)
    if "_" in param:  # a bare one-letter name (k) is a word, not a parameter
        message = re.sub(rf"(?<![\w/.-]){words}(?![\w/-]|\.\w)", flag, message)
    return _once(message)


def _once(message: str) -> str:
    """``--max-length 5000 (--max-length)``, ``--device cuda (--device cuda)``: the flag once."""
    message = re.sub(r"(--[\w-]+)((?: [^\s,;()]+)?) \(\1\2\)", r"\1\2", message)
    return re.sub(r"(--[\w-]+)((?: [^\s,;()]+)?(?: s)?) \(\1\)", r"\1\2", message)


def parameter_flags(flags) -> dict:
    """Python parameter -> flag, read from a command's option strings ``flags``: the parser's
    dest rule (``--token-budget`` sets ``token_budget``, ``-k`` sets ``k``) and
    :data:`PARAM_DESTS` for the parameters whose flag has another name (``world_size``:
    ``--gpus``). Nothing is listed by hand, so a new flag is named without editing this file."""
    names = {}
    for option in sorted(flags, key=len):  # a long option wins over a short one of one name
        if option.startswith("--"):
            names[option[2:].replace("-", "_")] = option
        elif len(option) == 2:
            names.setdefault(option[1], option)
    for param, dests in PARAM_DESTS.items():
        found = next((names[d] for d in dests if d in names), None)
        if found is not None:
            names[param] = found
    return names


def _sets(flag: str, param: str) -> bool:
    """Whether ``flag`` is the one that sets ``param`` (by the parser's dest rule)."""
    return flag.lstrip("-").replace("-", "_") in PARAM_DESTS.get(param, (param,))


def _guessed(message: str, flags) -> str:
    """The wording for errors that carry no parameter, or are about several (``min_share``
    against ``max_share``), or one with no flag in this command: the parameter names the
    message holds in their forms (`` `name` ``, ``name=VALUE``, a bare ``snake_case``) that
    have a flag in this command (:func:`parameter_flags`) are reworded as flags."""
    known = parameter_flags(flags)

    def flag(name):
        return known.get(name)

    def valued(m):
        name, value = m.group(1), m.group(2)
        if flag(name) is None:
            return m.group(0)
        return f"{flag(name)} {value.strip(chr(34) + chr(39))}" if value else flag(name)

    text = re.sub(r"\b(\w+)=/(--[\w-]+)", r"\2", message)           # column=/--column
    text = re.sub(r"\b(\w+)=? \((?:CLI: )?(--[\w-]+)\)", lambda m: m.group(2)
                  if _sets(m.group(2), m.group(1)) else m.group(0), text)
    text = re.sub(r"\bpass (\w+)=" + _VALUE + r" or ",                  # no such flag here
                  lambda m: m.group(0) if flag(m.group(1)) else "", text)
    text = re.sub(r"\b(\w+)=" + _VALUE + r"?(?=[\s,;).]|$)", valued, text)
    text = re.sub(r"`(\w+)`", lambda m: flag(m.group(1)) or m.group(0), text)
    text = _once(text)  # "--max-length 5000 (--max-length)": the flag once is enough
    return re.sub(r"(?<![\w/.-])([a-z]+_[a-z_]+)(?![\w/-]|\.\w)",  # not inside a path
                  lambda m: flag(m.group(1)) or m.group(0), text)


def _flags(parser, command) -> set:
    """The option strings of ``command``, less a long option whose name is a parameter another
    option sets (sweep's ``--k``, the k of the plan it writes, beside ``-k``, the range)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            actions = action.choices[command]._actions
            dests = {a.dest for a in actions}
            out = set()
            for a in actions:
                for option in a.option_strings:
                    name = option.lstrip("-").replace("-", "_")
                    claimed = set(PARAM_DESTS.get(name, (name,)))
                    if option.startswith("--") and a.dest not in claimed and claimed & dests:
                        continue
                    out.add(option)
            return out
    return set()


class _StdoutError(OSError):
    """Writing to standard output failed."""


class _GuardedStdout:
    """Standard output for a command: a failed write or flush raises :class:`_StdoutError`
    (a closed stream, a full disk, /dev/full, a file-size limit), told apart from the OSError
    of a file the command reads."""

    def __init__(self, stream):
        self._stream = stream

    def _call(self, name, *args):
        if self._stream is None:
            raise _StdoutError(errno.EBADF, "standard output is closed")
        try:
            return getattr(self._stream, name)(*args)
        except BrokenPipeError:
            raise
        except (OSError, ValueError) as exc:  # ValueError: "I/O operation on closed file"
            raise _StdoutError(getattr(exc, "errno", None) or errno.EIO,
                               getattr(exc, "strerror", None) or str(exc)) from None

    def write(self, text):
        return self._call("write", text)

    def flush(self):
        if self._stream is not None:
            self._call("flush")

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _discard_stdout() -> None:
    """Point standard output at /dev/null so the flush at exit cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        sys.stdout = None  # no file descriptor (closed, or a test's buffer): nothing to flush


def _subparser(parser, command):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            return action.choices[command]
    return None


def _given(parser, command, argv) -> frozenset:
    """The dests the command line set explicitly (not by a default): ``argv`` parsed again
    with every default of the subcommand suppressed."""
    sub = _subparser(parser, command)
    if sub is None:
        return frozenset()
    saved = [(action, action.default) for action in sub._actions]
    saved_defaults = dict(sub._defaults)
    try:
        for action, _ in saved:
            action.default = argparse.SUPPRESS
        sub._defaults.clear()
        namespace, _ = parser.parse_known_args(argv)
    finally:
        for action, default in saved:
            action.default = default
        sub._defaults.update(saved_defaults)
    return frozenset(vars(namespace)) - {"command"}


# The exit code and line of each signal the command line ends on: 128 + the signal's number.
_ENDINGS = {"SIGINT": (130, "interrupted"), "SIGTERM": (143, "terminated"),
            "SIGHUP": (129, "hung up")}
# Taken by the first ending; never released (the process ends).
_ENDING = threading.Lock()


def _end(signum) -> None:
    """End the command on a signal: the temporary files of the writes in progress removed (the
    targets keep their old content), one line, exit 130 (SIGINT) or 143 (SIGTERM) at once.
    os._exit, as raising KeyboardInterrupt is not enough: numba compiles through ctypes
    callbacks, which print the exception as a traceback and carry on ("Exception ignored on
    calling ctypes callback function"); and it runs no finally block, hence the removal first."""
    import signal

    if not _ENDING.acquire(blocking=False):  # the handler and the thread both came: one ends
        return
    code, word = _ENDINGS.get(signal.Signals(signum).name, (128 + signum, "stopped"))
    try:
        try:
            remove_temporaries()  # the spooled copy of standard input (--lens -) among them
            # a progress line drawn on the terminal ends first, so the message has its own (the
            # module if already loaded: no import from a signal)
            progress = sys.modules.get(f"{__package__}.progress")
            if progress is not None:
                progress.end_line()
        finally:
            os.write(2, f"bucketopt: {word}\n".encode())  # no lock a busy thread could hold
    finally:
        os._exit(code)


def _interrupted(signum, frame):
    _end(signum)


class _SignalEndings:
    """While a command runs: SIGINT and SIGTERM end it through :func:`_end`, from the Python
    handler, and from a thread the signal wakes (``signal.set_wakeup_fd``), as the handler runs
    only when the main thread returns to the interpreter, which a long compiled kernel delays.
    Main thread only; :meth:`close` puts back what was there."""

    def __init__(self):
        import signal
        import socket
        import threading

        self.previous, self.old_wakeup, self.thread, self.sockets = {}, None, None, None
        if threading.current_thread() is not threading.main_thread():
            return
        for name in _ENDINGS:
            number = getattr(signal, name)
            self.previous[number] = signal.signal(number, _interrupted)
        try:
            reader, writer = socket.socketpair()
            writer.setblocking(False)
            self.old_wakeup = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        except (OSError, ValueError):  # no wakeup fd here: the Python handler alone
            return
        self.sockets = (reader, writer)
        self.thread = threading.Thread(target=self._watch, args=(reader,), daemon=True,
                                       name="bucketopt-signals")
        self.thread.start()

    def _watch(self, reader) -> None:
        while True:
            try:
                data = reader.recv(64)
            except OSError:
                return
            if not data:
                return
            for number in data:
                if number in self.previous:
                    _end(number)

    def close(self) -> None:
        import signal

        if self.sockets is not None:
            signal.set_wakeup_fd(self.old_wakeup)
            reader, writer = self.sockets
            writer.close()  # the thread reads the end of the stream and returns
            self.thread.join(5)
            reader.close()
        for number, handler in self.previous.items():
            signal.signal(number, handler if handler is not None else signal.SIG_DFL)


def _say_interrupted() -> None:
    from .progress import end_line

    end_line()
    print("bucketopt: interrupted", file=sys.stderr)


def main(argv=None) -> int:
    from .progress import STAGES

    endings = _SignalEndings()
    parser = args = spooled = None
    try:
        parser = build_parser()
        args, extra = parser.parse_known_args(argv)
        if extra:  # let the subcommand's parser say it, with its usage
            sub = _subparser(parser, args.command)
            (sub or parser).error(f"unrecognized arguments: {' '.join(map(str, extra))}"[:300])
        if args.command is None:
            usage = " ".join(parser.format_usage().split())
            raise BucketoptError(f"a command is required: {', '.join(COMMANDS)} "
                                 f"(bucketopt COMMAND --help); {usage}")
        from .commands.common import check_args, spool_stdin_lens

        args.given = _given(parser, args.command, argv)
        check_args(args)
        spooled = spool_stdin_lens(args)  # --lens -: standard input, kept in a temporary file
        STAGES["enabled"] = not getattr(args, "quiet", False)
        stdout = sys.stdout
        sys.stdout = _GuardedStdout(stdout)
        try:
            code = int(args.run(args) or 0)
            sys.stdout.flush()  # a full disk or /dev/full shows here, not at exit
        finally:
            sys.stdout = stdout
        return code
    except BucketoptError as exc:
        message = str(exc)
        if spooled is not None:  # --lens -: name standard input, not its temporary file
            from .commands.common import name_stdin

            message = name_stdin(message, spooled)
        if args is not None and getattr(args, "command", None):
            flags = _flags(parser, args.command)
            flag = param_flag(_subparser(parser, args.command), exc.param)
            message = cli_message(message, flags, exc.param, flag)
        print(f"bucketopt: error: {message}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help / --version
        return int(exc.code or 0) if isinstance(exc.code, int) else 0
    except KeyboardInterrupt:
        _say_interrupted()
        return 130
    except SystemError as exc:
        # Ctrl-C while a compiled kernel runs surfaces when it returns, as a SystemError
        # ("returned a result with an exception set") around the KeyboardInterrupt
        if isinstance(exc.__cause__ or exc.__context__, KeyboardInterrupt):
            _say_interrupted()
            return 130
        raise
    except BrokenPipeError:  # `bucketopt ... | head`: the reader has all it wants
        _discard_stdout()
        return 0
    except _StdoutError as exc:
        # writing the result to standard output failed (a full disk, /dev/full, a closed
        # stream, a file-size limit): one line and a non-zero exit, never a silent 0
        _discard_stdout()
        print(f"bucketopt: error: could not write to standard output: {exc.strerror}.",
              file=sys.stderr)
        return 2
    except OSError as exc:  # a system error no check foresaw: still one line, not a traceback
        where = f" ({short(os.fsdecode(exc.filename))})" if exc.filename else ""
        print(f"bucketopt: error: {exc.strerror or exc}{where}.", file=sys.stderr)
        return 2
    except MemoryError:
        print("bucketopt: error: out of memory", file=sys.stderr)
        return 2
    finally:
        STAGES["enabled"] = False
        if spooled is not None:
            spooled.unlink(missing_ok=True)
            unlist_temporary(spooled)
        if argv is not None:
            # called in a process that goes on (tests, a program): its handlers back. A process
            # run as the command line (no argv: the console script, python -m bucketopt) keeps
            # the endings to its exit, so a signal just after the work is done is one line and
            # its exit code too, not Python's KeyboardInterrupt traceback.
            endings.close()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
