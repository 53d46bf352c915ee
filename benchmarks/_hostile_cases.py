"""The hostile inputs of ``benchmarks/hostile.py``: generated, each with its expected outcome.

A :class:`Case` is one run of the CLI (``argv``) or of a Python snippet (``code``) in its own
folder, after ``files`` are made there. ``expect`` is what a correct bucketopt does: "error" (one
clean line, exit 2 / a BucketoptError) or "ok" (exit 0; ``check`` then looks at stdout, and a
Python snippet asserts its own answer). ``output`` names a file that a failed run must leave
whole or absent (its old content is written first). The classes follow the hostile-input issue:
file formats, flags, profiles, states, sampler and plan arguments, API numbers, overflow,
outputs under a file-size limit or /dev/full, closed stdout, FIFOs, permissions, nesting, huge
numbers, strings for numbers, Ctrl-C, links in a source, float count columns and the
environment.
"""

from __future__ import annotations

import gzip
import json
import os
import pickle
import struct
from dataclasses import dataclass, field

import numpy as np

GIB = 1 << 30
SAMPLER_FORMAT = "bucketopt.training.sampler/1"


@dataclass
class Case:
    name: str
    group: str
    expect: str  # "error" | "ok"
    argv: list | None = None
    code: str | None = None
    files: dict = field(default_factory=dict)  # name -> maker(path)
    stdout: str = "pipe"  # "pipe" | "devfull" | "closed"
    fsize: int | None = None  # RLIMIT_FSIZE in bytes
    output: str | None = None  # must be whole (old content) or absent after a failure
    nopriv: bool = False  # run without the root capabilities that bypass permissions
    check: object = None  # (stdout text) -> bool, for "ok"
    interrupt: float | None = None  # the signal after this many seconds: expect exit 130/143
    signal: str = "SIGINT"  # the signal sent after ``interrupt`` seconds
    chmod: dict = field(default_factory=dict)  # name -> mode, applied after files
    env: dict = field(default_factory=dict)  # extra environment ("{folder}": the case's folder)
    stdin: bytes | None = None  # standard input (else /dev/null)


# --- file makers ---------------------------------------------------------------------------------

def text(content: str, encoding="utf-8"):
    def make(path):
        with open(path, "w", encoding=encoding, newline="") as fh:
            fh.write(content)
    return make


def raw(content: bytes):
    def make(path):
        with open(path, "wb") as fh:
            fh.write(content)
    return make


def npy(array):
    def make(path):
        with open(path, "wb") as fh:
            np.save(fh, np.asarray(array), allow_pickle=True)
    return make


def npz(**arrays):
    def make(path):
        with open(path, "wb") as fh:
            np.savez(fh, **{k: np.asarray(v) for k, v in arrays.items()})
    return make


def npz_bomb(path):
    with open(path, "wb") as fh:
        np.savez_compressed(fh, lengths=np.zeros(80_000_000, dtype=np.int64))


def sparse(size: int, head: bytes = b""):
    """A sparse file of ``size`` bytes (no disk used) starting with ``head``."""
    def make(path):
        with open(path, "wb") as fh:
            fh.write(head)
            fh.truncate(size)
    return make


def npy_header(shape, dtype="<i8", total: int | None = None):
    """A .npy whose header claims ``shape``; the file is ``total`` bytes (sparse)."""
    def make(path):
        header = {"descr": dtype, "fortran_order": False, "shape": tuple(shape)}
        text_ = repr(header)
        pad = 64 - (10 + len(text_) + 1) % 64
        body = (text_ + " " * pad + "\n").encode()
        head = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(body)) + body
        with open(path, "wb") as fh:
            fh.write(head)
            fh.truncate(total if total is not None else len(head))
    return make


def arrow(table_fn, kind="file"):
    def make(path):
        import pyarrow as pa
        import pyarrow.feather as feather
        import pyarrow.parquet as pq

        table = table_fn()
        if kind == "parquet":
            pq.write_table(table, path)
        elif kind == "feather1":
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                feather.write_feather(table, path, version=1)
        elif kind == "stream":
            with pa.ipc.new_stream(path, table.schema) as w:
                w.write_table(table)
        else:
            with pa.ipc.new_file(path, table.schema) as w:
                w.write_table(table)
    return make


def corrupt_offsets(path):
    import pyarrow as pa

    table = pa.table({"input_ids": pa.array([[1, 2], [3]], type=pa.list_(pa.int32()))})
    with pa.ipc.new_file(path, table.schema) as w:
        w.write_table(table)
    with open(path, "rb") as fh:
        data = bytearray(fh.read())
    at = data.find(struct.pack("<3i", 0, 2, 3))
    data[at:at + 12] = struct.pack("<3i", 0, 2, 1 << 30)
    with open(path, "wb") as fh:
        fh.write(bytes(data))


def hf_dir(table_fn, state=True, info=True):
    def make(path):
        import pyarrow as pa

        os.makedirs(path)
        table = table_fn()
        with pa.ipc.new_stream(os.path.join(path, "data-00000-of-00001.arrow"),
                               table.schema) as w:
            w.write_table(table)
        if state:
            text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}))(
                os.path.join(path, "state.json"))
        if info:
            text("{}")(os.path.join(path, "dataset_info.json"))
    return make


def folder(**files):
    def make(path):
        os.makedirs(path)
        for name, maker in files.items():
            maker(os.path.join(path, name))
    return make


def fifo(path):
    os.mkfifo(path)


def nested_json(depth: int, opener="[", closer="]"):
    return text(opener * depth + closer * depth)


def pickled(path):
    with open(path, "wb") as fh:
        pickle.dump([5, 7, 9], fh)


# --- content variants of a length file --------------------------------------------------------

GOOD = [5, 7, 9, 12, 30, 31, 64, 100]


def _pa_table(values, name="length", dictionary=False, lists=False, nulls=False):
    def build():
        import pyarrow as pa

        if lists:
            arr = pa.array([[1] * v for v in values], type=pa.list_(pa.int32()))
            return pa.table({"input_ids": arr})
        arr = pa.array(values + ([None] if nulls else []))
        if dictionary:
            arr = arr.dictionary_encode()
        return pa.table({name: arr})
    return build


