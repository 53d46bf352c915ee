"""Run benchmarks and write what they print into docs/benchmarks.md.

Each benchmark's section of docs/benchmarks.md sits between two markers::

    <!-- bench: NAME -->
    ...what `python benchmarks/NAME.py ARGS` printed, with the date and the machine...
    <!-- /bench -->

and is written by this script only, never by hand: the figures on that page are what the
scripts printed in the run it names (these machines are shared and noisy, so every script prints
ratios measured side by side in one run; absolute times move with the load).

    python benchmarks/record.py cold_start solver     # rerun these two, rewrite their sections
    python benchmarks/record.py --list                # the benchmarks this script records

A benchmark that exits non-zero leaves its section as it was.
"""

from __future__ import annotations

import datetime
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "benchmarks.md"

# name -> the arguments of `python benchmarks/NAME.py` that docs/benchmarks.md records
BENCHMARKS = {
    "cold_start": [],
    "solver": [],
    "batchpad": [],
    "certified": [],
    "time_objective": [],
    "packing_plan": [],
    "memory_plan": [],
    "diversity": [],
}
SECTION = re.compile(r"(<!-- bench: ([\w-]+) -->\n)(.*?)(<!-- /bench -->)", re.S)


def machine() -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"{os.cpu_count()} CPU cores, load average {load:.1f} at the start"


def run(name: str) -> str | None:
    """What the benchmark printed (stdout), framed for the page; None when it failed."""
    argv = [sys.executable, str(ROOT / "benchmarks" / f"{name}.py"), *BENCHMARKS[name]]
    shown = " ".join(["python", f"benchmarks/{name}.py", *BENCHMARKS[name]])
    where = machine()
    start = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, env=env)
    took = time.perf_counter() - start
    if done.returncode != 0:
        sys.stderr.write(f"{shown} exited {done.returncode}:\n{done.stderr[-2000:]}\n")
        return None
    day = datetime.date.today().isoformat()
    return (f"`{shown}`, recorded {day} ({where}; the run took {took:.0f} s):\n\n"
            f"```\n{done.stdout.rstrip()}\n```\n")


def write(results: dict) -> list[str]:
    """Replace the sections named in ``results``; returns the names written."""
    text = PAGE.read_text()
    written = []
    for m in reversed(list(SECTION.finditer(text))):
        name = m.group(2)
        if results.get(name) is not None:
            text = text[:m.start(3)] + results[name] + text[m.end(3):]
            written.append(name)
    PAGE.write_text(text)
    return written


def main(argv: list[str]) -> int:
    if "--list" in argv:
        print("\n".join(BENCHMARKS))
        return 0
    unknown = [a for a in argv if a not in BENCHMARKS]
    if unknown or not argv:
        sys.stderr.write(f"record.py: give benchmark names among {', '.join(BENCHMARKS)}; "
                         f"unknown: {' '.join(unknown) or '(none given)'}\n")
        return 2
    sections = {m.group(2) for m in SECTION.finditer(PAGE.read_text())}
    missing = [a for a in argv if a not in sections]
    if missing:
        sys.stderr.write(f"record.py: docs/benchmarks.md has no section for {', '.join(missing)}\n")
        return 2
    results = {}
    for name in argv:
        print(f"running {name} ...", file=sys.stderr, flush=True)
        results[name] = run(name)
    written = write(results)
    print(f"wrote {', '.join(sorted(written)) or 'nothing'} into {PAGE.relative_to(ROOT)}")
    return 0 if len(written) == len(argv) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
