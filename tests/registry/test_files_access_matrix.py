"""Restricted, embargoed and shared files, as a matrix: every byte surface x every reader, through the real HTTP
stack on PostgreSQL, 0 leaks of file bytes; and the metadata of the same versions visible to everyone, saying
how the files may be had, in each export's own vocabulary.

The world: alice's public model ``gated-model`` has version 1 restricted and version 2 embargoed until next
year; ``open-model`` is open and derived from version 1 (so it is restricted to the same readers). bob holds a
grant, carol held one that was revoked and dave one that expired; mallory has nothing; a reviewer holds a share
link to version 1 only.
"""

from __future__ import annotations

import json
from datetime import timedelta
from xml.etree import ElementTree as ET

import pytest
from django.utils import timezone

from hub.metadata.oai import oai_identifier
from hub.registry import services
from hub.registry.files_access import new_share_token, record_card, token_hash
from hub.registry.models import Grant, ShareLink, Version
from tests.conftest import client_for, staged, valid_metadata

pytestmark = pytest.mark.django_db

SECRET = b"restricted-weights-0123456789abcdef"  # the bytes that must never leak
EMBARGOED = b"embargoed-weights-fedcba9876543210"
DERIVED = b"derived-from-restricted-bytes-4242"


@pytest.fixture
def world(owner, make_user, tmp_path):
    people = {name: make_user(name) for name in ("bob", "carol", "dave", "mallory")}
    artifact = services.create_artifact(owner, kind="model", name="gated-model", title="Gated")
    v1 = services.create_version(artifact, owner, files=[staged(tmp_path, "m.bin", SECRET),
                                                         staged(tmp_path, "notes.txt", SECRET)],
                                 metadata=valid_metadata("model"), label="1")
    v2 = services.create_version(artifact, owner, files=[staged(tmp_path, "m.bin", EMBARGOED)],
                                 metadata=valid_metadata("model"), label="2")
    Version.objects.filter(pk=v1.pk).update(files_access="restricted")
    Version.objects.filter(pk=v2.pk).update(files_access="embargoed",
                                            embargo_until=timezone.now() + timedelta(days=365))
    v1.refresh_from_db()
    v2.refresh_from_db()
    derived_artifact = services.create_artifact(owner, kind="model", name="open-model", title="Derived")
    derived = services.create_version(derived_artifact, owner, files=[staged(tmp_path, "m.bin", DERIVED)],
                                      metadata=valid_metadata("model"), label="1",
                                      provenance=[services.ProvenanceRef("converted_from", v1)])
    Grant.objects.create(artifact=artifact, user=people["bob"], granted_by=owner)
    Grant.objects.create(artifact=artifact, user=people["carol"], granted_by=owner, revoked_at=timezone.now())
    Grant.objects.create(artifact=artifact, user=people["dave"], granted_by=owner,
                         expires=timezone.now() - timedelta(minutes=1))
    token = new_share_token()
    ShareLink.objects.create(version=v1, token_sha256=token_hash(token), created_by=owner)
    return {"people": people, "v1": v1, "v2": v2, "derived": derived, "token": token}


# Who reads which version's bytes: (reader, version) -> allowed.
READERS = ("anonymous", "mallory", "bob", "carol", "dave", "alice", "share link")
ALLOWED = {("bob", "1"), ("bob", "2"), ("alice", "1"), ("alice", "2"), ("share link", "1"),
           ("bob", "derived"), ("alice", "derived")}


def _client(world, reader, owner):
    if reader == "alice":
        return client_for(owner), {}
    if reader in ("anonymous", "share link"):
        return client_for(None), ({"HTTP_X_SHARE_TOKEN": world["token"]} if reader == "share link" else {})
    return client_for(world["people"][reader]), {}


BYTE_SURFACES = {
    "api file": lambda c, name, label, h: c.get(f"/api/v1/artifacts/alice/{name}/versions/{label}/files/m.bin", **h),
    "api file inline": lambda c, name, label, h: c.get(
        f"/api/v1/artifacts/alice/{name}/versions/{label}/files/m.bin?inline=1", **h),
    "api file range": lambda c, name, label, h: c.get(
        f"/api/v1/artifacts/alice/{name}/versions/{label}/files/m.bin", HTTP_RANGE="bytes=0-3", **h),
    "api archive": lambda c, name, label, h: c.get(f"/api/v1/artifacts/alice/{name}/versions/{label}/archive", **h),
    "hf resolve": lambda c, name, label, h: c.get(f"/alice/{name}/resolve/{label}/m.bin", **h),
    "hf resolve head": lambda c, name, label, h: c.head(f"/alice/{name}/resolve/{label}/m.bin", **h),
}


def _body(response) -> bytes:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content)
    return response.content


