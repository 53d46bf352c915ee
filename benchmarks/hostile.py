"""Throw generated hostile inputs at the CLI and the API, each in its own process.

    python benchmarks/hostile.py                 # every case (about 20-40 min on 2 cores)
    python benchmarks/hostile.py --quick 80      # a spread-out subset of 80 cases
    python benchmarks/hostile.py --match profile --jobs 2 --show-failures

Every case runs in a fresh folder, in its own process, under a 60 s timeout and a 4 GiB address-
space limit (RLIMIT_AS); its peak RSS is read from ``os.wait4``. Outcomes:

- clean error: exit 2 and one stderr line ``bucketopt: error: ...`` (the CLI) or one line of
  BucketoptError (the API), where an error is expected;
- accepted: exit 0 where success is expected (and the case's own check of the answer passed);
- traceback: any other exception, any other exit code, or an error message of several lines;
- hang: the 60 s timeout;
- peak > 1.5 GB: the process's peak RSS, whatever its exit;
- silent: exit 0 where an error is expected, or a wrong answer;
- half-written: a failed run left its output file changed (it must stay whole or absent) or a
  temporary file behind;
- refused valid: a clean error where success is expected.

The case list (:mod:`_hostile_cases`) says what each input should give.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from _hostile_cases import Case, all_cases  # noqa: E402

TIMEOUT = 60.0
MEMORY_LIMIT = 4 << 30
RSS_LIMIT = 1.5e9
OLD = b"OLD CONTENT\n"
OUTCOMES = ("clean error", "accepted", "traceback", "hang", "peak > 1.5 GB", "silent",
            "half-written", "refused valid")
# the snippet around a Python case: a BucketoptError is one line on stderr and exit 2
WRAP = """\
import sys
from bucketopt.errors import BucketoptError
try:
{body}
except BucketoptError as exc:
    text = str(exc)
    sys.stderr.write("bucketopt: error: " + text + "\\n")
    sys.exit(2 if "\\n" not in text and len(text) < 2000 else 3)
