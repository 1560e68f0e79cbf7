"""The report page in a real browser: Debian's headless chromium (scripts/provision.d/40-chromium.sh),
driven over the DevTools protocol (tests/support/cdp.py). A person sees every plot, nothing fails in the
console, and the page fetches nothing but itself."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from tests.support.bench_bundles import shared_bundles
from tests.support.cdp import Chromium
from tests.support.cli import run_cli

PLOTS = {"kv_capacity", "memory_breakdown", "ladder", "bench", "frontier"}


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    with Chromium.launch(tmp_path_factory.mktemp("chromium")) as chromium:
        yield chromium


def _colours(png: bytes) -> tuple[int, float]:
    """(distinct colours, share of pixels that are not white) of a screenshot."""
    image = Image.open(io.BytesIO(png)).convert("RGB")
    colours = image.getcolors(maxcolors=1 << 20) or []
    white = sum(count for count, rgb in colours if rgb == (255, 255, 255))
    return len(colours), 1 - white / (image.width * image.height)


def test_the_report_renders_every_plot_without_errors(browser, tmp_path, tmp_path_factory):
    project, runs = shared_bundles(tmp_path_factory)
    page = tmp_path / "report.html"
    res = run_cli(
        "--root", str(project.root), "report", *map(str, runs), "--html", str(page), timeout=180
    )
    assert res.returncode == 0, res.stderr
    seen = browser.open(page, height=6000)  # tall enough that the screenshot holds the whole page
    assert seen.console_errors == []
    assert seen.requests == [page.resolve().as_uri()]  # nothing fetched but the page itself
    assert {p["name"] for p in seen.plots} == PLOTS and seen.missing == []
    for plot in seen.plots:
        assert plot["width"] > 400 and plot["height"] > 150, plot  # laid out at a readable size
        assert plot["shapes"] > 50, plot  # bars, lines, glyphs: a drawn plot, not an empty frame
    colours, inked = _colours(seen.screenshot)
    assert colours > 50 and inked > 0.05, (colours, inked)


def test_the_harness_sees_console_errors_and_fetches(browser, tmp_path):
    # The checks above must be able to fail: a page with an error and a fetch is caught.
    page = tmp_path / "bad.html"
    page.write_text(
        '<html><body><img src="http://127.0.0.1:9/x.png"><script>console.error("boom"); nope()</script></body></html>'
    )
    seen = browser.open(page)
    assert "boom" in seen.console_errors and any("Uncaught" in e for e in seen.console_errors)
    assert "http://127.0.0.1:9/x.png" in seen.requests
    assert seen.plots == []
    blank = browser.open(_blank(tmp_path))
    assert _colours(blank.screenshot)[1] == 0  # a blank page is seen as blank


def _blank(tmp_path):
    page = tmp_path / "blank.html"
    page.write_text("<html><body></body></html>")
    return page
