"""Regenerate the generated sections of README.md and docs/*.md from the commands they show.

A generated section sits between two markers::

    <!-- regen: NAME -->
    ...text written by the generator NAME below...
    <!-- /regen -->

Run from the repository root::

    python docs/regen.py            # rewrite every section
    python docs/regen.py --check    # exit 1 and name the sections that differ
    python docs/regen.py --fast     # only the sections that take a few seconds
    python docs/regen.py --figures  # redraw the pictures the pages show (docs/img/)

tests/test_docs.py runs the whole check in the test suite (so these outputs cannot drift) and
asserts that every marker in the docs names a generator here; docs/examples.py runs every
example of the docs as printed (a generated console transcript is run and compared there too).
Generators marked ``slow`` solve for several seconds; ``--fast`` skips them while editing.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = ("README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")))
SECTION = re.compile(r"(<!-- regen: ([\w-]+) -->\n)(.*?)(<!-- /regen -->)", re.S)
GENERATORS: dict[str, tuple] = {}  # name -> (function, slow)


def generator(name: str, *, slow: bool = False):
    def register(fn):
        GENERATORS[name] = (fn, slow)
        return fn
    return register


def cli(*argv: str, cwd: Path | None = None) -> str:
    """``$ bucketopt ARGS`` and the command's stdout, run in-process (stderr dropped)."""
    from bucketopt.cli import main

    out, here = io.StringIO(), os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            code = main(list(argv))
    finally:
        os.chdir(here)
    if code != 0:
        raise RuntimeError(f"bucketopt {' '.join(argv)} exited {code}")
    return f"$ bucketopt {' '.join(argv)}\n{out.getvalue()}"


def fence(text: str, lang: str = "") -> str:
    return f"```{lang}\n{text.rstrip()}\n```\n"


@functools.lru_cache(maxsize=1)
def lengths():
    from bucketopt.datasets import seed_like

    return seed_like()


def pct(x: float) -> str:
    return f"{100 * x:.2f}%"


# --- README ---------------------------------------------------------------------------------------

@generator("readme-quickstart")
def readme_quickstart() -> str:
    import bucketopt

    sol = bucketopt.solve(lengths(), k=6, token_budget=65536)
    return fence(f"""import bucketopt
from bucketopt.datasets import seed_like

lengths = seed_like()                       # or bucketopt.load_lengths("seq_len.npy")
sol = bucketopt.solve(lengths, k=6, token_budget=65536)
sol.boundaries         # {sol.boundaries}: inclusive upper edges
sol.batch_sizes        # {sol.batch_sizes}: floor(token_budget / edge)
sol.padding_fraction   # {sol.padding_fraction:.4f}
sol.optimality["exact"]  # {sol.optimality["exact"]}

sampler = bucketopt.BucketBatchSampler(lengths, sol.boundaries, token_budget=65536, seed=0)
for epoch in range(2):
    sampler.set_epoch(epoch)   # a fresh shuffle inside every bucket
    for batch in sampler:      # lists of sample indices, one bucket each
        break                  # ... forward, backward, optimizer step""", "python")


@generator("readme-solve")
def readme_solve() -> str:
    return fence(cli("solve", "-k", "6", "--token-budget", "65536"))


@functools.lru_cache(maxsize=1)
def padding_by_k():
    """Expected dynamic padding at T = 65,536 (benchmarks/batchpad.py's table)."""
    import bucketopt
    from bucketopt.heuristics import RULES, rule_of_thumb

    rows = []
    for k in (4, 6, 8, 12):
        batch = bucketopt.solve(lengths(), k, token_budget=65536, pad="batch")
        edge = bucketopt.solve(lengths(), k, token_budget=65536)
        row = [batch.padding_fraction, bucketopt.evaluate(
            lengths(), edge.boundaries, token_budget=65536, pad="batch").padding_fraction]
        for rule in RULES:
            edges = rule_of_thumb(rule, lengths(), k, token_budget=65536)
            row.append(bucketopt.evaluate(lengths(), edges, token_budget=65536,
                                          pad="batch").padding_fraction)
        rows.append((k, row))
    return rows


@generator("dp-batch-table", slow=True)
def dp_batch_table() -> str:
    lines = ["| k | batch-optimal | edge-optimal | pow2 | quantile | lhotse | t2t | linspace |",
             "|---|---|---|---|---|---|---|---|"]
    for k, row in padding_by_k():
        lines.append(f"| {k} | " + " | ".join(map(pct, row)) + " |")
    return "\n".join(lines) + "\n"