def length_files() -> list[tuple[str, str, object, str]]:
    """(name, file name, maker, expect) for every format x content variant."""
    out = []
    arrays = {  # name -> (values, expect)
        "valid": (GOOD, "ok"),
        "one": ([42], "ok"),
        "zeros": ([0, 0, 0], "error"),
        "negative": ([5, -3, 7], "error"),
        "int64max": ([5, 2**63 - 1], "error"),
        "huge-total": ([2**50] * 2000, "error"),
        "large-total-ok": ([2**40] * 2000, "ok"),
    }
    for key, (values, expect) in arrays.items():
        arr = np.array(values, dtype=np.int64)
        out.append((f"npy-{key}", "lens.npy", npy(arr), expect))
        out.append((f"npz-{key}", "lens.npz", npz(lengths=arr), expect))
        out.append((f"txt-{key}", "lens.txt", text("\n".join(map(str, values)) + "\n"), expect))
        out.append((f"csv-{key}", "lens.csv",
                    text("seq_len,id\n" + "".join(f"{v},{i}\n" for i, v in enumerate(values))),
                    expect))
        for kind, suffix in (("parquet", "parquet"), ("file", "arrow"), ("stream", "arrows"),
                             ("feather1", "feather")):
            out.append((f"{kind}-{key}", f"lens.{suffix}", arrow(_pa_table(values), kind),
                        expect))
        out.append((f"hf-{key}", "hfdir", hf_dir(_pa_table(values)), expect))
    # format-specific hostile content
    out += [
        ("npy-float", "lens.npy", npy(np.array([5.5, 7.0])), "error"),
        ("npy-float-integral", "lens.npy", npy(np.array([5.0, 7.0])), "ok"),
        ("npy-nan", "lens.npy", npy(np.array([5.0, np.nan])), "error"),
        ("npy-inf", "lens.npy", npy(np.array([5.0, np.inf])), "error"),
        ("npy-bool", "lens.npy", npy(np.array([True, False])), "error"),
        ("npy-empty", "lens.npy", npy(np.zeros(0, dtype=np.int64)), "error"),
        ("npy-2d", "lens.npy", npy(np.ones((3, 3), dtype=np.int64)), "error"),  # (n, 2): pairs
        ("npy-strings", "lens.npy", npy(np.array(["5", "7"])), "error"),
        ("npy-object", "lens.npy", npy(np.array([5, "x"], dtype=object)), "error"),
        ("npy-uint64-big", "lens.npy", npy(np.array([5, 2**64 - 1], dtype=np.uint64)), "error"),
        ("npy-int8", "lens.npy", npy(np.array([5, 7], dtype=np.int8)), "ok"),
        ("npy-uint16", "lens.npy", npy(np.array([5, 7], dtype=np.uint16)), "ok"),
        ("npy-bigendian", "lens.npy", npy(np.array([5, 7], dtype=">i8")), "ok"),
        ("npy-complex", "lens.npy", npy(np.array([5 + 1j])), "error"),
        ("npy-pickle", "lens.npy", pickled, "error"),
        ("npy-truncated", "lens.npy", npy_header((1000,), total=200), "error"),
        ("npy-header-huge-shape", "lens.npy", npy_header((10**12,)), "error"),
        ("npy-header-negative-shape", "lens.npy", npy_header((-5,)), "error"),
        ("npy-sparse-1.2GB-zeros", "lens.npy", npy_header((150_000_000,), total=1_200_000_128),
         "error"),
        ("npy-garbage-header", "lens.npy", raw(b"\x93NUMPY\x01\x00\x10\x00{'descr': <<<<}\n"),
         "error"),
        ("npy-gzip", "lens.npy", raw(gzip.compress(b"\x93NUMPY" + b"0" * 100)), "error"),
        ("npz-empty", "lens.npz", npz(), "error"),
        ("npz-two-arrays", "lens.npz", npz(a=np.array([5]), b=np.array([7])), "error"),
        ("npz-named-lengths", "lens.npz", npz(lengths=np.array([5, 7]), ids=np.array([1, 2])),
         "ok"),
        ("npz-object", "lens.npz", npz(lengths=np.array([5, None], dtype=object)), "error"),
        ("npz-zip-bomb", "lens.npz", npz_bomb, "error"),
        ("npz-not-zip", "lens.npz", raw(b"PK\x03\x04garbage" * 10), "error"),
        ("txt-empty", "lens.txt", text(""), "error"),
        ("txt-only-comments", "lens.txt", text("# nothing\n\n"), "error"),
        ("txt-bom", "lens.txt", raw(b"\xef\xbb\xbf5\n7\n9\n"), "ok"),
        ("txt-crlf", "lens.txt", text("5\r\n7\r\n9\r\n"), "ok"),
        ("txt-cr-only", "lens.txt", text("5\r7\r9\r"), "ok"),
        ("txt-float", "lens.txt", text("5\n7.5\n"), "error"),
        ("txt-nan", "lens.txt", text("5\nnan\n"), "error"),
        ("txt-inf", "lens.txt", text("5\ninf\n"), "error"),
        ("txt-5000-digits", "lens.txt", text("5\n" + "9" * 5000 + "\n"), "error"),
        ("txt-underscore", "lens.txt", text("5\n1_000\n"), "error"),
        ("txt-hex", "lens.txt", text("5\n0x10\n"), "error"),
        ("txt-arabic-digits", "lens.txt", text("5\n\u0665\n"), "error"),
        ("txt-latin1", "lens.txt", raw(b"longueur\xe9\n5\n"), "error"),
        ("txt-binary", "lens.txt", raw(b"\x00\x01\x02" * 100), "error"),
        ("txt-giant-line", "lens.txt", text("5" * 3_000_000), "error"),
        ("txt-sparse-1GB-nul", "lens.txt", sparse(GIB), "error"),
        ("txt-gzip", "lens.txt.gz", raw(gzip.compress(b"5\n7\n")), "error"),
        ("csv-non-ascii-header", "lens.csv", text("länge\n5\n7\n"), "ok"),
        ("csv-non-ascii-two", "lens.csv", text("länge,größe\n5,1\n7,2\n"), "error"),
        ("csv-bom-header", "lens.csv", raw(b"\xef\xbb\xbfseq_len\n5\n7\n"), "ok"),
        ("csv-ragged", "lens.csv", text("seq_len,id\n5,1\n7\n"), "error"),
        ("csv-dup-header", "lens.csv", text("seq_len,seq_len\n5,1\n"), "error"),
        ("csv-header-no-rows", "lens.csv", text("seq_len\n"), "error"),
        ("csv-histogram", "lens.csv", text("length,count\n512,3\n1024,2\n"), "ok"),
        ("csv-histogram-overflow", "lens.csv",
         text(f"length,count\n512,{2**62}\n1024,{2**62}\n"), "error"),
        ("csv-histogram-negative", "lens.csv", text("length,count\n512,-3\n"), "error"),
        ("csv-quoted", "lens.csv", text('"seq_len"\n"5"\n"7"\n'), "ok"),
        ("csv-mixed-header", "lens.csv", text("seq_len,5\n5,7\n"), "error"),
        ("parquet-dictionary", "lens.parquet", arrow(_pa_table(GOOD, dictionary=True),
                                                      "parquet"), "ok"),
        ("arrow-dictionary", "lens.arrow", arrow(_pa_table(GOOD, dictionary=True)), "ok"),
        ("arrows-dictionary", "lens.arrows", arrow(_pa_table(GOOD, dictionary=True), "stream"),
         "ok"),
        ("parquet-non-ascii", "lens.parquet", arrow(_pa_table(GOOD, name="längd"), "parquet"),
         "ok"),
        ("arrow-non-ascii", "lens.arrow", arrow(_pa_table(GOOD, name="长度")), "ok"),
        ("parquet-nulls", "lens.parquet", arrow(_pa_table(GOOD, nulls=True), "parquet"),
         "error"),
        ("arrow-nulls", "lens.arrow", arrow(_pa_table(GOOD, nulls=True)), "error"),
        ("parquet-lists", "lens.parquet", arrow(_pa_table(GOOD, lists=True), "parquet"), "ok"),
        ("arrow-lists", "lens.arrow", arrow(_pa_table(GOOD, lists=True)), "ok"),
        ("feather1-lists-free", "lens.feather", arrow(_pa_table(GOOD, name="seq_len"),
                                                       "feather1"), "ok"),
        ("arrow-corrupt-offsets", "lens.arrow", corrupt_offsets, "error"),
        ("arrow-truncated", "lens.arrow", raw(b"ARROW1\x00\x00" + b"\x00" * 50), "error"),
        ("parquet-truncated", "lens.parquet", raw(b"PAR1" + b"\x00" * 100), "error"),
        ("parquet-gzip", "lens.parquet", raw(gzip.compress(b"PAR1....")), "error"),
        ("arrow-strings", "lens.arrow", arrow(lambda: __import__("pyarrow").table(
            {"length": ["5", "7"]})), "error"),
        ("parquet-floats", "lens.parquet", arrow(lambda: __import__("pyarrow").table(
            {"length": [5.5, 7.0]}), "parquet"), "error"),
        ("hf-no-state", "hfdir", hf_dir(_pa_table(GOOD), state=False), "error"),
        ("hf-state-not-json", "hfdir", folder(**{
            "state.json": text("{not json"),
            "data-00000-of-00001.arrow": arrow(_pa_table(GOOD), "stream")}), "error"),
        ("hf-state-nested", "hfdir", folder(**{"state.json": nested_json(100_000, "{\"a\":",
                                                                           "}")}), "error"),
        ("hf-state-sparse-1GB", "hfdir", folder(**{"state.json": sparse(GIB, b"{")}), "error"),
        ("hf-state-5000-digits", "hfdir", folder(**{"state.json": text(
            '{"_data_files": ' + "9" * 5000 + "}")}), "error"),
        ("hf-state-missing-shard", "hfdir", folder(**{"state.json": text(
            '{"_data_files": [{"filename": "nope.arrow"}]}')}), "error"),
        ("dir-empty", "dir", folder(), "error"),
        ("dir-mixed", "dir", folder(**{"a.npy": npy(np.array([5])), "b.txt": text("7\n")}),
         "error"),
        ("dir-shards", "dir", folder(**{"a.parquet": arrow(_pa_table([5, 7]), "parquet"),
                                        "b.parquet": arrow(_pa_table([9]), "parquet")}), "ok"),
        ("dir-with-fifo", "dir", folder(**{"a.txt": text("5\n"), "p.txt": fifo}), "ok"),
        ("fifo", "lens.txt", fifo, "error"),
        ("dev-zero", "/dev/zero", None, "error"),
        ("dev-null", "/dev/null", None, "error"),
        ("missing", "nope.npy", None, "error"),
        ("symlink-loop", "loop", lambda p: os.symlink(p, p), "error"),
        ("dangling-link", "dangling", lambda p: os.symlink(p + ".missing", p), "error"),
    ]
    return out


# --- the cases ----------------------------------------------------------------------------------

def _json_ok(check):
    def run(stdout):
        try:
            return bool(check(json.loads(stdout)))
        except (ValueError, KeyError, TypeError, IndexError):
            return False
    return run


def _solve_ok(max_length):
    return _json_ok(lambda d: d["boundaries"][-1] >= max_length and d["real_tokens"] > 0)


def file_cases() -> list[Case]:
    cases = []
    for name, filename, maker, expect in length_files():
        files = {} if maker is None else {filename: maker}
        path = filename
        commands = {
            "solve": ["solve", "--lens", path, "-k", "3", "--json", "-q"],
            "sweep": ["sweep", "--lens", path, "-k", "1:3", "--json", "-q"],
            "export": ["export", "--lens", path, "-k", "2", "--format", "sampler", "-q"],
            "inspect": ["inspect", path],
        }
        for command, argv in commands.items():
            check = None
            if expect == "ok" and command == "solve":
                check = _json_ok(lambda d: d["boundaries"] and d["real_tokens"] > 0)
            cases.append(Case(f"{command}:{name}", "file formats", expect, argv=argv,
                              files=files, check=check))
        # one length per sample, each a positive int64: the totals are solve()'s to refuse
        loaded = "ok" if name.endswith(("-int64max", "-huge-total")) else expect
        cases.append(Case(f"load_lengths:{name}", "file formats", loaded, files=files,
                          code=f"import bucketopt\na = bucketopt.load_lengths({path!r})\n"
                               "assert a.dtype.kind == 'i' and a.min() >= 1 and a.ndim == 1"))
    return cases


BAD_INTS = ["0", "-1", "x", "1.5", "1e3", "", " ", "9" * 5000, str(2**70), "0x10", "٣", "nan"]
BAD_FLOATS = ["nan", "inf", "-inf", "-0.1", "1.5", "0.5x", "", "9" * 5000, "1e400"]