"""


def _prepare(case: Case, folder: str) -> None:
    for name, maker in case.files.items():
        if maker is not None and not os.path.isabs(name):
            maker(os.path.join(folder, name))
    if case.output:
        path = os.path.join(folder, case.output)
        if os.path.isdir(os.path.dirname(path)) and not os.path.exists(path):
            with open(path, "wb") as fh:
                fh.write(OLD)
        if os.path.isfile(path):  # what a failed run must leave there
            with open(path, "rb") as fh:
                case.before = fh.read()
    for name, mode in case.chmod.items():
        os.chmod(os.path.join(folder, name), mode)


def _limits(fsize, close_stdout):
    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        if close_stdout:
            os.close(1)
        os.setsid()
    return apply


def _command(case: Case) -> list[str]:
    if case.code is not None:
        body = "\n".join("    " + line for line in case.code.splitlines())
        argv = [sys.executable, "-c", WRAP.format(body=body)]
    else:
        argv = [sys.executable, "-m", "bucketopt", *case.argv]
    if case.nopriv and shutil.which("setpriv"):
        argv = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", *argv]
    return argv


def run_case(case: Case) -> dict:
    folder = tempfile.mkdtemp(prefix="hostile-")
    try:
        _prepare(case, folder)
        before = set(_listing(folder))
        env = {**os.environ, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": "1",
               "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "2",
               "PYTHONDONTWRITEBYTECODE": "1"}
        env.update({k: v.replace("{folder}", folder) for k, v in case.env.items()})
        stdin = subprocess.DEVNULL
        if case.stdin is not None:  # a file outside the case's folder: no leftover of ours
            stdin = tempfile.TemporaryFile()  # noqa: SIM115 (closed below)
            stdin.write(case.stdin)
            stdin.seek(0)
        stdout_file = None
        if case.stdout == "devfull":
            stdout = open("/dev/full", "wb")  # noqa: SIM115 (closed below)
        elif case.stdout == "closed":
            stdout = None
        elif case.stdout == "file":
            stdout_file = os.path.join(folder, ".stdout")
            stdout = open(stdout_file, "wb")  # noqa: SIM115 (closed below)
        else:
            stdout = subprocess.PIPE
        start = time.monotonic()
        proc = subprocess.Popen(
            _command(case), cwd=folder, env=env, stdin=stdin,
            stdout=stdout if stdout is not None else subprocess.DEVNULL,
            stderr=subprocess.PIPE, preexec_fn=_limits(case.fsize, case.stdout == "closed"))
        out, err, status, rusage, hung = _wait(proc, case)
        elapsed = time.monotonic() - start
        if stdout not in (None, subprocess.PIPE):
            stdout.close()
        if stdin is not subprocess.DEVNULL:
            stdin.close()
        result = {"case": case, "elapsed": elapsed, "rss": rusage.ru_maxrss * 1024.0,
                  "stdout": out, "stderr": err, "hung": hung, "status": status}
        result["outcome"] = classify(case, result, folder, before)
        return result
    finally:
        for root, dirs, _ in os.walk(folder):
            for d in dirs:
                with contextlib.suppress(OSError):
                    os.chmod(os.path.join(root, d), 0o755)
        with contextlib.suppress(OSError):
            os.chmod(folder, 0o755)
        shutil.rmtree(folder, ignore_errors=True)


def _wait(proc, case):
    """(stdout, stderr, wait status, rusage, hung) with the timeout and the Ctrl-C of a case."""
    import threading

    chunks = {"out": [], "err": []}

    def drain(stream, key):
        if stream is not None:
            for block in iter(lambda: stream.read(65536), b""):
                if sum(map(len, chunks[key])) < (1 << 20):
                    chunks[key].append(block)

    threads = [threading.Thread(target=drain, args=(proc.stdout, "out"), daemon=True),
               threading.Thread(target=drain, args=(proc.stderr, "err"), daemon=True)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + TIMEOUT
    interrupt_at = None if case.interrupt is None else time.monotonic() + case.interrupt
    hung = False
    while True:
        pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        now = time.monotonic()
        if interrupt_at is not None and now >= interrupt_at:
            os.kill(proc.pid, getattr(signal, case.signal))
            interrupt_at = None
        if now > deadline:
            hung = True
            os.killpg(proc.pid, signal.SIGKILL)
            pid, status, rusage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.02)
    proc.returncode = 0  # reaped here; keep Popen from waiting again
    for t in threads:
        t.join(5)
    return (b"".join(chunks["out"]).decode("utf-8", "replace"),
            b"".join(chunks["err"]).decode("utf-8", "replace"), status, rusage, hung)


def _listing(folder):
    for root, _dirs, files in os.walk(folder):
        for name in files:
            yield os.path.relpath(os.path.join(root, name), folder)


def classify(case: Case, result: dict, folder: str, before: set) -> str:
    if result["hung"]:
        return "hang"
    if result["rss"] > RSS_LIMIT:
        return "peak > 1.5 GB"
    status = result["status"]
    code = os.waitstatus_to_exitcode(status)
    lines = [line for line in result["stderr"].splitlines() if line.strip()]
    error_lines = [line for line in lines if line.startswith("bucketopt: error: ")]
    if case.expect == "interrupt":
        if case.output and _changed(folder, case.output, getattr(case, "before", None)):
            return "half-written"
        if _leftovers(folder, before):
            return "half-written"
        sig = getattr(signal, case.signal)
        if code in (128 + sig, -sig) and "Traceback" not in result["stderr"] and len(lines) <= 1:
            return "clean error"
        if code == 0 and "Traceback" not in result["stderr"]:
            return "accepted"  # finished before the signal came
        return "traceback"
    if "Traceback (most recent call last)" in result["stderr"] or code not in (0, 2):
        if "AssertionError" in result["stderr"] and case.expect == "ok":
            return "silent"  # a wrong answer
        return "traceback"
    if code == 2:
        clean = len(error_lines) == 1 and (len(lines) == 1 or _notes_only(lines))
        if not clean:
            return "traceback"
        if case.output and _changed(folder, case.output, getattr(case, "before", None)):
            return "half-written"
        if _leftovers(folder, before):
            return "half-written"
        return "clean error" if case.expect == "error" else "refused valid"
    # exit 0
    if case.expect == "error":
        return "silent"
    if case.check is not None and not case.check(result["stdout"]):
        return "silent"
    return "accepted"


def _notes_only(lines) -> bool:
    """Notes for people before the error line (--quiet was not given): still one error."""
    return lines[-1].startswith("bucketopt: error: ") and not any(
        line.startswith(("Traceback", "  File ")) for line in lines)


def _changed(folder: str, name: str, before: bytes | None) -> bool:
    path = os.path.join(folder, name)
    if not os.path.exists(path) or os.path.isdir(path):
        return False
    try:
        with open(path, "rb") as fh:
            return fh.read() != before and not _whole(path)
    except OSError:
        return False


def _whole(path: str) -> bool:
    """A complete file of the output's kind (a successful write is allowed)."""
    import json

    with open(path, "rb") as fh:
        data = fh.read()
    if path.endswith(".json"):
        try:
            json.loads(data)
            return True
        except ValueError:
            return False
    if path.endswith(".png"):
        return data.startswith(b"\x89PNG\r\n\x1a\n") and data.endswith(b"IEND\xaeB`\x82")
    if path.endswith(".pdf"):
        return data.startswith(b"%PDF") and data.rstrip().endswith(b"%%EOF")
    if path.endswith(".svg"):
        return data.rstrip().endswith(b"</svg>")
    return False


