"""Counts beyond meaning are capped or refused at once; every malformed value is one clean
error wherever it enters (Python or the CLI); valid values at the edge of a range are taken."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest

import bucketopt
from bucketopt.cli import main
from bucketopt.errors import BucketoptError
from bucketopt.validate import WORLD_SIZE_LIMIT

L = list(range(1, 200))
MEM = {"m0": 1e9, "m1": 1e4, "m2": 0, "capacity": 8e9}


def cli(argv):
    """(exit code, stdout, stderr) of one in-process CLI run."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def one_line_error(argv, words=None):
    code, _, err = cli(argv)
    assert code == 2 and err.count("\n") == 1 and err.startswith("bucketopt: error:"), err
    if words:
        assert words in err, err
    return err


@pytest.fixture()
def lens(tmp_path):
    path = tmp_path / "lens.npy"
    np.save(path, np.arange(1, 200))
    return str(path)


# --- memory models -----------------------------------------------------------------------------

@pytest.mark.parametrize("memory, kw, words", [
    (dict(MEM, m0=10**400), {}, "`m0` must be at most"),
    (dict(MEM, capacity=10**400), {}, "`capacity` must be at most"),
    (dict(MEM, m1=10**5000), {}, "`m1` must be at most"),
    (MEM, {"memory_headroom": 10**400}, "memory_headroom"),
    (MEM, {"gpu_memory": 10**400}, "gpu_memory"),
    (MEM, {"memory_headroom": "0.5"}, "got '0.5'"),
    (dict(MEM, headroom="0.5"), {}, "`headroom` must be a number"),
    ({"provenance": {"probe": [1, 2]}}, {}, "holds no memory fit"),
    ({"provenance": {"probe": {"memory": [1]}}}, {}, "holds no memory fit"),
])
def test_malformed_memory_values_are_one_clear_error(memory, kw, words):
    with pytest.raises(BucketoptError, match=words) as info:
        bucketopt.solve(L, 2, memory=memory, **kw)
    assert "\n" not in str(info.value) and len(str(info.value)) < 400


def test_a_memory_value_nested_100000_deep_is_one_short_error():
    v = x = []
    for _ in range(100_000):
        x.append([])
        x = x[0]
    with pytest.raises(BucketoptError, match="`m0` must be a number of bytes"):
        bucketopt.solve(L, 2, memory=dict(MEM, m0=v))


def test_a_sampler_refuses_a_headroom_given_as_a_string():
    with pytest.raises(BucketoptError, match="memory_headroom"):
        bucketopt.BucketBatchSampler(L, (100, 199), memory=MEM, memory_headroom="0.5")


def test_the_top_of_gpu_memory_is_accepted_from_python_and_the_cli(tmp_path, lens):
    sol = bucketopt.solve(L, 2, memory=MEM, gpu_memory=1e9)
    assert sol.boundaries[-1] == 199
    path = tmp_path / "mem.json"
    path.write_text(json.dumps(MEM))
    code, out, err = cli(["solve", "--lens", lens, "-k", "2", "--memory", str(path),
                          "--gpu-memory", "1e9", "--json", "-q"])
    assert code == 0, err
    assert json.loads(out)["boundaries"][-1] == 199
    with pytest.raises(BucketoptError, match="gpu_memory"):
        bucketopt.solve(L, 2, memory=MEM, gpu_memory=1.01e9)


@pytest.mark.parametrize("text, ok", [
    ("\ufeff" + json.dumps(MEM), True),
    ('{"m0": 1' + "0" * 400 + ', "m1": 1e4, "m2": 0, "capacity": 8e9}', False),
    ('{"m0": 1' + "0" * 5000 + ', "m1": 1e4, "m2": 0, "capacity": 8e9}', False),
    ('{"provenance": {"probe": [1, 2]}}', False),
    ('{"m0": ' + "[" * 100_000 + "]" * 100_000 + "}", False),
])
def test_memory_json_files_from_the_cli_and_python(tmp_path, lens, text, ok):
    path = tmp_path / "mem.json"
    path.write_text(text, encoding="utf-8")
    argv = ["solve", "--lens", lens, "-k", "2", "--memory", str(path), "-q"]
    if ok:  # a byte-order mark: the same rule as profiles
        assert bucketopt.solve(L, 2, memory=str(path)).boundaries[-1] == 199
        assert cli(argv)[0] == 0
        return
    with pytest.raises(BucketoptError) as info:
        bucketopt.solve(L, 2, memory=str(path))
    assert "\n" not in str(info.value) and len(str(info.value)) < 400
    one_line_error(argv)


@pytest.mark.parametrize("entry, words", [
    ([1e7, 1e-4, 0.0], r"\[0, 1e\+06\]"),
    ([10**400, 0.0, 0.0], "about 401 digits"),
])
def test_a_profiles_uncertainty_sets_have_the_main_coefficients_caps(tmp_path, entry, words):
    path = tmp_path / "prof.json"
    path.write_text(json.dumps({"alpha": 0.1, "beta": 1e-4, "gamma": 0.0,
                                "uncertainty": {"coefficient_sets": [entry]}}))
    with pytest.raises(BucketoptError, match=words):
        bucketopt.solve(L, 2, profile=str(path), token_budget=400)


# --- booleans and huge integers where counts belong ----------------------------------------------

