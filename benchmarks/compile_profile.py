"""Where a first run's compile time goes: one CLI command, with numba's compile events timed.

Run it with an empty cache of its own, or nothing compiles::

    rm -rf /tmp/c && NUMBA_CACHE_DIR=/tmp/c python benchmarks/compile_profile.py \\
        solve -k 6 --token-budget 65536 --pad batch -q > /dev/null

It prints on stderr, per compiled function (bucketopt's kernels and numba's own helpers), the CPU
seconds of its compile without and with the compiles it started, and how many signatures it
compiled: a kernel compiled more than once was called with other types (a literal constant, a
read-only or non-contiguous array, an omitted default), each a compile of its own. Then numba's
helpers by the kernels that pulled them in (np.sort, np.unique, slice assignments, ...).
CPU seconds (``time.process_time``): steady on a shared machine, where wall seconds are not.
"""

from __future__ import annotations

import collections
import sys
import time

from numba.core import event

OWN = collections.defaultdict(float)
WITH = collections.defaultdict(float)
SIGS = collections.defaultdict(list)
BY = collections.defaultdict(collections.Counter)
_STACK = []


def _name(ev):
    func = ev.data["dispatcher"].py_func
    return f"{func.__module__}.{func.__qualname__}"


class _Timer(event.Listener):
    def on_start(self, ev):
        _STACK.append([time.process_time(), 0.0, _name(ev)])

    def on_end(self, ev):
        start, inner, name = _STACK.pop()
        took = time.process_time() - start
        OWN[name] += took - inner
        WITH[name] += took
        SIGS[name].append(str(ev.data["args"]))
        if _STACK:
            _STACK[-1][1] += took
            if not name.startswith("bucketopt."):
                BY[name][_STACK[-1][2]] += 1


def main(argv) -> int:
    event.register("numba:compile", _Timer())
    start = time.process_time()
    from bucketopt.cli import main as cli

    code = cli(argv)
    err = sys.stderr
    print(f"{time.process_time() - start:.2f} CPU s in all, {sum(OWN.values()):.2f} compiling "
          f"{len(OWN)} functions", file=err)
    print("   own   with  sigs  function", file=err)
    for name in sorted(OWN, key=OWN.get, reverse=True)[:40]:
        print(f"{OWN[name]:6.2f} {WITH[name]:6.2f} {len(SIGS[name]):5d}  {name}", file=err)
    twice = [n for n in SIGS if n.startswith("bucketopt.") and len(SIGS[n]) > 1]
    for name in twice:
        print(f"\n{name} compiled {len(SIGS[name])} times:", file=err)
        for sig in SIGS[name]:
            print(f"    {sig[:300]}", file=err)
    print("\nnumba's helpers, by the kernels that pulled them in:", file=err)
    for name in sorted(BY, key=WITH.get, reverse=True)[:15]:
        print(f"{WITH[name]:6.2f}  {name} <- {dict(BY[name])}", file=err)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