def flag_cases() -> list[Case]:
    cases = []
    base = ["solve", "-k", "3", "--json", "-q"]
    for value in BAD_INTS:
        for flag in ("-k", "--token-budget", "--align", "--max-length", "--epochs"):
            argv = ["solve", "-k", "3", "-q"] if flag != "-k" else ["solve", "-q"]
            if flag == "--epochs":
                argv += ["--profile", "rtx-pro-6000-blackwell"]
            cases.append(Case(f"flag {flag}={value[:12]!r}", "CLI flags: numbers", "error",
                              argv=[*argv, flag, value]))
    for value in BAD_FLOATS:
        for flag in ("--min-share", "--max-share", "--min-fill"):
            cases.append(Case(f"flag {flag}={value[:12]!r}", "CLI flags: numbers", "error",
                              argv=[*base, flag, value]))
    for value in ("", "5,3", "a,b", "0,10", "-5,10", "1,,2", "9" * 5000, f"5,{2**62}",
                  "3.5,9000"):
        cases.append(Case(f"--boundaries {value[:12]!r}", "CLI flags: numbers", "error",
                          argv=["export", "--boundaries", value, "--format", "sampler", "-q"]))
    cases.append(Case("-k far above the data", "CLI flags: numbers", "ok",
                      argv=["solve", "-k", "100000000", "--json", "-q"]))
    cases.append(Case("--boundaries valid", "CLI flags: numbers", "ok",
                      argv=["export", "--boundaries", "2000,9000", "--format", "sampler", "-q"]))
    for command in ("solve", "sweep", "export", "inspect", "calibrate", "compare", "probe"):
        cases.append(Case(f"{command} --bogus", "CLI flags: unknown", "error",
                          argv=[command, "--bogus"], check=None))
        cases.append(Case(f"{command} --help", "CLI flags: unknown", "ok",
                          argv=[command, "--help"]))
    cases.append(Case("no command", "CLI flags: unknown", "error", argv=[]))
    cases.append(Case("unknown command", "CLI flags: unknown", "error", argv=["solv"]))
    cases.append(Case("--version", "CLI flags: unknown", "ok", argv=["--version"]))
    for overflow in ("truncate", "drop", "split"):
        cases.append(Case(f"compare --max-length 1 --overflow {overflow}", "overflow policies",
                          "ok" if overflow == "truncate" else "error",
                          argv=["compare", "-k", "3", "--token-budget", "8192", "--max-length",
                                "1", "--overflow", overflow, "--json", "-q",
                                "--no-diversity"]))
        cases.append(Case(f"solve --max-length 1 --overflow {overflow}", "overflow policies",
                          "error" if overflow == "drop" else "ok",
                          argv=["solve", "-k", "3", "--max-length", "1", "--overflow", overflow,
                                "--json", "-q"]))
    return cases


PROFILE_OK = {"alpha": 0.01, "beta": 1e-6, "gamma": 1e-10, "token_budget": 65536,
              "world_size": 8}


def _profile_text(**change) -> str:
    data = dict(PROFILE_OK)
    for key, value in change.items():
        if value is _DROP:
            data.pop(key)
        else:
            data[key] = value
    return json.dumps(data)


_DROP = object()


def profile_files() -> list[tuple[str, object, str]]:
    out = [
        ("valid", text(_profile_text()), "ok"),
        ("bom", raw(b"\xef\xbb\xbf" + _profile_text().encode()), "ok"),
        ("crlf-indented", text(json.dumps(PROFILE_OK, indent=2).replace("\n", "\r\n")), "ok"),
        ("5000-digit-int", text(_profile_text(alpha=1).replace('"alpha": 1',
                                                               '"alpha": 1' + "0" * 5000)),
         "error"),
        ("string-alpha", text(_profile_text(alpha="0.1")), "error"),
        ("string-budget", text(_profile_text(token_budget="65536")), "error"),
        ("bool-beta", text(_profile_text(beta=True)), "error"),
        ("1e308", text(_profile_text(alpha=1e308, beta=1e308, gamma=1e308)), "error"),
        ("NaN", text(_profile_text().replace("0.01", "NaN")), "error"),
        ("Infinity", text(_profile_text().replace("0.01", "Infinity")), "error"),
        ("negative", text(_profile_text(gamma=-1e-9)), "error"),
        ("all-zero", text(_profile_text(alpha=0, beta=0, gamma=0)), "error"),
        ("missing-gamma", text(_profile_text(gamma=_DROP)), "error"),
        ("list", text("[1, 2, 3]"), "error"),
        ("nested-100k", nested_json(100_000), "error"),
        ("nested-dict-100k", nested_json(100_000, '{"a":', "}"), "error"),
        ("empty", text(""), "error"),
        ("latin1", raw(b'{"alpha": 0.01, "name": "\xe9"}'), "error"),
        ("budget-1e30", text(_profile_text(token_budget=10**30)), "error"),
        ("world-size-0", text(_profile_text(world_size=0)), "error"),
        ("world-size-string", text(_profile_text(world_size="8")), "error"),
        ("world-size-float", text(_profile_text(world_size=2.5)), "error"),
        ("sparse-100MB", sparse(100 << 20, b"{"), "error"),
        ("fifo", fifo, "error"),
        ("directory", folder(), "error"),
        ("gzip", raw(gzip.compress(_profile_text().encode())), "error"),
    ]
    return out


def profile_cases() -> list[Case]:
    cases = []
    for name, maker, expect in profile_files():
        files = {"profile.json": maker}
        cases.append(Case(f"solve --profile {name}", "profiles", expect, files=files,
                          argv=["solve", "--lens", "lens.npy", "-k", "2", "--profile",
                                "profile.json", "--json", "-q"],
                          check=_json_ok(lambda d: d["ktok_per_s"] > 0)))
        cases[-1].files["lens.npy"] = npy(np.array(GOOD * 10))
        cases.append(Case(f"compare --profile {name}", "profiles", expect,
                          files={**files, "lens.npy": npy(np.array(GOOD * 10))},
                          argv=["compare", "--lens", "lens.npy", "-k", "2", "--profile",
                                "profile.json", "--json", "-q", "--no-diversity"]))
        cases.append(Case(f"solve(profile=) {name}", "profiles", expect, files=files,
                          code="import bucketopt\ns = bucketopt.solve([5, 7, 9, 100], 2, "
                               "profile='profile.json')\nassert s.ktok_per_s > 0"))
    nested = "v = []\nx = v\nfor _ in range(100000):\n    x.append([]); x = x[0]\n"
    ok = "alpha=0.01, beta=1e-6, gamma=1e-10"
    for name, setup, expr in (
            ("dict-string", "", "dict(alpha='0.1', beta=1e-6, gamma=1e-10)"),
            ("dict-bool", "", "dict(alpha=0.01, beta=1e-6, gamma=False)"),
            ("dict-bigint", "", "dict(alpha=10**5000, beta=1e-6, gamma=1e-10)"),
            ("dict-nan", "", "dict(alpha=0.01, beta=float('nan'), gamma=1e-10)"),
            ("dict-1e308", "", "dict(alpha=1e308, beta=1e308, gamma=1e308)"),
            ("dict-nested", nested, "dict(alpha=v, beta=1e-6, gamma=1e-10)"),
            ("dict-world-size-str", "", f"dict({ok}, world_size='8')"),
            ("dict-budget-bool", "", f"dict({ok}, token_budget=True)")):
        code = (f"import bucketopt\n{setup}p = {expr}\n"
                "bucketopt.solve([5, 7, 9], 2, profile=p, token_budget=1000)")
        cases.append(Case(f"profile {name}", "profiles", "error", code=code))
    cases.append(Case("profile dict valid", "profiles", "ok",
                      code=f"import bucketopt\ns = bucketopt.solve([5, 7, 9], 2, "
                           f"profile=dict({ok}), token_budget=1000)\nassert s.ktok_per_s > 0"))
    return cases


STATE = ("import bucketopt\ns = bucketopt.BucketBatchSampler(list(range(1, 200)), (50, 120, 199), "
         "token_budget=400, seed=3)\nst = s.state_dict()\n")


def state_cases() -> list[Case]:
    cases = []
    edits = {
        "as-is": ("", "ok"),
        "nested-list-100k": ("v = []\nx = v\nfor _ in range(100000):\n    x.append([]); x = x[0]\n"
                             "st = v\n", "error"),
        "nested-in-seed": ("v = []\nx = v\nfor _ in range(100000):\n    x.append([]); x = x[0]\n"
                           "st['seed'] = v\n", "error"),
        "nested-in-version": ("v = {}\nx = v\nfor _ in range(100000):\n    x['a'] = {}; "
                              "x = x['a']\nst['version'] = v\n", "error"),
        "nested-in-epoch": ("v = []\nx = v\nfor _ in range(100000):\n    x.append([]); x = x[0]\n"
                            "st['epoch'] = v\n", "error"),
        "string-epoch": ("st['epoch'] = '1'\n", "error"),
        "bool-position": ("st['position'] = True\n", "error"),
        "huge-position": ("st['position'] = 10**5000\n", "error"),
        "negative-position": ("st['position'] = -1\n", "error"),
        "float-epoch": ("st['epoch'] = 1.5\n", "error"),
        "other-seed": ("st['seed'] = 4\n", "error"),
        "huge-seed": ("st['seed'] = 10**5000\n", "error"),
        "missing-fingerprint": ("del st['fingerprint']\n", "error"),
        "bad-fingerprint": ("st['fingerprint'] = 'x' * 10**6\n", "error"),
        "version-99": ("st['version'] = 99\n", "error"),
        "not-a-dict": ("st = 'state'\n", "error"),
        "none": ("st = None\n", "error"),
        "list": ("st = [1, 2]\n", "error"),
        "string-world-size": ("st['world_size'] = '2'\n", "error"),
        "huge-string-key": ("st['x' * 10**6] = 1\n", "ok"),
    }
    for name, (edit, expect) in edits.items():
        cases.append(Case(f"load_state_dict {name}", "sampler states", expect,
                          code=STATE + edit + "s.load_state_dict(st)"))
    # a state saved to JSON and read back (1 GB sparse: must not be read)
    for name, maker, expect in (
            ("sparse-1GB", sparse(GIB, b"{"), "error"),
            ("nested", nested_json(100_000), "error"),
            ("fifo", fifo, "error"),
            ("bom", None, "ok")):
        if maker is None:
            code = (STATE + "import json\nopen('state.json', 'wb').write(b'\\xef\\xbb\\xbf' + "
                    "json.dumps(st).encode())\nfrom bucketopt.data.guards import read_json\n"
                    "s.load_state_dict(read_json('state.json', 'state'))")
            cases.append(Case(f"state.json {name}", "sampler states", expect, code=code))
            continue
        code = ("from bucketopt.data.guards import read_json\n" + STATE
                + "s.load_state_dict(read_json('state.json', 'state'))")
        cases.append(Case(f"state.json {name}", "sampler states", expect, code=code,
                          files={"state.json": maker}))
    configs = [
        ("valid", text(json.dumps({"format": SAMPLER_FORMAT, "boundaries": [50, 199],
                                   "token_budget": 400})), "ok"),
        ("fifo", fifo, "error"),
        ("directory", folder(), "error"),
        ("sparse-1GB", sparse(GIB, b"{"), "error"),
        ("nested", nested_json(100_000), "error"),
        ("5000-digits", text('{"boundaries": [' + "9" * 5000 + "]}"), "error"),
        ("string-budget", text(json.dumps({"format": SAMPLER_FORMAT,
                                           "boundaries": [50, 199], "token_budget": "400"})),
         "error"),
        ("bool-boundary", text(json.dumps({"format": SAMPLER_FORMAT,
                                           "boundaries": [True, 199], "token_budget": 400})),
         "error"),
        ("bom", raw(b"\xef\xbb\xbf" + json.dumps({"format": SAMPLER_FORMAT,
                                                   "boundaries": [50, 199],
                                                   "token_budget": 400}).encode()), "ok"),
        ("missing", None, "error"),
    ]
    from_format = "from bucketopt.show.export import SAMPLER_FORMAT\n"
    for name, maker, expect in configs:
        files = {} if maker is None else {"sampler.json": maker}
        code = ("from bucketopt.show.export import sampler_kwargs\n"
                "kw = sampler_kwargs('sampler.json')\nassert kw['boundaries'][-1] == 199")
        if name in ("valid", "string-budget", "bool-boundary", "bom"):
            code = from_format + code
        cases.append(Case(f"sampler_kwargs {name}", "sampler configs", expect, files=files,
                          code=code))
    return cases


