"""The time objective on the story (edge padding, k = 6, shipped profile, 8 GPUs, 6 epochs):
the table of docs/cost_model.md.

    python benchmarks/time_story.py
"""

from __future__ import annotations

import time

import bucketopt
from bucketopt.datasets import seed_like

PROFILE = "rtx-pro-6000-blackwell"


def main():
    lengths = seed_like()
    print("| objective | boundaries | padding | Ktok/s synced | Ktok/s random order | ETA synced "
          "| solve time |")
    print("|---|---|---|---|---|---|---|")
    for label, kw in (("padding", dict(objective="padding")),
                      ("time (default with a profile: synced)", dict()),
                      ("time, sync_buckets=False", dict(sync_buckets=False))):
        start = time.perf_counter()
        sol = bucketopt.solve(lengths, 6, profile=PROFILE, world_size=None, epochs=6, **kw)
        seconds = time.perf_counter() - start
        synced, shuffled = (bucketopt.evaluate(lengths, sol.boundaries, profile=PROFILE,
                                               world_size=None, epochs=6, sync_buckets=sync)
                            for sync in (True, False))
        print(f"| {label} | {', '.join(map(str, sol.boundaries))} | "
              f"{sol.padding_fraction * 100:.2f}% | {synced.ktok_per_s:.2f} | "
              f"{shuffled.ktok_per_s:.2f} | {synced.eta_days:.2f} d | {seconds:.1f} s |")


if __name__ == "__main__":
    main()
