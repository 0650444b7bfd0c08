"""Bad input never gets a 500 or a traceback: a coded 4xx with a message."""

from __future__ import annotations

import re

import pytest
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


def assert_coded(response, status: int, code: str) -> None:
    assert response.status_code == status, response.content
    body = response.json()
    assert body["code"] == code and response["X-Error-Code"] == code
    assert body["detail"] and body["request_id"] == response["X-Request-ID"]
    assert "Traceback" not in response.content.decode()


def test_malformed_json(api):
    response = api.generic("POST", "/api/v1/artifacts/", b"{not json", content_type="application/json")
    assert_coded(response, 400, "malformed_request")


def test_unsupported_media_type(api):
    response = api.generic("POST", "/api/v1/artifacts/", b"kind=model", content_type="text/plain")
    assert_coded(response, 415, "unsupported_media_type")


def test_unknown_api_path_and_objects(anon):
    assert_coded(anon.get("/api/v1/nothing-here/"), 404, "not_found")
    assert_coded(anon.get("/api/v1/artifacts/nobody/nothing/"), 404, "not_found")
    assert_coded(anon.get("/api/v1/jobs/not-a-uuid/"), 404, "not_found")


def test_wrong_types_everywhere(api):
    assert_coded(api.post("/api/v1/artifacts/", ["a", "list"], format="json"), 400, "invalid")
    assert_coded(api.post("/api/v1/uploads/", {"size": "big"}, format="json"), 400, "invalid")
    api.post("/api/v1/artifacts/", {"kind": "model", "name": "m"}, format="json")
    bad_files = api.post("/api/v1/artifacts/alice/m/versions/",
                         {"files": [{"path": "a", "upload": "not-a-uuid"}]}, format="json")
    assert_coded(bad_files, 400, "invalid")
    assert "files[0].upload" in bad_files.json()["errors"]
    unknown = api.post("/api/v1/artifacts/alice/m/versions/",
                       {"files": [{"path": "a", "upload": "00000000-0000-0000-0000-000000000000"}]}, format="json")
    assert_coded(unknown, 404, "not_found")
    bad_ref = api.post("/api/v1/artifacts/alice/m/versions/",
                       {"files": [], "provenance": [{"relation": "derived_from", "target": "nonsense"}]},
                       format="json")
    assert_coded(bad_ref, 400, "invalid")


def test_writes_need_authentication():
    assert_coded(APIClient().post("/api/v1/artifacts/", {}, format="json"), 401, "not_authenticated")


def test_request_id_is_echoed(anon):
    response = anon.get("/api/v1/artifacts/", HTTP_X_REQUEST_ID="my-request-1234")
    assert response["X-Request-ID"] == "my-request-1234"


def test_openapi_schema_and_docs(anon):
    schema = anon.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    spec = schema.json()
    assert spec["openapi"].startswith("3.")
    for path in ("/api/v1/artifacts/", "/api/v1/uploads/{upload_id}", "/api/v1/jobs/{id}/",
                 "/api/v1/artifacts/{owner}/{name}/versions/{version}/files/{path}"):
        assert path in spec["paths"], path
    assert spec["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    docs = anon.get("/api/docs/")
    assert docs.status_code == 200 and b"swagger" in docs.content.lower()
    # Nothing from a CDN: every address the page loads or links is the hub's own. (Not a search for "cdn" in the
    # page: its random CSRF token holds those letters about one time in 500.)
    loaded = re.findall(r'(?:src|href)\s*=\s*["\']([^"\']*)', docs.content.decode())
    assert loaded and all(address.startswith("/") and not address.startswith("//") for address in loaded), loaded


@pytest.mark.django_db
@pytest.mark.parametrize(("accept", "media_type"), [
    ("text/turtle", "text/plain"), ("application/ld+json", "application/json"),
    ("text/html,application/xhtml+xml", "text/html"), ("*/*", "text/html")])
def test_a_missing_page_answers_in_the_kind_of_media_asked_for(accept, media_type):
    from django.test import Client

    for path in ("/ark:/99999/fk4nothere", "/nothing/here"):
        response = Client().get(path, HTTP_ACCEPT=accept)
        assert response.status_code == 404 and response["Content-Type"].startswith(media_type), (path, accept)
        if media_type == "application/json":
            assert response.json()["code"] == "not_found"


@pytest.mark.django_db
@pytest.mark.parametrize("page, status, code", [("abc", 400, "invalid"), ("0", 400, "invalid"), ("-1", 400, "invalid"),
                                                ("99", 404, "not_found"), ("1", 200, None), ("last", 200, None)])
def test_a_page_that_is_not_a_page_number_is_a_400(anon, page, status, code):
    response = anon.get("/api/v1/artifacts/", {"page": page})
    assert response.status_code == status
    assert response.json().get("code") == code
