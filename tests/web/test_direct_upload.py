"""The publish page on the S3 backend: the browser sends the file's parts straight to the object store
(SeaweedFS) by presigned URLs, resumes after a reload with only the missing parts, and falls back to the
hub when it cannot reach the store. The web workers carry none of the bytes."""

from __future__ import annotations

import hashlib
import os
from urllib.parse import urlparse

import pytest
from playwright.sync_api import expect

from hub.registry.models import Upload
from tests.conftest import S3_PART
from tests.web.conftest import Watched

pytestmark = pytest.mark.django_db(transaction=True)

PART = S3_PART
DATA = os.urandom(3 * PART + 4321)  # four parts, the last one short
SHA = hashlib.sha256(DATA).hexdigest()


@pytest.fixture
def page_of(browser, live_server, owner):
    """A logged-in browser page on the test's live server; no script errors, nothing beyond 127.0.0.1."""
    opened: list[Watched] = []

    def open_page() -> Watched:
        watched = Watched(browser, live_server.url.replace("localhost", "127.0.0.1"))
        opened.append(watched)
        watched.login("alice", "alice-pw-12345")
        watched.page.goto("/publish/")
        return watched

    yield open_page
    for watched in opened:
        watched.context.close()
        assert watched.outside() == [] and watched.errors == [], (watched.outside(), watched.errors)


def puts(requests: list) -> tuple[list[int], list[str]]:
    """(part numbers sent to the object store, other PUT URLs) of the recorded requests."""
    parts, others = [], []
    for request in requests:
        if request.method != "PUT":
            continue
        query = dict(pair.split("=", 1) for pair in urlparse(request.url).query.split("&") if "=" in pair)
        if "partNumber" in query:
            parts.append(int(query["partNumber"]))
        else:
            others.append(request.url)
    return parts, others


def test_the_page_uploads_straight_to_the_object_store_and_resumes_after_a_reload(s3, page_of, tmp_path):
    path = tmp_path / "weights.bin"
    path.write_bytes(DATA)
    w = page_of()
    page = w.page
    page.evaluate("uploads.parallel = 1")  # one part at a time, so the cut falls between parts
    sent = []
    page.on("request", lambda request: sent.append(request))
    store = f"http://{s3.public_client._base_url.host}/**"

    def cut_after_one_part(route, request):
        if request.method == "PUT" and len([r for r in sent if r.method == "PUT"]) > 1:
            return route.abort("connectionreset")
        return route.continue_()

    page.route(store, cut_after_one_part)
    page.set_input_files("#f-files", str(path))
    expect(page.locator("#file-list .status").first).to_contain_text("resuming", timeout=30_000)
    page.unroute(store)
    first, through_hub = puts(sent)
    assert first[0] == 1 and through_hub == [], (first, through_hub)
    upload = Upload.objects.get()
    assert upload.direct_id and upload.state == Upload.State.OPEN

    page.reload()  # the page is gone; the store keeps part 1
    sent.clear()
    page.set_input_files("#f-files", str(path))
    page.locator('#file-list li[data-state="uploaded"]').wait_for()
    parts, through_hub = puts(sent)
    assert sorted(parts) == [2, 3, 4] and through_hub == [], "only the missing parts, none through the hub"
    upload.refresh_from_db()
    assert upload.state == Upload.State.COMPLETED and upload.sha256 == SHA
    with s3.open(SHA) as blob:
        assert blob.read() == DATA


def test_the_page_goes_through_the_hub_when_it_cannot_reach_the_object_store(s3, page_of, tmp_path):
    path = tmp_path / "weights.bin"
    path.write_bytes(DATA)
    w = page_of()
    page = w.page
    page.route(f"http://{s3.public_client._base_url.host}/**", lambda route, request: route.abort("addressunreachable"))
    page.evaluate("window.HUB_UPLOAD_CHUNK = 4 * 1024 * 1024")
    sent = []
    page.on("request", lambda request: sent.append(request))
    page.set_input_files("#f-files", str(path))
    page.locator('#file-list li[data-state="uploaded"]').wait_for()
    _, through_hub = puts(sent)
    chunks = -(-len(DATA) // (4 * 1024 * 1024))
    assert len(through_hub) == chunks and all("/api/v1/uploads/" in url for url in through_hub), through_hub
    uploads = {u.state: u for u in Upload.objects.all()}
    assert set(uploads) == {Upload.State.ABORTED, Upload.State.COMPLETED}, "the direct one given up, not left open"
    assert uploads[Upload.State.COMPLETED].sha256 == SHA and not uploads[Upload.State.COMPLETED].direct_id