@pytest.mark.parametrize("surface", sorted(BYTE_SURFACES))
@pytest.mark.parametrize("reader", READERS)
def test_file_bytes_only_to_those_granted(world, owner, surface, reader):
    client, headers = _client(world, reader, owner)
    for which, name, label, data in (("1", "gated-model", "1", SECRET), ("2", "gated-model", "2", EMBARGOED),
                                     ("derived", "open-model", "1", DERIVED)):
        response = BYTE_SURFACES[surface](client, name, label, headers)
        body = _body(response)
        if (reader, which) in ALLOWED:
            assert response.status_code in (200, 206), (surface, reader, which, response.status_code)
            if not surface.endswith("head") and surface != "api archive":
                assert body and data.startswith(body), (surface, reader, which)
        else:
            assert response.status_code == 403, (surface, reader, which, response.status_code)
            assert data not in body and SECRET not in body and EMBARGOED not in body
            assert "ETag" not in response and "Content-Range" not in response
            code = "GatedRepo" if surface.startswith("hf") else "access_restricted"
            assert response["X-Error-Code"] == code
            if response.request["REQUEST_METHOD"] != "HEAD":
                detail = json.loads(body)["detail"]
                assert "hpcfair request-access alice/gated-model" in detail


@pytest.mark.parametrize("path", ["/api/v1/artifacts/alice/gated-model/versions/{}/files/README.md",
                                  "/alice/gated-model/resolve/{}/README.md"])
def test_the_card_the_hub_wrote_is_read_as_the_record_is(world, path):
    """The README.md the hub wrote from the record (issue 55) says only what the open record says: anyone who
    reads the record reads it, restricted or embargoed files or not; an uploaded file stays closed."""
    for label, secret in (("1", SECRET), ("2", EMBARGOED)):
        response = client_for(None).get(path.format(label))
        body = _body(response)
        assert response.status_code == 200 and body.startswith(b"---\nlicense: mit\n"), (label, response.status_code)
        assert secret not in body and b"The hub wrote this card" in body
        assert client_for(None).get(path.format(label).replace("README.md", "m.bin")).status_code == 403



def test_an_uploaded_card_of_restricted_files_stays_closed(world, owner, tmp_path):
    card = b"# Gated\n\nThe card its owner wrote.\n" + SECRET
    v3 = services.create_version(world["v1"].artifact, owner, files=[staged(tmp_path, "README.md", card),
                                                                     staged(tmp_path, "m.bin", SECRET + b"3")],
                                 metadata=valid_metadata("model"), label="3")
    Version.objects.filter(pk=v3.pk).update(files_access="restricted")
    assert not record_card(v3.files.get(path="README.md"))
    for path in ("/api/v1/artifacts/alice/gated-model/versions/3/files/README.md",
                 "/alice/gated-model/resolve/3/README.md"):
        response = client_for(None).get(path)
        assert response.status_code == 403 and SECRET not in _body(response)


def test_the_landing_page_lists_files_but_shows_no_preview_or_byte(world, owner):
    page = client_for(None).get(f"/{world['v1'].pid}", HTTP_ACCEPT="text/html", follow=True)
    html = page.content.decode()
    assert page.status_code == 200 and "m.bin" in html and "notes.txt" in html
    assert SECRET.decode() not in html  # no text preview of notes.txt
    assert 'id="files-restricted"' in html and "hpcfair request-access" in html
    granted = client_for(world["people"]["bob"]).get(f"/{world['v1'].pid}", HTTP_ACCEPT="text/html", follow=True)
    assert SECRET.decode() in granted.content.decode()  # the grantee sees the preview
    assert 'id="files-restricted"' not in granted.content.decode()


@pytest.mark.parametrize("reader", ("anonymous", "mallory"))
def test_metadata_stays_findable_and_says_so(world, reader, owner):
    client, _ = _client(world, reader, owner)
    base = "/api/v1/artifacts/alice/gated-model/versions"
    assert client.get(f"{base}/1/").status_code == 200
    assert client.get(f"{base}/1/access").json()["files_access"] == "restricted"
    assert client.get(f"{base}/1/access").json()["may_read_files"] is False

    schema = client.get(f"{base}/1/metadata/schemaorg").json()
    assert schema["isAccessibleForFree"] is False and "Restricted files" in schema["conditionsOfAccess"]
    embargo = client.get(f"{base}/2/metadata/schemaorg").json()
    until = world["v2"].embargo_until.date().isoformat()
    assert embargo["isAccessibleForFree"] is False and embargo["availabilityStarts"] == until

    datacite = client.get(f"{base}/1/metadata/datacite-json").json()
    assert {"rights": "Restricted Access", "rightsUri": "info:eu-repo/semantics/restrictedAccess"} \
        in datacite["rightsList"]
    datacite2 = client.get(f"{base}/2/metadata/datacite-json").json()
    assert any(r["rightsUri"] == "info:eu-repo/semantics/embargoedAccess" for r in datacite2["rightsList"])
    assert {"date": until, "dateType": "Available"} in datacite2["dates"]
    xml = ET.fromstring(client.get(f"{base}/2/metadata/datacite-xml").content)  # noqa: S314 - our own answer
    ns = {"d": "http://datacite.org/schema/kernel-4"}
    assert "info:eu-repo/semantics/embargoedAccess" in [r.get("rightsURI") for r in xml.findall(
        "d:rightsList/d:rights", ns)]

    oai = client.get("/oai", {"verb": "GetRecord", "metadataPrefix": "oai_dc",
                              "identifier": oai_identifier(world["v1"])}).content.decode()
    assert "info:eu-repo/semantics/restrictedAccess" in oai
    derived = client.get("/api/v1/artifacts/alice/open-model/versions/1/metadata/schemaorg").json()
    assert derived["isAccessibleForFree"] is False  # its files follow its restricted source


