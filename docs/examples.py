"""Run the examples of README.md and docs/*.md as a reader would, and compare what they print.

An example is a fenced ``python`` or ``bash`` block, or a console transcript (a plain fence whose
first line starts with ``$ ``: each command, then the output it prints). Each has a name, its
page and the heading it sits under, counted from 1 under that heading::

    docs/index.md > 5. Train with the sampler #1

The blocks of one page run in order, in one fresh folder (a later block may use what an earlier
one wrote or defined, as the reader's session would), with ``bucketopt`` and ``python`` this
checkout's (a shell line that is ``bucketopt ...`` or ``python -c ...`` runs in this process,
without a start-up each; any other runs in bash; ``pip`` never runs). What is compared:

- a transcript's output, line by line (trailing spaces aside; a line ``...`` stands for any
  number of lines);
- in a python block, an expression statement followed by a comment that shows a value
  (``sol.boundaries  # (1013, 1628, ...): inclusive upper edges``, ``x  # 0.1807``,
  ``t.ktok_per_s, t.eta_days  # ~12.2, ~10.7``, ``f()  # "text"``, ``{'a': [...]}``): the value,
  to the digits shown (``~``: within one unit of the last digit shown; ``12.57...``: those
  digits, more may follow; ``...`` inside brackets: anything). A comment in words is prose.

tests/test_docs.py runs every page (each in a fresh folder and namespace) in one process of its
own, with a timeout per block and a memory ceiling, and names the blocks it skips (the Hub, a
GPU, the reader's own data) with the reason. By hand::

    python docs/examples.py docs/index.md      # run one page, print each block's result
    python docs/examples.py                    # every page
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import re
import resource
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import tokenize
import traceback
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = ("README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")))
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
HEADING = re.compile(r"^#{1,6} (.+)$", re.M)
BLOCK_TIMEOUT_S = 180  # a guard against a hang (a cold numba cache on a loaded machine is slow)
# A 16 GB laptop runs the examples with room to spare for the rest of its work.
MEMORY_CEILING = 4 * 2**30
_CURRENT = {"block": None}
# bucketopt's own dependencies: an example that cannot import one of these fails; one that
# cannot import anything else (torch, transformers, datasets, ...) is skipped, with the rest of
# its page, where that extra is not installed.
REQUIRED = {"bucketopt", "numpy", "scipy", "numba", "pyarrow", "matplotlib"}


@dataclass
class Block:
    page: str
    name: str
    kind: str  # "python", "bash" or "transcript"
    text: str
    line: int
    transcript: list = field(default_factory=list)  # [(command, expected output lines)]


def blocks(page: str) -> list:
    """The examples of ``page`` (a path relative to the repository root), in order."""
    text = (ROOT / page).read_text()
    fences = list(FENCE.finditer(text))
    headings = [(m.start(), m.group(1).strip()) for m in HEADING.finditer(text)
                if not any(f.start() < m.start() < f.end() for f in fences)]
    out, counts = [], {}
    for m in fences:
        lang, body = m.group(1), m.group(2)
        if lang in ("python", "bash"):
            kind = lang
        elif not lang and body.startswith("$ "):
            kind = "transcript"
        else:
            continue
        heading = next((h for pos, h in reversed(headings) if pos < m.start()), page)
        counts[heading] = counts.get(heading, 0) + 1
        block = Block(page, f"{page} > {heading} #{counts[heading]}", kind, body,
                      text[:m.start()].count("\n") + 1)
        if kind == "transcript":
            block.transcript = _transcript(body)
        out.append(block)
    return out


def _transcript(body: str) -> list:
    steps = []
    for line in body.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
    return steps


# --- comparing ------------------------------------------------------------------------------

def output_differs(expected: list, actual: str) -> str | None:
    """None when ``actual`` (stdout) prints the ``expected`` lines, else what differs first."""
    got = [line.rstrip() for line in actual.rstrip("\n").splitlines()]
    want = [line.rstrip() for line in expected]
    while want and not want[-1]:
        want.pop()
    if _lines_match(want, got):
        return None
    for i, (w, g) in enumerate(zip(want, got)):
        if w == "...":
            break
        if w != g:
            return f"line {i + 1}: the doc shows {w!r}, the command printed {g!r}"
    return (f"the doc shows {len(want)} line(s), the command printed {len(got)}:\n"
            + "\n".join(got))


def _lines_match(want, got) -> bool:
    if not want:
        return not got
    if want[0] == "...":
        return any(_lines_match(want[1:], got[i:]) for i in range(len(got) + 1))
    return bool(got) and want[0] == got[0] and _lines_match(want[1:], got[1:])


NUMBER = r"~?-?\d[\d_]*(?:\.\d+)?(?:e[-+]?\d+)?(?:\.\.\.)?"
NUMBERS = re.compile(rf"({NUMBER})((?:\s*,\s*{NUMBER})*)(?=$|:\s|;)")


def shown_value(comment: str):
    """The value a ``# comment`` shows (a matcher), or None when the comment is prose."""
    c = comment.lstrip("#").strip()
    if not c:
        return None
    if c[0] in "\"'":
        token = next(tokenize.generate_tokens(io.StringIO(c).readline))
        return ("str", ast.literal_eval(token.string)) if token.type == tokenize.STRING \
            else None
    if c[0] in "([{":
        end = _bracket_end(c)
        if end is None:
            return None
        try:
            return ("literal", ast.literal_eval(_mark_numbers(c[:end])))
        except (ValueError, SyntaxError):
            return None
    m = NUMBERS.match(c)
    if m is None:
        return None
    items = [x.strip() for x in m.group(0).split(",")]
    nums = [Shown(x) for x in items]
    return ("literal", nums[0] if len(nums) == 1 else tuple(nums))


