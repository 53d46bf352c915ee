"""Install lines work from a checkout: docs say pip install '.[extra]', messages say both forms
through one helper."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from bucketopt.errors import BucketoptError, install_hint

ROOT = Path(__file__).resolve().parents[1]


def test_the_hint_names_the_checkout_and_the_index_forms():
    text = install_hint("dask")
    assert "pip install '.[dask]'" in text and "checkout" in text
    assert "'bucketopt[dask]'" in text


def test_missing_dask_says_how_to_install_it(monkeypatch):
    from bucketopt.data import dask_hist

    monkeypatch.setitem(sys.modules, "dask", None)  # import dask raises ImportError
    with pytest.raises(BucketoptError) as info:
        dask_hist._require_dask()
    assert install_hint("dask") in str(info.value)


def test_missing_transformers_says_how_to_install_it(monkeypatch):
    from bucketopt.integrations import transformers as integration

    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(BucketoptError) as info:
        integration._require_transformers()
    assert install_hint("transformers") in str(info.value)


def _pages():
    yield from sorted((ROOT / "docs").glob("*.md"))
    yield from sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("page", list(_pages()), ids=lambda p: p.name)
def test_docs_install_extras_from_the_checkout(page):
    # `pip install 'bucketopt[x]'` needs bucketopt on a package index; the docs install from a
    # checkout (`pip install .`), so an extra is `pip install '.[x]'` there
    text = page.read_text()
    assert not re.findall(r"pip3? install ['\"]?bucketopt\[", text)


def test_messages_in_code_say_the_checkout_form_too():
    for path in sorted((ROOT / "bucketopt").rglob("*.py")):
        text = path.read_text()
        if "'bucketopt[" in text and path.name != "errors.py":
            assert "'.[" in text, path  # beside the index form, the checkout form