SAMPLER = "import bucketopt\nL = list(range(1, 200))\n"


def api_cases() -> list[Case]:
    cases = []
    bad_values = {"bool": "True", "string": "'3'", "float-frac": "2.5", "nan": "float('nan')",
                  "inf": "float('inf')", "huge": "10**5000", "negative": "-1", "none-list": "[1]",
                  "nested": "NESTED", "zero": "0"}
    nested = "v = []\nx = v\nfor _ in range(100000):\n    x.append([]); x = x[0]\n"
    params = {
        "k": "bucketopt.solve(L, {v})",
        "token_budget": "bucketopt.solve(L, 2, token_budget={v})",
        "min_share": "bucketopt.solve(L, 2, min_share={v})",
        "max_share": "bucketopt.solve(L, 2, max_share={v})",
        "align": "bucketopt.solve(L, 2, align={v})",
        "min_fill": "bucketopt.solve(L, 2, token_budget=400, min_fill={v})",
        "world_size": "bucketopt.solve(L, 2, profile='rtx-pro-6000-blackwell', world_size={v})",
        "epochs": "bucketopt.solve(L, 2, profile='rtx-pro-6000-blackwell', epochs={v})",
        "max_length": "bucketopt.solve(L, 2, max_length={v})",
        "tolerance": "bucketopt.sweep(L, [1, 2], tolerance={v})",
        "seed": "bucketopt.BucketBatchSampler(L, (100, 199), token_budget=400, seed={v})",
        "rank": "bucketopt.BucketBatchSampler(L, (100, 199), token_budget=400, world_size=2, "
                "rank={v})",
        "grad_accum": "bucketopt.BucketBatchSampler(L, (100, 199), token_budget=400, "
                      "grad_accum={v})",
        "sampler token_budget": "bucketopt.BucketBatchSampler(L, (100, 199), token_budget={v})",
        "set_epoch": "bucketopt.BucketBatchSampler(L, (100, 199), token_budget=400)"
                     ".set_epoch({v})",
        "simulate seed": "bucketopt.simulate(L, 'shuffle', token_budget=400, seed={v})",
        "boundaries": "bucketopt.evaluate(L, {v})",
        "lengths": "bucketopt.solve({v}, 2)",
    }
    # values a parameter takes (so the case expects ok)
    valid = {("seed", "zero"), ("simulate seed", "zero"), ("set_epoch", "zero"),
             ("min_share", "zero"), ("min_fill", "zero"), ("rank", "zero"),
             ("tolerance", "zero"), ("tolerance", "float-frac")}
    for param, template in params.items():
        for vname, value in bad_values.items():
            expect = "ok" if (param, vname) in valid else "error"
            if param in ("lengths",) and vname == "none-list":
                expect = "ok"
            if param == "boundaries" and vname == "none-list":
                expect = "error"
            prefix = SAMPLER + (nested if value == "NESTED" else "")
            call = template.format(v="v" if value == "NESTED" else value)
            cases.append(Case(f"{param}={vname}", "API numbers", expect, code=prefix + call))
    # int64 overflow where counts and edges multiply
    overflow = [
        ("Histogram 2**62 counts", "from bucketopt.data.histogram import Histogram\n"
         "bucketopt.solve(Histogram(values=[1, 2], counts=[2**62, 2**62]), 2)", "error"),
        ("Histogram 2**63-1 count", "from bucketopt.data.histogram import Histogram\n"
         "Histogram(values=[1], counts=[2**63 - 1])", "error"),
        ("Histogram uint64 count", "import numpy as np\nfrom bucketopt.data.histogram import "
         "Histogram\nHistogram(values=[1], counts=np.array([2**64 - 1], dtype=np.uint64))",
         "error"),
        ("Histogram many large counts", "import numpy as np\nfrom bucketopt.data.histogram import "
         "Histogram\nHistogram(values=np.arange(1, 1001), counts=np.full(1000, 2**53))",
         "error"),
        ("evaluate 2**62 edge", "bucketopt.evaluate([100, 200], (2**62,))", "error"),
        ("evaluate 2**61 edge x8", "bucketopt.evaluate([100] * 8, (2**61,))", "error"),
        ("evaluate 2**59 edge", "bucketopt.evaluate([100, 200], (2**59,))", "error"),
        ("evaluate 2**40 edge ok", "s = bucketopt.evaluate([100, 200], (2**40,))\n"
         "assert 0.99 < s.padding_fraction < 1", "ok"),
        ("evaluate edges past 2**63", "bucketopt.evaluate([100], (2**64,))", "error"),
        ("solve length 2**62", "bucketopt.solve([2**62], 1)", "error"),
        ("solve lengths 2**59 x 4", "bucketopt.solve([2**59] * 4, 1)", "error"),
        ("dict histogram", "s = bucketopt.solve({512: 3, 1024: 2}, 2)\n"
         "assert s.counts == (3, 2) and s.boundaries == (512, 1024)", "ok"),
        ("Counter histogram", "from collections import Counter\n"
         "s = bucketopt.solve(Counter([5, 5, 9]), 1)\nassert s.counts == (3,)", "ok"),
        ("dict histogram zero count", "s = bucketopt.solve({512: 3, 1024: 0}, 2)\n"
         "assert s.counts == (3,)", "ok"),
        ("dict histogram string count", "bucketopt.solve({512: '3'}, 2)", "error"),
        ("dict histogram negative", "bucketopt.solve({512: -3}, 2)", "error"),
        ("dict histogram 2**62", "bucketopt.solve({512: 2**62}, 1)", "error"),
        ("dict to sampler", "bucketopt.BucketBatchSampler({5: 2}, (5,), token_budget=10)",
         "error"),
        ("dict evaluate", "s = bucketopt.evaluate({5: 2, 9: 1}, (9,))\nassert s.counts == (3,)",
         "ok"),
    ]
    for name, code, expect in overflow:
        cases.append(Case(name, "integer overflow", expect, code=SAMPLER + code))
    plan = SAMPLER + "s = bucketopt.BucketBatchSampler(L, (100, 199), token_budget=400, " \
                     "world_size=4)\np = s.plan()\n"
    for rank, expect in (("-1", "error"), ("4", "error"), ("5", "error"), ("'0'", "error"),
                         ("1.5", "error"), ("True", "error"), ("0", "ok"), ("3", "ok"),
                         ("None", "ok"), ("10**5000", "error")):
        check = "\nassert isinstance(b, list)"
        cases.append(Case(f"plan().batches({rank})", "sampler and plan arguments", expect,
                          code=plan + f"b = p.batches({rank})" + check))
    cal = ("import bucketopt\ns = [1, 2, 4, 8, 16, 4, 2, 1]\nL = [512, 512, 1024, 1024, 2048, "
           "4096, 8192, 8192]\nt = [0.01 + 1e-5 * a * b + 1e-9 * a * b * b for a, b in "
           "zip(s, L)]\n")
    for kw, expect in (("folds=1", "error"), ("folds=0", "ok"), ("folds=2", "ok"),
                       ("bootstrap=10**8", "error"), ("bootstrap=10**5000", "error"),
                       ("folds='3'", "error"), ("bootstrap=True", "error"),
                       ("bootstrap=-1", "error"), ("bootstrap=2.5", "error"),
                       ("folds=float('nan')", "error"), ("seed='x'", "error"),
                       ("bootstrap=0", "ok")):
        cases.append(Case(f"calibrate({kw})", "API bounds", expect,
                          code=cal + f"c = bucketopt.calibrate(s, L, t, {kw})\n"
                                     "assert c.beta > 0"))
    epoch = ("import bucketopt\nfrom bucketopt.cost.costmodel import time_epoch, load_profile\n"
             "m = load_profile('rtx-pro-6000-blackwell').cost_model()\n")
    for arg, expect in (("'x', m", "error"), ("None, m", "error"), ("[1, 2], m", "error"),
                        ("bucketopt.simulate([5, 7, 9], 'sorted', token_budget=20), 'x'",
                         "error")):
        cases.append(Case(f"time_epoch({arg[:20]})", "API bounds", expect,
                          code=epoch + f"time_epoch({arg})"))
    pack = ("import numpy as np\nfrom bucketopt.training.packing import pack_rows\n"
            "L = np.random.default_rng(0).integers(1, 4096, {n})\n")
    for n in (88_641, 300_000):
        cases.append(Case(f"pack_rows bfd n={n}", "API bounds", "ok",
                          code=pack.format(n=n) + "r = pack_rows(L, 8192, method='bfd')\n"
                                                  "assert r is not None"))
    for kw, expect in (("method='bogus'", "error"), ("window=0", "error"),
                       ("window='8'", "error"), ("window=True", "error"),
                       ("method='bfd', window=10**5000", "error")):
        cases.append(Case(f"pack_rows {kw}", "API bounds", expect,
                          code=pack.format(n=1000) + f"pack_rows(L, 8192, {kw})"))
    for capacity, expect in (("0", "error"), ("'8192'", "error"), ("True", "error"),
                             ("10", "error"), ("2**70", "error"), ("float('nan')", "error")):
        cases.append(Case(f"pack_rows capacity={capacity}", "API bounds", expect,
                          code=pack.format(n=1000) + f"pack_rows(L, {capacity})"))
    return cases


