"""Options are checked once: one request built at the entry, one check per rule, one wording.

solve, sweep, evaluate and compare build a :class:`bucketopt.request.SolveRequest` by
:func:`bucketopt.request.build_request`; the rules' messages live in :mod:`bucketopt.validate`
alone, the same bad option gives the same error from every entry (and one line, exit 2, from the
CLI), and the objectives take the memory model as a parameter.
"""

from __future__ import annotations

import ast
import contextlib
import io
from pathlib import Path

import numpy as np
import pytest

import bucketopt
import bucketopt.request
import bucketopt.solver
from bucketopt.cli import main
from bucketopt.errors import BucketoptError
from bucketopt.request import OPTIONS, SolveRequest, build_request
from bucketopt.training.compare import compare

PACKAGE = Path(bucketopt.__file__).resolve().parent
LENS = np.arange(1, 100)

# A rule and the text of its one message (each must sit in exactly one place of the package).
RULES = {
    "pad is one of the paddings": "must be one of {', '.join(PADS)}",
    "pad=batch needs batch sizes": 'pad="batch" needs a token_budget or a memory model',
    "min_fill needs a budget": "min_fill needs a token_budget",
    "the edge fits the budget": "a batch of that bucket cannot hold even one sample",
    "align rounds the edge": "rounds the last edge up to",
    "memory_headroom in (0, 1]": "check_number(headroom, \"memory_headroom\"",
    "ks of a sweep": "`ks` must be",
}


def package_sources() -> dict[Path, str]:
    return {path: path.read_text() for path in sorted(PACKAGE.rglob("*.py"))}


@pytest.mark.parametrize("rule", sorted(RULES))
def test_each_rule_has_one_wording_in_one_place(rule):
    text = RULES[rule]
    where = [(path.relative_to(PACKAGE).as_posix(), source.count(text))
             for path, source in package_sources().items() if text in source]
    assert sum(count for _, count in where) == 1, where


def test_the_objectives_check_no_option():
    """The Python objective classes raise nothing about the options the request checked."""
    for name in ("base", "edge", "batch", "time", "packed"):
        source = (PACKAGE / "objectives" / f"{name}.py").read_text()
        for text in ("needs a token_budget", "exceeds token_budget", "must be one of"):
            assert text not in source, (name, text)


def test_memory_is_a_parameter_not_an_attribute_set_from_outside():
    """Every ``x.memory = ...`` in the package is ``self.memory`` in a constructor."""
    found = []
    for path, source in package_sources().items():
        for func in ast.walk(ast.parse(source)):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(func):
                if not isinstance(node, ast.Assign):
                    continue
                for target in node.targets:
                    if isinstance(target, ast.Attribute) and target.attr == "memory":
                        owner = target.value
                        if not (isinstance(owner, ast.Name) and owner.id == "self"
                                and func.name == "__init__"):
                            found.append(f"{path.name}:{node.lineno}")
    assert found == []


def test_memory_reaches_the_objective_through_its_constructor():
    memory = {"m0": 2e9, "m1": 3e5, "m2": 40.0, "capacity": 8e9}
    request = build_request([100, 200, 300, 400, 500], k=2, memory=memory)
    obj = request.make_objective()
    assert obj.memory is request.memory is not None
    for pad in ("edge", "batch"):
        r = build_request([100, 200, 300, 400, 500], k=2, memory=memory, pad=pad)
        assert r.make_objective().memory is r.memory


def test_the_request_is_frozen_and_resolved():
    r = build_request(LENS, ks=[3, 1, 3], token_budget=400, max_length=50, overflow="drop")
    assert isinstance(r, SolveRequest)
    assert r.ks == (1, 3) and r.kmax == 3
    assert r.objective == "padding" and r.pad == "edge" and r.sync_buckets is True
    assert r.hist.max_length == 50 and r.source.max_length == 99
    assert r.groups.edges[-1] == 50
    with pytest.raises(AttributeError):
        r.pad = "batch"
    with pytest.raises(TypeError, match="unexpected keyword argument 'tolerance'"):
        build_request(LENS, k=2, tolerance=0.1)
    assert set(OPTIONS) >= set(bucketopt.request.EVALUATE_OPTIONS)


def _error(call) -> tuple[str, str | None]:
    with pytest.raises(BucketoptError) as info:
        call()
    return str(info.value), info.value.param


def _cli(argv) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    return code, err.getvalue()


