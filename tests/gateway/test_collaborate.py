"""Model collaboration through the whole hub: a PyTorch encoder and a Keras decoder are uploaded and
converted by the real worker, then run as a chain in one request and merged into one ONNX model; both
equal running the parts one after another, and equal the original frameworks."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from hub.registry.models import Version
from tests.conftest import client_for, multipart_file, wait_for_job

pytestmark = [pytest.mark.worker, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
X = np.random.default_rng(7).standard_normal((3, 16)).astype(np.float32)


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    """encoder.pt (TorchScript: x [batch, 16] -> [batch, 8]) and decoder.keras (z [batch, 8] -> [batch, 4]),
    with their outputs on X computed by the frameworks themselves."""
    import keras
    import torch

    folder = tmp_path_factory.mktemp("parts")
    torch.manual_seed(0)
    encoder = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.Tanh()).eval()
    torch.jit.script(encoder).save(str(folder / "encoder.pt"))
    keras.utils.set_random_seed(1)
    z = keras.Input((8,), name="z")
    decoder = keras.Model(z, keras.layers.Dense(4, name="y")(keras.layers.Dense(6, activation="relu")(z)))
    decoder.save(folder / "decoder.keras")
    with torch.no_grad():
        latent = encoder(torch.from_numpy(X)).numpy()
    return folder, np.asarray(decoder.predict(latent, verbose=0))


def publish(api, name: str, path, metadata: dict) -> None:
    assert api.post("/api/v1/artifacts/", {"kind": "model", "name": name, "title": name}, format="json").status_code \
        == 201
    base = {"title": name, "description": "A part of a chain.", "creators": [{"name": "Alice Example"}],
            "license": "MIT", "task": "feature-extraction"}
    response = api.post(f"/api/v1/artifacts/alice/{name}/versions/",
                        {"files": [multipart_file(path.name, path.read_bytes())],
                         "metadata": json.dumps({**base, **metadata})}, format="multipart")
    assert response.status_code == 201, response.content
    version = Version.objects.get(artifact__name=name, label="1")
    job = wait_for_job(version.jobs.get().pk, timeout=240)
    assert job.state == "succeeded" and job.result["verified"], (job.error_detail, job.log[-3:])


def outputs(response) -> np.ndarray:
    assert response.status_code == 200, response.content
    (value,) = response.json()["outputs"].values()
    return np.asarray(value, np.float32)


def test_torch_encoder_into_keras_decoder_as_chain_and_merged(shared_storage, api, parts):
    folder, expected = parts
    publish(api, "encoder", folder / "encoder.pt",
            {"inputs": [{"name": "x", "shape": ["batch", 16], "dtype": "float32"}]})
    publish(api, "decoder", folder / "decoder.keras", {})

    latent = outputs(api.post("/api/v1/artifacts/alice/encoder/versions/1/infer", {"inputs": X.tolist()},
                              format="json"))
    one_after_another = outputs(api.post("/api/v1/artifacts/alice/decoder/versions/1/infer",
                                         {"inputs": latent.tolist()}, format="json"))
    np.testing.assert_allclose(one_after_another, expected, rtol=1e-4, atol=1e-5)  # equals the frameworks

    chain = api.post("/api/v1/collaborate", {"models": ["alice/encoder@1", "alice/decoder"], "inputs": X.tolist()},
                     format="json")
    np.testing.assert_allclose(outputs(chain), one_after_another, rtol=1e-6, atol=1e-6)
    assert [step["version"] for step in chain.json()["steps"]] == ["alice/encoder@1-onnx", "alice/decoder@1-onnx"]

    response = api.post("/api/v1/collaborate", {"models": ["alice/encoder", "alice/decoder"], "merge": True,
                                                 "name": "encoder-decoder", "task": "regression"}, format="json")
    assert response.status_code == 202, response.content
    job = wait_for_job(response.json()["id"], timeout=120)
    assert job.state == "succeeded", (job.error_code, job.error_detail, job.log[-3:])
    assert job.result["verified"] is True and job.result["prefixes"] == ["encoder__", "decoder__"]
    merged = Version.objects.get(pid=job.result["pid"])
    assert merged.artifact.full_name == "alice/encoder-decoder" and merged.artifact.visibility == "public"
    assert {(p.relation, str(p.target)) for p in merged.provenance.all()} == {
        ("merged_from", "alice/encoder@1-onnx"), ("merged_from", "alice/decoder@1-onnx")}
    assert merged.metadata["inputs"][0]["name"] == "encoder__x" and merged.metadata["task"] == "regression"
    report = merged.metadata["verification"]["encoder-decoder.onnx"]
    assert report["passed"] and report["runs"][0]["outputs"][0]["max_abs_diff"] < 1e-5
    in_one = outputs(api.post("/api/v1/artifacts/alice/encoder-decoder/versions/latest/infer",
                              {"inputs": X.tolist()}, format="json"))
    np.testing.assert_allclose(in_one, one_after_another, rtol=1e-5, atol=1e-6)


def test_chain_errors_name_the_problem(shared_storage, owner, other, publish):
    from tests.gateway import models

    publish(owner, "mlp", {"mlp.onnx": models.mlp()})
    publish(owner, "two", {"two.onnx": models.two_inputs()})
    publish(owner, "hidden", {"mlp.onnx": models.mlp(seed=1)}, visibility="private")
    api = client_for(owner)
    for body, status, fragment in [
        ({"models": ["alice/mlp"]}, 400, "two or more models"),
        ({"models": ["alice/mlp", "alice/two"], "inputs": [[0.0] * 784]}, 400, "say which feeds which in links[0]"),
        ({"models": ["alice/mlp", "alice/two"], "links": [{"a": "nothing"}]}, 400, "has no output 'nothing'"),
        ({"models": ["alice/mlp", "alice/two"], "links": [{"a": "logits"}]}, 400, "k unmapped"),
        ({"models": ["alice/mlp", "alice/nope"]}, 404, "alice/nope"),
        ({"models": ["alice/mlp", "alice/mlp"], "merge": True}, 400, "needs a name"),
        ({"models": ["alice/mlp", "alice/hidden"], "merge": True, "name": "m", "visibility": "public",
          "links": [{"x": "logits"}]}, 403, "stays private"),
    ]:
        response = api.post("/api/v1/collaborate", body, format="json")
        assert response.status_code == status and fragment in response.json()["detail"], response.content
    # Someone else cannot chain a private model they cannot read.
    response = client_for(other).post("/api/v1/collaborate", {"models": ["alice/mlp", "alice/hidden"]}, format="json")
    assert response.status_code == 404
