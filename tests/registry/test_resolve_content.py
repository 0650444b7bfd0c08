"""``GET /api/v1/resolve?content=<digest>``: the version you can see that holds exactly the files of a content
digest, so a client asks before it uploads files the hub would refuse as ``duplicate_version`` (issue 41,
point 11). Private versions of others stay secret, as the duplicate check keeps them."""

from __future__ import annotations

import hashlib

import pytest

from tests.conftest import client_for


def digest(*datas: bytes) -> str:
    return hashlib.sha256("\n".join(sorted(hashlib.sha256(d).hexdigest() for d in datas)).encode()).hexdigest()


@pytest.mark.django_db
def test_content_names_the_visible_version_with_those_files(api, owner, other, publish):
    _, version = publish(owner, "public-model", {"a.bin": b"alpha", "b.bin": b"beta"})
    found = api.get("/api/v1/resolve", {"content": digest(b"beta", b"alpha")})  # order and names do not count
    assert found.status_code == 200 and found.json()["pid"] == version.pid
    assert client_for(other).get("/api/v1/resolve", {"content": digest(b"alpha", b"beta")}).json()["pid"] == \
        version.pid
    none = api.get("/api/v1/resolve", {"content": digest(b"alpha")})
    assert none.status_code == 404 and none["X-Error-Code"] == "not_found"

    publish(owner, "secret-model", {"s.bin": b"secret"}, visibility="private")
    assert api.get("/api/v1/resolve", {"content": digest(b"secret")}).status_code == 200
    hidden = client_for(other).get("/api/v1/resolve", {"content": digest(b"secret")})
    assert hidden.status_code == 404  # another's private version is not revealed


@pytest.mark.django_db
def test_content_or_ref_and_a_well_formed_digest(api):
    for params in ({"content": "abc"}, {"content": digest(b"x"), "ref": "alice/x"}, {}):
        refused = api.get("/api/v1/resolve", params)
        assert refused.status_code == 400 and refused.json()["code"] == "invalid", params


@pytest.mark.django_db
def test_the_schema_documents_content(anon):
    spec = anon.get("/api/schema/", {"format": "json"}).json()
    parameters = {p["name"]: p for p in spec["paths"]["/api/v1/resolve"]["get"]["parameters"]}
    assert "content digest" in parameters["content"]["description"] and "ref" in parameters
    assert {"400", "404"} <= set(spec["paths"]["/api/v1/resolve"]["get"]["responses"])
