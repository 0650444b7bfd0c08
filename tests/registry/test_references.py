"""Data by reference (``hub.registry.references``): a path under a declared root or an S3 URL, read once by the
``reference`` job for size and sha256, published without a copy, served to those allowed, checked by fixity."""

from __future__ import annotations

import hashlib
import io
import os

import pytest

from hub.jobs import kinds
from hub.jobs.models import Job
from hub.jobs.runner import execute
from hub.registry.models import File, Upload, Version
from hub.storage import get_blob_store
from tests.conftest import client_for, valid_metadata

pytestmark = pytest.mark.django_db


@pytest.fixture
def lustre(settings, tmp_path):
    """A declared root, as a site's parallel file system would be."""
    root = tmp_path / "lustre" / "project"
    root.mkdir(parents=True)
    settings.HUB_REFERENCE_ROOTS = [str(root)]
    return root


def register(api, location: str) -> dict:
    """POST a reference and run its job (the worker's code, in this process); the upload, completed."""
    response = api.post("/api/v1/uploads/", {"reference": location}, format="json")
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["job"]["kind"] == "reference" and body["source"] == location
    execute(body["job"]["id"], kinds.get("reference").run)
    job = Job.objects.get(pk=body["job"]["id"])
    assert job.state == "succeeded", (job.error_code, job.error)
    return {**api.get(body["url"]).json(), "result": job.result}


def publish(api, upload_id: str, path: str, name: str = "campaign", **extra):
    return api.post(f"/api/v1/artifacts/alice/{name}/versions/", {
        "artifact": {"kind": "dataset"}, "metadata": valid_metadata("dataset"),
        "files": [{"path": path, "upload": upload_id}], **extra}, format="json")


