"""``bucketopt report``: one self-contained HTML page whose figures are the data it embeds, and
that data is what solve and compare give for the same flags. (The page in a real browser:
tests/test_report_browser.py.)"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import bucketopt
from bucketopt.cli import main
from bucketopt.errors import BucketoptError
from bucketopt.show.verify_result import check_verify, load_verify

from .report_figures import check_figures, embedded_data, html_cells, mismatch

VERIFY = Path(__file__).parent / "data" / "verify.json"
PROFILE = "rtx-pro-6000-blackwell"
FLAGS = ["-k", "3", "--token-budget", "8192"]
SECTIONS = ("distribution", "plan", "sweep", "strategies", "certificate", "verify")


@pytest.fixture(scope="module")
def lens(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lens")
    lengths = (np.random.default_rng(7).lognormal(6.0, 0.7, 4_000)).astype(np.int64) + 1
    np.save(folder / "lens.npy", lengths)
    return folder / "lens.npy"


def _run(capsys, argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def page(lens, tmp_path_factory):
    """A report with a profile and a verify result: the page and the --json of the same run."""
    out = tmp_path_factory.mktemp("report") / "report.html"
    capture = pytest.MonkeyPatch()
    import io
    import sys

    buffer = io.StringIO()
    capture.setattr(sys, "stdout", buffer)
    try:
        code = main(["report", "--lens", str(lens), *FLAGS, "--profile", PROFILE,
                     "--verify", str(VERIFY), "-o", str(out), "--json", "-q"])
    finally:
        capture.undo()
    assert code == 0
    return out.read_text(encoding="utf-8"), json.loads(buffer.getvalue())


def test_the_page_has_every_section_and_embeds_the_json_it_prints(page):
    text, data = page
    for section in SECTIONS:
        assert f'<section id="{section}">' in text
    assert embedded_data(text) == data
    assert data["format"] == "bucketopt-report" and data["verify"]["device"] == "cpu (1 thread)"
    # each figure is an image inside the page: distribution, sweep, strategies, verify
    images = re.findall(r'<img [^>]*src="([^"]*)"', text)
    assert len(images) == 4 and all(s.startswith("data:image/svg+xml;base64,") for s in images)


def test_the_page_needs_no_network(page):
    text, _ = page
    assert "http://" not in text and "https://" not in text
    assert "<link" not in text and "@import" not in text and "url(" not in text
    assert not re.search(r"<script[^>]*\bsrc=", text)
    for attribute in re.findall(r'\b(?:src|href)="([^"]*)"', text):
        assert attribute.startswith(("data:", "#")), attribute
    scripts = re.findall(r"<script([^>]*)>", text)
    assert scripts == [' type="application/json" id="bucketopt-data"']  # data, no code


def test_every_figure_shown_is_the_json(page):
    text, data = page
    cells = html_cells(text)
    assert len(cells) > 100
    assert check_figures(data, cells) == []


def test_the_figure_check_sees_a_wrong_figure(page):
    """The check above can fail: a figure off by more than its digits, a wrong unit, a wrong
    place, an interval's bound."""
    _, data = page
    fraction = data["plan"]["padding_fraction"]
    assert mismatch(data, "/plan/padding_fraction", f"{fraction * 100:.2f}%") is None
    assert mismatch(data, "/plan/padding_fraction", f"{fraction * 100 + 0.02:.2f}%")
    assert mismatch(data, "/plan/padding_fraction", f"{fraction * 100:.2f} GiB")
    assert mismatch(data, "/plan/real_tokens", f"{fraction * 100:.2f}%")
    assert mismatch(data, "/plan/nowhere", "1")
    low, high = data["plan"]["ktok_per_s_interval"]
    assert mismatch(data, "/plan/ktok_per_s_interval", f"[{low:,.1f}, {high:,.1f}]") is None
    assert mismatch(data, "/plan/ktok_per_s_interval", f"[{low:,.1f}, {high + 1:,.1f}]")
    bad = html_cells('<td data-path="/plan/n_samples">12</td>')
    assert check_figures({**data, "plan": {"n_samples": 13}}, [*html_cells(page[0]), *bad])