def output_cases() -> list[Case]:
    cases = []
    lens = {"lens.npy": npy(np.array(GOOD * 50))}
    writers = {
        "export -o": (["export", "--lens", "lens.npy", "-k", "2", "--format", "sampler", "-o",
                       "out.json", "-q"], "out.json"),
        "calibrate -o": (["calibrate", "--measurements", "m.csv", "-o", "out.json", "-q",
                          "--bootstrap", "20"], "out.json"),
        "sweep --plot": (["sweep", "--lens", "lens.npy", "-k", "1:3", "--plot", "out.png",
                          "-q"], "out.png"),
        "solve --plot": (["solve", "--lens", "lens.npy", "-k", "3", "--plot", "out.svg", "-q"],
                         "out.svg"),
        "compare --plot": (["compare", "--lens", "lens.npy", "-k", "2", "--token-budget",
                            "4096", "--plot", "out.pdf", "-q", "--no-diversity"], "out.pdf"),
    }
    rows = [(a, b) for a in (1, 2, 4, 8, 16) for b in (512, 1024, 2048)]
    measurements = "batch_size,padded_len,seconds\n" + "".join(
        f"{a},{b},{0.01 + 1e-5 * a * b + 1e-9 * a * b * b}\n" for a, b in rows)
    files = {**lens, "m.csv": text(measurements)}
    for name, (argv, out) in writers.items():
        cases.append(Case(f"{name} plain", "outputs", "ok", argv=argv, files=files))
        for limit in (0, 100) + ((1000, 4000) if name.endswith("--plot") else (50,)):
            cases.append(Case(f"{name} ulimit -f {limit} B", "outputs", "error", argv=argv,
                              files=files, fsize=limit, output=out))
        full = [a if a != out else "/dev/full" for a in argv]
        if not name.endswith("--plot"):
            cases.append(Case(f"{name} /dev/full", "outputs", "error", argv=full, files=files))
        cases.append(Case(f"{name} missing folder", "outputs", "error",
                          argv=[a if a != out else f"nofolder/{out}" for a in argv],
                          files=files))
        cases.append(Case(f"{name} to a folder", "outputs", "error",
                          argv=[a if a != out else "adir" for a in argv],
                          files={**files, "adir": folder()}))
        cases.append(Case(f"{name} unwritable folder", "permissions", "error",
                          argv=[a if a != out else f"ro/{out}" for a in argv],
                          files={**files, "ro": folder()}, chmod={"ro": 0o555}, nopriv=True,
                          output=f"ro/{out}"))
    stdout_commands = {
        "solve": ["solve", "--lens", "lens.npy", "-k", "3"],
        "solve --json": ["solve", "--lens", "lens.npy", "-k", "3", "--json"],
        "sweep": ["sweep", "--lens", "lens.npy", "-k", "1:4"],
        "sweep --json": ["sweep", "--lens", "lens.npy", "-k", "1:4", "--json"],
        "export": ["export", "--lens", "lens.npy", "-k", "2", "--format", "sampler"],
        "inspect": ["inspect", "lens.npy"],
        "compare": ["compare", "--lens", "lens.npy", "-k", "2", "--token-budget", "4096",
                    "--no-diversity"],
        "calibrate": ["calibrate", "--measurements", "m.csv", "--bootstrap", "20"],
        "calibrate --json": ["calibrate", "--measurements", "m.csv", "--json",
                             "--bootstrap", "20"],
    }
    for name, argv in stdout_commands.items():
        for mode in ("devfull", "closed"):
            cases.append(Case(f"{name} stdout={mode}", "outputs: stdout", "error",
                              argv=[*argv, "-q"], files=files, stdout=mode))
        cases.append(Case(f"{name} stdout ulimit -f 0", "outputs: stdout", "error",
                          argv=[*argv, "-q"], files=files, stdout="file", fsize=0))
    same = [
        ("export -o = --lens", ["export", "--lens", "lens.npy", "-k", "2", "--format",
                                "sampler", "-o", "lens.npy"], "lens.npy"),
        ("export -o = --lens via ./", ["export", "--lens", "lens.npy", "-k", "2", "--format",
                                       "sampler", "-o", "./lens.npy"], "lens.npy"),
        ("export -o = --lens via link", ["export", "--lens", "lens.npy", "-k", "2", "--format",
                                         "sampler", "-o", "link.npy"], "lens.npy"),
        ("export -o = --profile", ["export", "--lens", "lens.npy", "-k", "2", "--format",
                                   "sampler", "--profile", "p.json", "-o", "p.json"], "p.json"),
        ("calibrate -o = --measurements", ["calibrate", "--measurements", "m.csv", "-o",
                                           "m.csv"], "m.csv"),
        ("probe -o X --measurements X", ["probe", "--model", "nomod:f", "--token-budget", "4096",
                                         "--max-length", "512", "-o", "x.json",
                                         "--measurements", "x.json"], None),
        ("probe --measurements = --profile", ["probe", "--model", "nomod:f", "--token-budget",
                                              "4096", "--max-length", "512", "--measurements",
                                              "m.csv"], None),
        ("sweep --plot = --lens", ["sweep", "--lens", "lens.png", "-k", "1:2", "--plot",
                                   "lens.png"], None),
    ]
    for name, argv, keep in same:
        extra = {"link.npy": lambda p: os.symlink("lens.npy", p),
                 "p.json": text(_profile_text()),
                 "lens.png": text("5\n7\n9\n")}
        cases.append(Case(name, "outputs: same path", "error", argv=argv,
                          files={**files, **extra}, output=keep))
    return cases


def link(target: str):
    def make(path):
        os.symlink(target, path)
    return make


def input_output_cases() -> list[Case]:
    """Outputs that name a file the command reads (or would read next time), of every kind:
    refused, and every input left whole; and outputs beside the inputs that the next read does
    not take: written."""
    files = {
        "lens.npy": npy(np.array(GOOD * 50)),
        "shards": folder(**{"a.npy": npy(np.array(GOOD * 20)),
                            "b.npy": npy(np.array(GOOD * 30))}),
        "texts": folder(**{"a.svg": text("5\n7\n9\n"), "b.txt": text("12\n30\n")}),
        "globbed": folder(**{"a.npy": npy(np.array(GOOD)), "b.npy": npy(np.array(GOOD))}),
        "hf": hf_dir(_pa_table(GOOD, lists=True)),
        "mem.json": text(json.dumps({"m0": 1e9, "m1": 1e4, "m2": 0, "capacity": 8e10})),
        "p.json": text(_profile_text()),
        "model.py": text("def make():\n    raise SystemExit('never built')\n"),
        "cfg.json": text(json.dumps({"model_type": "gpt2", "n_layer": 1})),
        "m.csv": text("batch_size,padded_len,seconds\n1,512,0.01\n2,512,0.02\n"),
        "link-a.npy": link("shards/a.npy"),
        "link-mem.json": link("mem.json"),
        "link-m.csv": link("m.csv"),
        "link-shards": link("shards"),
    }
    export = ["export", "-k", "2", "--format", "sampler", "-q"]
    probe = ["probe", "--token-budget", "64", "--max-length", "8", "-q"]
    refused = [  # (name, argv, the input it names, or None for a file not there yet)
        ("export -o a shard of --lens FOLDER", [*export, "--lens", "shards", "-o",
                                                "shards/a.npy"], "shards/a.npy"),
        ("export -o a new file in --lens FOLDER", [*export, "--lens", "shards", "-o",
                                                   "shards/new.json"], None),
        ("export -o a shard through a linked folder", [*export, "--lens", "shards", "-o",
                                                       "link-shards/b.npy"], "shards/b.npy"),
        ("export -o a link to a shard", [*export, "--lens", "shards", "-o", "link-a.npy"],
         "shards/a.npy"),
        ("export -o a match of --lens GLOB", [*export, "--lens", "globbed/*.npy", "-o",
                                              "globbed/a.npy"], "globbed/a.npy"),
        ("export -o a new match of --lens GLOB", [*export, "--lens", "globbed/*.npy", "-o",
                                                  "globbed/c.npy"], None),
        ("export -o a hf shard", [*export, "--lens", "hf", "-o",
                                  "hf/data-00000-of-00001.arrow"], "hf/data-00000-of-00001.arrow"),
        ("export -o hf state.json", [*export, "--lens", "hf", "-o", "hf/state.json"],
         "hf/state.json"),
        ("export -o hf dataset_info.json", [*export, "--lens", "hf", "-o",
                                            "hf/dataset_info.json"], "hf/dataset_info.json"),
        ("solve --plot a text shard", ["solve", "-k", "2", "--lens", "texts", "--plot",
                                       "texts/a.svg", "-q"], "texts/a.svg"),
        ("solve --plot a new file in --lens FOLDER", ["solve", "-k", "2", "--lens", "texts",
                                                      "--plot", "texts/new.png", "-q"], None),
        ("sweep --plot a new match of --lens GLOB", ["sweep", "-k", "1:2", "--lens",
                                                     "globbed/*", "--plot", "globbed/x.pdf",
                                                     "-q"], None),
        ("export -o --memory", [*export, "--memory", "mem.json", "-o", "mem.json"],
         "mem.json"),
        ("export -o a link to --memory", [*export, "--memory", "mem.json", "-o",
                                          "link-mem.json"], "mem.json"),
        ("compare --plot --profile", ["compare", "-k", "2", "--token-budget", "4096",
                                      "--profile", "p.json", "--plot", "p.json", "-q"],
         "p.json"),
        ("probe -o the --model module", [*probe, "--model", "model.py:make", "-o", "model.py"],
         "model.py"),
        ("probe --measurements the --model module", [*probe, "--model", "model.py:make",
                                                     "--measurements", "model.py"], "model.py"),
        ("probe -o the dotted --model module", [*probe, "--model", "model:make", "-o",
                                                "model.py"], "model.py"),
        ("probe -o the --model hf: config", [*probe, "--model", "hf:cfg.json", "-o",
                                             "cfg.json"], "cfg.json"),
        ("calibrate -o a link to --measurements", ["calibrate", "--measurements", "m.csv",
                                                   "-o", "link-m.csv", "-q"], "m.csv"),
    ]
    cases = [Case(name, "outputs: naming an input", "error", argv=argv, files=files,
                  output=keep) for name, argv, keep in refused]
    written = [
        ("export -o a _-named file in --lens FOLDER", [*export, "--lens", "shards", "-o",
                                                       "shards/_plan.json"]),
        ("export -o a non-match beside --lens GLOB", [*export, "--lens", "globbed/*.npy",
                                                      "-o", "globbed/plan.json"]),
        ("export -o a new file beside a hf dataset", [*export, "--lens", "hf", "-o",
                                                      "hf/plan.json"]),
    ]
    cases += [Case(name, "outputs: naming an input", "ok", argv=argv, files=files)
              for name, argv in written]
    return cases


