"""Outputs never destroy inputs, and every write is atomic and leaves nothing behind.

- Every output flag of every command that writes, pointed at each kind of file the command
  reads (the --lens file, a shard of a --lens folder or glob, a file a --lens folder or glob
  would read next time, a link to an input, a Hugging Face dataset's files, --memory, a
  --profile file, --model's module or config, --measurements), is refused with exit 2 and one
  line, and every input is byte-identical after.
- Commands killed by SIGINT or SIGTERM at seeded random points, and in the middle of a write,
  leave the target absent, old or complete, and no temporary file; so does the sampler state a
  Trainer checkpoint holds. A full disk (a small tmpfs) is one clean line, the old file stays.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from bucketopt.cli import build_parser, main
from bucketopt.commands.common import INPUT_FLAGS, input_flags, output_flags
from bucketopt.data.output import atomic_writer, write_text

ROOT = Path(__file__).resolve().parent.parent

# --- every output flag against every kind of input -------------------------------------------

# The least arguments each command that writes needs to be parsed (the outputs are refused
# before anything runs). A command that gains an output must be listed here.
BASE_ARGS = {
    "solve": ["-k", "2"],
    "sweep": ["-k", "1:3"],
    "compare": ["-k", "2", "--token-budget", "4096"],
    "export": ["-k", "2", "--format", "sampler"],
    "calibrate": [],
    "probe": ["--token-budget", "64", "--max-length", "8"],
    "report": ["-k", "2", "--token-budget", "4096"],
}
# The flags a command needs whatever is tested (its required inputs), by the input flag.
REQUIRED = {"--measurements": ["--measurements", "m.csv"], "--model": ["--model", "model.py:build"]}

# Kinds of input: the arguments that make the command read it, and the output path naming it
# ("{ext}" is the output's suffix: .png for --plot, else .json).
KINDS = {
    "--lens": {
        "lens file": (["--lens", "lens.npy"], "lens.npy"),
        "shard of a folder": (["--lens", "shards"], "shards/a.npy"),
        "new file in the folder": (["--lens", "shards"], "shards/new{ext}"),
        "new file in a subfolder": (["--lens", "shards"], "shards/sub/new{ext}"),
        "folder through a link": (["--lens", "shards"], "shards-link/b.npy"),
        "glob match": (["--lens", "globbed/*"], "globbed/g1.npy"),
        "new glob match": (["--lens", "globbed/*"], "globbed/new{ext}"),
        "recursive glob match": (["--lens", "globbed/**/*.npy"], "globbed/deep/g3.npy"),
        "link to a shard": (["--lens", "shards"], "link-to-a.npy"),
        "link to the lens file": (["--lens", "lens.npy"], "link-to-lens.npy"),
        "hf shard": (["--lens", "hf"], "hf/data-00000-of-00001.arrow"),
        "hf state.json": (["--lens", "hf"], "hf/state.json"),
        "hf dataset_info.json": (["--lens", "hf"], "hf/dataset_info.json"),
    },
    "--memory": {
        "memory file": (["--memory", "mem.json"], "mem.json"),
        "link to the memory file": (["--memory", "mem.json"], "link-to-mem.json"),
    },
    "--profile": {
        "profile file": (["--profile", "prof.json"], "prof.json"),
    },
    "--model": {
        "module file": (["--model", "model.py:build"], "model.py"),
        "dotted module": (["--model", "model:build"], "model.py"),
        "hf config file": (["--model", "hf:cfg.json"], "cfg.json"),
        "hf config folder": (["--model", "hf:cfgdir"], "cfgdir/config.json"),
    },
    "--measurements": {
        "measurements": (["--measurements", "m.csv"], "m.csv"),
        "link to the measurements": (["--measurements", "m.csv"], "link-to-m.csv"),
    },
    "--plan": {
        "plan file": (["--plan", "plan.json"], "plan.json"),
    },
    "--verify": {
        "verify result": (["--verify", "verify.json"], "verify.json"),
    },
}


def _subparser(command):
    return next(a for a in build_parser()._actions if hasattr(a, "choices") and a.choices
                and command in a.choices).choices[command]


def _flag_strings(command):
    return {a.dest: a.option_strings for a in _subparser(command)._actions if a.option_strings}


def _io(command):
    """(the outputs, the inputs) of a command, as common.py reads them from its flags."""
    import argparse

    args = argparse.Namespace(command=command,
                              **{a.dest: None for a in _subparser(command)._actions})
    return output_flags(args), input_flags(args)


def _cases():
    from bucketopt.cli import COMMANDS

    cases = []
    for command in COMMANDS:
        outputs, inputs = _io(command)
        if not outputs:
            continue
        strings = _flag_strings(command)
        for _, dest in outputs:
            for option in strings[dest]:  # the long and the short form
                for flag, _ in inputs:
                    for kind in KINDS[flag]:
                        cases.append(pytest.param(command, option, flag, kind,
                                                  id=f"{command} {option} {kind}"))
    return cases


def test_every_writing_command_and_input_flag_is_covered():
    from bucketopt.cli import COMMANDS

    for command in COMMANDS:
        outputs, inputs = _io(command)
        if outputs:
            assert command in BASE_ARGS, f"{command} writes {outputs}: add it to BASE_ARGS"
            for flag, _ in inputs:
                assert flag in KINDS, f"{command} reads {flag}: add its kinds to KINDS"
    assert {f for f, _ in INPUT_FLAGS} <= set(KINDS)


@pytest.fixture
def inputs(tmp_path, monkeypatch):
    """A folder holding one input of every kind; the working folder is set to it."""
    import pyarrow as pa

    monkeypatch.chdir(tmp_path)
    np.save("lens.npy", np.arange(1, 100))
    Path("shards/sub").mkdir(parents=True)
    np.save("shards/a.npy", np.arange(1, 50))
    np.save("shards/b.npy", np.arange(20, 90))
    Path("globbed/deep").mkdir(parents=True)
    for name in ("g1", "g2", "deep/g3"):
        np.save(f"globbed/{name}.npy", np.arange(3, 60))
    Path("hf").mkdir()
    table = pa.table({"input_ids": pa.array([[1, 2], [3], [4, 5, 6]])})
    with pa.ipc.new_stream("hf/data-00000-of-00001.arrow", table.schema) as writer:
        writer.write_table(table)
    Path("hf/state.json").write_text(json.dumps(
        {"_data_files": [{"filename": "data-00000-of-00001.arrow"}], "_split": None}))
    Path("hf/dataset_info.json").write_text("{}")
    Path("mem.json").write_text(json.dumps({"m0": 1e9, "m1": 1e4, "m2": 0, "capacity": 8e10}))
    Path("prof.json").write_text(json.dumps({"name": "p", "alpha": 0.01, "beta": 1e-7,
                                             "gamma": 1e-11, "token_budget": 4096}))
    Path("model.py").write_text("def build():\n    raise SystemExit('never built')\n")
    Path("cfg.json").write_text(json.dumps({"model_type": "gpt2", "n_layer": 1}))
    Path("cfgdir").mkdir()
    Path("cfgdir/config.json").write_text(json.dumps({"model_type": "gpt2", "n_layer": 1}))
    Path("m.csv").write_text("batch_size,padded_len,seconds\n1,512,0.01\n2,512,0.02\n")
    Path("plan.json").write_text("{}")
    Path("verify.json").write_text("{}")
    for link, target in (("link-to-a.npy", "shards/a.npy"), ("link-to-lens.npy", "lens.npy"),
                         ("link-to-mem.json", "mem.json"), ("link-to-m.csv", "m.csv"),
                         ("shards-link", "shards")):
        os.symlink(target, link)
    return tmp_path


def _snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() and not p.is_symlink()
                                         else os.readlink(p) if p.is_symlink() else None)
            for p in sorted(folder.rglob("*"))}


@pytest.mark.parametrize("command, option, flag, kind", _cases())
def test_an_output_naming_an_input_is_refused(capsys, inputs, command, option, flag, kind):
    given, target = KINDS[flag][kind]
    target = target.format(ext=".png" if option == "--plot" else ".json")
    argv = [command, *BASE_ARGS[command], *given, option, target, "-q"]
    for needed, extra in REQUIRED.items():
        if needed in dict(_io(command)[1]) and needed not in argv:
            argv += extra
    before = _snapshot(inputs)
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, (argv, err)
    assert ("destroy the input" in err[0] or "the next read" in err[0]) and flag in err[0], err
    assert _snapshot(inputs) == before


def test_the_lines_name_both_files(capsys, inputs):
    cases = [
        (["export", "-k", "2", "-f", "sampler", "--lens", "shards", "-o", "link-to-a.npy"],
         ["'link-to-a.npy'", "'shards/a.npy'", "--lens"]),
        (["export", "-k", "2", "-f", "sampler", "--lens", "shards", "-o", "shards/x.json"],
         ["'shards/x.json'", "inside the --lens folder 'shards/'", "write it elsewhere"]),
        (["solve", "-k", "2", "--lens", "globbed/*", "--plot", "globbed/x.png"],
         ["--plot 'globbed/x.png'", "matches the --lens glob 'globbed/*'"]),
        (["probe", "--model", "hf:cfgdir", "--token-budget", "64", "--max-length", "8", "-o",
          "cfgdir/config.json"], ["'cfgdir/config.json'", "the file --model reads"]),
    ]
    for argv, words in cases:
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and all(w in err for w in words), (err, words)


@pytest.mark.parametrize("argv", [
    # outputs the next read does not take: a hidden or _-named file of a folder of shards, a
    # file a glob does not match, a new file beside a Hugging Face dataset's files
    ["export", "-k", "2", "-f", "sampler", "--lens", "shards", "-o", "shards/_plan.json"],
    ["export", "-k", "2", "-f", "sampler", "--lens", "globbed/*.npy", "-o", "globbed/x.json"],
    ["export", "-k", "2", "-f", "sampler", "--lens", "hf", "-o", "hf/boundaries.json"],
    ["export", "-k", "2", "-f", "sampler", "--lens", "lens.npy", "-o", "shards-2.json"],
])
def test_outputs_that_name_no_input_are_written(capsys, inputs, argv):
    before = _snapshot(inputs)
    assert main([*argv, "-q"]) == 0, capsys.readouterr().err
    written = Path(argv[-1])
    assert json.loads(written.read_text())["boundaries"]
    after = _snapshot(inputs)
    assert after.pop(argv[-1]) is not None and after == before


def test_a_plot_path_ending_in_a_slash_is_refused(capsys, inputs):
    assert main(["solve", "-k", "2", "--lens", "lens.npy", "--plot", "out.pdf/", "-q"]) == 2
    assert "folder" in capsys.readouterr().err and not Path("out.pdf").exists()


# --- kills ------------------------------------------------------------------------------------

def _env():
    return {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _complete(path: Path) -> bool:
    data = path.read_bytes()
    if path.suffix == ".png":
        return data.startswith(b"\x89PNG\r\n\x1a\n") and data.endswith(b"IEND\xaeB`\x82")
    if path.suffix == ".pdf":
        return data.startswith(b"%PDF") and data.rstrip().endswith(b"%%EOF")
    return bool(json.loads(data)["boundaries"])


def _check_left(folder: Path, target: Path, old: bytes | None, expected: set):
    names = set(os.listdir(folder))
    assert names <= expected | {target.name}, names - expected  # no temporary file
    if target.exists():
        assert target.read_bytes() == old or _complete(target)
    return target.exists() and target.read_bytes() != old


KILLED = [
    (["solve", "-k", "4", "--plot", "x.png"], "x.png"),
    (["sweep", "-k", "1:6", "--plot", "x.pdf"], "x.pdf"),
    (["export", "-k", "4", "--format", "sampler", "-o", "out.json"], "out.json"),
]


@pytest.mark.parametrize("argv, target", KILLED, ids=[a[0] for a, _ in KILLED])
def test_signals_at_random_points_leave_old_or_complete_files(tmp_path, argv, target):
    np.save(tmp_path / "lens.npy", np.random.default_rng(0).integers(1, 4000, 20_000))
    command = [sys.executable, "-m", "bucketopt", *argv, "--lens", "lens.npy", "-q"]
    first = subprocess.run(command, cwd=tmp_path, env=_env(), capture_output=True, timeout=300)
    assert first.returncode == 0, first.stderr[-2000:]  # (and the kernels are compiled)
    out = tmp_path / target
    assert _complete(out)
    start = time.monotonic()  # a warm run's length, to spread the signals over it (no assert)
    subprocess.run(command, cwd=tmp_path, env=_env(), capture_output=True, timeout=300)
    duration = time.monotonic() - start
    rng = random.Random(20261207)
    killed = 0
    for run in range(6):
        old = None if run % 3 == 0 else b"OLD"
        out.unlink(missing_ok=True)
        if old is not None:
            out.write_bytes(old)
        proc = subprocess.Popen(command, cwd=tmp_path, env=_env(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        time.sleep(rng.uniform(0.05, 0.95) * duration)
        sig = (signal.SIGINT, signal.SIGTERM)[run % 2]
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
        lines = err.decode().strip().splitlines()
        if proc.returncode == 128 + sig:  # ended by bucketopt's handler: one line
            assert len(lines) == 1, lines
        else:  # done before the signal, or ended before main() set its handlers
            assert proc.returncode in (0, -sig, 1), (proc.returncode, lines[-3:])
        killed += proc.returncode != 0
        _check_left(tmp_path, out, old, {"lens.npy"})
    assert killed  # the signals came while the command ran


# A command ended in the middle of its write: the hook runs once the content is written and
# flushed, before it is renamed over the target; it says so and waits for the signal.
_MID_WRITE = """
import sys, time
import bucketopt.data.output as output
if {named}:
    output._anonymous_file = lambda folder: None  # the named temporary file, as elsewhere