def test_the_plan_is_what_solve_gives_and_the_recommendation_compare_s(capsys, lens, page):
    _, data = page
    code, out, _ = _run(capsys, ["solve", "--lens", lens, *FLAGS, "--profile", PROFILE,
                                 "--json"])
    assert code == 0
    solved = json.loads(out)
    for key in ("boundaries", "counts", "batch_sizes", "padded_tokens", "padding_fraction",
                "ktok_per_s", "ktok_per_s_interval", "eta_days", "optimality"):
        assert data["plan"][key] == solved[key], key
    code, out, _ = _run(capsys, ["compare", "--lens", lens, *FLAGS, "--profile", PROFILE,
                                 "--json"])
    compared = json.loads(out)
    assert data["strategies"]["recommended"] == compared["recommended"] is not None
    assert data["strategies"]["strategies"] == compared["strategies"]
    # the page marks that row, and the sweep's recommended k
    text = page[0]
    marked = re.findall(r'<tr class="recommended" data-strategy="([^"]+)"', text)
    assert marked == [compared["recommended"]]
    assert re.findall(r'<tr class="recommended" data-k="(\d+)"', text) == \
        [str(data["sweep"]["recommended_k"])]
    # the sweep's row of k is the plan
    row = data["sweep"]["rows"][data["sweep"]["ks"].index(3)]
    assert row["boundaries"] == data["plan"]["boundaries"]
    assert row["ktok_per_s"] == pytest.approx(data["plan"]["ktok_per_s"])


def test_bucket_rows_add_up(page):
    _, data = page
    rows, plan = data["buckets"], data["plan"]
    assert [r["edge"] for r in rows] == plan["boundaries"]
    assert [r["lower"] for r in rows] == [0, *plan["boundaries"][:-1]]
    assert sum(r["samples"] for r in rows) == plan["n_samples"] == data["distribution"]["samples"]
    assert sum(r["padded_tokens"] for r in rows) == plan["padded_tokens"]
    for r in rows:
        assert r["padding_fraction"] == pytest.approx(
            r["padded_tokens"] / (r["real_tokens"] + r["padded_tokens"]))
        assert r["batch_size"] == 8192 // r["edge"]
    cert = data["certificate"]
    assert cert["exact"] == plan["optimality"]["exact"] and cert["gap"] == plan["optimality"]["gap"]


def test_distribution_percentiles_are_lengths_that_occur(lens, page):
    _, data = page
    lengths = np.load(lens)
    dist = data["distribution"]
    assert dist["percentiles"]["P0"] == lengths.min() and dist["percentiles"]["P100"] == \
        lengths.max()
    for name, value in dist["percentiles"].items():
        q = float(name[1:])
        assert value in set(lengths.tolist())
        assert np.mean(lengths <= value) >= q / 100 - 1e-12  # inverted CDF
    assert dist["real_tokens"] == int(lengths.sum())


def test_a_report_of_a_plan(capsys, lens, tmp_path):
    plan = tmp_path / "plan.json"
    assert _run(capsys, ["solve", "--lens", lens, *FLAGS, "-o", plan, "-q"])[0] == 0
    out = tmp_path / "plan.html"
    code, stdout, _ = _run(capsys, ["report", "--lens", lens, "--plan", plan, "-o", out,
                                    "--json", "-q", "--sweep", "2:5"])
    assert code == 0
    data = json.loads(stdout)
    saved = json.loads(plan.read_text())
    assert data["plan_origin"] == "plan" and data["plan"]["boundaries"] == saved["boundaries"]
    assert data["plan"]["batch_sizes"] == saved["batch_sizes"]
    assert data["certificate"]["gap"] == saved["optimality"]["gap"]
    assert data["sweep"]["ks"] == [2, 3, 4, 5]
    assert data["strategies"]["strategies"]["bucketed"]["boundaries"] == saved["boundaries"]
    assert "from a plan file" in out.read_text()
    assert check_figures(data, html_cells(out.read_text())) == []
    # other lengths: refused, one line
    other = tmp_path / "other.npy"
    np.save(other, np.load(lens)[:-5])
    code, _, err = _run(capsys, ["report", "--lens", other, "--plan", plan, "-o",
                                 tmp_path / "x.html"])
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--allow-other-lengths" in err
    assert not (tmp_path / "x.html").exists()


def test_without_a_profile_or_a_verify_result(capsys, lens, tmp_path):
    out = tmp_path / "plain.html"
    code, stdout, _ = _run(capsys, ["report", "--lens", lens, *FLAGS, "-o", out, "--json",
                                    "-q"])
    assert code == 0
    data = json.loads(stdout)
    text = out.read_text()
    assert data["verify"] is None and "ktok_per_s" not in data["plan"]
    assert "No throughput prediction" in text and "No measurement given" in text
    assert check_figures(data, html_cells(text)) == []


