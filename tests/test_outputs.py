"""Outputs never destroy inputs.

Every output flag of every command that writes, pointed at each kind of file the command
reads (the --lens file, a shard of a --lens folder or glob, a file a --lens folder or glob
would read next time, a link to an input, a Hugging Face dataset's files, --memory, a
--profile file, --model's module or config, --measurements), is refused with exit 2 and one
line, and every input is byte-identical after.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from bucketopt.cli import build_parser, main
from bucketopt.commands.common import INPUT_FLAGS, input_flags, output_flags

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