# A run whose write is ended by a signal once its content is out, before the rename (the
# hook sends the signal to the process itself): exit 130 / 143, one line, the target old.
_SIGNAL_IN_WRITE = """\
import os, signal, time
import bucketopt.data.output as output
if {named}:
    output._anonymous_file = lambda folder: None
keep = output._keep_mode
def hook(target, fd):
    keep(target, fd)
    os.kill(os.getpid(), signal.{signal})
    time.sleep(30)
output._keep_mode = hook
from bucketopt.cli import main
sys.exit(main({argv!r}))
"""


def signal_write_cases() -> list[Case]:
    files = {"lens.npy": npy(np.random.default_rng(0).integers(1, 4000, 20_000))}
    writers = {
        "solve --plot png": (["solve", "-k", "4", "--plot", "x.png"], "x.png"),
        "sweep --plot pdf": (["sweep", "-k", "1:6", "--plot", "x.pdf"], "x.pdf"),
        "compare --plot svg": (["compare", "-k", "2", "--token-budget", "4096", "--plot",
                                "x.svg", "--no-diversity"], "x.svg"),
        "export -o": (["export", "-k", "4", "--format", "sampler", "-o", "out.json"],
                      "out.json"),
    }
    cases = []
    for name, (argv, out) in writers.items():
        argv = [*argv, "--lens", "lens.npy", "-q"]
        for sig in ("SIGINT", "SIGTERM"):
            for named in (False, True):
                code = _SIGNAL_IN_WRITE.format(named=named, signal=sig, argv=argv)
                cases.append(Case(f"{name}: {sig} in the write"
                                  + (" (named temporary)" if named else ""),
                                  "outputs: signal during a write", "interrupt", code=code,
                                  files=files, output=out, signal=sig))
            for delay in (0.5, 1.5, 3.0):
                cases.append(Case(f"{name}: {sig} after {delay} s",
                                  "outputs: signal during a write", "interrupt", argv=argv,
                                  files=files, output=out, interrupt=delay, signal=sig))
    return cases


def special_cases() -> list[Case]:
    cases = []
    for flag, argv in (("--lens", ["solve", "-k", "2", "--lens", "p"]),
                       ("--profile", ["solve", "-k", "2", "--profile", "p"]),
                       ("--measurements", ["calibrate", "--measurements", "p"]),
                       ("--boundaries file", ["inspect", "p"])):
        cases.append(Case(f"FIFO {flag}", "FIFOs and devices", "error", argv=argv,
                          files={"p": fifo}))
    for dev in ("/dev/zero", "/dev/urandom", "/dev/null", "/dev/stdin"):
        cases.append(Case(f"device --profile {dev}", "FIFOs and devices", "error",
                          argv=["solve", "-k", "2", "--profile", dev]))
        cases.append(Case(f"device --measurements {dev}", "FIFOs and devices", "error",
                          argv=["calibrate", "--measurements", dev]))
    perms = [
        ("unreadable file", "lens.txt", text("5\n7\n"), 0o000),
        ("unreadable folder", "d", folder(**{"a.txt": text("5\n")}), 0o000),
        ("unlistable folder", "d", folder(**{"a.txt": text("5\n")}), 0o111),
        ("unreadable npy", "lens.npy", npy(np.array(GOOD)), 0o000),
        ("unreadable parquet", "lens.parquet", arrow(_pa_table(GOOD), "parquet"), 0o000),
        ("unreadable hf", "hf", hf_dir(_pa_table(GOOD)), 0o000),
    ]
    for name, target, maker, mode in perms:
        cases.append(Case(f"permissions: {name}", "permissions", "error",
                          argv=["solve", "-k", "2", "--lens", target, "-q"],
                          files={target: maker}, chmod={target: mode}, nopriv=True))
        cases.append(Case(f"permissions: {name} (load_lengths)", "permissions", "error",
                          code=f"import bucketopt\nbucketopt.load_lengths({target!r})",
                          files={target: maker}, chmod={target: mode}, nopriv=True))
    cases.append(Case("permissions: unreadable profile", "permissions", "error",
                      argv=["solve", "-k", "2", "--profile", "p.json"],
                      files={"p.json": text(_profile_text())}, chmod={"p.json": 0}, nopriv=True))
    cases.append(Case("permissions: unreadable measurements", "permissions", "error",
                      argv=["calibrate", "--measurements", "m.csv"],
                      files={"m.csv": text("batch_size,padded_len,seconds\n")},
                      chmod={"m.csv": 0}, nopriv=True))
    big = {"measurements 1GB sparse": ("m.csv", sparse(GIB, b"batch_size,padded_len,seconds\n"),
                                       ["calibrate", "--measurements", "m.csv"]),
           "measurements 100MB rows": ("m.csv", None, ["calibrate", "--measurements", "m.csv"]),
           "lens text 1GB sparse digits": ("lens.txt", sparse(GIB, b"5\n7\n"),
                                           ["solve", "-k", "2", "--lens", "lens.txt"])}
    for name, (target, maker, argv) in big.items():
        if maker is None:
            def maker(path):
                with open(path, "w") as fh:
                    fh.write("batch_size,padded_len,seconds\n")
                    line = "1,512,0.01\n" * 100_000
                    for _ in range(100):
                        fh.write(line)
        cases.append(Case(name, "huge files", "error", argv=[*argv, "-q"],
                          files={target: maker}))
    for delay in (0.3, 1.0, 2.0, 4.0):
        cases.append(Case(f"Ctrl-C after {delay} s (compare)", "Ctrl-C", "interrupt",
                          argv=["compare", "-k", "6", "--token-budget", "65536", "--pad",
                                "batch", "-q"], interrupt=delay))
        cases.append(Case(f"Ctrl-C after {delay} s (time objective)", "Ctrl-C", "interrupt",
                          argv=["solve", "-k", "12", "--profile", "rtx-pro-6000-blackwell",
                                "--pad", "batch", "--exact", "-q"], interrupt=delay))
    return cases


def all_cases() -> list[Case]:
    cases = (file_cases() + flag_cases() + profile_cases() + state_cases() + api_cases()
             + output_cases() + input_output_cases() + signal_write_cases()
             + special_cases() + tampered_state_cases() + count_cases() + scale_cases()
             + link_loop_cases() + float_count_cases() + environment_cases())
    seen = set()
    for case in cases:  # names are unique: a table row is one case
        while case.name in seen:
            case.name += "'"
        seen.add(case.name)
    return cases


# --- tampered states, counts beyond meaning, malformed values, scale ------------------------------

STREAM = """\
import json
import numpy as np
from bucketopt.training.streaming import StreamBatcher
items = list(range(40))
size = dict(length=lambda i: 1 + i % 4, token_budget=8, buffer_size=10)
one = StreamBatcher(items, [2, 4], **size)
steps = one.micro_steps()
seen = [i for _ in range(3) for b in next(steps) for i in b]
s = json.loads(json.dumps(one.state_dict()))
b = StreamBatcher(items, [2, 4], **size)
"""
# a state must be refused when loaded: an error while iterating after it loaded is a traceback
STREAM_LOAD = """\
b.load_state_dict(s)
try:
    rest = [i for batch in b for i in batch]
except BucketoptError as exc:
    raise RuntimeError("refused after it loaded: " + str(exc)) from None
assert sorted(seen + rest) == items, "an item lost or batched twice"
"""
BIG_SAMPLER = ("import numpy as np\nimport bucketopt\n"
               "L = np.random.default_rng(0).integers(1, 2000, 1_000_000)\n"
               "s = bucketopt.BucketBatchSampler(L, (500, 1000, 2000), token_budget=8000, "
               "seed=3)\nst = s.state_dict()\n")
