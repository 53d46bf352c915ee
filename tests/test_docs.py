"""The docs match the code: every generated section of README.md and docs/ is what docs/regen.py
writes today (``python docs/regen.py`` rewrites them), and every example of the docs runs as
printed and prints what the docs show (docs/examples.py), on a CPU, offline, within a memory
ceiling: the few that cannot are named below with the reason, and their pages say so."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "docs"))
import examples  # noqa: E402
import regen  # noqa: E402

# The examples the suite cannot run: the network, a GPU, the reader's own data or cluster.
# Each page says so next to the block.
SKIP = {
    "README.md > bucketopt #1":
        "pip install fetches the dependencies from the network; the second line is this suite",
    "docs/index.md > 0. Install, and a Parquet file #1":
        "pip install fetches the dependencies from the network",
    "docs/trainer.md > Training with the Hugging Face Trainer: `BucketedTrainer` #1":
        "pip install fetches torch and transformers from the network",
    "docs/trainer.md > On a real small model (downloads from the Hugging Face Hub) #1":
        "downloads SmolLM2-135M and TinyStories from the Hugging Face Hub, and bf16 wants a GPU "
        "(the offline tiny-Llama variant after it runs the same trainer)",
    "docs/trainer.md > TRL's `SFTTrainer`, and any other Trainer subclass #1":
        "continues the Hub example (its model, tokenizer, data) with the reader's SFTConfig; "
        "tests/test_trainer.py runs bucketed(SFTTrainer)",
    "docs/cost_model.md > Calibrating on your own measurements #1":
        "needs the reader's measured step times (steps.csv)",
    "docs/cost_model.md > `bucketopt probe`: time your own model #1":
        "needs a CUDA GPU and the reader's model; tests/test_probe.py probes a tiny CPU model",
    "docs/cost_model.md > `bucketopt probe`: time your own model #2":
        "needs a CUDA GPU and the reader's model; tests/test_probe.py probes a tiny CPU model",
    "docs/cost_model.md > Logs as measurements: `bucketopt.cost.steptimer` #1":
        "a piece of the reader's training loop (loader, model, optimizer); "
        "tests/test_steptimer.py runs it",
    "docs/cost_model.md > Logs as measurements: `bucketopt.cost.steptimer` #2":
        "a piece of the reader's Trainer call; tests/test_steptimer.py runs the callback",
    "docs/ingest.md > Dask, for data too large for one machine #1":
        "needs the reader's Dask cluster (scheduler:8786) and data; tests/test_io.py runs the "
        "helper on a LocalCluster",
    "docs/sampler.md > The sampler: `BucketBatchSampler` #1": "a signature, not a program",
    "docs/scale.md > 1. The histogram, on your engine #1":
        "runs on the reader's data/ with Dask; tests/test_io.py runs the helper",
    "docs/scale.md > 1. The histogram, on your engine #2":
        "needs Spark (and Java 17) and the reader's data/",
    "docs/scale.md > 2. The rest, on the histogram #1":
        "needs the hist.csv one of the engines above writes",
    "docs/streaming.md > Streamed data: planning on a sample, batching online #1":
        "a sketch on the reader's stream and job (stream, rank, world_size, epochs); "
        "tests/test_streaming.py runs these calls",
    "docs/streaming.md > 3. Resuming a pass mid-epoch #1":
        "a sketch on the reader's checkpoint and job (batches, stream, new_world_size); "
        "tests/test_streaming.py kills and resumes streamed epochs",
}
ALL_EXAMPLES = [b.name for page in examples.PAGES for b in examples.blocks(page)]
TOTAL_TIMEOUT_S = 600  # every page, one process: about 45 s on a shared 2-core machine


# --- generated sections ----------------------------------------------------------------------

def test_every_section_names_a_generator_and_closes():
    seen = set()
    for page in regen.PAGES:
        text = (ROOT / page).read_text()
        opened = re.findall(r"<!-- regen: ([\w-]+) -->", text)
        assert len(opened) == text.count("<!-- /regen -->"), page
        assert len(opened) == len(regen.sections(page)[1]), page
        for name in opened:
            assert name in regen.GENERATORS, (page, name)
        seen.update(opened)
    assert seen == set(regen.GENERATORS), set(regen.GENERATORS) - seen  # none unused


def test_every_section_is_current():
    differ = regen.regenerate(check=True)  # about 25 s: the slow tables included
    assert not differ, f"stale docs (run python docs/regen.py): {differ}"


# --- every example, run -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """Every page's examples, run once in a fresh process: {name: result}, and its stderr."""
    report = tmp_path_factory.mktemp("examples") / "report.jsonl"
    argv = [sys.executable, str(ROOT / "docs" / "examples.py"), "--report", str(report)]
    for name in SKIP:
        argv += ["--skip", name]
    try:
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True,
                              timeout=TOTAL_TIMEOUT_S)
        stderr = done.stderr
    except subprocess.TimeoutExpired as exc:
        stderr = f"the examples ran past {TOTAL_TIMEOUT_S} s\n{exc.stderr or ''}"
    results = {}
    if report.exists():
        for line in report.read_text().splitlines():
            row = json.loads(line)
            results[row.pop("name")] = row
    return results, stderr


