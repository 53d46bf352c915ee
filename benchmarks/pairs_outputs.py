"""Every output of a matrix of 2-D solves as canonical JSON lines: the record that a change to
the 2-D kernels (bucketopt.pairs.hierarchical_dp, sub_buckets, bin_costs) or to the order
statistics they read leaves the plans identical.

    PYTHONPATH=/path/to/before python benchmarks/pairs_outputs.py --out before.jsonl
    PYTHONPATH=/path/to/after python benchmarks/pairs_outputs.py --out after.jsonl
    cmp before.jsonl after.jsonl && echo identical

The matrix: the three paired shapes of bucketopt.pairs.synthetic, three seeds, 400 / 1,500 /
3,000 pairs coarsened to tens of distinct lengths a dimension; edge and dynamic padding at
k = 1, 3, 8 and on 2 x 3 and 3 x 2 grids (token budget three times the widest pair), k = 5
under a budget a few tokens over the widest pair, and the exact time objective (k = 4,
encdec-example) on the two smaller sizes. Each line is a case and its solution's ``to_dict()``
(bins, padding figures, batch sizes, optimality certificate), floats at full precision, keys
sorted. Takes a few minutes warm.
"""

from __future__ import annotations

import argparse
import json
import sys

import bucketopt
from bucketopt.data.output import write_text
from bucketopt.pairs.synthetic import SHAPES, paired_lengths

PLANS = ({"k": 1}, {"k": 3}, {"k": 8}, {"k": None, "grid": (2, 3)}, {"k": None, "grid": (3, 2)})
SIZES = ((400, (8, 4)), (1500, (6, 3)), (3000, (4, 2)))


def cases():
    """(name, solve) for every case of the matrix."""
    for shape in SHAPES:
        for seed in (0, 1, 2):
            for n, div in SIZES:
                pairs = paired_lengths(shape, n, seed=seed) // list(div) + 1
                widest = int(pairs.sum(axis=1).max())
                for pad in ("edge", "batch"):
                    for plan in PLANS:
                        kw = dict(plan)
                        k = kw.pop("k")
                        yield (repr({"shape": shape, "seed": seed, "n": n, "pad": pad, "k": k,
                                     **kw}),
                               lambda p=pairs, k=k, kw=kw, pad=pad, b=3 * widest: bucketopt.solve(
                                   p, k, pad=pad, token_budget=b, **kw))
                    yield (f"tight {shape} {seed} {n} {pad}",
                           lambda p=pairs, pad=pad, b=widest + 7: bucketopt.solve(
                               p, 5, pad=pad, token_budget=b))
                if n <= 1500:
                    yield (f"time {shape} {seed} {n}",
                           lambda p=pairs, b=3 * widest: bucketopt.solve(
                               p, 4, token_budget=b, profile="encdec-example", exact=True))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="the JSON-lines file")
    args = parser.parse_args(argv)
    lines = [json.dumps({"case": name, "sol": solve().to_dict()}, sort_keys=True)
             for name, solve in cases()]
    write_text(args.out, "\n".join(lines) + "\n")
    print(f"{len(lines)} cases to {args.out} ({bucketopt.__file__})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
