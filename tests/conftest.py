"""Rules of the whole test session.

In CI (the environment variable ``CI`` is ``true`` or ``1``, as CI services set it), a test that
would skip because a package ``.ci/run`` installs is missing fails instead, naming the package:
``.ci/run`` installed it, so its absence means an install went wrong, and the Trainer, Lightning,
Accelerate or Lhotse tests would silently never run. Elsewhere such tests still skip (the
packages are optional extras). A skip is read as "missing" from the reason
``pytest.importorskip`` gives ("could not import 'lhotse': ...") and the one the documentation
examples and the browser test give ("needs lhotse, which is not installed", docs/examples.py;
"needs chromium, ...", tests/test_report_browser.py), for a test or for a whole module.
"""

from __future__ import annotations

import os
import re

import pytest

# The import names of what .ci/run installs: torch, lhotse (with urllib3), '.[transformers]'
# (transformers, accelerate, datasets), trl, lightning, selenium and '.[test]'; and the name of
# what it installs with apt (chromium: Debian's chromium and chromium-driver). tests/test_ci.py
# holds this set equal to the one read from .ci/run and pyproject.toml.
CI_INSTALLS = frozenset({
    "torch", "lhotse", "urllib3", "transformers", "accelerate", "datasets", "trl", "lightning",
    "pytest", "hypothesis", "nbclient", "nbformat", "ipykernel", "ruff", "dask", "distributed",
    "duckdb", "selenium", "chromium",
})
_MISSING = (re.compile(r"could not import '([\w.]+)'"),
            re.compile(r"needs ([\w.]+), which is not installed"))


def in_ci(environ=os.environ) -> bool:
    return environ.get("CI", "").strip().lower() in ("true", "1")


def missing_install(reason: str) -> str | None:
    """The module a skip ``reason`` says is missing, when .ci/run installs it; else None."""
    for pattern in _MISSING:
        found = pattern.search(reason)
        if found and found.group(1).split(".")[0] in CI_INSTALLS:
            return found.group(1)
    return None


def _fail_in_ci(report) -> None:
    if not (report.skipped and in_ci()) or hasattr(report, "wasxfail"):
        return
    longrepr = report.longrepr
    reason = str(longrepr[2]) if isinstance(longrepr, tuple) else str(longrepr)
    name = missing_install(reason)
    if name is not None:
        report.outcome = "failed"
        report.longrepr = (f"CI={os.environ['CI']}: {name} is missing although .ci/run installs "
                           f"it; in CI its tests must run, not skip ({reason})")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_in_ci(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _fail_in_ci(outcome.get_result())

# tests/toy_objective.py registers an objective when imported (as an objective module does):
# only its test's fixture imports it, never pytest's doctest collection of every module.
collect_ignore = ["toy_objective.py"]