@pytest.mark.parametrize("name", ALL_EXAMPLES)
def test_doc_example_runs_as_printed(ran, name):
    if name in SKIP:
        pytest.skip(SKIP[name])
    results, stderr = ran
    result = results.get(name)
    assert result is not None, f"{name} did not finish (memory ceiling, timeout or crash):\n" \
                               + stderr[-3000:]
    if result.get("skipped"):
        pytest.skip(result["reason"])
    assert result["ok"], f"{name}:\n{result['error']}"


def test_every_skipped_example_exists_and_the_rest_is_most():
    stale = set(SKIP) - set(ALL_EXAMPLES)
    assert not stale, f"no such examples (renamed?): {stale}"
    assert len(ALL_EXAMPLES) - len(SKIP) >= 20  # most of the docs' examples run


def test_the_run_compares_output_where_the_docs_show_it(ran):
    results, _ = ran
    compared = {name for name, r in results.items() if r.get("compared")}
    for name in ("README.md > Quick start #1", "README.md > Quick start #2",
                 "docs/index.md > 3. Solve, and see the buckets on the histogram #1",
                 "docs/ingest.md > Reading lengths where they live #2",
                 "docs/trainer.md > Offline: a tiny Llama from a config #1"):
        if results.get(name, {}).get("skipped"):  # an optional package it needs is missing
            continue
        assert name in compared, name


def _run_examples(page, *extra):
    """docs/examples.py on one page, in a fresh process: ({name: result}, the process)."""
    report = page.parent / "report.jsonl"
    done = subprocess.run([sys.executable, str(ROOT / "docs" / "examples.py"), str(page),
                           "--report", str(report), *extra], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    rows = [json.loads(line) for line in report.read_text().splitlines()] \
        if report.exists() else []
    return {row.pop("name").split(" > ")[1]: row for row in rows}, done


def test_the_checker_catches_what_differs(tmp_path):
    """docs/examples.py itself: a wrong value, a wrong line and a missing extra are caught."""
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n```python\nx = (1013, 1628)\nx  # (1013, 1628): edges\nx  # (1013, 9999)\n"
        "0.18066  # 0.1807\n0.1812  # 0.1807\n12.19, 10.74  # ~12.2, ~10.7\n"
        "'a; 3 files'  # \"a; 3 files\"\n'a'  # \"a; 3 files\"\n352462638.5713  # 352462638.57...\n"
        "{'b': [1, 2]}  # {'b': [...]}\nprint('prose')  # a comment in words\n```\n\n"
        "## Shell\n\n```\n$ bucketopt --version\n...\n```\n\n```\n$ bucketopt --version\nno\n"
        "```\n\n## Extras\n\n```python\nimport no_such_extra_module_xyz\n```\n\n```python\n"
        "1  # 2\n```\n")
    results, _ = _run_examples(page)
    assert list(results) == ["Page #1", "Shell #1", "Shell #2", "Extras #1", "Extras #2"]
    values = results["Page #1"]
    assert not values["ok"] and values["compared"] == 9
    wrong = re.findall(r"line (\d+):", values["error"])
    assert wrong == ["3", "5", "8"], values["error"]  # (1013, 9999), 0.1812, 'a'
    assert results["Shell #1"]["ok"]
    assert "the doc shows 'no'" in results["Shell #2"]["error"]
    assert results["Extras #1"]["skipped"]  # an extra that is not installed ...
    assert results["Extras #2"]["skipped"]  # ... skips the rest of its page



def test_a_command_refused_for_a_missing_extra_skips_its_page(tmp_path):
    """A shell command that exits 2 with the CLI's line for an optional package it needs
    (``probe needs torch, which is not installed``) skips, with the rest of its page, as a python
    block that cannot import one does; the same line naming a required package fails."""
    page = tmp_path / "page.md"
    refuse = ("python -c \"import sys; sys.stderr.write('x needs {}, which is not installed\\n'); "
              "sys.exit(2)\"")
    page.write_text(f"# Extra\n\n```bash\n{refuse.format('no_such_extra_xyz')}\n```\n\n"
                    "```python\n1  # 2\n```\n")
    results, _ = _run_examples(page)
    assert results["Extra #1"]["skipped"] and results["Extra #2"]["skipped"]
    page.write_text(f"# Required\n\n```bash\n{refuse.format('numpy')}\n```\n")
    (page.parent / "report.jsonl").unlink()
    results, _ = _run_examples(page)
    assert "exited 2" in results["Required #1"]["error"]

def test_the_memory_ceiling_stops_a_hog(tmp_path):
    page = tmp_path / "hog.md"
    page.write_text("# Hog\n\n```python\nhog = bytearray(400 * 2**20)\nhog[::4096] = "
                    "b'x' * len(hog[::4096])\nimport time\ntime.sleep(2)\n```\n\n"
                    "# After\n\n```python\n1\n```\n")
    results, done = _run_examples(page, "--ceiling-mib", "300")
    assert done.returncode == 3 and "hog.md > Hog #1: RSS" in done.stderr, done.stderr
    assert results == {}  # nothing after it ran


