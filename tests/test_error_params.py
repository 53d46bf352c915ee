"""A BucketoptError names the parameter it is about, and the CLI names the flag from it."""

from __future__ import annotations

import ast
import contextlib
import io
import pickle
import re
from pathlib import Path

import numpy as np
import pytest

import bucketopt
from bucketopt.cli import (
    COMMANDS,
    _flags,
    _guessed,
    _subparser,
    build_parser,
    cli_message,
    main,
    param_flag,
    parameter_flags,
)
from bucketopt.cost.memory import load_memory
from bucketopt.data.histogram import Histogram
from bucketopt.errors import BucketoptError
from bucketopt.validate import (
    INT64_MAX,
    check_budget_scale,
    check_int,
    check_number,
    check_positive_int,
    check_token_budget,
)

LENS = np.arange(1, 100)

# (call, the parameter its error names, the exact message a Python user sees)
CASES = [
    (lambda: check_int(0, "k", low=1), "k", "`k` must be an integer >= 1; got 0."),
    (lambda: check_int("3", "seed"), "seed", "`seed` must be an integer; got '3'."),
    (lambda: check_number(2, "min_share", low=0, high=1), "min_share",
     "`min_share` must be a number in [0, 1]; got 2."),
    (lambda: check_number(float("nan"), "tolerance", low=0.0), "tolerance",
     "`tolerance` must be a finite number >= 0; got nan."),
    (lambda: bucketopt.solve(LENS, 0), "k", "`k` must be an integer >= 1; got 0."),
    (lambda: bucketopt.solve(LENS, 2, align=0), "align", "`align` must be an integer >= 1; got 0."),
    (lambda: bucketopt.solve(LENS, 2, min_share=2), "min_share",
     "`min_share` must be a number in [0, 1]; got 2."),
    (lambda: bucketopt.solve(LENS, 2, min_fill=-1), "min_fill",
     "`min_fill` must be a number in [0, 1]; got -1."),
    (lambda: bucketopt.solve(LENS, 2, pad="x"), "pad",
     "`pad` must be one of edge, batch; got 'x'."),
    (lambda: bucketopt.solve(LENS, 2, token_budget=0), "token_budget",
     "`token_budget` must be an integer >= 1; got 0."),
    (lambda: bucketopt.solve(LENS, 2, token_budget=50), "token_budget",
     "token_budget=50 is smaller than the longest sample (99)."),
    (lambda: bucketopt.solve(LENS, 2, exact=1), "exact", "`exact` must be True or False; got 1."),
    (lambda: bucketopt.sweep(LENS, []), "ks", "`ks` is empty: give at least one k."),
    (lambda: bucketopt.sweep(LENS, [1, 0]), "ks", "`ks` must be an integer >= 1; got 0."),
    (lambda: bucketopt.sweep(LENS, 3, tolerance=-1), "tolerance",
     "`tolerance` must be a finite number >= 0; got -1."),
    (lambda: check_token_budget(2.5), "token_budget",
     "`token_budget` must be an integer >= 1; got 2.5."),
    (lambda: check_budget_scale(10**15, Histogram.from_lengths(LENS)), "token_budget", None),
    (lambda: check_positive_int(0, "world_size"), "world_size",
     "`world_size` must be an integer >= 1; got 0."),
    (lambda: check_positive_int(2**61, "world_size"), "world_size",
     "`world_size` must be at most 2**60; got 2305843009213693952."),
    (lambda: check_int(2**63, "seed", low=0, high=INT64_MAX), "seed",
     "`seed` must be at most 2**63 - 1; got 9223372036854775808."),
    (lambda: check_int(-1, "state epoch", low=0, high=INT64_MAX), None,
     "`state epoch` must be an integer >= 0; got -1."),
    (lambda: load_memory({"m0": 1, "m1": 1, "m2": 0, "capacity": 8}, gpu_memory=-1), "gpu_memory",
     "`gpu_memory` (--gpu-memory) must be a number of GB in (0, 1e9]; got -1."),
    (lambda: bucketopt.simulate(LENS, "random", token_budget=100, seed=-1), "seed",
     "`seed` must be an integer >= 0; got -1."),
    (lambda: bucketopt.BucketBatchSampler(LENS, [99], token_budget=100, world_size=0),
     "world_size", "`world_size` must be an integer in [1, 65536]; got 0."),
    (lambda: bucketopt.BucketBatchSampler(LENS, [99], token_budget=100, grad_accum=0),
     "grad_accum", "`grad_accum` must be an integer >= 1; got 0."),
]