@pytest.mark.parametrize("lengths", [[True, 5, 7], (5, np.True_, 9), {5: True, 7: 2}])
def test_a_boolean_is_not_a_length_nor_a_count(lengths):
    with pytest.raises(BucketoptError, match="must be integers; got True"):
        bucketopt.solve(lengths, 2)


def test_a_histogram_built_from_lists_refuses_a_boolean_count():
    from bucketopt.data.histogram import Histogram

    with pytest.raises(BucketoptError, match="boolean"):
        Histogram(values=[5, 7], counts=[True, 2])
    assert Histogram(values=[5, 7], counts=[1, 2]).n == 3


@pytest.mark.parametrize("sizes, words", [
    ([10**5000, 1], "about 5,001 digits"), ([True, 1], "got True"), (["2", 1], "got '2'"),
    ([float("nan"), 1], "got nan"), ([1, 2, 3], "one integer per bucket"),
])
def test_batch_sizes_of_the_wrong_kind_are_one_clear_error(sizes, words):
    for make in (lambda: bucketopt.BucketBatchSampler(L, (100, 199), batch_sizes=sizes),
                 lambda: bucketopt.simulate(L, "bucketed", boundaries=(100, 199),
                                            token_budget=400, batch_sizes=sizes)):
        with pytest.raises(BucketoptError, match=words) as info:
            make()
        assert info.value.param == "batch_sizes"


# --- world size ---------------------------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda g: bucketopt.solve(L, 2, profile="rtx-pro-6000-blackwell", world_size=g),
    lambda g: bucketopt.evaluate(L, (100, 199), profile="rtx-pro-6000-blackwell", world_size=g),
    lambda g: bucketopt.BucketBatchSampler(L, (100, 199), token_budget=400, world_size=g),
    lambda g: bucketopt.compare(L, 2, token_budget=400, world_size=g),
])
def test_a_world_size_past_the_cap_is_refused_at_once_everywhere(make):
    for g in (WORLD_SIZE_LIMIT + 1, 2**60):
        with pytest.raises(BucketoptError, match="65536"):
            make(g)


def test_the_cli_refuses_gpus_past_the_cap_in_one_line(lens):
    one_line_error(["compare", "--lens", lens, "-k", "2", "--token-budget", "400",
                    "--gpus", str(2**60), "-q"], "--gpus")
    one_line_error(["compare", "--lens", lens, "-k", "2", "--token-budget", "400",
                    "--gpus", "1000000", "-q"], "65536")


# --- k beyond the distinct lengths ---------------------------------------------------------------

@pytest.mark.parametrize("seed", range(4))
def test_k_beyond_the_distinct_lengths_is_k_equal_to_their_number(seed):
    lengths = np.random.default_rng(seed).integers(1, 600, 3000)
    m = np.unique(lengths).size
    huge = bucketopt.solve(lengths, 10**9, pad="batch", token_budget=1200)
    exact = bucketopt.solve(lengths, m, pad="batch", token_budget=1200, exact=True)
    assert huge.padded_tokens == exact.padded_tokens == 0
    assert huge.optimality["exact"] and huge.boundaries == tuple(np.unique(lengths).tolist())
    # where one bucket per length is not allowed (min_share, align), the DP still decides
    shared = bucketopt.solve(lengths, 10**9, pad="batch", token_budget=1200, min_share=0.05)
    assert min(shared.counts) >= 0.05 * lengths.size


def test_solve_with_a_billion_buckets_answers_at_once_from_the_cli(lens):
    code, out, err = cli(["solve", "--lens", lens, "-k", "1000000000", "--pad", "batch",
                          "--token-budget", "400", "--json", "-q"])
    assert code == 0, err
    data = json.loads(out)
    assert data["padding_fraction"] == 0.0 and data["optimality"]["exact"]


@pytest.mark.parametrize("warmup", [10**9, 1001, 10**5000], ids=["1e9", "1001", "5001-digits"])
def test_a_warmup_past_the_cap_is_refused_before_any_step(warmup):
    from bucketopt.cost.probe import MAX_WARMUP, probe

    with pytest.raises(BucketoptError, match=f"at most {MAX_WARMUP:,}") as info:
        probe("no-such-model:build", token_budget=128, max_length=16, warmup=warmup)
    assert info.value.param == "warmup"


# --- file names holding any character ------------------------------------------------------------

@pytest.mark.parametrize("flag", ["--lens", "--memory", "--measurements", "--profile"])
def test_a_file_name_holding_a_newline_stays_on_the_errors_one_line(tmp_path, lens, flag):
    bad = tmp_path / "bad\nname.npy"
    bad.write_bytes(b'{"x": 1}' if flag in ("--memory", "--profile") else b"x")
    argv = {"--lens": ["solve", "--lens", str(bad), "-k", "2"],
            "--memory": ["solve", "--lens", lens, "-k", "2", "--memory", str(bad)],
            "--profile": ["solve", "--lens", lens, "-k", "2", "--profile", str(bad)],
            "--measurements": ["calibrate", "--measurements", str(bad)]}[flag]
    err = one_line_error(argv)
    assert "bad\\nname.npy" in err


def test_no_error_message_ever_holds_a_line_break():
    err = BucketoptError("file a\nb\r\x1b: bad")
    assert str(err) == "file a\\nb\\r\\x1b: bad"