keep = output._keep_mode
def hook(target, fd):
    keep(target, fd)
    print("writing", flush=True)
    time.sleep(60)
output._keep_mode = hook
{body}
"""


def _mid_write(tmp_path, body, sig, *, named=False):
    script = _MID_WRITE.format(named=named, body=textwrap.dedent(body))
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=tmp_path, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "writing", proc.stderr.read()[-2000:]
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err.strip().splitlines()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("named", [False, True], ids=["anonymous", "named"])
@pytest.mark.parametrize("argv, target", KILLED, ids=[a[0] for a, _ in KILLED])
def test_a_signal_during_the_write(tmp_path, argv, target, named, sig):
    np.save(tmp_path / "lens.npy", np.arange(1, 3000))
    (tmp_path / target).write_bytes(b"OLD")
    body = f"""
        from bucketopt.cli import main
        sys.exit(main({[*argv, "--lens", "lens.npy", "-q"]!r}))
    """
    code, lines = _mid_write(tmp_path, body, sig, named=named)
    word = "interrupted" if sig == signal.SIGINT else "terminated"
    assert code == 128 + sig and lines == [f"bucketopt: {word}"], (code, lines)
    assert sorted(os.listdir(tmp_path)) == sorted(["lens.npy", target])
    assert (tmp_path / target).read_bytes() == b"OLD"


# --- the sampler state in a Trainer checkpoint -----------------------------------------------

@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL],
                         ids=["SIGINT", "SIGTERM", "SIGKILL"])
def test_a_signal_during_the_sampler_state_write(tmp_path, sig):
    """In a training script (no handler of bucketopt's: SIGTERM and SIGKILL end the process
    where it is), the state file stays old and no temporary file is left."""
    (tmp_path / "bucketopt_sampler.json").write_text('{"old": true}')
    body = """
        from bucketopt.integrations.transformers import save_sampler_state
        save_sampler_state({"position": 7}, "bucketopt_sampler.json")
    """
    code, _ = _mid_write(tmp_path, body, sig)
    assert code != 0
    assert os.listdir(tmp_path) == ["bucketopt_sampler.json"]
    assert json.loads((tmp_path / "bucketopt_sampler.json").read_text()) == {"old": True}


def test_a_trainer_checkpoint_killed_while_it_writes_the_sampler_state(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("datasets")
    pytest.importorskip("accelerate")
    body = f"""
        import bucketopt.data.output as output
        hooked = output._keep_mode
        def only_the_state(target, fd):
            if target.endswith("bucketopt_sampler.json") and "checkpoint-6" in target:
                return hooked(target, fd)
            return keep(target, fd)
        output._keep_mode = only_the_state
        from tests import _trainer_job as job
        job.trainer({str(tmp_path / "run")!r}, save_steps=3).train()
    """
    code, lines = _mid_write(ROOT, body, signal.SIGTERM)
    assert code == -signal.SIGTERM, lines[-5:]
    first = tmp_path / "run" / "checkpoint-3"
    assert json.loads((first / "bucketopt_sampler.json").read_text())["position"] == 6
    killed = tmp_path / "run" / "checkpoint-6"
    assert not [n for n in os.listdir(killed) if "bucketopt_sampler" in n]


# --- a full disk ------------------------------------------------------------------------------

@pytest.fixture
def small_disk(tmp_path):
    """A 64 KiB tmpfs, where the tests may mount one (root in a container often may)."""
    folder = tmp_path / "disk"
    folder.mkdir()
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"cannot mount a small tmpfs: {exc}")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs: {done.stderr.strip() or done.returncode}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], capture_output=True, timeout=30)


def _fill(folder: Path, leave: int = 0) -> None:
    """Fill the file system of ``folder`` but ``leave`` bytes (a page or two of slack)."""
    with open(folder / "filler", "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"x" * 1024)
        except OSError:
            pass
    if leave:
        size = (folder / "filler").stat().st_size
        os.truncate(folder / "filler", max(0, size - leave))


def test_a_full_disk_keeps_the_old_files(capsys, tmp_path, small_disk):
    np.save(tmp_path / "lens.npy", np.arange(1, 5000))
    old = {"out.json": b"OLD", "x.png": b"OLD", "bucketopt_sampler.json": b'{"old": true}'}
    for name, data in old.items():
        (small_disk / name).write_bytes(data)
    _fill(small_disk)
    listing = sorted(os.listdir(small_disk))
    runs = [(["export", "-k", "4", "-f", "sampler", "-o", str(small_disk / "out.json")],
             "the JSON"),
            (["solve", "-k", "4", "--plot", str(small_disk / "x.png")], "the plot")]
    for argv, _ in runs:
        code = main([*argv, "--lens", str(tmp_path / "lens.npy"), "-q"])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and "No space left" in err[0], err
    from bucketopt import BucketoptError
    from bucketopt.integrations.transformers import save_sampler_state

    with pytest.raises(BucketoptError, match="could not write the sampler state.*No space"):
        save_sampler_state({"position": 1, "pad": "x" * 100_000},
                           small_disk / "bucketopt_sampler.json")
    assert sorted(os.listdir(small_disk)) == listing  # no temporary file
    for name, data in old.items():
        assert (small_disk / name).read_bytes() == data


def test_a_full_disk_with_room_for_part_of_the_file(tmp_path, small_disk):
    """The write fails after some bytes went out, anonymous or named: nothing is left."""
    import bucketopt.data.output as output

    (small_disk / "t.json").write_text("OLD")
    _fill(small_disk, leave=8192)
    from bucketopt import BucketoptError

    for anonymous in (True, False):
        saved = output._anonymous_file
        if not anonymous:
            output._anonymous_file = lambda folder: None
        try:
            with pytest.raises(BucketoptError, match="No space left"):
                write_text(small_disk / "t.json", "y" * 200_000)
        finally:
            output._anonymous_file = saved
        assert sorted(os.listdir(small_disk)) == ["filler", "t.json"]
        assert (small_disk / "t.json").read_text() == "OLD"


# --- the writer itself ------------------------------------------------------------------------

def test_the_writer_keeps_the_mode_and_leaves_no_temporary_file(tmp_path):
    import bucketopt.data.output as output

    target = tmp_path / "t.txt"
    target.write_text("")
    os.chmod(target, 0o640)
    for anonymous in (True, False):
        target.write_text("OLD")
        saved = output._anonymous_file
        if not anonymous:
            output._anonymous_file = lambda folder: None
        try:
            with pytest.raises(KeyboardInterrupt), atomic_writer(target) as fh:
                fh.write("half")
                assert target.read_text() == "OLD"
                raise KeyboardInterrupt
            assert os.listdir(tmp_path) == ["t.txt"] and target.read_text() == "OLD"
            write_text(target, f"new {anonymous}")
        finally:
            output._anonymous_file = saved
        assert target.read_text() == f"new {anonymous}" and os.listdir(tmp_path) == ["t.txt"]
        assert os.stat(target).st_mode & 0o777 == 0o640
    fresh = tmp_path / "fresh.txt"
    write_text(fresh, "x")
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(fresh).st_mode & 0o777 == 0o666 & ~umask


def test_remove_temporaries_removes_the_named_file_of_a_write_in_progress(tmp_path):
    """What the command line's signal handlers call before they exit (os._exit runs no
    finally block): the named temporary file of a write in progress goes."""
    import bucketopt.data.output as output
    from bucketopt import BucketoptError

    saved = output._anonymous_file
    output._anonymous_file = lambda folder: None
    try:
        with pytest.raises(BucketoptError, match="could not write"), \
                atomic_writer(tmp_path / "t.txt") as fh:
            fh.write("x")
            [temp] = os.listdir(tmp_path)
            assert temp.startswith(".t.txt.") and temp.endswith(".tmp")
            assert str(tmp_path / temp) in output._TEMPORARIES
            output.remove_temporaries()
            assert os.listdir(tmp_path) == []
    finally:
        output._anonymous_file = saved
    assert not output._TEMPORARIES and os.listdir(tmp_path) == []


def test_a_path_under_temporary_path_goes_with_the_temporaries(tmp_path):
    """A file of the command's own (such as a spooled copy of standard input) listed for the
    signal endings: removed by remove_temporaries, unlisted when the block ends."""
    import bucketopt.data.output as output

    spooled = tmp_path / "spool.npy"
    spooled.write_bytes(b"x")
    with output.temporary_path(spooled):
        output.remove_temporaries()
        assert not spooled.exists()
    spooled.write_bytes(b"x")
    with output.temporary_path(spooled):
        pass
    output.remove_temporaries()
    assert spooled.exists() and not output._TEMPORARIES
