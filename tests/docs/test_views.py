"""/docs/ (issue 56): the hub serves the built manual from HUB_DOCS_DIR; a coded 404 that says how to build it when
it is not built, and for anything not in it (a missing page, a path out of the folder)."""

from __future__ import annotations

import pytest
from django.test import Client


@pytest.fixture
def manual(settings, tmp_path):
    site = tmp_path / "site"
    (site / "guides" / "metadata").mkdir(parents=True)
    (site / "assets").mkdir()
    (site / "index.html").write_text("<h1>HPCFair Hub</h1>")
    (site / "guides" / "metadata" / "index.html").write_text("<h1>Metadata</h1>")
    (site / "assets" / "main.css").write_text("body {}")
    (site / "search").mkdir()
    (site / "search" / "search_index.json").write_text('{"docs": []}')
    (tmp_path / "secret.txt").write_text("outside the manual")
    settings.HUB_DOCS_DIR = site
    return site


def test_pages_assets_and_the_search_index_are_served(manual):
    client = Client()
    home = client.get("/docs/")
    assert home.status_code == 200 and home["Content-Type"] == "text/html; charset=utf-8"
    assert b"".join(home.streaming_content) == b"<h1>HPCFair Hub</h1>"
    assert b"Metadata" in b"".join(client.get("/docs/guides/metadata/").streaming_content)
    assert client.get("/docs/assets/main.css")["Content-Type"] == "text/css; charset=utf-8"
    assert client.get("/docs/search/search_index.json")["Content-Type"] == "application/json; charset=utf-8"
    assert client.head("/docs/").status_code == 200


def test_a_folder_without_its_slash_is_redirected(manual):
    answer = Client().get("/docs/guides/metadata")
    assert answer.status_code == 302 and answer["Location"] == "/docs/guides/metadata/"


@pytest.mark.parametrize("path", ["/docs/nope/", "/docs/../secret.txt", "/docs/%2e%2e/secret.txt",
                                  "/docs/guides/../../secret.txt", "/docs/assets/", "/docs/a%00b"])
def test_anything_else_is_a_coded_404(manual, path):
    answer = Client().get(path, HTTP_ACCEPT="application/json")
    assert answer.status_code == 404 and answer["X-Error-Code"] == "not_found", path
    assert answer.json()["code"] == "not_found" and "outside" not in answer.content.decode()


def test_only_reads(manual):
    answer = Client().post("/docs/", {})
    assert answer.status_code == 405


def test_not_built_says_how_to_build_it(settings, tmp_path):
    settings.HUB_DOCS_DIR = tmp_path / "never-built"
    page = Client().get("/docs/", HTTP_ACCEPT="text/html")
    assert page.status_code == 404 and page["X-Error-Code"] == "not_found"
    assert "make docs-build" in page.content.decode() and str(tmp_path) not in page.content.decode()
    api = Client().get("/docs/guides/", HTTP_ACCEPT="application/json").json()
    assert api["code"] == "not_found" and "make docs-build" in api["detail"]
