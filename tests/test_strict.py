"""Every request body names only fields its endpoint knows: an unknown field is a 400 that names it (with the
closest known field), and nothing is made. (The fine-tune's own are in tests/finetune/test_requests.py.)"""

from __future__ import annotations

import json

import pytest

from hub.jobs.models import Job
from hub.registry.models import Artifact, Upload, Version
from hub.strict import unknown_field
from tests.conftest import multipart_file, valid_metadata
from tests.test_hostile_input import staged_files

pytestmark = pytest.mark.django_db


def refused(response, field: str, hint: str) -> None:
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == "invalid" and field in body["errors"] and hint in body["errors"][field][0], body


def test_the_message_offers_the_closest_field_or_the_list():
    assert unknown_field("opsett", ["opset", "files"]) == "Unknown field; did you mean 'opset'?"
    assert unknown_field("partition", ["opset", "files"]) == "Unknown field; the fields are files, opset."


def test_artifacts_and_versions(api, publish, owner, settings):
    refused(api.post("/api/v1/artifacts/", {"kind": "model", "name": "m", "visiblity": "private"}, format="json"),
            "visiblity", "did you mean 'visibility'?")
    assert not Artifact.objects.exists()
    publish(owner, "model")
    refused(api.patch("/api/v1/artifacts/alice/model/", {"titel": "x"}, format="json"), "titel", "'title'")
    url = "/api/v1/artifacts/alice/model/versions/"
    refused(api.post(url, {"metadata": valid_metadata(), "files": [], "provenence": []}, format="json"),
            "provenence", "'provenance'")
    form = {"w.bin": multipart_file("w.bin", b"w" * 100), "metdata": json.dumps(valid_metadata())}
    refused(api.post(url, form, format="multipart"), "metdata", "did you mean 'metadata'?")
    assert Version.objects.count() == 1 and staged_files(settings) == []


def test_jobs_uploads_and_tokens(api, publish, owner):
    publish(owner, "model", {"model.pt": b"PK not really"})
    jobs = Job.objects.count()
    refused(api.post("/api/v1/artifacts/alice/model/versions/1/convert", {"opsett": 13}, format="json"),
            "opsett", "'opset'")
    refused(api.post("/api/v1/artifacts/alice/model/versions/1/container", {"bild": "yes"}, format="json"),
            "bild", "'build'")
    assert Job.objects.count() == jobs
    refused(api.post("/api/v1/uploads/", {"size": 3, "file_name": "x"}, format="json"), "file_name", "'filename'")
    assert not Upload.objects.exists()
