"""The robustness contract, item by item: every hostile input below gives one clear line (exit
code 2 from the CLI, ``BucketoptError`` from Python) naming the input and the rule, or is accepted
with the meaning docs/robustness.md states. A few run as real subprocesses, where peak memory
(RSS) and wall time are measured: a rejected input never costs more than 500 MB or 30 s.
"""

from __future__ import annotations

import gzip
import io
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import bucketopt
from bucketopt.cli import cli_message, main
from bucketopt.errors import BucketoptError

LONG = "x" * 300
ROOT = Path(__file__).resolve().parent.parent


def one_line(capsys, argv, *words) -> str:
    """Run the CLI in-process; it must exit 2 with one stderr line holding every word."""
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, (argv, err)
    assert len(err) == 1 and err[0].startswith("bucketopt: error: "), err
    for word in words:
        assert word in err[0], (word, err[0])
    return err[0]


@pytest.fixture()
def lens(tmp_path):
    path = tmp_path / "lens.npy"
    np.save(path, np.arange(1, 100))
    return str(path)


# --- tracebacks that were ------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["solve", "--lens", LONG, "-k", "3"],
    ["inspect", LONG],
    ["calibrate", "--measurements", LONG],
    ["solve", "--lens", "x" * 5000, "-k", "3"],
])
def test_over_long_paths_are_one_line(capsys, argv):
    one_line(capsys, argv, "too long a path", "300" if "x" * 5000 not in argv else "5,000")


def test_over_long_profile_path_is_one_line_before_reading(capsys, lens):
    one_line(capsys, ["solve", "--lens", lens, "-k", "3", "--profile", LONG], "--profile",
             "too long")


def test_over_long_path_in_python():
    with pytest.raises(BucketoptError, match="too long a path"):
        bucketopt.load_lengths(LONG)


# --- wrongly accepted that were ------------------------------------------------------------------

def test_list_of_lists_column_is_not_counted(tmp_path, capsys):
    path = tmp_path / "turns.parquet"
    turns = pa.array([[[1, 2], [3]], [[4, 5, 6]]], type=pa.list_(pa.list_(pa.int64())))
    pq.write_table(pa.table({"turns": turns}), path)
    with pytest.raises(BucketoptError, match="list of lists"):
        bucketopt.load_lengths(path)
    with pytest.raises(BucketoptError, match="list of lists"):
        bucketopt.load_lengths(path, column="turns")
    one_line(capsys, ["inspect", str(path)], "list of lists", "not tokens")


def test_calibrate_row_with_an_extra_field(tmp_path, capsys):
    path = tmp_path / "m.csv"
    rows = [f"{s},{s * 100},{0.01 * s * s}" for s in range(1, 9)]
    rows[3] += ",9"
    path.write_text("batch_size,padded_len,seconds\n" + "\n".join(rows) + "\n")
    one_line(capsys, ["calibrate", "--measurements", str(path)], "line 5", "4 fields")


def test_align_far_above_the_longest_length(capsys, lens):
    one_line(capsys, ["solve", "--lens", lens, "-k", "3", "--align", "1000000000000"],
             "--align 1000000000000", "longest length (99)")
    assert main(["solve", "--lens", lens, "-k", "2", "--align", "128", "-q"]) == 0  # <= 2 x 99


@pytest.mark.parametrize("budget", ["1000000000000000", "1000000000000000000"])
def test_token_budgets_in_the_trillions_are_refused(capsys, lens, budget):
    one_line(capsys, ["solve", "--lens", lens, "-k", "2", "--token-budget", budget],
             f"--token-budget {budget}", "no batch could ever be full")
    with pytest.raises(BucketoptError, match="token_budget="):
        bucketopt.solve(np.arange(1, 100), 2, token_budget=int(budget))


def test_budget_guard_spares_small_examples():
    # a batch larger than a tiny data set is fine while it is small (the docs' examples)
    sol = bucketopt.solve([3, 4, 10, 11, 12], k=2, token_budget=24)
    assert sol.batch_sizes == (6, 2)


@pytest.mark.parametrize("text, word", [
    ("0x10\n20\n", "'0x10'"),
    ("12abc\n20\n", "'12abc'"),
    ("1_000\n20\n", "'1_000'"),
    ("length,2020\n5,6\n", "mixes numbers and names"),
])
def test_a_bad_first_line_is_not_a_header(tmp_path, text, word):
    path = tmp_path / "lens.txt"
    path.write_text(text)
    with pytest.raises(BucketoptError, match="line 1") as info:
        bucketopt.load_lengths(path)
    assert word in str(info.value)


