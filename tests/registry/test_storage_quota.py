"""Per-person storage quota (hub.registry.quota): checked when an upload opens, at each chunk and completion, and
when a version is published; content counted once per person; a refusal leaves no row and no blob."""

from __future__ import annotations

import hashlib
import json
import os
import time

import pytest

from hub.registry import quota, services
from hub.registry.models import Artifact, Blob, Upload, Version
from hub.storage import get_blob_store
from tests.conftest import at_once, multipart_file, run_on_sqlite_file, valid_metadata

pytestmark = pytest.mark.django_db
KB = 1000


def written_cards(user) -> int:
    """The bytes of the README.md files the hub wrote for ``user``'s live versions published without a card
    (issue 55): stored blobs, counted like any other (each distinct blob once)."""
    cards = Blob.objects.filter(files__path="README.md", files__version__artifact__owner=user,
                                files__version__deleted_at__isnull=True)
    return sum(dict(cards.values_list("sha256", "size")).values())


@pytest.fixture
def one_mib(settings):
    settings.HUB_USER_STORAGE_MB = 1
    return 1024 * 1024


@pytest.fixture
def model(api):
    assert api.post("/api/v1/artifacts/", {"kind": "model", "name": "cnn"}, format="json").status_code == 201
    return "/api/v1/artifacts/alice/cnn/"


def post_files(api, url, files: dict[str, bytes]):
    data = {"metadata": json.dumps(valid_metadata()), "files": [multipart_file(n, c) for n, c in files.items()]}
    return api.post(url + "versions/", data, format="multipart")


def put(api, upload_id, data: bytes, start: int, total: int):
    return api.generic("PUT", f"/api/v1/uploads/{upload_id}", data, content_type="application/octet-stream",
                       HTTP_CONTENT_RANGE=f"bytes {start}-{start + len(data) - 1}/{total}")


def assert_refused(response, *, adding: int | None = None):
    assert response.status_code == 403, response.content
    assert response["X-Error-Code"] == "storage_quota"
    body = response.json()
    assert body["code"] == "storage_quota" and body["limit"] == 1024 * 1024
    assert "MiB used of 1.0 MiB" in body["detail"] and "DELETE" in body["detail"]
    if adding is not None:
        assert body["adding"] == adding
    return body


def test_the_default_is_no_limit(settings, owner):
    assert settings.HUB_USER_STORAGE_MB == 0
    quota.check_adding(owner, 10**15)  # nothing raised


def test_a_version_past_the_quota_is_refused_and_leaves_nothing(one_mib, api, model, owner):
    first = os.urandom(600 * KB)
    assert post_files(api, model, {"weights.bin": first}).status_code == 201
    assert quota.used_bytes(owner) == 600 * KB + written_cards(owner)
    second = os.urandom(600 * KB)
    body = assert_refused(post_files(api, model, {"weights.bin": second}), adding=600 * KB)
    assert body["used"] == 600 * KB + written_cards(owner)
    assert Version.objects.filter(artifact__name="cnn").count() == 1
    sha = hashlib.sha256(second).hexdigest()
    assert not Blob.objects.filter(sha256=sha).exists() and not get_blob_store().exists(sha)
    # content the person already holds is counted once: the same weights and a small new file fit
    again = post_files(api, model, {"weights.bin": first, "card.md": b"# CNN\n" * 1000})
    assert again.status_code == 201, again.content
    assert quota.used_bytes(owner) == 600 * KB + 6 * KB + written_cards(owner)


def test_a_new_artifact_with_a_refused_first_version_is_not_created(one_mib, api):
    data = {"metadata": json.dumps(valid_metadata()), "artifact": json.dumps({"kind": "model"}),
            "files": [multipart_file("w.bin", os.urandom(1100 * KB))]}
    assert_refused(api.post("/api/v1/artifacts/alice/big/versions/", data, format="multipart"))
    assert not Artifact.objects.filter(name="big").exists()


def test_opening_an_upload_counts_its_declared_size(one_mib, api):
    opened = api.post("/api/v1/uploads/", {"size": 600 * KB}, format="json")
    assert opened.status_code == 201
    refused = api.post("/api/v1/uploads/", {"size": 600 * KB}, format="json")
    assert_refused(refused, adding=600 * KB)
    assert Upload.objects.count() == 1
    assert api.delete(f"/api/v1/uploads/{opened.json()['id']}").status_code == 204  # room made
    assert api.post("/api/v1/uploads/", {"size": 600 * KB}, format="json").status_code == 201