class Shown:
    """A number as the doc prints it: its digits, ``~`` (about) or a ``...`` tail."""

    def __init__(self, text: str):
        self.text = text
        self.about = text.startswith("~")
        self.more = text.endswith("...")
        core = text.lstrip("~").removesuffix("...").replace("_", "")
        self.value = float(core)
        self.integer = re.fullmatch(r"-?\d+", core) is not None
        mantissa = core.split("e")[0]
        self.step = 10.0 ** -(len(mantissa.split(".")[1]) if "." in mantissa else 0)
        if "e" in core:
            self.step *= 10.0 ** int(core.split("e")[1])

    def matches(self, actual) -> bool:
        if isinstance(actual, bool) or not isinstance(actual, (int, float)):
            try:
                actual = float(actual)
            except (TypeError, ValueError):
                return False
        if self.integer and not (self.about or self.more):
            return actual == self.value
        if self.more:  # the digits shown, then more: truncated or rounded there
            return abs(actual - self.value) < self.step + 1e-12 * abs(self.value)
        tolerance = self.step if self.about else self.step / 2
        return abs(actual - self.value) <= tolerance * (1 + 1e-9)

    def __repr__(self):
        return self.text


def _mark_numbers(text: str) -> str:
    """Floats inside a literal become Shown(...) markers (as strings literal_eval accepts)."""
    out, i = [], 0
    for m in re.finditer(r"(?<![\w'\"])(~?-?\d+\.\d+(?:e[-+]?\d+)?(?:\.\.\.)?|~-?\d+)", text):
        out.append(text[i:m.start()])
        out.append(repr("\x00" + m.group(0)))
        i = m.end()
    return "".join(out) + text[i:]


def _bracket_end(text: str):
    depth, quote = 0, None
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def value_differs(shown, actual) -> str | None:
    """None when ``actual`` is what the comment ``shown`` (from :func:`shown_value`) says."""
    kind, want = shown
    if kind == "str":
        return None if str(actual) == want else f"the doc shows {want!r}, got {str(actual)!r}"
    return None if _matches(want, actual) else f"the doc shows {_show(want)}, got {actual!r}"


def _matches(want, got) -> bool:
    if want is Ellipsis:
        return True
    if isinstance(want, Shown):
        return want.matches(got)
    if isinstance(want, str) and want.startswith("\x00"):
        return Shown(want[1:]).matches(got)
    if isinstance(want, dict):
        return isinstance(got, dict) and set(want) == set(got) and all(
            _matches(v, got[k]) for k, v in want.items())
    if isinstance(want, (tuple, list)):
        if hasattr(got, "tolist") and not isinstance(got, (tuple, list)):
            got = got.tolist()
        if not isinstance(got, (tuple, list)) or type(want) is not type(got):
            return False
        if want and want[-1] is Ellipsis:  # [1, 2, ...]: these first, then any
            return len(got) >= len(want) - 1 and all(
                _matches(w, g) for w, g in zip(want[:-1], got))
        return len(want) == len(got) and all(_matches(w, g) for w, g in zip(want, got))
    return want == got


def _show(want) -> str:
    return repr(want).replace("'\\x00", "").replace("\\x00", "")


# --- running ---------------------------------------------------------------------------------