def test_a_revoked_share_link_fails_at_once(world, owner):
    link = ShareLink.objects.get(version=world["v1"])
    url = "/api/v1/artifacts/alice/gated-model/versions/1/files/m.bin"
    assert client_for(None).get(url, {"share": world["token"]}).status_code == 200
    response = client_for(owner).delete(f"/api/v1/artifacts/alice/gated-model/versions/1/share-links/{link.pk}")
    assert response.status_code == 204
    refused = client_for(None).get(url, {"share": world["token"]})
    assert refused.status_code == 403 and SECRET not in _body(refused)
    # a share link opens its own version only
    assert client_for(None).get(url.replace("/1/", "/2/"), {"share": world["token"]}).status_code == 403


def test_naming_a_restricted_digest_copies_no_bytes(world, owner):
    """A Hugging Face commit may name bytes by sha256 that its author holds (``hub.hfhub.lfs.held_by``): the
    digest of a restricted file is in its public metadata, and naming it must not copy the bytes into a repository
    of one's own."""
    from hashlib import sha256

    from hub.hfhub.lfs import held_by

    oid = sha256(SECRET).hexdigest()
    assert not held_by(world["people"]["mallory"], oid)
    assert not held_by(world["people"]["carol"], oid)  # a revoked grant
    assert held_by(world["people"]["bob"], oid) and held_by(owner, oid)


def test_jobs_and_inference_on_restricted_files_need_a_grant(world):
    """Inference resolves its model through ``gateway.services.model_for``/``model_of`` and every job starts
    in ``jobs.services.create_job``: both refuse restricted files with the same code, before anything runs."""
    from hub.errors import HubError
    from hub.gateway.services import dataset_input, model_for
    from hub.jobs.models import Job
    from hub.jobs.services import create_job

    mallory, bob = world["people"]["mallory"], world["people"]["bob"]
    for ref in ("alice/gated-model@1", "alice/open-model@1"):  # the second: derived from the first
        with pytest.raises(HubError) as refused:
            model_for(mallory, ref)
        assert refused.value.code == "access_restricted"
    with pytest.raises(HubError) as refused:  # a batch run's dataset input
        dataset_input(mallory, "alice/gated-model@1", "")
    assert refused.value.code == "access_restricted"
    with pytest.raises(HubError) as refused:
        create_job("infer", mallory, version=world["v1"])
    assert refused.value.code == "access_restricted" and not Job.objects.filter(requester=mallory).exists()
    with pytest.raises(HubError) as other:
        model_for(bob, "alice/gated-model@1")  # granted: past the check, to the model's own answer
    assert other.value.code in ("not_converted", "not_runnable")


def test_the_web_ui_request_and_decision(world, owner, client, make_user):
    erin = make_user("erin")
    client.force_login(erin)
    page = client.get(f"/{world['v1'].pid}", HTTP_ACCEPT="text/html", follow=True).content.decode()
    assert 'id="request-access"' in page
    asked = client.post("/access/ask/alice/gated-model", {"purpose": "Benchmark on Frontier"}, follow=True)
    assert "is pending" in asked.content.decode()
    assert "gated-model" in client.get("/access/requests/").content.decode()
    client.force_login(owner)
    waiting = client.get("/access/requests/").content.decode()
    assert "erin" in waiting and "Benchmark on Frontier" in waiting
    pk = erin.access_requests.get().pk
    client.post(f"/access/requests/{pk}", {"decision": "approve", "message": "ok"})
    client.force_login(erin)
    got = client.get("/api/v1/artifacts/alice/gated-model/versions/1/files/m.bin")
    assert got.status_code == 200 and b"".join(got.streaming_content) == SECRET
