"""The report in a real browser: Debian's headless Chromium, driven by Selenium through Debian's
chromedriver (nothing is downloaded at test time; the network is cut, so a resource the page
fetched would fail). The page loads with no console error, every image decodes, nothing but
``data:`` URIs is loaded, the figures the DOM shows equal the JSON the page embeds (which is
``bucketopt report --json``'s), and a screenshot is taken.

.ci/run installs chromium, chromium-driver and selenium: in CI a missing one fails these tests
(tests/conftest.py); elsewhere they skip."""

from __future__ import annotations

import io
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from bucketopt.cli import main

from .report_figures import check_figures

pytest.importorskip("selenium")

CHROMIUM = next((p for p in (shutil.which("chromium"), "/usr/bin/chromium")
                 if p and Path(p).exists()), None)
DRIVER = next((p for p in (shutil.which("chromedriver"), "/usr/bin/chromedriver")
               if p and Path(p).exists()), None)
if CHROMIUM is None or DRIVER is None:
    pytest.skip("needs chromium, which is not installed (Debian's chromium and "
                "chromium-driver: apt-get install chromium chromium-driver)",
                allow_module_level=True)

VERIFY = Path(__file__).parent / "data" / "verify.json"
WIDTH, HEIGHT = 1280, 2400


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", f"--window-size={WIDTH},{HEIGHT}",
                     # no network: a page that fetched anything would log an error
                     "--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def _errors(driver) -> list:
    return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """A report with a profile and a verify result, and its --json."""
    folder = tmp_path_factory.mktemp("report")
    lengths = (np.random.default_rng(3).lognormal(6.2, 0.8, 5_000)).astype(np.int64) + 1
    np.save(folder / "lens.npy", lengths)
    out = folder / "report.html"
    stdout, sys.stdout = sys.stdout, io.StringIO()
    try:
        code = main(["report", "--lens", str(folder / "lens.npy"), "-k", "4",
                     "--token-budget", "16384", "--profile", "rtx-pro-6000-blackwell",
                     "--verify", str(VERIFY), "-o", str(out), "--json", "-q"])
        printed = sys.stdout.getvalue()
    finally:
        sys.stdout = stdout
    assert code == 0
    return out, json.loads(printed)


def test_the_page_in_chromium(browser, report, tmp_path):
    path, data = report
    browser.get_log("browser")  # start from an empty log
    browser.get(path.as_uri())
    assert browser.execute_script("return document.readyState") == "complete"
    assert _errors(browser) == []
    # nothing but the page and data: URIs was loaded
    resources = browser.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)")
    assert all(name.startswith("data:") for name in resources), resources
    # every figure decodes and is drawn at a size
    images = browser.execute_script(
        "return Array.from(document.images).map(i => [i.closest('figure').id, i.complete, "
        "i.naturalWidth, i.getBoundingClientRect().width])")
    assert [i[0] for i in images] == ["figure-distribution", "figure-sweep", "figure-strategies",
                                      "figure-verify"]
    assert all(done and natural > 0 and shown > 100 for _, done, natural, shown in images)
    # the JSON the page holds is the one --json printed
    embedded = browser.execute_script(
        "return JSON.parse(document.getElementById('bucketopt-data').textContent)")
    assert embedded == data
    # the figures the DOM shows are that JSON's
    cells = browser.execute_script(
        "return Array.from(document.querySelectorAll('[data-path]'))"
        ".map(e => [e.dataset.path, e.innerText])")
    assert len(cells) > 100
    assert check_figures(data, cells) == []
    # the recommended strategy is the one marked
    marked = browser.execute_script(
        "return Array.from(document.querySelectorAll('#strategies tr.recommended'))"
        ".map(r => [r.dataset.strategy, r.innerText])")
    assert [m[0] for m in marked] == [data["strategies"]["recommended"]]
    assert "recommended" in marked[0][1]
    for section in ("distribution", "plan", "sweep", "strategies", "certificate", "verify"):
        heading = browser.find_element("css selector", f"#{section} h2")
        assert heading.is_displayed() and heading.text
    shot = tmp_path / "report.png"
    assert browser.save_screenshot(str(shot))
    png = shot.read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert width > 0 and height > 0
    assert _errors(browser) == []


def test_the_console_check_sees_an_error(browser, tmp_path):
    """The console check above can fail: a page that logs an error, and one that fetches a
    resource (the network is cut), are both seen."""
    page = tmp_path / "bad.html"
    page.write_text("<!DOCTYPE html><html><body><script>console.error('broken')</script>"
                    '<img src="https://example.invalid/x.png"></body></html>')
    browser.get_log("browser")
    browser.get(page.as_uri())
    messages = " ".join(entry["message"] for entry in _errors(browser))
    assert "broken" in messages and "example.invalid" in messages