def test_a_completed_upload_is_not_counted_again_when_it_becomes_a_version(one_mib, api, model, owner):
    data = os.urandom(900 * KB)
    uid = api.post("/api/v1/uploads/", {"size": len(data)}, format="json").json()["id"]
    assert put(api, uid, data, 0, len(data)).status_code == 200
    assert api.post(f"/api/v1/uploads/{uid}/complete", {}, format="json").status_code == 200
    assert quota.used_bytes(owner) == 900 * KB + written_cards(owner)
    published = api.post(model + "versions/", {"metadata": valid_metadata(),
                                                "files": [{"path": "w.bin", "upload": uid}]}, format="json")
    assert published.status_code == 201, published.content
    assert quota.used_bytes(owner) == 900 * KB + written_cards(owner)


def test_chunks_and_completion_stop_past_the_quota_and_the_upload_waits_for_room(one_mib, api, owner, publish):
    data = os.urandom(500 * KB)
    uid = api.post("/api/v1/uploads/", {"size": len(data)}, format="json").json()["id"]
    assert put(api, uid, data[:200 * KB], 0, len(data)).status_code == 200
    # a job of the person's publishes a result: never refused, but it fills the quota
    _, made = publish(owner, "outputs", {"outputs.bin": os.urandom(600 * KB)})
    assert quota.used_bytes(owner) == 1100 * KB + written_cards(owner)
    assert_refused(put(api, uid, data[200 * KB:], 200 * KB, len(data)), adding=0)
    assert api.get(f"/api/v1/uploads/{uid}").json()["offset"] == 200 * KB  # nothing lost
    services.delete_version(made)
    assert put(api, uid, data[200 * KB:], 200 * KB, len(data)).status_code == 200
    assert api.post(f"/api/v1/uploads/{uid}/complete", {}, format="json").json()["state"] == "completed"


def test_completion_is_refused_while_over_the_quota(one_mib, api, owner, publish):
    data = os.urandom(300 * KB)
    uid = api.post("/api/v1/uploads/", {"size": len(data)}, format="json").json()["id"]
    assert put(api, uid, data, 0, len(data)).status_code == 200
    _, made = publish(owner, "outputs", {"outputs.bin": os.urandom(800 * KB)})
    assert_refused(api.post(f"/api/v1/uploads/{uid}/complete", {}, format="json"))
    assert Upload.objects.get(pk=uid).state == Upload.State.OPEN
    services.delete_version(made)
    assert api.post(f"/api/v1/uploads/{uid}/complete", {}, format="json").json()["state"] == "completed"


def test_a_collaborators_version_counts_against_the_owner(one_mib, api, model, owner, collaborator):
    from tests.conftest import client_for

    Artifact.objects.get(name="cnn").collaborators.add(collaborator)
    assert post_files(api, model, {"w.bin": os.urandom(700 * KB)}).status_code == 201
    refused = post_files(client_for(collaborator), model, {"x.bin": os.urandom(400 * KB)})
    assert "alice's storage" in assert_refused(refused, adding=400 * KB)["detail"]
    assert quota.used_bytes(collaborator) == 0


def test_deleted_versions_and_staff_are_not_counted(one_mib, owner, publish, make_user):
    content = os.urandom(700 * KB)
    _, made = publish(owner, "m", {"a.bin": content})
    _, other = publish(owner, "n", {"a.bin": content, "b.bin": b"x"})
    assert quota.used_bytes(owner) == 700 * KB + 1 + written_cards(owner)  # the same content in two artifacts, once
    services.delete_version(made)
    assert quota.used_bytes(owner) == 700 * KB + 1 + written_cards(owner)  # still held by the other version
    services.delete_version(other)
    assert quota.used_bytes(owner) == 0
    admin = make_user("root")
    admin.is_staff = True
    quota.check_adding(admin, 10**12)  # nothing raised