MEMORY = {"m0": 1e9, "m1": 1e4, "m2": 0, "capacity": 8e9}


def tampered_state_cases() -> list[Case]:
    cases = []
    edits = {
        "as-is": ("", "ok"),
        "stats.batches='x'": ("s['stats']['batches'] = 'x'\n", "error"),
        "stats.real_tokens=None": ("s['stats']['real_tokens'] = None\n", "error"),
        "stats.items=-5": ("s['stats']['items'] = -5\n", "error"),
        "done without tail": ("s['done'] = True\n", "error"),
        "inf in buffer": ("s['buffer'][0].append([float('inf'), 1])\n", "error"),
        "-1 in rng": ("s['rng'][1][0] = -1\n", "error"),
        "numpy seed array": ("s['seed'] = np.array([0, 0])\n", "error"),
        "position past the end": ("s['position'] = 41\ns['stats']['items'] = 41\n", "error"),
        "position 10**6": ("s['position'] = 10**6\n", "error"),
        "position 10**6 and items": ("s['position'] = s['stats']['items'] = 10**6\n", "error"),
        "string buffer entry": ("s['buffer'][1][0][0] = str(s['buffer'][1][0][0])\n", "error"),
        "float buffer entry": ("s['buffer'][1][0][0] += 0.5\n", "error"),
        "buffer emptied": ("s['buffer'] = [[], []]\n", "error"),
        "tail [] mid-stream": ("s['tail'] = []\n", "error"),
        "numpy int seed": ("s['seed'] = np.int64(0)\n", "ok"),
    }
    for name, (edit, expect) in edits.items():
        cases.append(Case(f"StreamBatcher state {name}", "tampered states", expect,
                          code=STREAM + edit + STREAM_LOAD))
    for key in ("seed", "version", "fingerprint", "settings"):
        cases.append(Case(f"sampler state numpy {key}", "tampered states", "error",
                          code=STATE + f"import numpy as np\nst[{key!r}] = np.array([1, 2])\n"
                                       "s.load_state_dict(st)"))
    cases.append(Case("sampler state 64 tampered segments, 1M samples", "tampered states",
                      "error", code=BIG_SAMPLER + "s.load_state_dict({**st, 'segments': "
                                                  "[[2, 1, 1]] * 64})"))
    cases.append(Case("sampler state 64 segments at position 0, 1M samples", "tampered states",
                      "ok", code=BIG_SAMPLER + "s.load_state_dict({**st, 'segments': "
                                               "[[2 + i % 2, 1, 0] for i in range(64)]})\n"
                                               "assert s.plan().n_batches > 0"))
    for step, expect in (('"x"', "error"), ("-1", "error"), ("2.5", "error"), ("12", "ok")):
        cases.append(Case(f"trainer_state.json global_step={step}", "tampered states", expect,
                          files={"ck": folder(**{"trainer_state.json": text(
                              f'{{"global_step": {step}}}')})},
                          code="from bucketopt.integrations.transformers import "
                               "_checkpoint_step\nassert _checkpoint_step('ck') == 12"))
    return cases


def count_cases() -> list[Case]:
    cases = []
    lens = {"lens.npy": npy(np.random.default_rng(0).integers(1, 4000, 20_000))}
    mem = "memory=" + repr(MEMORY)
    cli = [
        ("solve -k 1000000000 --pad batch", ["solve", "--lens", "lens.npy", "-k", "1000000000",
                                             "--pad", "batch", "--token-budget", "8192",
                                             "--json", "-q"], "ok", {}),
        ("compare --gpus 2**60", ["compare", "--lens", "lens.npy", "-k", "3", "--token-budget",
                                  "8192", "--gpus", str(2**60), "-q"], "error", {}),
        ("compare --gpus 1000000", ["compare", "--lens", "lens.npy", "-k", "3",
                                    "--token-budget", "8192", "--gpus", "1000000", "-q"],
         "error", {}),
        ("--gpu-memory 1e9", ["solve", "--lens", "lens.npy", "-k", "3", "--memory", "mem.json",
                              "--gpu-memory", "1e9", "--json", "-q"], "ok",
         {"mem.json": text(json.dumps(MEMORY))}),
        ("memory JSON with a BOM", ["solve", "--lens", "lens.npy", "-k", "3", "--memory",
                                    "mem.json", "--json", "-q"], "ok",
         {"mem.json": raw(b"\xef\xbb\xbf" + json.dumps(MEMORY).encode())}),
        ("memory JSON 400 digits", ["solve", "--lens", "lens.npy", "-k", "3", "--memory",
                                    "mem.json", "-q"], "error",
         {"mem.json": text('{"m0": 1' + "0" * 400 + ', "m1": 1e4, "m2": 0, "capacity": 8e9}')}),
        ("memory JSON 5000 digits", ["solve", "--lens", "lens.npy", "-k", "3", "--memory",
                                     "mem.json", "-q"], "error",
         {"mem.json": text('{"m0": 1' + "0" * 5000 + ', "m1": 1e4, "m2": 0}')}),
        ("memory JSON provenance.probe list", ["solve", "--lens", "lens.npy", "-k", "3",
                                               "--memory", "mem.json", "-q"], "error",
         {"mem.json": text('{"provenance": {"probe": [1, 2]}}')}),
        ("memory JSON nested 100000", ["solve", "--lens", "lens.npy", "-k", "3", "--memory",
                                       "mem.json", "-q"], "error",
         {"mem.json": text('{"m0": ' + "[" * 100_000 + "]" * 100_000 + "}")}),
        ("memory JSON headroom '0.5'", ["solve", "--lens", "lens.npy", "-k", "3", "--memory",
                                        "mem.json", "-q"], "error",
         {"mem.json": text(json.dumps({**MEMORY, "headroom": "0.5"}))}),
        ("profile uncertainty 1e7", ["solve", "--lens", "lens.npy", "-k", "3", "--profile",
                                     "prof.json", "--token-budget", "8192", "-q"], "error",
         {"prof.json": text(json.dumps({"alpha": 0.1, "beta": 1e-4, "gamma": 0.0,
                                        "uncertainty": {"coefficient_sets": [[1e7, 0, 0]]}}))}),
        ("profile uncertainty 400 digits", ["solve", "--lens", "lens.npy", "-k", "3",
                                            "--profile", "prof.json", "--token-budget", "8192",
                                            "-q"], "error",
         {"prof.json": text('{"alpha": 0.1, "beta": 1e-4, "gamma": 0.0, "uncertainty": '
                            '{"coefficient_sets": [[1' + "0" * 400 + ', 0, 0]]}}')}),
        ("--lens name with a newline", ["solve", "--lens", "bad\nname.npy", "-k", "2", "-q"],
         "error", {"bad\nname.npy": text("x")}),
        ("--memory name with a newline", ["solve", "--lens", "lens.npy", "-k", "2", "--memory",
                                          "bad\nmem.json", "-q"], "error",
         {"bad\nmem.json": text('{"m0": 1}')}),
        ("--measurements name with a newline", ["calibrate", "--measurements",
                                                "bad\nm.csv"], "error",
         {"bad\nm.csv": text("x\n1\n")}),
    ]
    for name, argv, expect, files in cli:
        check = None
        if name.startswith("solve -k 1000000000"):
            check = _json_ok(lambda d: d["padding_fraction"] == 0.0)
        elif expect == "ok":
            check = _json_ok(lambda d: d["boundaries"][-1] >= 3900)
        cases.append(Case(name, "counts and values", expect, argv=argv,
                          files={**lens, **files}, check=check))
    api = [
        ("probe warmup=10**9", "from bucketopt.cost.probe import probe\n"
         "probe('no-such:build', token_budget=128, max_length=16, warmup=10**9)", "error"),
        ("batch_sizes=[10**5000, 1, 1]", "bucketopt.BucketBatchSampler(L, (50, 120, 199), "
         "batch_sizes=[10**5000, 1, 1])", "error"),
        ("batch_sizes=[True, 1, 1]", "bucketopt.BucketBatchSampler(L, (50, 120, 199), "
         "batch_sizes=[True, 1, 1])", "error"),
        ("lengths [True, 5, 7]", "bucketopt.solve([True, 5, 7], 2)", "error"),
        ("histogram count True", "bucketopt.solve({5: True, 7: 2}, 2)", "error"),
        ("memory m0=10**400", f"bucketopt.solve(L, 2, memory=dict({mem[7:]}, m0=10**400))",
         "error"),
        ("memory capacity=10**400", f"bucketopt.solve(L, 2, memory=dict({mem[7:]}, "
         "capacity=10**400))", "error"),
        ("memory_headroom=10**400", f"bucketopt.solve(L, 2, {mem}, memory_headroom=10**400)",
         "error"),
        ("gpu_memory=10**400", f"bucketopt.solve(L, 2, {mem}, gpu_memory=10**400)", "error"),
        ("memory_headroom='0.5'", f"bucketopt.solve(L, 2, {mem}, memory_headroom='0.5')",
         "error"),
        ("dict headroom '0.5'", f"bucketopt.solve(L, 2, memory=dict({mem[7:]}, "
         "headroom='0.5'))", "error"),
        ("sampler memory_headroom='0.5'", f"bucketopt.BucketBatchSampler(L, (100, 199), {mem}, "
         "memory_headroom='0.5')", "error"),
        ("gpu_memory=1e9", f"s = bucketopt.solve(L, 2, {mem}, gpu_memory=1e9)\n"
         "assert s.boundaries[-1] == 199", "ok"),
        ("memory JSON with a BOM", "import json\nopen('m.json', 'wb').write(b'\\xef\\xbb"
         f"\\xbf' + json.dumps({MEMORY!r}).encode())\n"
         "assert bucketopt.solve(L, 2, memory='m.json').boundaries[-1] == 199", "ok"),
        ("world_size=2**60", "bucketopt.solve(L, 2, profile='rtx-pro-6000-blackwell', "
         "world_size=2**60)", "error"),
        ("sampler world_size=100000", "bucketopt.BucketBatchSampler(L, (100, 199), "
         "token_budget=400, world_size=100_000)", "error"),
    ]
    for name, code, expect in api:
        cases.append(Case(name, "counts and values", expect, code=SAMPLER + code))
    return cases