@pytest.mark.parametrize("comment, shown", [
    ("# (1013, 1628, 2340): inclusive upper edges", ("literal", (1013, 1628, 2340))),
    ("# one draw of the same random quantity", None),
    ("# the Solution for the recommended k", None),
    ("# 10 batches the loop consumed", None),
])
def test_which_comments_show_a_value(comment, shown):
    assert examples.shown_value(comment) == shown


# --- the names and messages the docs show -----------------------------------------------------

CODE_NAME = re.compile(r"`([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+)`")


def _resolve(dotted):
    """The object a dotted name under the package names (``objectives.certified.polish``):
    the longest prefix that imports as a module, then an attribute for each part left."""
    import importlib

    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)  # AttributeError: the docs name something that is gone
        return obj
    raise ModuleNotFoundError(dotted)


def _code_names(text):
    """Every dotted name in a *Code:* paragraph of ``text`` (a paragraph that starts with
    "Code:", up to the next blank line)."""
    names = []
    for paragraph in re.split(r"\n\s*\n", text):
        if paragraph.strip().startswith("Code:"):
            names += CODE_NAME.findall(paragraph)
    return names


def test_method_names_the_code_of_each_step():
    """docs/method.md: every section past the definitions says where its step is implemented,
    the certified DP's entry points among them, and every name it gives exists."""
    text = (ROOT / "docs" / "method.md").read_text()
    sections = re.split(r"^## ", text, flags=re.M)[1:]
    for section in sections:
        title = section.splitlines()[0]
        if title in ("Conventions", "Objectives"):
            continue
        assert _code_names(section), f"method.md, section {title!r}: no Code: line"
    names = _code_names(text)
    for entry in ("certified_layers", "relaxed_layers", "backward_pass", "forward_layer"):
        assert any(name.endswith("." + entry) for name in names), entry
    for name in sorted(set(names)):
        try:
            _resolve("bucketopt." + name)
        except (ImportError, AttributeError) as exc:
            raise AssertionError(f"method.md names `{name}`, which does not exist: {exc}") from exc


def test_architecture_names_only_what_exists():
    text = (ROOT / "docs" / "architecture.md").read_text()
    names = sorted({n for n in CODE_NAME.findall(text) if n.startswith("bucketopt.")})
    assert len(names) >= 30, names  # the page walks the code by its names
    for name in names:
        try:
            _resolve(name)
        except (ImportError, AttributeError) as exc:
            raise AssertionError(f"architecture.md names `{name}`, which does not exist: "
                                 f"{exc}") from exc


def test_the_name_check_catches_a_stale_name():
    assert _resolve("bucketopt.objectives.certified.certified_layers") is not None
    assert _code_names("Code: `a.b` and `c`.\n\nNot code: `d.e`.") == ["a.b"]
    with pytest.raises(AttributeError):
        _resolve("bucketopt.objectives.certified.no_such_function")
    with pytest.raises(AttributeError):
        _resolve("bucketopt.no_such_module.f")


def test_solution_carries_the_intervals_the_docs_name():
    import bucketopt

    sol = bucketopt.solve([100, 200, 300, 400] * 50, 2, token_budget=800,
                          profile="rtx-pro-6000-blackwell", world_size=8)
    data = sol.to_dict()
    assert sol.ktok_per_s_interval == tuple(data["ktok_per_s_interval"])
    assert sol.eta_days_interval == tuple(data["eta_days_interval"])
    low, high = sol.eta_days_interval
    assert low <= sol.eta_days <= high and low < high  # the shipped profile's sets differ
    plain = bucketopt.solve([100, 200, 300, 400], 2)
    assert plain.ktok_per_s_interval is None and plain.eta_days_interval is None


def test_the_lhotse_note_reads_as_a_sentence(monkeypatch, capsys, tmp_path):
    import bucketopt.show.export as ex
    from bucketopt.cli import main

    monkeypatch.setattr(ex, "installed_lhotse_version", lambda: None)
    note = ex.lhotse_target()
    assert "Lhotse no Lhotse" not in note and note.endswith("no Lhotse installed, so the "
                                                            "current rule")
    assert ex.lhotse_target("1.26.0").endswith("; Lhotse 1.26.0 given")
    monkeypatch.setattr(ex, "installed_lhotse_version", lambda: "1.33.0")
    assert ex.lhotse_target().endswith("; Lhotse 1.33.0 installed")
    monkeypatch.setattr(ex, "installed_lhotse_version", lambda: None)
    lens = tmp_path / "lens.txt"
    lens.write_text("\n".join(map(str, range(1, 200))) + "\n")
    assert main(["export", "--lens", str(lens), "-k", "3", "-f", "lhotse"]) == 0
    err = capsys.readouterr().err
    assert "no Lhotse installed, so the current rule" in err and "Lhotse no Lhotse" not in err
