"""The built documentation site: every public name documented, the gallery rendered.

``make docs`` builds the site into ``docs/_build/html`` and then runs this file. Without a
built site (as in ``make test``, which does not build it) every test here skips, saying so.
The browser tests open the pages in Debian's headless ``chromium`` through
``chromium-driver`` (``.ci/run`` installs them; skipped, saying so, without them), served by
an HTTP server on 127.0.0.1 that the tests start and stop.
"""

from __future__ import annotations

import functools
import html.parser
import http.server
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import stencilpipe
import stencilpipe.io
import stencilpipe.library
import stencilpipe.ndfilters
import stencilpipe.ndmorph
from chromium import headless_chromium
from stencilpipe.cli import main as cli_main

DOCS = Path(__file__).resolve().parents[1] / "docs"
SITE = DOCS / "_build" / "html"
EXAMPLES = sorted(path.stem for path in (DOCS / "examples").glob("*.py"))
EXECUTED = [name for name in EXAMPLES if name.startswith("plot_")]
MODULES = (
    stencilpipe,
    stencilpipe.library,
    stencilpipe.ndfilters,
    stencilpipe.ndmorph,
    stencilpipe.io,
)

pytestmark = pytest.mark.skipif(
    not (SITE / "index.html").is_file(),
    reason=f"the docs site is not built ({SITE} has no index.html): make docs builds it, "
    "then runs this file",
)


class _Ids(html.parser.HTMLParser):
    """Collects the ``id`` attributes of a page: Sphinx's anchors of documented objects."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.ids.update(value for name, value in attrs if name == "id" and value)


@functools.cache
def _anchors() -> frozenset[str]:
    parser = _Ids()
    for page in SITE.rglob("*.html"):
        parser.feed(page.read_text(encoding="utf-8"))
    return frozenset(parser.ids)


def _documented_as(module, name: str) -> set[str]:
    """The anchors under which ``module.name`` may be documented: its own, or that of the
    same object in another public module (``stencilpipe.io.imread`` is ``stencilpipe.imread``)."""
    value = getattr(module, name)
    places = {m.__name__ for m in MODULES if getattr(m, name, None) is value} | {module.__name__}
    if isinstance(value, type(stencilpipe)):
        return {f"module-{value.__name__}"}
    return {f"{place}.{name}" for place in places}


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_every_public_name_has_its_entry(module):
    missing = [name for name in module.__all__ if not _documented_as(module, name) & _anchors()]
    assert not missing, f"{module.__name__}: no entry in the API reference for {missing}"


def test_every_command_has_its_section():
    commands = {f"stencilpipe-{name}" for name in cli_main.commands}
    assert commands <= _anchors(), sorted(commands - _anchors())


def test_every_example_has_its_page():
    pages = {path.stem for path in (SITE / "auto_examples").glob("*.html")}
    assert set(EXAMPLES) <= pages, sorted(set(EXAMPLES) - pages)


LOADED = "return document.readyState === 'complete' && [...document.images].every(i => i.complete);"
# Each image of the page: its address, whether loading ended, and its decoded width.
IMAGES = "return [...document.images].map(i => [i.currentSrc, i.complete, i.naturalWidth]);"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base's name)
        pass


@pytest.fixture(scope="module")
def site_url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Quiet, directory=str(SITE))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    session = headless_chromium(
        tmp_path_factory.mktemp("chromium-profile"), window="1400,1000", console_log=True
    )
    session.set_page_load_timeout(60)
    try:
        yield session
    finally:
        session.quit()


def _open(browser, url: str) -> list[list]:
    """Load ``url``; return its images once loaded, after checking the console is clean."""
    from selenium.webdriver.support.wait import WebDriverWait

    browser.get_log("browser")  # drop what an earlier page left
    browser.get(url)
    # get() can return before the load event (Chromium's navigation, not the page, is done)
    WebDriverWait(browser, 60).until(lambda b: b.execute_script(LOADED), f"{url} to load")
    images = browser.execute_script(IMAGES)
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert not errors, f"{url}: console errors {errors}"
    broken = [src for src, complete, width in images if not (complete and width > 0)]
    assert not broken, f"{url}: images that did not load: {broken}"
    return images


def test_gallery_index_shows_a_thumbnail_per_example(browser, site_url):
    images = _open(browser, site_url + "auto_examples/index.html")
    thumbnails = {
        name for name in EXAMPLES for src, _, _ in images if f"sphx_glr_{name}_thumb" in src
    }
    assert thumbnails == set(EXAMPLES)


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_page_renders_its_figures(browser, site_url, name):
    images = _open(browser, site_url + f"auto_examples/{name}.html")
    figures = [src for src, _, _ in images if re.search(rf"/sphx_glr_{name}_\d+\.png$", src)]
    if name in EXECUTED:
        assert figures, f"{name}: ran at build time but shows no figure"
    else:
        assert not figures, f"{name}: shown, not run, yet it has figures"
    text = browser.find_element("tag name", "article").text
    assert "Traceback" not in text


@pytest.mark.parametrize(
    "page",
    [
        "index.html",
        "api/index.html",
        "api/generated/stencilpipe.html",
        "api/generated/stencilpipe.ndfilters.html",
        "cli.html",
        "search.html",
    ],
)
def test_page_loads_without_console_errors(browser, site_url, page):
    _open(browser, site_url + page)