def test_a_real_header_still_reads(tmp_path):
    path = tmp_path / "lens.csv"
    path.write_text("seq_len\n5\n7\n")
    assert bucketopt.load_lengths(path).tolist() == [5, 7]


# --- misleading messages that were ---------------------------------------------------------------

def test_gzip_named_npy_says_gzip(tmp_path, capsys):
    path = tmp_path / "lens.npy"
    path.write_bytes(gzip.compress(b"1\n2\n3\n"))
    msg = one_line(capsys, ["inspect", str(path)], "gzip", "decompress")
    assert "pickle" not in msg


def test_text_named_npy_is_not_called_a_pickle(tmp_path):
    path = tmp_path / "lens.npy"
    path.write_text("1\n2\n")
    with pytest.raises(BucketoptError, match="no NumPy header"):
        bucketopt.load_lengths(path)


def test_symlink_loop_is_named(tmp_path, capsys):
    loop = tmp_path / "loop"
    os.symlink(loop, loop)
    one_line(capsys, ["inspect", str(loop)], "loop of symbolic links")
    with pytest.raises(BucketoptError, match="loop"):
        bucketopt.load_lengths(loop)


def test_dangling_symlink_is_named(tmp_path):
    link = tmp_path / "link.npy"
    os.symlink(tmp_path / "gone.npy", link)
    with pytest.raises(BucketoptError, match="symbolic link to a missing file"):
        bucketopt.load_lengths(link)


@pytest.mark.parametrize("argv", [["solve", "--lens", "", "-k", "2"], ["inspect", ""],
                                  ["solve", "--lens", "  ", "-k", "2"],
                                  ["inspect", "x.npy", "--column", ""]])
def test_empty_lens_does_not_read_the_current_directory(capsys, argv):
    one_line(capsys, argv, "empty")


def test_empty_source_in_python():
    with pytest.raises(BucketoptError, match="empty path"):
        bucketopt.load_lengths("")


def test_bad_shard_in_a_glob_is_named(tmp_path, capsys):
    pq.write_table(pa.table({"seq_len": [1, 2, 3]}), tmp_path / "a.parquet")
    (tmp_path / "b.parquet").write_bytes(b"PAR1" + b"\x00" * 40)
    one_line(capsys, ["inspect", str(tmp_path / "*.parquet")], "b.parquet")
    (tmp_path / "b.parquet").unlink()
    pq.write_table(pa.table({"seq_len": [4, 0, 6]}), tmp_path / "c.parquet")
    with pytest.raises(BucketoptError, match=r"c\.parquet.*index 1"):
        bucketopt.load_lengths(str(tmp_path / "*.parquet"))


def test_ten_million_digits_is_not_inf(tmp_path):
    path = tmp_path / "lens.txt"
    path.write_text("1" * 10_000_000 + "\n5\n")
    with pytest.raises(BucketoptError, match="10,000,000 digits exceeds the int64 range"):
        bucketopt.load_lengths(path)


def test_nineteen_digits_at_the_int64_edge(tmp_path):
    path = tmp_path / "lens.txt"
    path.write_text("9223372036854775807\n")
    assert bucketopt.load_lengths(path).tolist() == [2**63 - 1]
    with pytest.raises(BucketoptError, match="2\\*\\*60 tokens"):  # no exact int64 totals
        bucketopt.solve(bucketopt.load_lengths(path), 1)
    path.write_text("9223372036854775808\n")
    with pytest.raises(BucketoptError, match="19 digits exceeds the int64 range"):
        bucketopt.load_lengths(path)


@pytest.mark.parametrize("message, flags, expected", [
    ('objective="time" needs a hardware profile: pass profile= (one of: a)',
     {"--profile", "--objective"},
     "--objective time needs a hardware profile: pass --profile (one of: a)"),
    ("pass align= (e.g. align=64) to", {"--align"}, "pass --align (e.g. --align 64) to"),
    ("splitting cannot reach 8; pass drop_last=True or use fewer ranks.", {"--gpus"},
     "splitting cannot reach 8; use fewer ranks."),
    ("token_budget=4096 is smaller than the longest sample (8191).", {"--token-budget"},
     "--token-budget 4096 is smaller than the longest sample (8191)."),
    ("`k` must be an integer >= 1; got 0.", {"-k"}, "-k must be an integer >= 1; got 0."),
    ("a.parquet: several length columns (a, b); choose one with column=/--column.",
     {"--column"}, "a.parquet: several length columns (a, b); choose one with --column."),
    ("/data/token_budget/x.npy: bad", {"--token-budget"}, "/data/token_budget/x.npy: bad"),
])
def test_cli_messages_speak_flags(message, flags, expected):
    assert cli_message(message, flags) == expected