@pytest.mark.parametrize("call, param, message", CASES)
def test_validators_name_their_parameter(call, param, message):
    with pytest.raises(BucketoptError) as info:
        call()
    assert info.value.param == param
    assert isinstance(info.value, ValueError)
    if message is not None:  # the message a Python user reads is the message alone
        assert str(info.value) == message


def test_errors_about_no_single_parameter_carry_none():
    # "state epoch" is no parameter; min_share against max_share is about two
    with pytest.raises(BucketoptError) as info:
        check_int(-1, "state epoch", low=0)
    assert info.value.param is None
    with pytest.raises(BucketoptError) as info:
        bucketopt.solve(LENS, 2, min_share=0.6, max_share=0.5)
    assert info.value.param is None
    assert BucketoptError("plain").param is None


def test_param_survives_pickling():
    err = pickle.loads(pickle.dumps(BucketoptError("`k` must be >= 1.", param="k")))
    assert (str(err), err.param) == ("`k` must be >= 1.", "k")


def _commands():
    parser = build_parser()
    return parser, {c: _subparser(parser, c) for c in ("solve", "sweep", "compare")}


def test_the_flag_comes_from_the_parser():
    _, subs = _commands()
    assert param_flag(subs["solve"], "token_budget") == "--token-budget"
    assert param_flag(subs["solve"], "world_size") == "--gpus"
    assert param_flag(subs["sweep"], "ks") == "-k"  # dest k_range
    assert param_flag(subs["solve"], "state") is None
    assert param_flag(subs["solve"], None) is None


@pytest.mark.parametrize("call, param, message", CASES)
def test_named_and_guessed_agree_on_validator_messages(call, param, message):
    # Naming the flag from the error's parameter gives the wording the fallback gives, in every
    # command that has a flag for it (the fallback reads its flags from the parser too).
    with pytest.raises(BucketoptError) as info:
        call()
    parser, subs = _commands()
    for command, sub in subs.items():
        flag = param_flag(sub, info.value.param)
        if flag is None:
            continue
        flags = _flags(parser, command)
        assert cli_message(str(info.value), flags, info.value.param, flag) == \
            _guessed(str(info.value), flags)


def test_named_path_rewords_its_parameter_only():
    flags = {"--align", "--min-share", "--token-budget"}
    message = "`align` must be an integer >= 1 (see min_share, token_budget=5); got 0."
    assert cli_message(message, flags, "align", "--align") == \
        "--align must be an integer >= 1 (see min_share, token_budget=5); got 0."
    assert cli_message(message, flags) == \
        "--align must be an integer >= 1 (see --min-share, --token-budget 5); got 0."
    # a path that holds the parameter's name is left alone
    assert cli_message("token_budget=7 in /d/token_budget/x.npy", flags, "token_budget",
                       "--token-budget") == "--token-budget 7 in /d/token_budget/x.npy"