def shims(folder: Path) -> Path:
    """A bin folder whose ``bucketopt`` and ``python`` are this interpreter and checkout."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, line in (("bucketopt", f'exec "{sys.executable}" -m bucketopt "$@"'),
                       ("python", f'exec "{sys.executable}" "$@"')):
        path = folder / name
        path.write_text(f"#!/bin/sh\n{line}\n")
        path.chmod(0o755)
    return folder


def environment(bin_dir: Path) -> dict:
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    # Offline, as on a laptop without a network: a Hub download fails at once, not after a wait.
    # One thread per math library: the shared CI machines are loaded, and a tiny model on two
    # threads that wait for each other ran 30x slower there.
    env.update(MPLBACKEND="Agg", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1",
               MKL_NUM_THREADS="1", HF_DATASETS_DISABLE_PROGRESS_BARS="1")
    return env


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout


def run_python(block: Block, scope: dict, timeout: float) -> dict:
    """Run a python block statement by statement in ``scope``; compare the shown values."""
    try:
        tree = ast.parse(block.text)
        comments = {tok.start[0]: tok.string for tok in tokenize.generate_tokens(
            io.StringIO(block.text).readline) if tok.type == tokenize.COMMENT}
    except (SyntaxError, tokenize.TokenError) as exc:
        return {"ok": False, "error": f"not Python: {exc}"}
    compared, problems, out = 0, [], io.StringIO()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        with contextlib.redirect_stdout(out):
            for stmt in tree.body:
                where = f"{block.name}, line {stmt.lineno}"
                if isinstance(stmt, ast.Expr):
                    value = eval(compile(ast.Expression(stmt.value), where, "eval"), scope)
                    shown = shown_value(comments.get(stmt.end_lineno, ""))
                    if shown is not None:
                        compared += 1
                        differs = value_differs(shown, value)
                        if differs:
                            problems.append(f"line {stmt.end_lineno}: {differs}")
                else:
                    exec(compile(ast.Module([stmt], []), where, "exec"), scope)
    except _Timeout:
        return {"ok": False, "error": f"timed out after {timeout:.0f} s"}
    except ModuleNotFoundError as exc:
        top = (exc.name or "").split(".")[0]
        if top and top not in REQUIRED:  # an optional extra (torch, transformers, ...)
            return {"skipped": True, "missing": top,
                    "reason": f"needs {top}, which is not installed"}
        return {"ok": False, "error": traceback.format_exc(limit=-3)}
    except BaseException:
        return {"ok": False, "error": traceback.format_exc(limit=-3)}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    return {"ok": not problems, "error": "\n".join(problems) or None, "compared": compared,
            "stdout": out.getvalue()[-2000:]}


def commands(text: str) -> list | None:
    """The argv of each command of a shell block, when every one is ``bucketopt ...`` or
    ``python -c CODE`` (they then run in this process, without paying each its start-up);
    None when the block needs a shell (pipes, ``&&``, other programs)."""
    out = []
    for line in text.replace("\\\n", " ").splitlines():
        try:
            argv = shlex.split(line, comments=True)
        except ValueError:
            return None
        if not argv:
            continue
        ours = argv[0] == "bucketopt" and not {"&&", "||", "|", ";", ">", "<"} & set(argv)
        if not (ours or (argv[0] == "python" and len(argv) == 3 and argv[1] == "-c")):
            return None
        out.append(argv)
    return out


def run_command(argv: list, timeout: float):
    """(exit code, stdout, stderr) of one command of :func:`commands`, run in this process."""
    from bucketopt.cli import main

    out, err = io.StringIO(), io.StringIO()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            if argv[0] == "bucketopt":
                code = main(argv[1:])
            else:
                exec(compile(argv[2], "python -c", "exec"), {"__name__": "__main__"})
                code = 0
    except _Timeout:
        code, err = None, io.StringIO(f"timed out after {timeout:.0f} s")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except Exception:
        code = 1
        err.write(traceback.format_exc(limit=-3))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    return code, out.getvalue(), err.getvalue()


def run_shell(command: str, cwd: Path, env: dict, timeout: float):
    """(exit code, stdout, stderr) of ``command``: in this process where :func:`commands`
    allows, else by bash. ``pip`` is never run (it would change this environment)."""
    if re.search(r"(^|[;&|]\s*)pip3? ", command, re.M):
        return 1, "", "pip is not run by the examples' check: name the block in its skips"
    argvs = commands(command)
    if argvs is not None:
        code, out, err = 0, "", ""
        for argv in argvs:
            code, o, e = run_command(argv, timeout)
            out, err = out + o, err + e
            if code != 0:
                break
        return code, out, err
    try:
        done = subprocess.run(["bash", "-eo", "pipefail", "-c", command], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "", f"timed out after {timeout:.0f} s"
    return done.returncode, done.stdout, done.stderr


def run_block(block: Block, scope: dict, cwd: Path, env: dict, timeout: float) -> dict:
    if block.kind == "python":
        return run_python(block, scope, timeout)
    steps = block.transcript if block.kind == "transcript" else [(block.text, None)]
    compared = 0
    for command, expected in steps:
        code, out, err = run_shell(command, cwd, env, timeout)
        if code == 2:  # a command refused for an optional package it needs: skipped, as a
            # python block that cannot import one is (the CLI's one line names the package)
            found = re.search(r"needs ([\w.-]+), which is not installed", err)
            if found and found.group(1).split(".")[0] not in REQUIRED:
                top = found.group(1).split(".")[0]
                return {"skipped": True, "missing": top,
                        "reason": f"needs {top}, which is not installed"}
        if code != 0:
            return {"ok": False, "error": f"{command!r} exited {code}:\n{err[-3000:]}"}
        if expected is not None:
            compared += 1
            differs = output_differs(expected, out)
            if differs:
                return {"ok": False, "error": f"{command!r}: {differs}"}
    return {"ok": True, "error": None, "compared": compared}


def _rss():
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGESIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def watch_memory(ceiling: int) -> None:
    """Stop this process (exit 3, naming the block) once its RSS passes ``ceiling`` bytes,
    before an example that builds too much takes the machine down (Linux; elsewhere no-op)."""
    import threading

    if _rss() is None:
        return

    def watch():
        while True:
            rss = _rss()
            if rss > ceiling:
                sys.stderr.write(f"{_CURRENT['block']}: RSS {rss / 2**30:.1f} GiB passed the "
                                 f"{ceiling / 2**30:.1f} GiB ceiling\n")
                sys.stderr.flush()
                os._exit(3)
            time.sleep(0.05)

    threading.Thread(target=watch, daemon=True).start()


def run_pages(pages, root: Path, *, skip=(), report=None, timeout: float = BLOCK_TIMEOUT_S,
              ceiling: int = MEMORY_CEILING) -> dict:
    """Run the examples of ``pages``, each page in a fresh folder under ``root`` and a fresh
    namespace; {block name: result}. Each result is also written to ``report`` (a file of JSON
    lines) as soon as it is known, so a run stopped by the memory ceiling keeps what it saw."""
    watch_memory(ceiling)
    env = environment(shims(root / ".bin"))
    os.environ.update(env)  # for the blocks run in this process (set before torch loads)
    results, missing = {}, None
    for page in pages:
        folder = root / re.sub(r"\W+", "-", page)
        folder.mkdir(parents=True, exist_ok=True)
        if page != "docs/index.md" and "train.parquet" in (ROOT / page).read_text():
            # the other pages that read it use the train.parquet of index.md's step 0
            import regen

            (folder / "train.parquet").symlink_to(regen.index_folder() / "train.parquet")
        os.chdir(folder)
        scope, missing = {"__name__": "__main__"}, None
        for block in blocks(page):
            _CURRENT["block"] = block.name
            start, cpu = time.perf_counter(), _cpu_seconds()
            if block.name in skip:
                result = {"skipped": True, "reason": "skipped by name"}
            elif missing:
                result = {"skipped": True, "reason": f"needs {missing}, which is not installed"}
            else:
                result = run_block(block, scope, folder, env, timeout)
                missing = result.get("missing")
            result["seconds"] = round(time.perf_counter() - start, 2)
            result["cpu_seconds"] = round(_cpu_seconds() - cpu, 2)
            results[block.name] = result
            if report is not None:
                with open(report, "a") as fh:
                    fh.write(json.dumps({"name": block.name, **result}) + "\n")
    return results


def _cpu_seconds() -> float:
    """CPU time of this process and its finished children (a loaded machine moves wall time)."""
    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                  resource.getrusage(resource.RUSAGE_CHILDREN)))


def peak_rss() -> int:
    """The largest RSS of this process or of a child it waited for, in bytes (Linux: KiB)."""
    return max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
               resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) * 1024


def main(argv=None) -> int:
    """``examples.py [PAGE ...] [--skip NAME]... [--report FILE] [--ceiling-mib N]``: every
    page by default."""
    args = sys.argv[1:] if argv is None else list(argv)
    skip, pages, report, ceiling = [], [], None, MEMORY_CEILING
    while args:
        arg = args.pop(0)
        if arg == "--skip":
            skip.append(args.pop(0))
        elif arg == "--report":
            report = args.pop(0)
        elif arg == "--ceiling-mib":
            ceiling = int(args.pop(0)) * 2**20
        else:
            pages.append(arg)
    with tempfile.TemporaryDirectory() as tmp:
        results = run_pages(pages or PAGES, Path(tmp).resolve(), skip=set(skip), report=report,
                            ceiling=ceiling)
    for name, result in results.items():
        state = "skipped" if result.get("skipped") else "ok" if result["ok"] else "FAILED"
        compared = f", {result['compared']} output(s) compared" if result.get("compared") else ""
        print(f"{state:8} {result.get('seconds', 0):6.2f} s {result.get('cpu_seconds', 0):6.2f} "
              f"s CPU  {name}{compared}")
        if result.get("error") or result.get("skipped"):
            print("    " + (result.get("error") or result["reason"]).replace("\n", "\n    "))
    print(f"peak RSS {peak_rss() / 2**20:,.0f} MiB")
    return 0 if all(r.get("skipped") or r["ok"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
