"""Issue 55, point 3: a version published without a card gets a ``README.md`` written from its metadata at
publication, a file like the others (listed, checksummed, downloadable, in the Hugging Face tree); one with a
card keeps its own, byte for byte."""

from __future__ import annotations

import hashlib

import pytest
import requests
import yaml

from hub.metadata.derive import split_card
from hub.storage import get_blob_store
from tests.conftest import multipart_file

pytestmark = pytest.mark.django_db

METADATA = """\
title: Held-out random forest
description: A random forest for the held-out split of the iris flowers.
creators:
  - name: Ada Forest
license: MIT
keywords: [iris, random-forest]
framework: scikit-learn
task: classification
"""


def publish_form(api, name: str, files: dict[str, bytes], metadata: str = METADATA):
    assert api.post("/api/v1/artifacts/", {"kind": "model", "name": name}, format="json").status_code == 201
    response = api.post(f"/api/v1/artifacts/alice/{name}/versions/", {
        "metadata": metadata, "files": [multipart_file(path, data) for path, data in files.items()]},
        format="multipart")
    assert response.status_code == 201, response.content
    return response.json()


def download(client, name: str, label: str, path: str) -> bytes:
    """The file's bytes, from the hub or, on S3, from the presigned address it redirects to."""
    response = client.get(f"/api/v1/artifacts/alice/{name}/versions/{label}/files/{path}")
    if response.status_code == 302:
        return requests.get(response["Location"], timeout=30).content
    assert response.status_code == 200, response.content
    return b"".join(response.streaming_content)


def test_yaml_metadata_without_a_card_gets_a_readme_written_from_it(backend, api, anon):
    weights = b"\x80\x04 not really a pickle"
    version = publish_form(api, "forest", {"model.skops": weights})
    files = {f["path"]: f for f in version["files"]}
    assert sorted(files) == ["README.md", "model.skops"]
    readme = download(anon, "forest", "1", "README.md")
    assert files["README.md"]["sha256"] == hashlib.sha256(readme).hexdigest()
    assert files["README.md"]["size"] == len(readme) and files["README.md"]["media_type"] == "text/markdown"
    assert get_blob_store().exists(files["README.md"]["sha256"])
    front, body = split_card(readme.decode())
    assert front == {"license": "mit", "tags": ["iris", "random-forest"], "pipeline_tag": "classification"}
    assert body.startswith("# Held-out random forest\n") and "A random forest for the held-out split" in body
    assert "By Ada Forest." in body and "| Framework | scikit-learn |" in body
    assert version["metadata"]["card"] == body.strip() and "card" in version["metadata"]["derived"]
    # the content digest is still that of the files sent: the client asks it before uploading them
    assert version["content_digest"] == hashlib.sha256(hashlib.sha256(weights).hexdigest().encode()).hexdigest()
    tree = anon.get("/api/models/alice/forest/tree/main").json()
    assert {entry["path"] for entry in tree} == {"README.md", "model.skops"}
    info = anon.get("/api/models/alice/forest").json()
    assert {s["rfilename"] for s in info["siblings"]} == {"README.md", "model.skops"}
    assert info["cardData"] == front
    page = anon.get(f"/{version['pid']}", follow=True).content.decode()
    assert "written by the hub from the metadata" in page


@pytest.mark.parametrize("card_name", ["README.md", "readme.md", "ModelCard.md"])
def test_an_uploaded_card_is_kept_untouched(api, anon, card_name):
    card = b"---\nlicense: apache-2.0\n---\n# My forest\n\nWritten by hand.\n"
    version = publish_form(api, "handmade", {"model.skops": b"weights", card_name: card})
    assert sorted(f["path"] for f in version["files"]) == sorted(["model.skops", card_name])
    assert download(anon, "handmade", "1", card_name) == card
    assert version["metadata"]["card"].startswith("# My forest")
    page = anon.get(f"/{version['pid']}", follow=True).content.decode()
    assert "written by the hub from the metadata" not in page


def test_the_written_card_is_a_card_when_its_files_are_published_again(api, anon):
    """Downloaded and published as a new version, the hub's README.md is read back as the card it wrote, its
    front matter as the fields it names (the Hugging Face Hub's, which hold no creators)."""
    first = publish_form(api, "again", {"model.skops": b"weights v1"})
    readme = download(anon, "again", "1", "README.md")
    response = api.post("/api/v1/artifacts/alice/again/versions/", {
        "metadata": "creators: [{name: Ada Forest}]", "files": [multipart_file("model.skops", b"weights v2"),
                                    multipart_file("README.md", readme)]}, format="multipart")
    assert response.status_code == 201, response.content
    second = response.json()
    assert download(anon, "again", "2", "README.md") == readme  # not written a second time
    assert second["metadata"]["card"] == first["metadata"]["card"]
    assert yaml.safe_load(readme.decode().split("---")[1])["license"] == "mit"
    assert second["metadata"]["license"] == "MIT"


def test_the_same_files_sent_back_with_the_written_card_are_a_duplicate(api, anon):
    """The content digest leaves the hub's card out: a download published again, the card with it (or a Hugging
    Face commit that changes nothing), is the version it came from."""
    first = publish_form(api, "twice", {"model.skops": b"the same weights"})
    again = api.post("/api/v1/artifacts/alice/twice/versions/", {
        "metadata": METADATA, "files": [multipart_file("model.skops", b"the same weights"),
                                        multipart_file("README.md", download(anon, "twice", "1", "README.md"))]},
        format="multipart")
    assert again.status_code == 409 and again.json()["code"] == "duplicate_version", again.content
    assert again.json()["existing_pid"] == first["pid"]
