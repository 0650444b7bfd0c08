"""Everything the hub made that carries an artifact's content follows its visibility and deletion (issue 38,
point 6): a fine-tune (``derived_from`` its base), a merge (``merged_from`` its parts), inference outputs
(``derived_from`` the model and the input dataset) and the MLCube project of one version. When a source
becomes private or is deleted, public derivatives become private (their owners keep them) and cannot be made
public again while the source stays so; a project that packages a deleted version is deleted with it. A
user's own ``derived_from`` is a citation and stays as it is (tests/registry/test_privacy_matrix.py)."""

from __future__ import annotations

import uuid

import pytest

from hub.registry import services
from hub.registry.models import Artifact, ProvenanceLink, Version
from hub.registry.services import ProvenanceRef
from tests.conftest import client_for, staged, valid_metadata
from tests.registry.test_followers import CUBE, model_and_cube  # noqa: F401 - a fixture
from tests.search.test_search import names

pytestmark = pytest.mark.django_db
DERIVED, MERGED = ProvenanceLink.Relation.DERIVED_FROM, ProvenanceLink.Relation.MERGED_FROM


@pytest.fixture
def derive(tmp_path):
    """Publish ``owner/name`` (public) with one version a job made that carries ``sources`` through
    ``relation``, as hub.finetune.jobs, hub.gateway.jobs.collaborate and hub.gateway.jobs.infer publish theirs."""

    def make(owner, name: str, sources: list[Version], relation: str = DERIVED, kind: str = "model",
             by_job: bool = True) -> Artifact:
        artifact = services.create_artifact(owner, kind=kind, name=name, visibility="public")
        metadata = valid_metadata(kind, **({"job": str(uuid.uuid4())} if by_job else {}))
        services.create_version(artifact, owner, files=[staged(tmp_path, "model.onnx", f"bytes of {name}".encode())],
                                metadata=metadata, provenance=[ProvenanceRef(relation, s) for s in sources],
                                system=by_job)
        return artifact

    return make


@pytest.fixture
def rf(owner, publish):
    return publish(owner, "rf", {"model.onnx": b"onnx bytes of rf"})


def visibility(name: str) -> str:
    return Artifact.objects.get(name=name, deleted_at__isnull=True).visibility


def test_a_fine_tune_by_another_user_follows_its_base_into_privacy(rf, other, derive, api, anon):
    _, base = rf
    derive(other, "rf-tuned", [base])
    derive(other, "rf-tuned-again", [Version.objects.get(artifact__name="rf-tuned")])  # a fine-tune of it
    mallory = client_for(other)
    assert anon.get("/api/v1/artifacts/mallory/rf-tuned/").status_code == 200
    assert api.patch("/api/v1/artifacts/alice/rf/", {"visibility": "private"}, format="json").status_code == 200
    assert visibility("rf-tuned") == "private" and visibility("rf-tuned-again") == "private"
    assert anon.get("/api/v1/artifacts/mallory/rf-tuned/versions/latest/files/model.onnx").status_code == 404
    assert "rf-tuned" not in names(anon.get("/api/v1/artifacts/?q=rf"))
    assert mallory.get("/api/v1/artifacts/mallory/rf-tuned/").status_code == 200, "its owner keeps it"

    refused = mallory.patch("/api/v1/artifacts/mallory/rf-tuned/", {"visibility": "public"}, format="json")
    assert refused.status_code == 409 and refused.json()["code"] == "follows_source"
    assert "alice/rf is private or deleted" in refused.json()["detail"]
    api.patch("/api/v1/artifacts/alice/rf/", {"visibility": "public"}, format="json")
    shown = mallory.patch("/api/v1/artifacts/mallory/rf-tuned/", {"visibility": "public"}, format="json")
    assert shown.status_code == 200


def test_a_merge_is_withdrawn_when_a_part_is_deleted(rf, owner, publish, derive, api, anon):
    _, base = rf
    _, other_part = publish(owner, "decoder", {"model.onnx": b"onnx bytes of decoder"})
    derive(owner, "merged", [base, other_part], MERGED)
    assert api.delete("/api/v1/artifacts/alice/rf/").status_code == 204
    assert visibility("merged") == "private" and anon.get("/api/v1/artifacts/alice/merged/").status_code == 404
    refused = api.patch("/api/v1/artifacts/alice/merged/", {"visibility": "public"}, format="json")
    assert refused.status_code == 409 and "alice/rf" in refused.json()["detail"]


def test_outputs_made_public_follow_a_deleted_model_version(rf, other, derive, anon):
    _, base = rf
    outputs = derive(other, "rf-outputs", [base], kind="dataset")
    assert anon.get("/api/v1/artifacts/mallory/rf-outputs/").status_code == 200
    services.delete_version(base, "withdrawn")
    outputs.refresh_from_db()
    assert outputs.visibility == "private" and outputs.deleted_at is None
    assert anon.get("/api/v1/artifacts/mallory/rf-outputs/").status_code == 404


def test_a_project_of_a_deleted_version_is_deleted_with_it(model_and_cube, api, anon):  # noqa: F811
    model, cube = model_and_cube
    assert api.delete("/api/v1/artifacts/alice/rf/versions/1/").status_code in (200, 204)
    cube_version = cube.versions.get()
    assert cube_version.deleted_at is not None and "alice/rf" in cube_version.deletion_reason
    assert anon.get(CUBE + "versions/1/files/workspace/model.onnx").status_code in (404, 410)


def test_derivatives_of_a_public_source_and_users_own_citations_are_left_alone(rf, owner, other, derive, api):
    _, base = rf
    derive(other, "rf-tuned", [base])
    derive(other, "rf-summary", [base], kind="dataset", by_job=False)  # a user's derived_from: a citation
    api.patch("/api/v1/artifacts/alice/rf/", {"title": "Random forest"}, format="json")
    services.delete_artifact(services.create_artifact(owner, kind="model", name="unrelated"))
    assert visibility("rf-tuned") == "public" and visibility("rf-summary") == "public"
    api.patch("/api/v1/artifacts/alice/rf/", {"visibility": "private"}, format="json")
    assert visibility("rf-tuned") == "private" and visibility("rf-summary") == "public"
