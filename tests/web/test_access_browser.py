"""The request -> approve -> download flow in Chromium against the embedded hub: carol finds a dataset whose
files are restricted, sees the notice and no preview, asks with a purpose; the owner approves on
/access/requests/; carol's download then brings the bytes."""

from __future__ import annotations

import re

import pytest
import requests

from tests.web.test_browser import DEMO

pytestmark = pytest.mark.slow

ROWS = "station,temperature\nsummit,-12.5\nvalley,3.25\n"


def test_request_approve_download_in_the_browser(site, embedded_hub, hub_users, tmp_path):
    base, token, _ = embedded_hub
    auth = {"Authorization": f"Bearer {token}"}
    (tmp_path / "readings.csv").write_text(ROWS)
    with open(tmp_path / "readings.csv", "rb") as rows:
        made = requests.post(f"{base}/api/v1/artifacts/demo/dua-readings/versions/", headers=auth, timeout=60,
                             data={"metadata": '{"title": "Readings under a DUA", "description": "Restricted.", '
                                               '"creators": [{"name": "Demo Person"}], "license": "CC-BY-4.0"}',
                                   "artifact": '{"kind": "dataset", "title": "Readings under a DUA"}'},
                             files={"readings.csv": ("readings.csv", rows, "text/csv")})
    assert made.status_code == 201, made.text
    label, pid = made.json()["version"], made.json()["pid"]
    access = requests.put(f"{base}/api/v1/artifacts/demo/dua-readings/versions/{label}/access", headers=auth,
                          json={"files_access": "restricted"}, timeout=30)
    assert access.status_code == 200, access.text

    carol = site()
    carol.login("carol", hub_users["carol"])
    page = carol.page
    page.goto(f"/{pid}")
    assert "Restricted files." in page.locator("#files-restricted").inner_text()
    assert "summit" not in page.content()  # no preview of the rows
    page.get_by_label("Purpose").fill("Validate our lapse-rate model")
    page.get_by_role("button", name="Request access").click()
    page.wait_for_url("**/access/requests/")
    assert "pending" in page.locator("#mine").inner_text()
    carol.shot("access-request-pending")

    owner = site()
    owner.login(*DEMO)
    owner.page.goto("/access/requests/")
    entry = owner.page.locator("article.request", has_text="carol")
    assert "Validate our lapse-rate model" in entry.inner_text()
    entry.get_by_label("Message").fill("Granted for the paper")
    entry.get_by_role("button", name="Approve").click()
    assert "approved" in owner.page.locator(".messages").inner_text()

    page.goto(f"/{pid}")
    assert page.locator("#files-restricted").count() == 0 and "summit" in page.content()  # the preview now
    with page.expect_download() as started:
        page.get_by_role("link", name=re.compile(r"^readings\.csv$")).click()
    assert open(started.value.path()).read() == ROWS
