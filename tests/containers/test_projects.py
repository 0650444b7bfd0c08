"""Projects over the API: a version needs an MLCube the hub can run; a broken mlcube.yaml is a 400 that
names each problem, and nothing is stored. Models without an ONNX version have no cube yet."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from hpcfair.config import SCHEMA_FILE

from hub.registry.models import Blob, Version
from tests.conftest import multipart_file

PROJECT = SCHEMA_FILE.with_name("examples") / "project_dir"
FILES = ("mlcube.yaml", "Containerfile", "main.py", "requirements.txt", "workspace/parameters.yaml")
METADATA = {"description": "Prepare and train.", "creators": [{"name": "Alice Example"}], "license": "MIT"}


def project_files(**replace: bytes) -> dict[str, bytes]:
    files = {path: (PROJECT / path).read_bytes() for path in FILES}
    files.update(replace)
    return {path: data for path, data in files.items() if data is not None}


def upload(api, name: str, files: dict[str, bytes]):
    api.post("/api/v1/artifacts/", {"kind": "project", "name": name, "title": name}, format="json")
    return api.post(f"/api/v1/artifacts/alice/{name}/versions/",
                    {"files": [multipart_file(p, d) for p, d in files.items()], "metadata": json.dumps(METADATA)},
                    format="multipart")


@pytest.mark.django_db
def test_a_project_with_a_good_mlcube_is_described(api, hub_dirs):
    response = upload(api, "recipe", project_files())
    assert response.status_code == 201, response.content
    cube = response.json()["metadata"]["mlcube"]
    assert cube["name"] == "linear-regression-project" and [t["name"] for t in cube["tasks"]] == ["prepare", "train"]
    assert cube["tasks"][0] == {"name": "prepare", "inputs": {"parameters": "parameters.yaml"},
                                "outputs": {"data_dir": "data"}}


@pytest.mark.django_db
def test_a_zipped_project_is_checked_inside_the_zip(api, hub_dirs):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for path, data in project_files().items():
            zf.writestr(f"recipe/{path}", data)
    response = upload(api, "zipped", {"recipe.zip": buffer.getvalue()})
    assert response.status_code == 201, response.content
    assert [t["name"] for t in response.json()["metadata"]["mlcube"]["tasks"]] == ["prepare", "train"]


@pytest.mark.django_db
@pytest.mark.parametrize(("change", "place", "says"), [
    ({"mlcube.yaml": (PROJECT / "mlcube.yaml").read_bytes().replace(b"\ntasks:", b"\ntaks:")},
     "taks", "Did you mean 'tasks'?"),
    ({"Containerfile": (PROJECT / "Containerfile").read_bytes().replace(b"ENTRYPOINT", b"# ENTRYPOINT")},
     "tasks.train.entrypoint", "nothing would run"),
    ({"mlcube.yaml": (PROJECT / "mlcube.yaml").read_bytes().replace(b"{type: file, default: metrics.json}",
                                                                     b"{type: file, default: metrics.json, size: 1}")},
     "tasks.train.parameters.outputs.metrics.size", "Unknown key 'size'"),
    ({"mlcube.yaml": None}, "mlcube.yaml", "Missing."),
])
def test_a_broken_mlcube_is_a_400_naming_the_problem_and_nothing_is_stored(api, hub_dirs, change, place, says):
    blobs = Blob.objects.count()
    response = upload(api, "broken", project_files(**change))
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == "invalid_mlcube" and says in body["errors"][place][0], body
    assert "mlcube" in body["detail"].lower()
    assert not Version.objects.filter(artifact__name="broken").exists() and Blob.objects.count() == blobs


@pytest.mark.django_db
def test_a_model_without_onnx_has_no_cube_yet(api, hub_dirs):
    api.post("/api/v1/artifacts/", {"kind": "model", "name": "weights", "title": "weights"}, format="json")
    response = api.post("/api/v1/artifacts/alice/weights/versions/",
                        {"files": [multipart_file("notes.txt", b"not a model")],
                         "metadata": json.dumps({**METADATA, "task": "regression", "framework": "pytorch"})},
                        format="multipart")
    assert response.status_code == 201, response.content
    for method in (api.get, api.post):
        answer = method("/api/v1/artifacts/alice/weights/versions/1/container")
        assert answer.status_code == 409 and answer.json()["code"] == "not_converted", answer.content


def zip_with(extra: zipfile.ZipInfo | str, data: bytes = b"x") -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for path, content in project_files().items():
            zf.writestr(f"recipe/{path}", content)
        zf.writestr(extra, data)
    return buffer.getvalue()


def link(name: str, target: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.external_attr = (0o120777 << 16)  # a symbolic link, as zip -y stores one
    return info, target.encode()


@pytest.mark.django_db
@pytest.mark.parametrize("member", [
    "recipe/../../etc/cron.d/evil", "/etc/passwd", "recipe/..\\..\\evil.bat", "C:/Windows/evil", link(
        "recipe/workspace/shadow", "/etc/shadow")])
def test_a_project_archive_with_members_outside_it_is_refused_at_publish(api, hub_dirs, member):
    info, data = member if isinstance(member, tuple) else (member, b"x")
    response = upload(api, "slip", {"recipe.zip": zip_with(info, data)})
    assert response.status_code == 400 and response.json()["code"] == "invalid_mlcube", response.content
    assert "archive" in response.json()["errors"] and "stay inside its folder" in response.json()["detail"]
    assert not Version.objects.exists() and not Blob.objects.exists()