@functools.lru_cache(maxsize=1)
def story_comparison():
    """compare() on the embedded example, 8 GPUs of the story profile, 6 epochs, with the
    story's method (dynamic padding, the padding optimum): its batches ran in random order, so
    the bucketed row's simulated figures are the ones to set beside the published ones."""
    from bucketopt.training.compare import compare

    return compare(lengths(), 6, profile="rtx-pro-6000-blackwell", world_size=8, epochs=6,
                   pad="batch", objective="padding")


@functools.lru_cache(maxsize=1)
def default_comparison():
    """``bucketopt compare -k 6 --profile rtx-pro-6000-blackwell --gpus 8 --epochs 6`` on the
    embedded example: every default (edge padding, the time objective, synced ranks)."""
    from bucketopt.training.compare import compare

    return compare(lengths(), 6, pad="batch", profile="rtx-pro-6000-blackwell", world_size=8,
                   epochs=6)


def run_figure(row, key):
    """A row's figure as its run measured it: the simulated one where the row also carries
    solve's synced prediction (bucketopt's plans), else its own."""
    return row.get(key + "_simulated", row.get(key))


@functools.lru_cache(maxsize=1)
def batch_comparison():
    """``bucketopt compare -k 6 --pad batch --profile rtx-pro-6000-blackwell --gpus 8 --epochs 6``
    on the embedded example: dynamic padding, every other default."""
    from bucketopt.training.compare import compare

    return compare(lengths(), 6, pad="batch", profile="rtx-pro-6000-blackwell", world_size=8,
                   epochs=6)


@generator("readme-findings", slow=True)
def readme_findings() -> str:
    """Every bucketing trained the same way (the sampler's synced order, dynamic padding, the
    story profile on 8 GPUs), then compare's other strategies."""
    import bucketopt
    from bucketopt.heuristics import rule_of_thumb
    from bucketopt.show.report import rate_header

    c = batch_comparison()
    budget = c.token_budget
    common = dict(token_budget=budget, pad="batch", profile="rtx-pro-6000-blackwell",
                  world_size=8, epochs=6)
    plans = [("powers of two (the story's first guess, 5 buckets)",
              bucketopt.evaluate(lengths(), (512, 1024, 2048, 4096, 8192), **common))]
    for rule, label in (("quantile", "equal shares (quantiles)"), ("lhotse", "Lhotse's rule")):
        edges = rule_of_thumb(rule, lengths(), 6, token_budget=budget)
        plans.append((label, bucketopt.evaluate(lengths(), edges, **common)))
    plans += [("bucketopt, padding optimum", bucketopt.solve(lengths(), 6, objective="padding",
                                                             **common)),
              ("**bucketopt, time optimum**", bucketopt.solve(lengths(), 6, **common))]
    lines = [f"| buckets (k = 6) | boundaries | padding | {rate_header(8)} | ETA, 6 epochs |",
             "|---|---|---|---|---|"]
    for label, sol in plans:
        edges = ", ".join(map(str, sol.boundaries))
        lines.append(f"| {label} | {edges} | {pct(sol.padding_fraction)} | "
                     f"{sol.ktok_per_s:.1f} | {sol.eta_days:.2f} days |")
    rows = c.strategies
    story = story_comparison().strategies
    published = ", ".join(f"{run_figure(story[name], 'ktok_per_s'):.1f}"
                          for name in ("sorted", "shuffle", "bucketed"))
    return (
        "Dynamic padding under a token budget of "
        f"{budget:,} tokens, every bucketing trained by `BucketBatchSampler` (synced ranks), "
        "Ktok/s and ETA predicted by the shipped profile for 8 GPUs (fitted to the published "
        "run, not measured on a GPU):\n\n" + "\n".join(lines) + "\n\n"
        "Beside them (`bucketopt compare -k 6 --pad batch --profile rtx-pro-6000-blackwell "
        f"--gpus 8 --epochs 6`): sorted batches {rows['sorted']['ktok_per_s']:.1f} Ktok/s (but "
        f"the same batches every epoch), a full shuffle {rows['shuffle']['ktok_per_s']:.1f}, "
        f"packed rows {rows['packed-balanced']['ktok_per_s']:.1f} (varlen attention; compare "
        f"recommends **{c.recommended}** on this data). The published run measured about 32, "
        "12 and 25.1 Ktok/s (sorted, shuffled, its own bucketed run in random batch order); "
        f"the same model predicts {published}.\n")


# --- docs/ ---------------------------------------------------------------------------------------

