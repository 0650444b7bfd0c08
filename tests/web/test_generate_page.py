"""A language model's page streams generated text in a real browser, on the embedded hub (SQLite, the file
lane, its Celery worker and generation engine), and shows the API's refusals."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from tests.generation.lm import folder_files, save_lm

pytestmark = pytest.mark.slow

DEMO = ("demo", "demo-password")


def test_a_language_model_page_streams_generated_text(site, embedded_hub, tmp_path):
    from hpcfair import modelAPI
    from hpcfair.errors import HubError

    base, token, _ = embedded_hub
    api = modelAPI(base, token)
    folder = save_lm(tmp_path / "page-llama", "llama")
    meta = {"title": "Page llama", "description": "A random tiny Llama", "creators": [{"name": "demo"}],
            "license": "MIT", "framework": "pytorch", "task": "text-generation"}
    published = api.client.publish("page-llama", {path: folder / path for path in folder_files(folder)}, meta)
    deadline = time.monotonic() + 300
    while True:  # the build is queued behind the folder's ONNX conversion
        try:
            expected = "".join(p["text"] for p in api.client.generate(
                published["pid"], prompt="the hub converts", max_new_tokens=10, temperature=0) if not p.get("done"))
            break
        except HubError as exc:
            assert exc.code == "not_ready" and time.monotonic() < deadline, exc
            time.sleep(2)
    w = site()
    w.login(*DEMO)
    page = w.page
    page.goto(f"/{published['pid']}")
    page.get_by_role("link", name="Generate").click()
    page.get_by_label("Prompt").fill("the hub converts")
    page.get_by_label("New tokens").fill("10")
    page.get_by_label("Temperature (0: greedy)").fill("0")
    page.get_by_role("button", name="Generate").click()
    expect(page.locator("#generate-status")).not_to_have_text(re.compile(r"^generating"), timeout=60_000)
    assert page.locator("#generate-status").inner_text() == "10 tokens, length"
    assert page.locator("#generate-output").text_content() == expected
    w.shot("landing-generate")
    page.get_by_label("Prompt").fill("the hub converts models " * 200)  # longer than the model's context
    page.get_by_role("button", name="Generate").click()
    expect(page.locator("#generate-status")).to_contain_text("[prompt_too_long]", timeout=30_000)
    assert "context holds 256" in page.locator("#generate-status").inner_text()
