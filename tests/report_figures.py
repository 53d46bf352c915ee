"""What the report's figures are checked by, in the plain tests (the HTML parsed) and in the
browser (the DOM's text): every element with a ``data-path`` shows the number (or the [low,
high] interval) found at that JSON pointer of the report's data, to the digits shown."""

from __future__ import annotations

import math
import re
from html.parser import HTMLParser

NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?")
# A figure's unit -> what the JSON value is multiplied by to show it.
UNITS = ((" GiB", 2.0**-30), (" MiB", 2.0**-20), ("%", 100.0), (" tok/s", 1.0), (" s", 1.0))
# The sections whose figures a report with a profile and a verify result shows.
SECTIONS = ("distribution", "plan", "buckets", "sweep", "strategies", "certificate", "verify")


def resolve(data, pointer: str):
    """The value at a JSON pointer (RFC 6901)."""
    value = data
    for part in pointer.split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def _shown(token: str) -> tuple[float, float]:
    """A number as shown and half a unit of its last digit shown."""
    mantissa, _, exponent = token.replace(",", "").partition("e")
    decimals = len(mantissa.partition(".")[2])
    power = int(exponent) if exponent else 0
    return float(mantissa) * 10.0**power, 0.5 * 10.0 ** (power - decimals)


def mismatch(data, pointer: str, text: str) -> str | None:
    """Why ``text`` does not show the value at ``pointer`` of ``data`` (None: it does)."""
    try:
        expected = resolve(data, pointer)
    except (KeyError, IndexError, ValueError, TypeError):
        return f"{pointer}: no such place in the data"
    text = text.strip()
    scale = next((s for unit, s in UNITS if text.rstrip("]").endswith(unit)), 1.0)
    tokens = NUMBER.findall(text)
    values = expected if isinstance(expected, list) else [expected]
    if len(tokens) != len(values) or not all(isinstance(v, (int, float)) for v in values):
        return f"{pointer}: shows {text!r}, the data holds {expected!r}"
    for token, value in zip(tokens, values):
        shown, half = _shown(token)
        if not math.isclose(shown / scale, value, rel_tol=0, abs_tol=half / scale * 1.000001):
            return f"{pointer}: shows {text!r}, the data holds {expected!r}"
    return None


def check_figures(data, cells) -> list[str]:
    """The figures of ``cells`` ((pointer, text) pairs) that do not show the data; raises if
    a section of the report shows no figure at all."""
    bad = [why for pointer, text in cells if (why := mismatch(data, pointer, text))]
    shown = {pointer.split("/")[1] for pointer, _ in cells}
    missing = [s for s in SECTIONS if s not in shown and data.get(s) is not None]
    assert not missing, f"sections with no figure shown: {missing}"
    return bad


class _Cells(HTMLParser):
    """(data-path, text) of every element that has one (they hold text only)."""

    def __init__(self):
        super().__init__()
        self.cells, self._open = [], []

    def handle_starttag(self, tag, attrs):
        path = dict(attrs).get("data-path")
        if path is not None:
            self._open.append([tag, path, ""])

    def handle_endtag(self, tag):
        if self._open and self._open[-1][0] == tag:
            _, path, text = self._open.pop()
            self.cells.append((path, text))

    def handle_data(self, text):
        for cell in self._open:
            cell[2] += text


def html_cells(page: str) -> list[tuple[str, str]]:
    parser = _Cells()
    parser.feed(page)
    return parser.cells


def embedded_data(page: str):
    """The JSON the page holds in <script type="application/json" id="bucketopt-data">."""
    import json

    found = re.search(r'<script type="application/json" id="bucketopt-data">(.*?)</script>',
                      page, re.S)
    assert found, "the page holds no bucketopt-data script"
    return json.loads(found.group(1))