@pytest.mark.parametrize("content, words", [
    ("not json", "not valid JSON"),
    ("[1, 2]", "must be a JSON object"),
    ("{}", "holds no measured or predicted figure"),
    ('{"measured": {"step_time_p50": "fast"}}', "measured.step_time_p50 must be a number"),
    ('{"measured": {"step_time_p50": -1}}', "measured.step_time_p50 must be a number >= 0"),
    ('{"measured": [0.1]}', "measured must be a JSON object"),
    ('{"predicted": {"step_time_p50": {"value": 0.1, "interval": [0.2, 0.1]}}}',
     "predicted.step_time_p50.interval must have 0 <= low <= high"),
    ('{"predicted": {"step_time_p50": {"value": 0.1, "interval": [0.1]}}}',
     "predicted.step_time_p50.interval must be [low, high]"),
    ('{"measured": {"tokens_per_s": 1}, "verdicts": {"tokens_per_s": {"inside": "yes"}}}',
     "verdicts.tokens_per_s.inside must be true, false or null"),
    ('{"measured": {"tokens_per_s": 1}, "warnings": "slow"}', "warnings must be a list"),
    ('{"measured": {"tokens_per_s": 1}, "steps": 2.5}', "steps must be an integer"),
    ('{"measured": {"tokens_per_s": NaN}}', "not valid JSON"),
])
def test_a_bad_verify_result_is_one_line(capsys, lens, tmp_path, content, words):
    bad = tmp_path / "verify.json"
    bad.write_text(content)
    out = tmp_path / "r.html"
    out.write_text("old")
    code, stdout, err = _run(capsys, ["report", "--lens", lens, *FLAGS, "--verify", bad,
                                      "-o", out])
    assert code == 2 and stdout == ""
    assert len(err.strip().splitlines()) == 1 and words in err and "Traceback" not in err, err
    assert err.startswith("bucketopt: error: verify ")
    assert out.read_text() == "old"  # nothing written


@pytest.mark.parametrize("argv, words", [
    (FLAGS, "give -o REPORT.html"),
    ([*FLAGS, "-o", "report.txt"], "ending in .html or .htm"),
    ([*FLAGS, "-o", "nowhere/report.html"], "does not exist"),
    (["--token-budget", "8192", "-o", "r.html"], "needs -k K"),
    (["-k", "3", "-o", "r.html"], "needs --token-budget"),
    ([*FLAGS, "--exact", "-o", "r.html"], "--exact applies to"),
    ([*FLAGS, "--sweep", "5:2", "-o", "r.html"], "-k range '5:2' is empty"),
    ([*FLAGS, "--verify", "missing.json", "-o", "r.html"], "does not exist"),
    ([*FLAGS, "--verify", "", "-o", "r.html"], "--verify is empty"),
    ([*FLAGS, "--plan", "plan.json", "-o", "r.html"], "--plan sets the solver settings"),
])
def test_bad_arguments_are_one_line(capsys, lens, tmp_path, monkeypatch, argv, words):
    monkeypatch.chdir(tmp_path)
    Path("plan.json").write_text("{}")
    code, stdout, err = _run(capsys, ["report", "--lens", lens, *argv])
    assert code == 2 and stdout == ""
    assert len(err.strip().splitlines()) == 1 and words in err and "Traceback" not in err, err
    assert not list(tmp_path.glob("*.htm*"))


def test_no_input_is_overwritten(capsys, lens, tmp_path):
    """-o naming the --verify file, the --plan file or the --lens file: refused before
    anything is read, every input byte-identical."""
    verify = tmp_path / "verify.html"  # an HTML name, so only the input rule refuses it
    shutil.copy(VERIFY, verify)
    lens_copy = tmp_path / "lens.html"
    lens_copy.write_text("\n".join(map(str, np.load(lens)[:500].tolist())))
    before = {p: p.read_bytes() for p in (verify, lens_copy)}
    for argv, flag in (([*FLAGS, "--lens", lens, "--verify", verify, "-o", verify], "--verify"),
                       ([*FLAGS, "--lens", lens_copy, "-o", lens_copy], "--lens")):
        code, _, err = _run(capsys, ["report", *argv])
        assert code == 2 and "destroy the input" in err and flag in err, err
    assert {p: p.read_bytes() for p in before} == before


