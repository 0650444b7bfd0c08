"""The manual in a browser (issue 56): the built site as the hub serves it at /docs/, in headless Chromium at desktop
and phone widths. Nothing is fetched from off the host, no script fails, the navigation and search work, and
screenshots go to test-output/screenshots/docs-*.png."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.web.conftest import SHOTS, Watched  # the session's Chromium is tests/conftest.py's browser

pytestmark = [pytest.mark.slow, pytest.mark.django_db]

DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
PAGES = [("", "HPCFair Hub"), ("getting-started/tour/", "A five-minute tour"),
         ("guides/metadata/", "Metadata"), ("reference/configuration/", "Configuration"),
         ("reference/rest-api/", "REST API")]


def shot(watched: Watched, name: str) -> None:
    """What the reader's screen shows (the reference pages are too long for a whole-page picture)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    watched.page.screenshot(path=str(SHOTS / f"{name}.png"))


@pytest.fixture
def hub(settings, live_server, built_manual) -> str:
    settings.HUB_DOCS_DIR = built_manual
    return live_server.url.replace("localhost", "127.0.0.1")


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_the_manual_reads_offline_at_both_widths(browser, hub, width):  # noqa: F811
    watched = Watched(browser, hub, DESKTOP if width == "desktop" else PHONE)
    try:
        for path, heading in PAGES:
            answer = watched.page.goto(f"/docs/{path}")
            assert answer.status == 200, path
            assert heading in watched.page.locator("article h1").first.inner_text(), path
            name = path.strip("/").replace("/", "-") or "home"
            shot(watched, f"docs-{width}-{name}")
        width_of = watched.page.evaluate("document.documentElement.scrollWidth")
        assert width_of <= (DESKTOP if width == "desktop" else PHONE)["width"], "the page scrolls sideways"
        assert not watched.outside(), watched.outside()
        assert not watched.errors, watched.errors
    finally:
        watched.context.close()


def test_search_and_navigation_work(browser, hub):  # noqa: F811
    watched = Watched(browser, hub, DESKTOP)
    try:
        page = watched.page
        page.goto("/docs/")
        page.get_by_role("link", name="Configuration").first.click()
        page.wait_for_url("**/docs/reference/configuration/")
        assert page.locator("td code", has_text="HUB_DOCS_DIR").count() >= 1
        page.keyboard.press("/")  # Material's search shortcut
        box, results = page.locator("input[data-md-component=search-query]"), page.locator(".md-search-result__item")
        # Material's search index loads in a web worker; words typed before it is ready find nothing until they
        # are typed again (a loaded machine: 20 s was not enough once), so type them again until it answers.
        deadline = time.monotonic() + 60
        while True:
            box.fill("")
            box.fill("fine-tune")
            try:
                results.first.wait_for(timeout=5_000)
                break
            except PlaywrightTimeout:
                if time.monotonic() > deadline:
                    raise
        assert results.count() > 1
        shot(watched, "docs-desktop-search")
        results.first.locator("a").first.click()
        page.wait_for_load_state()
        assert "/docs/" in page.url and page.locator("article h1").count() == 1
        assert not watched.outside(), watched.outside()
        assert not watched.errors, watched.errors
    finally:
        watched.context.close()