@pytest.mark.parametrize("argv, line", [
    (["solve", "-k", "0"], "-k must be an integer >= 1; got 0."),
    (["solve", "-k", "3", "--token-budget", "0"], "--token-budget must be an integer >= 1; got 0."),
    (["solve", "-k", "3", "--min-share", "2"], "--min-share must be a number in [0, 1]; got 2.0."),
    (["solve", "-k", "3", "--gpus", "0"], "solve: argument --gpus: must be an integer >= 1; got 0"),
    (["solve", "-k", "3", "--align", "0"], "--align must be an integer >= 1; got 0."),
    (["solve", "-k", "3", "--min-fill", "2"], "--min-fill must be a number in [0, 1]; got 2.0."),
    (["solve", "-k", "3", "--token-budget", "50"],
     "--token-budget 50 is smaller than the longest sample (99)."),
    (["sweep", "-k", "1:3", "--token-budget", "50"],
     "--token-budget 50 is smaller than the longest sample (99)."),
    (["solve", "-k", "3", "--token-budget", "1000000000000000"],
     "--token-budget 1000000000000000 allows batches of 1,000,000,000,000,000 samples of the "
     "shortest length (1), more than the 99 samples there are: no batch could ever be full; use "
     "--token-budget <= 65,536."),
    (["solve", "-k", "3", "--min-share", "0.6", "--max-share", "0.5"],
     "--min-share (0.6) must not exceed --max-share (0.5)."),
    (["solve", "-k", "3", "--align", "64", "--token-budget", "99"],
     "bucket edge 128 exceeds --token-budget 99 (--align 64 rounds the last edge up to it): a "
     "batch of that bucket cannot hold even one sample."),
])
def test_cli_lines_name_flags(tmp_path, argv, line):
    lens = tmp_path / "lens.npy"
    np.save(lens, LENS)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main([argv[0], "--lens", str(lens), *argv[1:]])
    assert code == 2
    assert err.getvalue() == f"bucketopt: error: {line}\n"


def test_a_parameter_the_old_map_missed_is_named_too(tmp_path, capsys):
    lens = tmp_path / "lens.npy"
    np.save(lens, LENS)
    mem = tmp_path / "m.json"
    mem.write_text('{"m0": 1e9, "m1": 1e4, "m2": 0, "capacity": 8e9}')
    assert main(["solve", "--lens", str(lens), "-k", "2", "--memory", str(mem),
                 "--gpu-memory", "-3"]) == 2
    assert capsys.readouterr().err == \
        "bucketopt: error: --gpu-memory must be a number of GB in (0, 1e9]; got -3.0.\n"


def test_parameter_flags_come_from_the_parser():
    parser = build_parser()
    solve = parameter_flags(_flags(parser, "solve"))
    assert (solve["token_budget"], solve["world_size"], solve["k"]) == \
        ("--token-budget", "--gpus", "-k")
    assert parameter_flags(_flags(parser, "sweep"))["ks"] == "-k"  # dest k_range
    assert "tolerance" not in solve  # sweep's flag, not solve's
    # a flag added to a command is named with nothing listed by hand
    assert parameter_flags({"--new-limit"}) == {"new_limit": "--new-limit"}


def _message_text(node) -> str:
    """The literal text of a message (an f-string's fields left out), or "" if not literal."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return " ".join(v.value for v in node.values if isinstance(v, ast.Constant))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _message_text(node.left) + _message_text(node.right)
    return ""


def _cli_parameters() -> set:
    """Every Python parameter some command has a flag for."""
    parser = build_parser()
    names = set()
    for command in COMMANDS:
        names |= set(parameter_flags(_flags(parser, command)))
    return {n for n in names if len(n) > 1} - {"help", "json", "quiet", "version"}


def test_every_error_that_names_a_cli_parameter_says_which_it_is_about():
    # An error whose message names a parameter the command line has a flag for (`align`,
    # token_budget=, a bare max_length) states the parameter it is about with param= (None
    # when it is about several), so the CLI names the flag from it rather than from the text.
    known = _cli_parameters()
    forms = re.compile(r"`(\w+)`|(?<![\w/.-])(\w+)=|(?<![\w/.-])([a-z]+_[a-z_]+)(?![\w/-]|\.\w)")
    root = Path(bucketopt.__file__).parent
    missing = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and node.args and "BucketoptError" in (
                    getattr(node.func, "id", None), getattr(node.func, "attr", None))):
                continue
            if any(k.arg == "param" for k in node.keywords):
                continue
            said = {next(g for g in m.groups() if g) for m in forms.finditer(
                _message_text(node.args[0]))}
            if said & known:
                missing.append(f"{path.relative_to(root)}:{node.lineno} {sorted(said & known)}")
    assert not missing, missing