def scale_cases() -> list[Case]:
    cases = []
    wide = {"wide.npy": npy(np.arange(1, 10**7 + 1))}
    mem = {"mem.json": text(json.dumps({"m0": 1e9, "m1": 1.0, "m2": 0.0, "capacity": 1e15}))}
    top = _json_ok(lambda d: d["boundaries"][-1] == 10**7)
    for name, extra, expect, files in (
            ("solve -k 6", [], "ok", {}),
            ("solve -k 6 --pad batch", ["--pad", "batch", "--token-budget", "20000000"],
             "error", {}),
            ("solve -k 6 time objective", ["--profile", "rtx-pro-6000-blackwell",
                                           "--token-budget", "20000000"], "error", {}),
            ("solve -k 6 --memory --pad batch", ["--pad", "batch", "--memory", "mem.json"],
             "error", mem)):
        cases.append(Case(f"10**7 distinct lengths: {name}", "scale", expect,
                          argv=["solve", "--lens", "wide.npy", "-k", "6", "--json", "-q", *extra],
                          files={**wide, **files}, check=top if expect == "ok" else None))
    cases.append(Case("10**7 distinct lengths: solve -k 64", "scale", "ok",
                      argv=["solve", "--lens", "wide.npy", "-k", "64", "--json", "-q"],
                      files=wide, check=top))
    cases.append(Case("10**7 distinct lengths: sweep -k 1:16", "scale", "ok",
                      argv=["sweep", "--lens", "wide.npy", "-k", "1:16", "--json", "-q"],
                      files=wide, check=_json_ok(lambda d: len(d["rows"]) == 16)))
    cases.append(Case("10**7 distinct lengths: compare --profile", "scale", "error",
                      argv=["compare", "--lens", "wide.npy", "-k", "6", "--profile",
                            "rtx-pro-6000-blackwell", "--token-budget", "20000000", "-q"],
                      files=wide))
    cases.append(Case("solve(list(range(1, 10**7 + 1)), 3)", "scale", "ok",
                      code="import bucketopt\ns = bucketopt.solve(list(range(1, 10**7 + 1)), 3)\n"
                           "assert s.boundaries[-1] == 10**7"))
    return cases


# --- links in a source, float count columns, the environment -------------------------------------

def tree(links=(), outside=False):
    """d/a.npy and d/sub/b.npy (40 lengths each), then ``links`` (name in d -> target)."""
    def make(path):
        os.makedirs(os.path.join(path, "sub"))
        np.save(os.path.join(path, "a.npy"), np.arange(1, 41))
        np.save(os.path.join(path, "sub", "b.npy"), np.arange(101, 141))
        if outside:
            np.save(os.path.join(os.path.dirname(path), "outside.npy"), np.arange(500, 510))
        for name, target in links:
            os.symlink(target, os.path.join(path, name))
    return make


def link_loop_cases() -> list[Case]:
    """A ``**`` glob or a folder through links: each real file read once, no walk of a loop."""
    cases = []
    trees = {
        "a link back to the parent": ([("sub/loop", "..")], 80),
        "two links to themselves": ([("self", "."), ("sub/again", "."), ("sub/up", "..")], 80),
        "a link to a file outside": ([("sub/c.npy", "../../outside.npy")], 90),
        "a second name for a file": ([("a2.npy", "a.npy"), ("sub/b2.npy", "b.npy")], 80),
    }
    for name, (links, n) in trees.items():
        files = {"d": tree(links, outside=n == 90)}
        for source in ("d/**/*.npy", "d"):
            cases.append(Case(f"link loop: {name}: load_lengths({source!r})", "link loops", "ok",
                              files=files,
                              code=f"import bucketopt\na = bucketopt.load_lengths({source!r})\n"
                                   f"assert a.size == {n}, a.size"))
            cases.append(Case(f"link loop: {name}: solve --lens {source}", "link loops", "ok",
                              argv=["solve", "--lens", source, "-k", "2", "--json", "-q"],
                              files=files, check=_json_ok(lambda d, n=n: d["n_samples"] == n)))
        cases.append(Case(f"link loop: {name}: export -o into the glob", "link loops", "error",
                          argv=["export", "--lens", "d/**/*.npy", "-k", "2", "--format",
                                "sampler", "-q", "-o", "d/sub/loop/a.npy"
                                if "parent" in name else "d/a.npy"],
                          files=files, output="d/a.npy"))
    return cases


def _hist_parquet(counts, count_type="float64"):
    def make(path):
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"length": pa.array([10, 20, 30][:len(counts)], pa.int64()),
                                 "count": pa.array(counts, getattr(pa, count_type)())}), path)
    return make


def float_count_cases() -> list[Case]:
    """A ``length,count`` table whose count column is float: whole numbers are counts (n = 6),
    anything else one error naming the column, never one sample a length."""
    cases = []
    good = {"float64 2.0,3.0,1.0": _hist_parquet([2.0, 3.0, 1.0]),
            "float32 2.0,3.0,1.0": _hist_parquet([2.0, 3.0, 1.0], "float32"),
            "float64 0.0,5.0,1.0": _hist_parquet([0.0, 5.0, 1.0])}
    bad = {f"float64 {v}": _hist_parquet([1.0, 2.0, v])
           for v in (2.5, float("nan"), -1.0, float("inf"), 1e300, 0.1)}
    texts = {"csv 2.0,3.0,1.0": ("length,count\n10,2.0\n20,3.0\n30,1.0\n", "ok"),
             "csv 2.5": ("length,count\n10,1\n20,2\n30,2.5\n", "error"),
             "csv nan": ("length,count\n10,1\n20,2\n30,nan\n", "error"),
             "csv -1.0": ("length,count\n10,1\n20,2\n30,-1.0\n", "error"),
             "csv inf": ("length,count\n10,1\n20,2\n30,inf\n", "error")}
    variants = [(name, "h.parquet", maker, "ok") for name, maker in good.items()]
    variants += [(name, "h.parquet", maker, "error") for name, maker in bad.items()]
    variants += [(name, "h.csv", text(content), expect)
                 for name, (content, expect) in texts.items()]
    for name, filename, maker, expect in variants:
        files = {filename: maker}
        check = _json_ok(lambda d: d["n_samples"] == 6) if expect == "ok" else None
        cases.append(Case(f"float counts: {name}: solve", "float count histograms", expect,
                          argv=["solve", "--lens", filename, "-k", "2", "--json", "-q"],
                          files=files, check=check))
        code = (f"import bucketopt\nh = bucketopt.load_histogram({filename!r})\n"
                "assert h.n == 6, h.n\n"
                f"assert bucketopt.load_lengths({filename!r}).size == 6")
        if expect == "error":
            code = (f"import bucketopt\ntry:\n    bucketopt.load_lengths({filename!r})\n"
                    "except BucketoptError as exc:\n    assert 'count' in str(exc), exc\n"
                    "    raise\n")
        cases.append(Case(f"float counts: {name}: load", "float count histograms", expect,
                          files=files, code=code))
    return cases


def environment_cases() -> list[Case]:
    """Bad environment variables: one line and exit 2 where bucketopt cannot use the value, the
    documented default where it can (bucketopt/env.py)."""
    cases = []
    lens = {"lens.txt": text("5\n7\n9\n12\n30\n")}
    solve = ["solve", "--lens", "lens.txt", "-k", "2", "--json", "-q"]
    ok = _json_ok(lambda d: d["n_samples"] == 5)
    threads = {"abc": "error", "0": "error", "-1": "error", "+0": "error", "1.5": "error",
               "\u00b2": "error", "\u0663": "error", "1e3": "error", "2 3": "error",
               "": "ok", " ": "ok", "1": "ok", "+2": "ok", "007": "ok", "99999": "ok",
               "9" * 5000: "ok", str(2**70): "ok"}
    for value, expect in threads.items():
        shown = value if len(value) <= 20 else f"{len(value)} digits"
        for command, argv in (("solve", solve),
                              ("solve --profile", [*solve, "--profile",
                                                   "rtx-pro-6000-blackwell",
                                                   "--token-budget", "4096"])):
            cases.append(Case(f"env NUMBA_NUM_THREADS={shown!r}: {command}", "environment",
                              expect, argv=argv, files=lens, env={"NUMBA_NUM_THREADS": value},
                              check=ok if expect == "ok" else None))
    afile = {"afile": text("x")}
    for name, env in (("NUMBA_CACHE_DIR a file", {"NUMBA_CACHE_DIR": "{folder}/afile"}),
                      ("NUMBA_CACHE_DIR below a file", {"NUMBA_CACHE_DIR": "{folder}/afile/x"}),
                      ("NUMBA_CACHE_DIR empty", {"NUMBA_CACHE_DIR": ""}),
                      ("TMPDIR missing", {"TMPDIR": "{folder}/missing"}),
                      ("TMPDIR a file", {"TMPDIR": "{folder}/afile"}),
                      ("TMPDIR empty", {"TMPDIR": ""})):
        cases.append(Case(f"env {name}: solve --lens -", "environment", "ok",
                          argv=["solve", "--lens", "-", "-k", "2", "--json", "-q"],
                          files=afile, env=env, stdin=b"5\n7\n9\n12\n30\n", check=ok))
        cases.append(Case(f"env {name}: solve", "environment", "ok", argv=solve,
                          files={**lens, **afile}, env=env, check=ok))
    return cases
