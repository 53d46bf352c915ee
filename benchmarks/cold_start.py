"""The first run: every command of README.md and docs/index.md, cold and warm, and pack_rows.

Each command runs in a subprocess of its own: first with an empty numba cache directory of its
own (cold: every kernel it needs is compiled), then again with the cache that run filled (warm).
The commands are read from the pages when the benchmark runs (the fenced ``bash`` and
``python`` blocks and the ``$ bucketopt ...`` lines of console transcripts, as docs/examples.py
reads them), so the table follows the pages. A page's commands run in order in one temporary
folder (a later command reads what an earlier one wrote, train.parquet for instance); a python
block runs with the page's earlier python blocks before it (the reader's session: README's
training block uses the solve before it), and ``pip`` lines are left out. ``bucketopt`` is
``python -m bucketopt`` of the checkout measured.

The goal: a cold command answers within 15 s, pack_rows within 5 s. Wall seconds count, and
CPU seconds (user + system of the subprocess) beside them: on a shared machine the CPU figure
is the steadier one. ``--code PATH`` (repeatable) measures several checkouts in one run, the
runs interleaved command by command, so that a ratio between two checkouts holds even while the
machine's load moves::

    python benchmarks/cold_start.py --quick
    python benchmarks/cold_start.py --code /path/to/old --code . --markdown cold.md
    python benchmarks/cold_start.py --command "bucketopt solve -k 6 --pad batch"
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "docs"))
import examples  # noqa: E402  (docs/examples.py: how the docs test reads the pages)

PAGES = ("README.md", "docs/index.md")
GOAL_S = 15.0
PACK_GOAL_S = 5.0
# pack_rows on 200,000 documents, both methods: the calls' own seconds (numba's import and the
# kernels' load or compile included; bucketopt's import apart)
PACK = """
import time
import numpy as np
rng = np.random.default_rng(0)
lengths = np.minimum(rng.lognormal(7.0, 1.0, 200_000), 32_767).astype(np.int64) + 1
from bucketopt.training.packing import pack_rows
t = time.perf_counter()
pack_rows(lengths, 32_768)
pack_rows(lengths, 32_768, method="bfd", window=4096)
print(f"@call {time.perf_counter() - t:.3f}")
"""
SHELL_PRELUDE = 'bucketopt() { python -m bucketopt "$@"; }\n'


@dataclass
class Command:
    page: str
    name: str  # what the table shows
    kind: str  # "shell" or "python"
    text: str  # the shell text, or the whole python program
    goal: float = GOAL_S
    call: bool = False  # time the "@call" figure the program prints, not the process


def _shell_lines(text: str) -> str:
    """A bash block without its pip and test-suite commands (``pip install . && bucketopt
    ...``: the rest)."""
    out = []
    for line in text.splitlines():
        parts = [p for p in re.split(r"\s*&&\s*", line)
                 if not re.match(r"\s*(pip3?\s|python -m pytest)", p)]
        if any(p.strip() for p in parts):
            out.append(" && ".join(parts))
    return "\n".join(out)


def _label(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 90 else text[:87] + "..."


def page_commands(page: str) -> list:
    """The commands of one page, in order (a page missing: none)."""
    if not (ROOT / page).exists():
        return []
    out, python = [], []
    for block in examples.blocks(page):
        if block.kind == "python":
            python.append(block.text)
            first = next((ln for ln in block.text.splitlines()
                          if ln.strip() and not ln.startswith(("import ", "from "))), "")
            out.append(Command(page, f"[python] {block.name.split(' > ', 1)[1]}: {_label(first)}",
                               "python", "\n\n".join(python)))
        elif block.kind == "transcript":
            for command, _ in block.transcript:
                if not re.match(r"pip3?\s", command):
                    out.append(Command(page, _label(command), "shell", command))
        else:
            text = _shell_lines(block.text)
            if text.strip():
                out.append(Command(page, _label(text), "shell", text))
    return out


def all_commands(pages, extra, quick: bool) -> list:
    cmds = [c for page in pages for c in page_commands(page)]
    cmds += [Command("(given)", _label(c), "shell", c) for c in extra]
    if quick:  # the data they need, every `bucketopt solve`, and what --command adds
        cmds = [c for c in cmds if c.page == "(given)" or "bucketopt solve" in c.text
                or "write_table" in c.text]
    cmds.append(Command("(API)", "pack_rows: greedy and bfd, 200,000 documents", "python", PACK,
                        PACK_GOAL_S, call=True))
    return cmds


def run(cmd: Command, code: Code, cwd: Path, cache: Path, timeout: float) -> dict:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache),
               PYTHONPATH=os.pathsep.join(p for p in (str(code.path),
                                                      os.environ.get("PYTHONPATH"))
                                          if p),
               MPLBACKEND="Agg")
    if cmd.kind == "python":
        argv = [sys.executable, "-c", cmd.text]
    else:
        argv = ["bash", "-eo", "pipefail", "-c", SHELL_PRELUDE + cmd.text]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    try:
        done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=timeout)
        rc, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired:
        rc, out, err = None, "", f"timed out after {timeout:.0f} s"
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if cmd.call and rc == 0:
        m = re.search(r"^@call ([\d.]+)$", out, re.M)
        wall = float(m.group(1)) if m else wall
    return {"rc": rc, "wall": wall, "cpu": cpu, "err": err.strip().splitlines()[-1:] if rc else []}


def measure(cmds, codes, repeat: int, timeout: float, keep: bool, log) -> list:
    """[(command, code, [cold results], [warm results])], the checkouts interleaved per
    command and repeat."""
    rows = {(i, c): ([], []) for i in range(len(cmds)) for c in range(len(codes))}
    base = Path(tempfile.mkdtemp(prefix="bucketopt-cold-"))
    try:
        for r in range(repeat):
            folders = {}
            for c, _ in enumerate(codes):
                for page in {cmd.page for cmd in cmds}:
                    folders[c, page] = base / f"r{r}-c{c}" / re.sub(r"\W", "_", page)
                    folders[c, page].mkdir(parents=True)
            for i, cmd in enumerate(cmds):
                caches = {}
                for c, code in enumerate(codes):  # cold: each its own empty cache
                    caches[c] = base / f"r{r}-c{c}" / f"cache{i}"
                    res = run(cmd, code, folders[c, cmd.page], caches[c], timeout)
                    rows[i, c][0].append(res)
                    log(f"  cold {res['wall']:7.2f} s wall {res['cpu']:7.2f} s cpu  "
                        f"[{code}] {cmd.name}" + (f"  FAILED {res['err']}" if res["rc"] else ""))
                for c, code in enumerate(codes):  # warm: the cache the cold run filled
                    res = run(cmd, code, folders[c, cmd.page], caches[c], timeout)
                    rows[i, c][1].append(res)
                    log(f"  warm {res['wall']:7.2f} s wall {res['cpu']:7.2f} s cpu  "
                        f"[{code}] {cmd.name}" + (f"  FAILED {res['err']}" if res["rc"] else ""))
                for c in caches:
                    shutil.rmtree(caches[c], ignore_errors=True)
    finally:
        if not keep:
            shutil.rmtree(base, ignore_errors=True)
    return [(cmd, codes[c], *rows[i, c]) for i, cmd in enumerate(cmds)
            for c in range(len(codes))]


def _span(results, key) -> str:
    ok = [x[key] for x in results if x["rc"] == 0]
    if not ok:
        return "failed"
    lo, hi = min(ok), max(ok)
    return f"{lo:.2f}" if len(ok) == 1 or hi - lo < 0.005 else f"{lo:.2f}-{hi:.2f}"


def table(rows, codes) -> str:
    many = len(codes) > 1
    head = ["command", *(["code"] if many else []), "cold s", "cold CPU s", "warm s",
            "goal met"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for cmd, code, cold, warm in rows:
        ok = [x["wall"] for x in cold if x["rc"] == 0]
        met = ("yes" if ok and max(ok) <= cmd.goal else "no") + f" (<= {cmd.goal:g} s)"
        cells = [f"`{cmd.name}`".replace("|", "\\|"), *([str(code)] if many else []),
                 _span(cold, "wall"), _span(cold, "cpu"), _span(warm, "wall"), met]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


@dataclass
class Code:
    """A checkout to import, and its name in the table."""

    path: Path
    label: str

    def __str__(self):
        return self.label


def _code(text: str) -> Code:
    name, _, path = text.rpartition("=")
    path = Path(path).resolve()
    return Code(path, name or path.name)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--code", action="append", metavar="[NAME=]PATH",
                        help="a checkout to import (PYTHONPATH), shown as NAME (default: the "
                             "folder's name); repeat to compare, interleaved (default: this one)")
    parser.add_argument("--quick", action="store_true",
                        help="only the pages' solves (and the data they read) and pack_rows")
    parser.add_argument("--command", action="append", default=[], metavar="CMD",
                        help="one more shell command to time (bucketopt ... works)")
    parser.add_argument("--page", action="append", help=f"pages to read (default: {PAGES})")
    parser.add_argument("--repeat", type=int, default=1, help="runs of everything (default 1)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds a command may take")
    parser.add_argument("--markdown", type=Path, metavar="FILE",
                        help="write the table to FILE too")
    parser.add_argument("--list", action="store_true", help="print the commands and stop")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folders")
    args = parser.parse_args(argv)
    codes = [_code(c) for c in (args.code or [str(ROOT)])]
    cmds = all_commands(args.page or PAGES, args.command, args.quick)
    if args.list:
        for cmd in cmds:
            print(f"{cmd.page}: {cmd.name}")
        return 0
    print(f"{len(cmds)} commands x {len(codes)} checkout(s) x {args.repeat} run(s), cold then "
          f"warm; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}", file=sys.stderr)
    rows = measure(cmds, codes, args.repeat, args.timeout, args.keep,
                   lambda s: print(s, file=sys.stderr, flush=True))
    text = table(rows, codes)
    print(text)
    if args.markdown:
        given = " ".join(map(shlex.quote, sys.argv[1:] if argv is None else argv))
        note = (f"\n\n{len(cmds)} commands, {args.repeat} run(s) each, cold (an empty numba "
                f"cache of its own) then warm; {os.cpu_count()} CPUs, load at the end "
                f"{os.getloadavg()[0]:.1f}. Ranges: min-max over the runs. Made by "
                f"`python benchmarks/cold_start.py {given}`.\n")
        args.markdown.write_text(text + note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