# bad options every entry takes, and the distinctive part of the one message they get
SHARED = [
    ({"token_budget": 50}, "token_budget=50 is smaller than the longest sample (99)."),
    ({"token_budget": 400, "pad": "x"}, "`pad` must be one of edge, batch; got 'x'."),
    ({"token_budget": 400, "memory": {"m0": 1e9, "m1": 1e4, "m2": 0, "capacity": 8e9},
      "memory_headroom": 2.0}, "`memory_headroom` must be a number in (0, 1]; got 2.0."),
    ({"token_budget": 400, "gpu_memory": 80}, "`gpu_memory` (--gpu-memory) needs a memory model"),
]


@pytest.mark.parametrize("options,text", SHARED)
def test_the_same_bad_option_gives_the_same_error_everywhere(options, text):
    errors = {
        "solve": _error(lambda: bucketopt.solve(LENS, 3, **options)),
        "sweep": _error(lambda: bucketopt.sweep(LENS, [1, 3], **options)),
        "evaluate": _error(lambda: bucketopt.evaluate(LENS, [50, 99], **options)),
        "compare": _error(lambda: compare(LENS, 3, rules=(), **options)),
    }
    assert len(set(errors.values())) == 1, errors
    assert text in errors["solve"][0]


# bad solver options of solve, sweep and compare (evaluate has no constraints), and the CLI
SOLVER = [
    ({"min_share": 0.6, "max_share": 0.5}, ["--min-share", "0.6", "--max-share", "0.5"],
     "must not exceed"),
    ({"align": 64, "token_budget": 99}, ["--align", "64", "--token-budget", "99"],
     "(align=64 rounds the last edge up to it): a batch of that bucket cannot hold"),
    ({"min_fill": 1.5}, ["--min-fill", "1.5"], "must be a number in [0, 1]; got 1.5."),
    ({"objective": "time", "token_budget": 400}, ["--objective", "time", "--token-budget", "400"],
     "needs a hardware profile"),
]


@pytest.mark.parametrize("options,argv,text", SOLVER)
def test_a_bad_solver_option_is_one_error_from_every_entry_and_the_cli(tmp_path, options, argv,
                                                                      text):
    options = {"token_budget": 400, **options}
    errors = {
        "solve": _error(lambda: bucketopt.solve(LENS, 3, **options)),
        "sweep": _error(lambda: bucketopt.sweep(LENS, [1, 3], **options)),
        "compare": _error(lambda: compare(LENS, 3, rules=(), **options)),
    }
    assert len(set(errors.values())) == 1, errors
    assert text in errors["solve"][0]
    lens = tmp_path / "lens.npy"
    np.save(lens, LENS)
    if "--token-budget" not in argv:
        argv = [*argv, "--token-budget", "400"]
    for command, k in (("solve", "3"), ("sweep", "1:3"), ("compare", "3")):
        code, err = _cli([command, "--lens", str(lens), "-k", k, *argv])
        assert code == 2 and err.startswith("bucketopt: error: ") and err.count("\n") == 1, err
        rule = text.replace("align=64", "--align 64")
        assert rule in err, (command, err)


@pytest.fixture
def count_requests(monkeypatch):
    """How many requests were built (build_request, wherever it is read from)."""
    calls = []
    original = bucketopt.request.build_request

    def counted(*args, **kwargs):
        calls.append(kwargs.get("k", kwargs.get("ks")))
        return original(*args, **kwargs)

    monkeypatch.setattr(bucketopt.request, "build_request", counted)
    monkeypatch.setattr(bucketopt.solver, "build_request", counted)
    return calls


def test_solve_builds_one_request(count_requests):
    bucketopt.solve(LENS, 3, token_budget=400)
    assert count_requests == [3]


def test_sweep_builds_one_request_even_when_it_solves_its_k_again(count_requests):
    """pad="batch" over many distinct lengths: the recommended k is solved alone, from the same
    request."""
    lengths = np.random.default_rng(5).integers(1, 3000, size=3000)
    result = bucketopt.sweep(lengths, [1, 2, 3], token_budget=6000, pad="batch")
    assert len(count_requests) == 1
    assert result[result.recommended_k].boundaries == bucketopt.solve(
        lengths, result.recommended_k, token_budget=6000, pad="batch").boundaries


def test_evaluate_builds_one_request(count_requests):
    bucketopt.evaluate(LENS, [50, 99], token_budget=400)
    assert len(count_requests) == 1


def test_compare_builds_one_request_for_its_solved_row(count_requests):
    """compare's bucketed row is solve's plan, solved from the request compare built."""
    c = compare(LENS, 3, token_budget=400, rules=(), diversity=False)
    assert count_requests == [3]
    assert tuple(c.strategies["bucketed"]["boundaries"]) == bucketopt.solve(
        LENS, 3, token_budget=400).boundaries
