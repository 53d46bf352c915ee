"""ruff, configured in pyproject.toml, is clean on the whole tree (skipped where ruff is absent)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_is_clean():
    if shutil.which("ruff") is None:
        pytest.importorskip("ruff")
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--output-format", "concise",
                           str(ROOT)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