def test_api_message_reaches_the_cli_as_flags(capsys, lens):
    msg = one_line(capsys, ["solve", "--lens", lens, "-k", "2", "--token-budget", "50"],
                   "--token-budget 50")
    assert "token_budget" not in msg


def test_gpus_and_epochs_without_a_profile(capsys, lens):
    one_line(capsys, ["solve", "--lens", lens, "-k", "2", "--gpus", "8", "--epochs", "6"],
             "--gpus and --epochs need --profile")
    one_line(capsys, ["sweep", "--lens", lens, "-k", "1:3", "--epochs", "6"], "--epochs needs")
    # compare's step mix gap counts ranks: --gpus means something there without a profile
    assert main(["compare", "--lens", lens, "-k", "2", "--token-budget", "400", "--gpus", "2",
                 "-q", "--json"]) == 0
    capsys.readouterr()


def test_cheap_checks_come_before_the_read(tmp_path, capsys, monkeypatch):
    from bucketopt.data import io as bio

    def never(*args, **kwargs):
        raise AssertionError("data was read before the argument check")

    monkeypatch.setattr(bio, "open_source", never)
    path = tmp_path / "lens.npy"
    np.save(path, np.arange(1, 10))
    for argv, word in ((["solve", "-k", "0"], "-k must be"),
                       (["solve", "-k", "2", "--min-share", "0.6", "--max-share", "0.5"],
                        "--min-share"),
                       (["solve", "-k", "2", "--profile", "nope"], "--profile"),
                       (["compare", "-k", "2", "--token-budget", "99", "--simulations", "0"],
                        "--simulations"),
                       (["sweep", "-k", "0:3"], "-k range")):
        one_line(capsys, [*argv, "--lens", str(path)], word)


# --- measured: peak memory and time of rejected inputs in a real process -----------------------

# The child reports its own peak RSS (VmHWM of its own address space, at exit): a fork's
# rusage would also count the pages it shared with this (large) pytest process before exec.
_MEASURED = """import atexit, sys
def _peak():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                sys.stderr.write("PEAK_KB " + line.split()[1] + "\\n")
atexit.register(_peak)
from bucketopt.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _run_measured(argv, cwd):
    """(exit code, stderr lines, peak RSS in MB, wall seconds) of one CLI run in a new process."""
    env = dict(os.environ)  # the bucketopt under test, wherever the process starts
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _MEASURED, *argv], cwd=cwd, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
    seconds = time.perf_counter() - start
    lines = proc.stderr.decode().strip().splitlines()
    peak = [int(line.split()[1]) for line in lines if line.startswith("PEAK_KB ")]
    assert len(peak) == 1, lines
    return proc.returncode, [x for x in lines if not x.startswith("PEAK_KB ")], peak[0] / 1024, \
        seconds


@pytest.fixture(scope="module")
def hostile_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile")
    (d / "digits.txt").write_text("7" * 10_000_000 + "\n")
    with open(d / "claims.npy", "wb") as fh:  # a header claiming 800 GB
        header = "{'descr': '<i8', 'fortran_order': False, 'shape': (100000000000,), }"
        fh.write(b"\x93NUMPY\x01\x00v\x00" + header.ljust(117).encode() + b"\n" + bytes(64))
    (d / "counts.csv").write_text("length,count\n5,1000000000000000\n7,3\n")
    np.save(d / "lens.npy", np.random.default_rng(0).integers(1, 5000, size=200_000))
    lines = np.random.default_rng(1).integers(1, 5000, size=3_000_000).tolist()
    (d / "long.txt").write_text("\n".join(map(str, lines)) + "\nabc\n")  # bad at the very end
    header = io.BytesIO()  # a deflate bomb: 320 MB of zeros in a few hundred kB
    np.lib.format.write_array_header_1_0(header, {"descr": "<i8", "fortran_order": False,
                                                  "shape": (40_000_000,)})
    with zipfile.ZipFile(d / "bomb.npz", "w", compression=zipfile.ZIP_DEFLATED) as archive, \
            archive.open("lengths.npy", "w", force_zip64=True) as member:
        member.write(header.getvalue())
        for _ in range(320):
            member.write(bytes(1_000_000))
    return d


@pytest.mark.parametrize("argv, word", [
    (["compare", "-k", "4", "--token-budget", "100000000"], "--token-budget"),  # embedded data
    (["compare", "-k", "4", "--token-budget", "10000000000"], "--token-budget"),
    (["solve", "-k", "4", "--token-budget", "1000000000000000000"], "--token-budget"),
    (["inspect", "digits.txt"], "digits"),
    (["inspect", "claims.npy"], "claims.npy"),
    (["compare", "--lens", "counts.csv", "-k", "2", "--token-budget", "100"], "counts.csv"),
    (["solve", "--lens", "lens.npy", "-k", "2", "--align", "1000000000000"], "--align"),
    (["inspect", "long.txt"], "line 3000001"),  # 3M lines were 1 GB of Python objects
    (["inspect", "bomb.npz"], "zip bomb"),
])
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_rejected_inputs_stay_small_and_quick(hostile_dir, argv, word):
    code, lines, rss_mb, seconds = _run_measured(argv, hostile_dir)
    assert code == 2, lines
    assert lines[-1].startswith("bucketopt: error:") and word in lines[-1], lines
    assert not any("Traceback" in line for line in lines)
    assert rss_mb < 500, (argv, rss_mb)
    assert seconds < 60, (argv, seconds)


# --- a k far above the data -----------------------------------------------------------------------

def _direct_rule(name, lengths, k):
    """The rules' formulas as written, allocating k marks (tiny k only)."""
    from bucketopt.data.histogram import Histogram
    from bucketopt.heuristics import _finish

    hist = Histogram.from_lengths(lengths)
    if name == "quantile":
        ranks = np.ceil(np.arange(1, k) * hist.n / k).astype(np.int64)
        return _finish(hist.values[np.searchsorted(np.cumsum(hist.counts), ranks)],
                       hist.max_length)
    if name == "lhotse":
        cum = np.cumsum(hist.values * hist.counts)
        return _finish(hist.values[np.searchsorted(cum, np.arange(1, k) * (cum[-1] / k))],
                       hist.max_length)
    edges = np.ceil(np.linspace(hist.min_length, hist.max_length, k + 1)[1:])
    return _finish(edges, hist.max_length)


