"""The ``bucketopt`` command line: one subcommand per module in ``bucketopt/commands/``.

``main(argv)`` returns the exit code: 0 on success, 2 on bad input (one line on stderr, never a
traceback).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from . import __version__
from .errors import BucketoptError

# name -> module in bucketopt.commands; each module has add_parser(subparsers) and run(args).
COMMANDS = ("solve", "sweep", "export", "inspect", "calibrate", "compare", "probe")


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit code 2
        raise BucketoptError(f"{self.prog}: {message}")


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


def main(argv=None) -> int:
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help(sys.stderr)
            return 2
        return int(args.run(args) or 0)
    except BucketoptError as exc:
        print(f"bucketopt: error: {exc}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help / --version
        return int(exc.code or 0) if isinstance(exc.code, int) else 0
    except KeyboardInterrupt:
        print("bucketopt: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except MemoryError:
        print("bucketopt: error: out of memory", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