def test_the_publish_page_checks_the_artifact_owners_quota_too(one_mib, api, model, collaborator):
    from django.test import Client

    Artifact.objects.get(name="cnn").collaborators.add(collaborator)
    assert post_files(api, model, {"w.bin": os.urandom(700 * KB)}).status_code == 201
    browser = Client()
    browser.force_login(collaborator)
    data = os.urandom(400 * KB)
    uid = browser.post("/api/v1/uploads/", {"size": len(data)}, content_type="application/json").json()["id"]
    assert browser.put(f"/api/v1/uploads/{uid}", data, content_type="application/octet-stream").status_code == 200
    assert browser.post(f"/api/v1/uploads/{uid}/complete", {}, content_type="application/json").status_code == 200
    body = {"to": "alice/cnn", "metadata": valid_metadata(), "files": [{"path": "x.bin", "upload": uid}]}
    refused = browser.post("/publish/", json.dumps(body), content_type="application/json")
    assert refused.status_code == 403 and refused.json()["code"] == "storage_quota"
    assert Version.objects.filter(artifact__name="cnn").count() == 1
    assert Upload.objects.get(pk=uid).state == Upload.State.COMPLETED  # kept for when room is made


@pytest.mark.postgres  # SQLite's in-memory test database cannot take two writers: the next test races on a file
@pytest.mark.services  # a PostgreSQL server; one test at a time, as it races two threads on time
@pytest.mark.django_db(transaction=True)  # each thread commits on its own connection, as two web workers would
@pytest.mark.parametrize("second", ["upload", "version"])
def test_two_writes_at_once_that_fit_alone_cannot_pass_the_quota_together(one_mib, owner, monkeypatch, second):
    """PostgreSQL: an upload and an upload (or a version) opened at the same moment by one person, each fitting
    alone but not together: the second check waits for the first's commit and counts its bytes, so exactly one is
    refused. The count is slowed down so that, without the person's lock, both checks would run before either
    writes."""
    from tests.conftest import client_for

    alice, again = client_for(owner), client_for(owner)
    assert alice.post("/api/v1/artifacts/", {"kind": "model", "name": "cnn"}, format="json").status_code == 201
    counted = quota.used_bytes

    def slowly(user):
        used = counted(user)
        time.sleep(0.5)  # the other request reaches its check meanwhile
        return used

    monkeypatch.setattr(quota, "used_bytes", slowly)
    content = os.urandom(600 * KB)
    one = lambda: alice.post("/api/v1/uploads/", {"size": 600 * KB}, format="json")  # noqa: E731
    two = (one if second == "upload" else  # noqa: E731
           lambda: post_files(again, "/api/v1/artifacts/alice/cnn/", {"weights.bin": content}))
    answers = at_once(one, two)
    assert sorted(answer.status_code for answer in answers) == [201, 403], [a.content for a in answers]
    refused = next(answer for answer in answers if answer.status_code == 403)
    assert_refused(refused, adding=600 * KB)
    assert refused.json()["used"] == 600 * KB  # the refused check counted the other's bytes
    made = Upload.objects.filter(owner=owner).count() + Version.objects.filter(artifact__name="cnn").count()
    assert made == 1  # the refusal left no row
    assert quota.used_bytes is slowly and counted(owner) == 600 * KB
    if second == "version" and refused is answers[1]:
        sha = hashlib.sha256(content).hexdigest()
        assert not Blob.objects.filter(sha256=sha).exists() and not get_blob_store().exists(sha)  # and no blob


SQLITE_RACE = """
import time
import django
django.setup()
from django.contrib.auth import get_user_model
from django.core.management import call_command
from hub.registry import quota, uploads
from tests.conftest import at_once

call_command("migrate", verbosity=0)
alice = get_user_model().objects.create_user("alice")
counted = quota.used_bytes
def slowly(user):
    used = counted(user)
    time.sleep(0.5)  # the other thread reaches its check meanwhile
    return used
quota.used_bytes = slowly
def open_one():
    try:
        uploads.open_upload(alice, 600 * 1000)
        return "opened"
    except quota.StorageQuota as refusal:
        return f"{refusal.code} used={refusal.extra['used']}"
print(sorted(at_once(open_one, open_one)), uploads.Upload.objects.count())
"""


@pytest.mark.slow
@pytest.mark.cpu
def test_two_uploads_at_once_cannot_pass_the_quota_together_on_sqlite(tmp_path):
    """The embedded default: two connections to one SQLite file (WAL, as deployed), two uploads of one person
    opened at once that fit alone but not together: one opens, the other is refused having counted it."""
    out = run_on_sqlite_file(tmp_path, SQLITE_RACE, HUB_USER_STORAGE_MB="1")
    assert out.strip() == "['opened', 'storage_quota used=600000'] 1"