@generator("packing-answer", slow=True)
def packing_answer() -> str:
    from bucketopt.show.report import rate_header

    c = default_comparison()
    lines = [f"| strategy | assumes | padding | {rate_header(c.timing['world_size'])} | "
             "ETA, 6 epochs | wait | step mix gap | epoch churn | packing efficiency | "
             "attention balance |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    from bucketopt.commands.compare import assumes

    for name in ("sorted", "shuffle", "bucketed", "bucketed-padding", "packed",
                 "packed-balanced", "packed-bucketed"):
        r = c.strategies[name]
        gap = r.get("step_mix_gap")
        churn = r.get("epoch_churn")
        wait = r.get("wait_fraction")
        efficiency = pct(r["packing_efficiency"]) if "packing_efficiency" in r else "-"
        balance = f"{r['attention_balance']:.4f}" if "attention_balance" in r else "-"
        label = f"{name} (bucketopt)" if r["bucketopt"] else name
        lines.append(f"| {label} | {assumes(r['settings'])} | {pct(r['padding_fraction'])} | "
                     f"{r['ktok_per_s']:.1f} | {r['eta_days']:.2f} days | "
                     f"{'-' if wait is None else pct(wait)} | "
                     f"{'-' if gap is None else f'{gap:.3f}'} | "
                     f"{'-' if churn is None else pct(churn)} | {efficiency} | {balance} |")
    levels = ",".join(map(str, c.strategies["packed-bucketed"]["boundaries"]))
    return ("\n".join(lines) + f"\n\npacked-bucketed levels: {levels}. Recommended (the "
            "fastest with a step mix at least as diverse as the full shuffle): "
            f"**{c.recommended}**.\n")


@generator("dp-compare")
def dp_compare() -> str:
    return fence(cli("compare", "-k", "6", "--token-budget", "65536", "--pad", "batch"))


@functools.lru_cache(maxsize=1)
def index_folder() -> Path:
    """A folder holding docs/index.md's train.parquet (step 0 writes the embedded example)."""
    import atexit

    import pyarrow as pa
    import pyarrow.parquet as pq

    tmp = tempfile.TemporaryDirectory()
    atexit.register(tmp.cleanup)
    data = lengths()
    pq.write_table(pa.table({"sample_id": range(len(data)), "seq_len": data}),
                   Path(tmp.name) / "train.parquet")
    return Path(tmp.name)


@generator("index-inspect")
def index_inspect() -> str:
    return fence(cli("inspect", "train.parquet", "-q", cwd=index_folder()))


@generator("index-sweep")
def index_sweep() -> str:
    return fence(cli("sweep", "--lens", "train.parquet", "-k", "1:16", "--token-budget", "65536",
                     "--plot", "sweep.png", cwd=index_folder()))


@generator("index-solve")
def index_solve() -> str:
    return fence(cli("solve", "--lens", "train.parquet", "-k", "6", "--token-budget", "65536",
                     "--plot", "buckets.png", cwd=index_folder()))


# --- the driver ----------------------------------------------------------------------------------

def sections(page: str):
    text = (ROOT / page).read_text()
    return text, list(SECTION.finditer(text))


def regenerate(*, check: bool, fast: bool = False, only=None) -> list[str]:
    """Rewrite (or, with ``check``, compare) every section; returns the names that differ."""
    differ = []
    for page in PAGES:
        text, found = sections(page)
        new = text
        for m in reversed(found):
            name = m.group(2)
            if name not in GENERATORS:
                raise SystemExit(f"{page}: no generator named {name!r} in docs/regen.py")
            fn, slow = GENERATORS[name]
            if (fast and slow) or (only and name not in only):
                continue
            body = fn()
            if body != m.group(3):
                differ.append(f"{page}: {name}")
                new = new[:m.start(3)] + body + new[m.end(3):]
        if new != text and not check:
            (ROOT / page).write_text(new)
    return differ


FIGURES = {"docs/img/buckets.png": "readme_picture"}


def readme_picture(path: Path) -> None:
    """README's picture: the embedded example's histogram with the k = 6 edges."""
    import bucketopt
    from bucketopt.show.plots import plot_histogram, save_figure

    sol = bucketopt.solve(lengths(), 6, token_budget=65536)
    ax = plot_histogram(lengths(), sol)
    ax.set_title("embedded example: 902,087 lengths, bucketopt k = 6 (edge padding, "
                 "T = 65,536)")
    save_figure(ax, path)


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if "--figures" in args:  # the pictures the pages show (binary: not part of --check)
        for path, name in FIGURES.items():
            globals()[name](ROOT / path)
            print(f"wrote {path}")
        return 0
    differ = regenerate(check="--check" in args, fast="--fast" in args)
    for name in differ:
        print(("differs: " if "--check" in args else "rewrote: ") + name)
    return 1 if differ and "--check" in args else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