def _leftovers(folder: str, before: set) -> bool:
    return any(name.endswith(".tmp") for name in set(_listing(folder)) - before)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", type=int, metavar="N", help="run N cases spread over the list")
    parser.add_argument("--match", help="only cases whose name or class holds this text")
    parser.add_argument("--jobs", type=int, default=1, help="cases run at once (default 1)")
    parser.add_argument("--show-failures", action="store_true",
                        help="print the stderr of every case that is not a clean error or "
                             "an acceptance")
    args = parser.parse_args(argv)
    cases = all_cases()
    if args.match:
        cases = [c for c in cases if args.match in c.name or args.match in c.group]
    if args.quick:
        step = max(1, len(cases) // args.quick)
        cases = cases[::step][: args.quick]
    print(f"{len(cases)} cases; each in its own process, {TIMEOUT:.0f} s timeout, "
          f"{MEMORY_LIMIT >> 30} GiB address-space limit", flush=True)
    start = time.monotonic()
    results = []
    if args.jobs > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(args.jobs) as pool:
            for i, res in enumerate(pool.map(run_case, cases), 1):
                results.append(res)
                _progress(i, len(cases), res)
    else:
        for i, case in enumerate(cases, 1):
            res = run_case(case)
            results.append(res)
            _progress(i, len(cases), res)
    print()
    report(results, time.monotonic() - start, args.show_failures)
    bad = sum(1 for r in results if r["outcome"] not in ("clean error", "accepted"))
    return 1 if bad else 0


def _progress(i, total, res):
    if res["outcome"] not in ("clean error", "accepted"):
        print(f"\n[{i}/{total}] {res['outcome']}: {res['case'].name}", flush=True)
    elif i % 25 == 0:
        print(f"[{i}/{total}]", end=" ", flush=True)


def report(results, seconds, show):
    counts = collections.Counter(r["outcome"] for r in results)
    by_group = collections.defaultdict(collections.Counter)
    for r in results:
        by_group[r["case"].group][r["outcome"]] += 1
    peak = max((r["rss"] for r in results), default=0.0)
    slowest = max(results, key=lambda r: r["elapsed"]) if results else None
    print(f"{len(results)} inputs in {seconds / 60:.1f} min; highest peak RSS "
          f"{peak / 1e6:,.0f} MB; slowest {slowest['elapsed']:.1f} s ({slowest['case'].name})"
          if results else "no inputs")
    print()
    width = max([len(g) for g in by_group] + [8])
    short = ("clean", "accepted", "traceback", "hang", ">1.5GB", "silent", "half", "refused")
    print(f"{'class'.ljust(width)}  " + "  ".join(f"{s:>9}" for s in short))
    for group in sorted(by_group):
        row = by_group[group]
        print(f"{group.ljust(width)}  " + "  ".join(f"{row[o]:>9}" for o in OUTCOMES))
    print(f"{'total'.ljust(width)}  " + "  ".join(f"{counts[o]:>9}" for o in OUTCOMES))
    if show:
        for r in results:
            if r["outcome"] not in ("clean error", "accepted"):
                tail = (r["stderr"].strip().splitlines() or [""])[-3:]
                print(f"\n--- {r['outcome']}: {r['case'].name} "
                      f"(exit {os.waitstatus_to_exitcode(r['status'])}, "
                      f"{r['rss'] / 1e6:.0f} MB, {r['elapsed']:.1f} s)")
                print("\n".join(tail)[:1500])


if __name__ == "__main__":
    sys.exit(main())
