"""CI runs the tests of every package it installs: in CI (``CI=true``) a test that would skip for a
missing package that ``.ci/run`` installs fails instead (tests/conftest.py); elsewhere it skips.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from .conftest import CI_INSTALLS, in_ci, missing_install

ROOT = Path(__file__).resolve().parent.parent


def _import_name(spec: str) -> str:
    return re.match(r"[A-Za-z0-9_.-]+", spec).group(0).lower().replace("-", "_")


def optional_dependencies(pyproject: str) -> dict[str, list[str]]:
    """The ``[project.optional-dependencies]`` table (no tomllib before Python 3.11)."""
    table = pyproject.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    return {name: re.findall(r'"([^"]+)"', items)
            for name, items in re.findall(r'^(\w+)\s*=\s*\[((?:"[^"]*"|[^]"])*)\]', table, re.M)}


def ci_run_installs() -> set[str]:
    """The import names of everything .ci/run installs: its ``install WHAT SPEC...`` lines and
    its last line's ``pip install '.[test]'``, extras read from pyproject.toml; and the WHAT of
    its ``apt_install WHAT PACKAGE...`` lines (a program, not a module: the name its tests'
    skip reason gives)."""
    extras = optional_dependencies((ROOT / "pyproject.toml").read_text())
    specs, names = [], set()
    for line in (ROOT / ".ci" / "run").read_text().splitlines():
        words = shlex.split(line.split("||")[0].split("&&")[0], comments=True)
        if words[:1] == ["install"]:
            specs += words[2:]
        elif words[:1] == ["apt_install"]:
            names.add(words[1])
        elif words[:3] == ["pip", "install", ".[test]"]:
            specs.append(".[test]")
    for spec in specs:
        extra = re.fullmatch(r"\.\[(\w+)\]", spec)
        names |= {_import_name(s) for s in extras[extra.group(1)]} if extra else \
            {_import_name(spec)}
    return names


def test_conftest_requires_what_ci_run_installs():
    installs = ci_run_installs()
    assert {"lightning", "accelerate", "duckdb", "chromium"} <= installs  # lines, extras, apt
    assert set(CI_INSTALLS) == installs


def test_ci_run_ends_with_the_readme_test_command():
    last = (ROOT / ".ci" / "run").read_text().rstrip().splitlines()[-1]
    assert last == "pip install '.[test]' && python -m pytest -q"


def test_the_reasons_read_as_missing():
    assert missing_install("could not import 'lightning': No module named 'lightning'") == \
        "lightning"
    assert missing_install("could not import 'dask.dataframe': No module named 'dask'") == \
        "dask.dataframe"
    assert missing_install("needs lhotse, which is not installed") == "lhotse"
    assert missing_install("needs chromium, which is not installed (Debian's chromium and "
                           "chromium-driver)") == "chromium"
    assert missing_install("could not import 'matplotlib': No module named 'matplotlib'") is None
    assert missing_install("needs Linux /proc") is None
    assert in_ci({"CI": "true"}) and in_ci({"CI": "1"}) and in_ci({"CI": "True"})
    assert not in_ci({}) and not in_ci({"CI": "false"}) and not in_ci({"CI": ""})


def test_in_ci_a_skip_for_a_missing_install_fails(tmp_path):
    """A tiny suite with this conftest (plus one package .ci/run would install that is surely
    missing): with CI=true its skips for that package fail, at module level and inside a test,
    and other skips stay skips; without CI everything skips."""
    conftest = (ROOT / "tests" / "conftest.py").read_text()
    (tmp_path / "conftest.py").write_text(
        conftest + "\nCI_INSTALLS = CI_INSTALLS | {'bucketopt_absent_pkg'}\n")
    (tmp_path / "test_module.py").write_text(
        "import pytest\npytest.importorskip('bucketopt_absent_pkg')\n\n"
        "def test_never():\n    pass\n")
    (tmp_path / "test_inside.py").write_text(
        "import pytest\n\n"
        "def test_needs_it():\n    pytest.importorskip('bucketopt_absent_pkg.sub')\n\n"
        "def test_needs_other():\n    pytest.importorskip('bucketopt_absent_other')\n\n"
        "def test_plain():\n    pass\n")
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}

    def run(**extra):
        return subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-rfEs", "-p", "no:cacheprovider",
             "--continue-on-collection-errors", str(tmp_path)],
            cwd=tmp_path, env={**env, **extra}, capture_output=True, text=True, timeout=120)

    local = run()
    assert local.returncode == 0, local.stdout + local.stderr
    assert "1 passed, 3 skipped" in local.stdout
    ci = run(CI="true")
    assert ci.returncode == 1, ci.stdout + ci.stderr
    assert "1 failed, 1 passed, 1 skipped, 1 error" in ci.stdout, ci.stdout
    for name in ("bucketopt_absent_pkg.sub", "bucketopt_absent_pkg"):
        assert f"CI=true: {name} is missing although .ci/run installs it" in ci.stdout, ci.stdout