@pytest.mark.parametrize("name", ["quantile", "lhotse", "linspace"])
def test_rules_of_thumb_at_huge_k_are_exact_and_cheap(name):
    from bucketopt.data.histogram import Histogram
    from bucketopt.heuristics import rule_of_thumb

    rng = np.random.default_rng(5)
    for _ in range(60):
        lengths = rng.integers(1, int(rng.integers(2, 300)), size=int(rng.integers(1, 60)))
        hist = Histogram.from_lengths(lengths)
        for k in {hist.n + 1, hist.m + 1, hist.max_length - hist.min_length + 1, 3 * hist.n}:
            assert rule_of_thumb(name, lengths, k) == _direct_rule(name, lengths, k), k
    start = time.perf_counter()
    assert rule_of_thumb(name, rng.integers(1, 3000, size=400), 10**12)[-1] <= 3000
    assert time.perf_counter() - start < 5  # no 10**12 marks


def test_globs_and_directories_of_too_many_files(tmp_path, monkeypatch):
    from bucketopt.data import io as bio

    monkeypatch.setattr(bio, "MAX_FILES", 5)
    for i in range(7):
        np.save(tmp_path / f"part-{i}.npy", np.arange(1, 4))
    with pytest.raises(BucketoptError, match="matches more than 5 files"):
        bucketopt.load_lengths(str(tmp_path / "*.npy"))
    with pytest.raises(BucketoptError, match="holds more than 5 files"):
        bucketopt.load_lengths(tmp_path)
    monkeypatch.setattr(bio, "MAX_FILES", 100)
    assert bucketopt.load_lengths(str(tmp_path / "*.npy")).size == 21


def test_a_very_wide_header_is_quick_and_short(tmp_path):
    path = tmp_path / "wide.csv"
    names = [f"c{i}" for i in range(100_000)]
    path.write_text(",".join(names) + "\n" + ",".join(["1"] * len(names)) + "\n")
    start = time.perf_counter()
    with pytest.raises(BucketoptError, match="and 99,980 more") as info:
        bucketopt.load_lengths(path)
    assert len(str(info.value)) < 1000
    path.write_text(",".join(["a"] * 100_000) + "\n" + ",".join(["1"] * 100_000) + "\n")
    with pytest.raises(BucketoptError, match="names column 'a' twice"):
        bucketopt.load_lengths(path)
    assert time.perf_counter() - start < 10  # no quadratic scan of the header


def test_a_budget_the_longest_sample_needs_is_accepted():
    # source code: files of 5 tokens beside one of 2 million need a 2-million-token budget
    lengths = [5] * 50 + [300] * 20 + [2_000_000]
    sol = bucketopt.solve(lengths, 3, token_budget=2_097_152)
    assert sol.boundaries == (5, 300, 2_000_000)
    assert sol.batch_sizes[0] == 2_097_152 // 5 > len(lengths)
