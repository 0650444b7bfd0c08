"""What the hub makes from an artifact and that carries its files (the MLCube project of a model) follows it:
its visibility and collaborators, whenever they change, and its deletion. Before, a cube took its model's
visibility once, when made: a model made private, or deleted, left a public project holding its ONNX file."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps

from hub.containers.jobs import cube_artifact
from hub.registry import services
from hub.registry.models import Artifact, ProvenanceLink
from hub.registry.services import ProvenanceRef
from tests.conftest import client_for, staged, valid_metadata
from tests.containers.test_projects import project_files
from tests.search.test_search import names

pytestmark = pytest.mark.django_db
CUBE = "/api/v1/artifacts/alice/rf-mlcube/"


@pytest.fixture
def model_and_cube(owner, publish, tmp_path):
    model, version = publish(owner, "rf", {"model.onnx": b"onnx bytes of rf"})
    cube = cube_artifact(version)
    files = {**project_files(), "workspace/model.onnx": b"onnx bytes of rf"}
    services.create_version(cube, owner, files=[staged(tmp_path, path, data) for path, data in files.items()],
                            metadata=valid_metadata("project", job="1"), system=True,  # as hub.containers.jobs does
                            provenance=[ProvenanceRef(ProvenanceLink.Relation.DERIVED_FROM, version)])
    return model, cube


def test_a_cube_is_made_following_its_model(model_and_cube, anon):
    model, cube = model_and_cube
    assert cube.follows == model and cube.visibility == "public"
    assert anon.get(CUBE).status_code == 200 and "alice/rf-mlcube" in anon.get("/api/v1/artifacts/").content.decode()


def test_a_model_made_private_takes_its_cube_along(model_and_cube, api, anon, collaborator):
    api.patch("/api/v1/artifacts/alice/rf/", {"visibility": "private"}, format="json")
    assert anon.get(CUBE).status_code == 404
    assert anon.get(CUBE + "versions/latest/files/workspace/model.onnx").status_code == 404
    assert "rf-mlcube" not in names(anon.get("/api/v1/artifacts/"))
    assert client_for(collaborator).get(CUBE).status_code == 404
    api.patch("/api/v1/artifacts/alice/rf/", {"collaborators": ["bob"]}, format="json")
    assert client_for(collaborator).get(CUBE + "versions/latest/files/workspace/model.onnx").status_code == 200
    api.patch("/api/v1/artifacts/alice/rf/", {"visibility": "public", "collaborators": []}, format="json")
    assert anon.get(CUBE).status_code == 200


def test_a_cube_cannot_be_given_its_own_visibility(model_and_cube, api, collaborator):
    api.patch("/api/v1/artifacts/alice/rf/", {"visibility": "private"}, format="json")
    response = api.patch(CUBE, {"visibility": "public"}, format="json")
    assert response.status_code == 409 and response.json()["code"] == "follows_source"
    assert "alice/rf" in response.json()["detail"] and Artifact.objects.get(name="rf-mlcube").visibility == "private"
    assert api.patch(CUBE, {"collaborators": ["bob"]}, format="json").json()["code"] == "follows_source"
    assert api.patch(CUBE, {"title": "My cube", "visibility": "private"}, format="json").status_code == 200


def test_a_deleted_model_takes_its_cube_along(model_and_cube, api, anon):
    assert api.delete("/api/v1/artifacts/alice/rf/").status_code == 204
    cube = Artifact.objects.get(name="rf-mlcube")
    assert cube.deleted_at is not None and "alice/rf" in cube.deletion_reason
    for client in (anon, api):
        assert client.get(CUBE + "versions/1/files/workspace/model.onnx").status_code in (404, 410)
    assert "rf-mlcube" not in names(anon.get("/api/v1/artifacts/"))


def test_a_cube_made_before_cubes_followed_is_healed(owner, publish, anon):
    model, version = publish(owner, "rf", {"model.onnx": b"onnx bytes of rf"})
    old = services.create_artifact(owner, kind="project", name="rf-mlcube", visibility="public")
    services.update_artifact(model, {"visibility": "private"})  # the old cube stayed public
    assert anon.get(CUBE).status_code == 200
    migration = importlib.import_module("hub.registry.migrations.0004_artifact_follows")
    migration.link_cubes(apps, None)  # what `migrate` does to such cubes
    old.refresh_from_db()
    assert old.follows == model and old.visibility == "private" and anon.get(CUBE).status_code == 404
    Artifact.objects.filter(pk=old.pk).update(follows=None, visibility="public")
    assert cube_artifact(version).pk == old.pk  # and the next cube job, for one missed
    old.refresh_from_db()
    assert old.follows == model and old.visibility == "private"
