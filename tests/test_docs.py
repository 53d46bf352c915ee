"""The docs match the code: every generated section of README.md and docs/ is what docs/regen.py
writes today (``python docs/regen.py`` rewrites them), and the README's Python runs as printed."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "docs"))
import regen  # noqa: E402


def test_every_section_names_a_generator_and_closes():
    seen = set()
    for page in regen.PAGES:
        text = (ROOT / page).read_text()
        opened = re.findall(r"<!-- regen: ([\w-]+) -->", text)
        assert len(opened) == text.count("<!-- /regen -->"), page
        assert len(opened) == len(regen.sections(page)[1]), page
        for name in opened:
            assert name in regen.GENERATORS, (page, name)
        seen.update(opened)
    assert seen == set(regen.GENERATORS), set(regen.GENERATORS) - seen  # none unused


def test_every_section_is_current():
    differ = regen.regenerate(check=True)  # about 25 s: the slow tables included
    assert not differ, f"stale docs (run python docs/regen.py): {differ}"


def _python_blocks(page):
    return re.findall(r"```python\n(.*?)```", (ROOT / page).read_text(), re.S)


def test_readme_python_runs_as_printed():
    pytest.importorskip("torch")
    quick, train = (b for b in _python_blocks("README.md") if "import" in b)
    scope: dict = {}
    exec(compile(quick, "README quick start", "exec"), scope)  # our own docs
    # The same names, a slice of the data: the training loop must find everything it uses.
    scope["lengths"] = np.asarray(scope["lengths"])[:3000]
    exec(compile(train, "README training", "exec"), scope)
    assert scope["epoch"] == scope["epochs"] - 1
    assert scope["batch"].shape[0] >= 1
