"""A fine-tune request is checked before any job exists: bad configs get coded 4xx answers and leave no job."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest

from hub.jobs.models import Job
from tests.conftest import client_for
from tests.finetune import fixtures

pytestmark = pytest.mark.django_db


@pytest.fixture
def base_and_data(publish, owner, tmp_path):
    model = fixtures.torchscript_mlp(tmp_path)
    publish(owner, "mlp", {"mlp.pt": model.read_bytes()})
    csv = fixtures.blobs_csv(tmp_path / "d")
    publish(owner, "blobs", {"blobs.csv": csv.read_bytes()}, kind="dataset")
    return model


def post(client, body, ref="alice/mlp/versions/1"):
    return client.post(f"/api/v1/artifacts/{ref}/finetune", body, format="json")


def refused(response, status: int, code: str) -> str:
    assert response.status_code == status, response.content
    assert response.json()["code"] == code and response["X-Error-Code"] == code
    assert Job.objects.filter(kind="finetune").count() == 0
    return response.json()["detail"]


def test_unknown_target_names_the_columns(api, base_and_data):
    detail = refused(post(api, {"dataset": "alice/blobs", "target": "lable"}), 400, "unknown_column")
    assert "'lable'" in detail and "a, b, c, d, label" in detail
    refused(post(api, {"dataset": "alice/blobs", "target": "label", "features": ["a", "z"]}), 400, "unknown_column")


def test_bad_hyperparameters(api, base_and_data):
    detail = refused(post(api, {"dataset": "alice/blobs", "target": "label", "epochs": 0}), 400, "invalid_config")
    assert "task_args.epochs" in detail
    refused(post(api, {"dataset": "alice/blobs", "target": "label", "validation_split": 1}), 400, "invalid_config")
    refused(post(api, {"dataset": "alice/blobs"}), 400, "invalid")  # no target at all


def test_onnx_only_model_is_not_trainable(api, publish, owner, base_and_data):
    publish(owner, "graph", {"graph.onnx": b"\x08\x07 not parsed here"})
    detail = refused(post(api, {"dataset": "alice/blobs", "target": "label"}, "alice/graph/versions/1"), 400,
                     "not_trainable")
    assert "ONNX" in detail and "TorchScript (.pt" in detail


def test_a_dataset_the_user_may_not_read(api, publish, make_user, base_and_data):
    mallory = make_user("mallory")
    publish(mallory, "secret", {"s.csv": b"a,label\n1,0\n2,1\n"}, kind="dataset", visibility="private")
    detail = refused(post(api, {"dataset": "mallory/secret", "target": "label"}), 404, "not_found")
    assert "mallory/secret" in detail


def test_read_token_and_anonymous_are_refused(base_and_data, owner, anon):
    refused(post(client_for(owner, "read"), {"dataset": "alice/blobs", "target": "label"}), 403,
            "insufficient_scope")
    refused(post(anon, {"dataset": "alice/blobs", "target": "label"}), 401, "not_authenticated")


def test_npz_keys_are_the_columns(api, publish, owner, base_and_data):
    x, y = fixtures.blobs(20)
    buffer = io.BytesIO()
    np.savez(buffer, features=x, target=y)
    publish(owner, "arrays", {"arrays.npz": buffer.getvalue()}, kind="dataset")
    detail = refused(post(api, {"dataset": "alice/arrays", "target": "label"}), 400, "unknown_column")
    assert "features, target" in detail
    response = post(api, {"dataset": "alice/arrays@1", "target": "target", "epochs": 2})
    assert response.status_code == 202, response.content
    job = Job.objects.get(kind="finetune")
    assert job.params["dataset"]["files"] == ["arrays.npz"] and job.params["output"] == {
        "name": "mlp-finetuned", "visibility": "private"}
    assert job.params["hyper"]["epochs"] == 2 and job.params["source"] == {"file": "mlp.pt"}
    assert zipfile.is_zipfile(io.BytesIO(buffer.getvalue()))


def test_output_name_must_not_be_a_dataset(api, base_and_data):
    refused(post(api, {"dataset": "alice/blobs", "target": "label", "name": "blobs"}), 409, "already_exists")


def test_the_form_on_the_model_page(client, owner, base_and_data):
    from hub.registry.models import Version

    pid = Version.objects.get(artifact__name="mlp", label="1").pid
    assert "to fine-tune this model" in client.get(f"/{pid}", HTTP_ACCEPT="text/html", follow=True).content.decode()
    client.force_login(owner)
    page = client.get(f"/{pid}", HTTP_ACCEPT="text/html", follow=True).content.decode()
    assert 'id="finetune"' in page and 'action="/finetune/alice/mlp/1"' in page
    refused_page = client.post("/finetune/alice/mlp/1", {"dataset": "alice/blobs", "target": "lable", "epochs": "2"},
                               follow=True).content.decode()
    assert "not started (unknown_column)" in refused_page and Job.objects.filter(kind="finetune").count() == 0
    answer = client.post("/finetune/alice/mlp/1", {"dataset": "alice/blobs", "target": "label", "epochs": "2",
                                                   "learning_rate": "0.01", "freeze": "backbone", "features": "a, b",
                                                   "name": "", "seed": "3"})
    job = Job.objects.get(kind="finetune")
    assert answer.status_code == 302 and answer["Location"] == f"/jobs/{job.pk}/"
    hyper = job.params["hyper"]
    assert (hyper["epochs"], hyper["freeze"], hyper["seed"], hyper["features"], hyper["learning_rate"]) == (
        2, "backbone", 3, ["a", "b"], 0.01)


def test_a_hugging_face_folder_needs_its_text_column(api, publish, owner, base_and_data):
    files = {"encoder/config.json": b'{"model_type": "bert"}', "encoder/model.safetensors": b"weights",
             "encoder/vocab.txt": b"[PAD]\n", "README.md": b"# encoder\n"}
    publish(owner, "encoder", files)
    publish(owner, "reviews", {"reviews.csv": b"text,sentiment\ngood,positive\nbad,negative\n"}, kind="dataset")
    body = {"dataset": "alice/reviews", "target": "sentiment"}
    detail = refused(post(api, body, "alice/encoder/versions/1"), 400, "invalid_config")
    assert "task_args.text" in detail
    refused(post(api, {**body, "text": "review"}, "alice/encoder/versions/1"), 400, "unknown_column")
    assert post(api, {**body, "text": "text"}, "alice/encoder/versions/1").status_code == 202
    assert Job.objects.get(kind="finetune").params["source"] == {"folder": "encoder"}


@pytest.mark.parametrize("extra, hint", [
    ({"partition": "gpu"}, "Unknown field; the fields are "),
    ({"worker_num": 4}, "Unknown field; the fields are "),
    ({"epoch": 3}, "did you mean 'epochs'?"),
])
def test_unknown_options_are_refused_by_name(api, base_and_data, extra, hint):
    response = post(api, {"dataset": "alice/blobs", "target": "label", **extra})
    detail = refused(response, 400, "invalid")
    (name,) = extra
    assert detail.startswith(f"{name}: ") and hint in detail and name in response.json()["errors"]


def test_a_fine_tune_of_a_private_model_stays_private(api, base_and_data):
    assert api.patch("/api/v1/artifacts/alice/mlp/", {"visibility": "private"}, format="json").status_code == 200
    body = {"dataset": "alice/blobs", "target": "label"}
    detail = refused(post(api, {**body, "visibility": "public"}), 403, "permission_denied")
    assert "alice/mlp" in detail and "stays private" in detail
    assert post(api, body).status_code == 202  # private by default