def refused(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    assert response["X-Error-Code"] == code and response.json()["code"] == code
    return response.json()


def referenced(response) -> list[dict]:
    """A published version's files but the README.md the hub wrote for it (none was uploaded), which the hub
    stores like any file: the referenced ones."""
    files = response.json()["files"]
    assert [f["path"] for f in files if not f.get("location")] == ["README.md"]
    return [f for f in files if f.get("location")]


def test_a_referenced_file_is_hashed_by_its_job_published_without_a_copy_and_served(api, anon, lustre):
    data = os.urandom(300_000)
    (lustre / "run1.bin").write_bytes(data)
    upload = register(api, str(lustre / "run1.bin"))
    assert upload["state"] == "completed" and upload["size"] == len(data)
    assert upload["sha256"] == hashlib.sha256(data).hexdigest()
    response = publish(api, upload["id"], "run1.bin")
    assert response.status_code == 201, response.content
    (file,) = referenced(response)
    assert file["location"] == str(lustre / "run1.bin") and file["location_changed"] is None
    assert not get_blob_store().exists(file["sha256"])  # never copied into the hub's store
    url = "/api/v1/artifacts/alice/campaign/versions/latest/files/run1.bin"
    got = anon.get(url)
    assert got.status_code == 200 and b"".join(got.streaming_content) == data
    assert got["ETag"] == f'"{file["sha256"]}"'
    part = anon.get(url, HTTP_RANGE="bytes=10-19")
    assert part.status_code == 206 and b"".join(part.streaming_content) == data[10:20]
    assert (lustre / "run1.bin").read_bytes() == data  # the referenced data is left as it was


def test_a_referenced_folder_becomes_its_files_and_counts_nothing_against_the_quota(api, lustre, settings, owner):
    settings.HUB_USER_STORAGE_MB = 1
    run = lustre / "run2"
    (run / "sub").mkdir(parents=True)
    (run / "a.bin").write_bytes(b"a" * 2_000_000)  # more than the quota: references hold no bytes of the hub's
    (run / "sub" / "b.bin").write_bytes(b"b" * 10)
    upload = register(api, str(run))
    assert upload["result"]["files"] == 2 and upload["size"] == 2_000_010
    response = publish(api, upload["id"], "run2")
    assert response.status_code == 201, response.content
    files = {f["path"]: f for f in referenced(response)}
    assert sorted(files) == ["run2/a.bin", "run2/sub/b.bin"]
    assert files["run2/sub/b.bin"]["location"] == str(run / "sub" / "b.bin")
    assert files["run2/sub/b.bin"]["sha256"] == hashlib.sha256(b"b" * 10).hexdigest()


def test_paths_outside_the_roots_relative_paths_and_escaping_links_are_refused(api, lustre, tmp_path):
    outside = tmp_path / "home" / "secret.txt"
    outside.parent.mkdir()
    outside.write_text("not for the hub")
    body = refused(api.post("/api/v1/uploads/", {"reference": str(outside)}, format="json"), 403,
                   "reference_not_allowed")
    assert str(lustre) in body["detail"]  # says which roots the hub reads from
    refused(api.post("/api/v1/uploads/", {"reference": "project/x.nc"}, format="json"), 400, "invalid")
    refused(api.post("/api/v1/uploads/", {"reference": f"{lustre}/../../home/secret.txt"}, format="json"), 403,
            "reference_not_allowed")
    (lustre / "link.txt").symlink_to(outside)
    body = refused(api.post("/api/v1/uploads/", {"reference": str(lustre / "link.txt")}, format="json"), 403,
                   "reference_not_allowed")
    assert "symbolic link" in body["detail"]
    refused(api.post("/api/v1/uploads/", {"reference": "s3://elsewhere/x"}, format="json"), 403,
            "reference_not_allowed")
    refused(api.post("/api/v1/uploads/", {"reference": "/x", "size": 3}, format="json"), 400, "invalid")
    assert not Upload.objects.exists()


def test_a_link_inside_a_folder_that_leads_out_fails_the_job_coded(api, lustre, tmp_path):
    (tmp_path / "elsewhere.bin").write_bytes(b"x")
    run = lustre / "run3"
    run.mkdir()
    (run / "ok.bin").write_bytes(b"ok")
    (run / "out.bin").symlink_to(tmp_path / "elsewhere.bin")
    body = api.post("/api/v1/uploads/", {"reference": str(run)}, format="json").json()
    execute(body["job"]["id"], kinds.get("reference").run)
    job = Job.objects.get(pk=body["job"]["id"])
    assert job.state == "failed" and job.error_code == "reference_not_allowed"
    assert Upload.objects.get(pk=body["id"]).state == "open"


def test_a_link_swapped_after_registration_is_not_followed_out_of_the_root(api, anon, lustre, tmp_path):
    target = lustre / "real.bin"
    target.write_bytes(b"public bytes")
    (lustre / "current.bin").symlink_to(target)
    upload = register(api, str(lustre / "current.bin"))
    assert publish(api, upload["id"], "current.bin").status_code == 201
    (tmp_path / "secret.bin").write_bytes(b"secret bytes")
    (lustre / "current.bin").unlink()
    (lustre / "current.bin").symlink_to(tmp_path / "secret.bin")
    refused(anon.get("/api/v1/artifacts/alice/campaign/versions/latest/files/current.bin"), 403,
            "reference_not_allowed")


def test_fixity_reports_a_changed_reference_and_the_pid_still_resolves(api, anon, lustre, owner):
    (lustre / "t.bin").write_bytes(b"0123456789")
    upload = register(api, str(lustre / "t.bin"))
    version = publish(api, upload["id"], "t.bin").json()
    version["id"] = Version.objects.get(pid=version["pid"]).pk
    (lustre / "t.bin").write_bytes(b"9876543210")  # same size, other bytes
    job = Job.objects.create(kind="fixity", requester=owner, version_id=version["id"])
    execute(str(job.pk), kinds.get("fixity").run)
    job.refresh_from_db()
    (found,) = [f for f in job.result["files"] if f["path"] == "t.bin"]  # and the README.md the hub wrote
    file = File.objects.get(version_id=version["id"], path="t.bin")
    assert job.result["ok"] is False and file.location_changed is not None
    assert found["problem"] == f"the referenced data changed on {file.location_changed.date().isoformat()}"
    body = refused(anon.get("/api/v1/artifacts/alice/campaign/versions/latest/files/t.bin"), 409,
                   "reference_changed")
    assert "changed on" in body["detail"] and body["location"] == str(lustre / "t.bin")
    record = anon.get(f"/{version['pid']}", HTTP_ACCEPT="text/html", follow=True)
    assert record.status_code == 200 and b"changed on" in record.content
    (lustre / "t.bin").unlink()  # gone altogether: still reported, with the first date
    job = Job.objects.create(kind="fixity", requester=owner, version_id=version["id"])
    execute(str(job.pk), kinds.get("fixity").run)
    job.refresh_from_db()
    (found,) = [f for f in job.result["files"] if f["path"] == "t.bin"]
    assert found["problem"].startswith("the referenced data changed on")
    assert File.objects.get(pk=file.pk).location_changed == file.location_changed


def test_restricted_references_are_served_only_to_those_allowed(api, lustre, make_user):
    (lustre / "r.bin").write_bytes(b"restricted bytes")
    upload = register(api, str(lustre / "r.bin"))
    assert publish(api, upload["id"], "r.bin").status_code == 201
    Version.objects.filter(artifact__name="campaign").update(files_access="restricted")
    url = "/api/v1/artifacts/alice/campaign/versions/latest/files/r.bin"
    refused(client_for(make_user("mallory")).get(url), 403, "access_restricted")
    assert b"".join(api.get(url).streaming_content) == b"restricted bytes"


def test_an_s3_reference_is_hashed_in_the_bucket_and_served_by_redirect(api, s3, settings):
    data = os.urandom(200_000)
    s3.client.put_object(s3.bucket, "collection/part-0.bin", io.BytesIO(data), len(data))
    settings.HUB_REFERENCE_ROOTS = [f"s3://{s3.bucket}/collection/"]
    settings.HUB_REFERENCE_S3 = {"ENDPOINT": settings.HUB_STORAGE["S3_ENDPOINT"], "SECURE": False,
                                 "REGION": "us-east-1", "ACCESS_KEY": settings.HUB_STORAGE["S3_ACCESS_KEY"],
                                 "SECRET_KEY": settings.HUB_STORAGE["S3_SECRET_KEY"]}
    location = f"s3://{s3.bucket}/collection/part-0.bin"
    upload = register(api, location)
    assert upload["sha256"] == hashlib.sha256(data).hexdigest()
    assert publish(api, upload["id"], "part-0.bin").status_code == 201
    got = api.get("/api/v1/artifacts/alice/campaign/versions/latest/files/part-0.bin")
    assert got.status_code == 302 and "collection/part-0.bin" in got["Location"]
    import urllib3

    assert urllib3.request("GET", got["Location"]).data == data
