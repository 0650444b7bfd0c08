"""Browser tests: Playwright driving Debian's Chromium against the embedded hub (``make run``'s processes).

Every page a test opens is watched: a request to anything but 127.0.0.1 or a JavaScript error fails the
test. Screenshots of the main pages go to ``test-output/screenshots/`` (``HUB_TEST_OUTPUT`` moves it).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest

ROOT = Path(__file__).resolve().parents[2]
# the `browser` fixture (Chromium through Playwright) is tests/conftest.py's: one per session, for every package
SHOTS = Path(os.environ.get("HUB_TEST_OUTPUT", ROOT / "test-output")) / "screenshots"


class Watched:
    """A browser context on the hub whose requests and script errors are recorded."""

    def __init__(self, browser, base: str, viewport: dict[str, int] | None = None) -> None:
        self.base = base
        self.context = browser.new_context(base_url=base, viewport=viewport or {"width": 1280, "height": 900},
                                           accept_downloads=True)
        self.context.set_default_timeout(30_000)
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.context.on("request", lambda request: self.requests.append(request.url))
        self.page = self.context.new_page()
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.page.on("console", lambda msg: self.errors.append(msg.text) if msg.type == "error"
                     and "Failed to load resource" not in msg.text else None)

    def login(self, username: str, password: str) -> None:
        self.page.goto("/accounts/login/")
        self.page.get_by_label("Username").fill(username)
        self.page.get_by_label("Password").fill(password)
        self.page.get_by_role("button", name="Log in").click()
        self.page.wait_for_url(self.base + "/")

    def shot(self, name: str) -> Path:
        SHOTS.mkdir(parents=True, exist_ok=True)
        path = SHOTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def outside(self) -> list[str]:
        """Requests that left 127.0.0.1 (data: and blob: URLs stay in the page)."""
        return [url for url in self.requests
                if urlparse(url).scheme not in {"data", "blob"} and urlparse(url).hostname != "127.0.0.1"]


@pytest.fixture
def site(embedded_hub, browser):
    """A fresh browser context (no cookies) on the embedded hub; checks at the end that no request left
    127.0.0.1 and that no page had a script error."""
    base, _, _ = embedded_hub
    opened: list[Watched] = []

    def open_context(viewport: dict[str, int] | None = None) -> Watched:
        watched = Watched(browser, base, viewport)
        opened.append(watched)
        return watched

    yield open_context
    for watched in opened:
        watched.context.close()
    for watched in opened:
        assert watched.requests, "the browser made no requests at all"
        assert watched.outside() == [], f"requests left 127.0.0.1: {watched.outside()}"
        assert watched.errors == [], f"script errors: {watched.errors}"


@pytest.fixture(scope="session")
def hub_users(embedded_hub):
    """A second and third account on the embedded hub (bob, carol; password 'pw-<name>-1')."""
    _, _, var = embedded_hub
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "HUB_BROKER_URL", "HUB_STORAGE"}}
    env["HUB_VAR_DIR"] = str(var)
    code = ("from django.contrib.auth.models import User\n"
            "for name in ('bob', 'carol'):\n"
            "    user, _ = User.objects.get_or_create(username=name)\n"
            "    user.set_password(f'pw-{name}-1'); user.save()\n")
    subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env=env, check=True,
                   capture_output=True, timeout=120)
    return {"bob": "pw-bob-1", "carol": "pw-carol-1"}