def test_the_report_replaces_an_old_one_atomically(capsys, lens, tmp_path):
    out = tmp_path / "r.html"
    out.write_text("old")
    code, _, err = _run(capsys, ["report", "--lens", lens, *FLAGS, "-o", out])
    assert code == 0 and f"wrote {out}" in err
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert [p.name for p in tmp_path.iterdir()] == ["r.html"]  # no temporary left


def test_the_python_function(lens):
    lengths = np.load(lens)
    result = bucketopt.report(lengths, 3, token_budget=8192, profile=PROFILE,
                              verify=str(VERIFY), ks=[1, 2, 3, 4])
    assert isinstance(result, bucketopt.show.html_report.Report)
    assert set(result.figures) == {"distribution", "sweep", "strategies", "verify"}
    # solve's defaults (one GPU unless world_size is given), in the plan and compare's row
    solved = bucketopt.solve(lengths, 3, token_budget=8192, profile=PROFILE)
    plan = result.data["plan"]
    assert plan["boundaries"] == list(solved.boundaries) and plan["world_size"] == 1
    assert plan["ktok_per_s"] == solved.ktok_per_s == \
        result.data["strategies"]["strategies"]["bucketed"]["ktok_per_s"]
    assert result.data["sweep"]["rows"][2]["ktok_per_s"] == pytest.approx(solved.ktok_per_s)
    page = result.to_html()
    assert check_figures(result.data, html_cells(page)) == []
    with pytest.raises(BucketoptError, match="a report needs k"):
        bucketopt.report(lengths, token_budget=8192)
    with pytest.raises(BucketoptError, match="a plan sets the solver settings; drop pad"):
        bucketopt.report(lengths, plan={}, pad="batch")
    with pytest.raises(BucketoptError, match="verify must be a dict or a path"):
        bucketopt.report(lengths, 3, token_budget=8192, verify=3)


def test_a_verify_result_with_figures_missing(lens):
    """Only what was measured: the rest shows as "-", a figure beyond the known ones too."""
    result = bucketopt.report(
        np.load(lens), 3, token_budget=8192, ks=[1, 2, 3], figures=False,
        verify={"measured": {"step_time_mean": 0.05, "loader_wait": 0.001},
                "predicted": {"step_time_mean": 0.04}})
    verify = result.data["verify"]
    assert verify["predicted"]["step_time_mean"] == {"value": 0.04, "interval": None}
    assert verify["device"] is None and verify["warnings"] == [] and verify["verdicts"] == {}
    page = result.to_html()
    assert 'data-figure="loader_wait"' in page and 'data-figure="step_time_mean"' in page
    assert "tokens/s" not in page.split('id="verify"')[1]
    assert check_figures(result.data, html_cells(page)) == []


def test_the_fixture_is_a_valid_verify_result():
    checked = load_verify(VERIFY)
    assert checked == check_verify(json.loads(VERIFY.read_text()))
    assert checked["predicted"]["peak_memory_bytes"]["interval"] is None
    assert checked["verdicts"]["step_time_p90"] == {"inside": False, "off_by": 0.0389}


def test_with_a_memory_model_the_plan_is_solve_s(capsys, lens, tmp_path):
    memory = tmp_path / "memory.json"
    memory.write_text(json.dumps({"m0": 2e9, "m1": 2e5, "m2": 20, "capacity": 8e10}))
    flags = ["-k", "3", "--profile", PROFILE, "--memory", memory]
    out = tmp_path / "memory.html"
    code, stdout, _ = _run(capsys, ["report", "--lens", lens, *flags, "-o", out, "--json",
                                    "-q", "--sweep", "1:4"])
    assert code == 0
    data = json.loads(stdout)
    code, solved, _ = _run(capsys, ["solve", "--lens", lens, *flags, "--json"])
    solved = json.loads(solved)
    for key in ("boundaries", "batch_sizes", "padding_fraction", "ktok_per_s"):
        assert data["plan"][key] == solved[key], key
    assert [r["peak_memory_bytes"] for r in data["buckets"]] == solved["peak_memory_bytes"]
    assert data["sweep"]["rows"][2]["boundaries"] == solved["boundaries"]
    text = out.read_text()
    assert "peak memory" in text and check_figures(data, html_cells(text)) == []


def test_text_from_the_inputs_cannot_end_the_data_or_add_markup(lens):
    source = "data</script><script>alert(1)</script><b>.npy"
    result = bucketopt.report(np.load(lens), 2, token_budget=8192, ks=[1, 2], figures=False,
                              source=source)
    page = result.to_html()
    assert page.count("<script") == 1 and "<b>" not in page
    assert embedded_data(page)["source"] == source
