"""Issue 36, points 1 and 2, through the real hub and Celery worker: a Hugging Face Llama folder (random
weights from a ``LlamaConfig``) in float32 and bfloat16 converts with its weights in ``model.onnx.data`` (the
worker's ``HUB_ONNX_EXTERNAL_DATA_MB`` is 0, so a small model takes the path a 2 GiB one takes), keeps its
precision, verifies, and answers inference equal to transformers'; an uploaded ONNX whose weights name a file
outside its version is refused; a model past the worker's model memory is answered ``model_too_large``."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.external_data_helper import convert_model_to_external_data

from hub.registry.models import Version
from tests.conftest import start_worker, stop_process, wait_for_job, worker_env
from tests.conversions.test_worker import conversion_job, publish_model

pytestmark = [pytest.mark.worker, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CACHE_MB = 3  # the worker's model memory (HUB_GATEWAY_CACHE_MB): the tiny Llama fits, a 4 MiB matrix does not


@pytest.fixture(scope="module")
def worker(django_db_setup, django_db_blocker, tmp_path_factory):
    """This module's worker: every converted model's weights go beside it, and loaded models get 3 MiB."""
    from workers.celery import app

    root = tmp_path_factory.mktemp("worker-external")
    env = worker_env(root, HUB_ONNX_EXTERNAL_DATA_MB="0", HUB_GATEWAY_CACHE_MB=str(CACHE_MB))
    app.control.purge()
    proc = start_worker(root, env)
    yield root
    stop_process(proc)


def llama_folder(folder, dtype: str):
    """A two-layer Llama saved by transformers in ``dtype``; returns the model (float32 weights, as saved)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = LlamaForCausalLM(config).to(getattr(torch, dtype)).eval()
    model.save_pretrained(str(folder))
    return model


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_llama_folder_converts_with_external_data_and_answers(dtype, tmp_path, shared_storage, api):
    import torch

    model = llama_folder(tmp_path / "llama", dtype)
    name = f"llama-{dtype}"
    files = {p.name: p.read_bytes() for p in (tmp_path / "llama").iterdir()}
    publish_model(api, name, files, {"task": "text-generation"})
    job = wait_for_job(conversion_job("1", name).pk, timeout=300)
    assert job.state == "succeeded", (job.error_code, job.error_detail, job.log[-5:])
    converted = Version.objects.get(artifact__name=name, label="1-onnx")
    paths = {f.path: f for f in converted.files.all()}
    assert {"model.onnx", "model.onnx.data", "config.json"} <= set(paths)
    data = paths["model.onnx.data"]
    assert data.blob_id != paths["model.onnx"].blob_id and data.size > paths["model.onnx"].size  # the weights
    report = converted.metadata["conversion"]["model.onnx"]
    assert report["data_files"] == ["model.onnx.data"]
    half = dtype == "bfloat16"
    assert report["dtype"] == ("float16" if half else "float32")
    assert converted.metadata["verified"] is True
    check = converted.metadata["verification"]["model.onnx"]
    assert (check["atol"], check["rtol"]) == ((1e-2, 1e-2) if half else (1e-4, 1e-3))
    assert any("model.onnx.data" in line["message"] for line in job.log)
    assert converted.metadata["outputs"][0]["dtype"] == ("float16" if half else "float32")

    ids = np.array([[1, 5, 9, 200, 3], [7, 7, 2, 0, 1]], dtype=np.int64)
    response = api.post(f"/api/v1/artifacts/alice/{name}/versions/1/infer",
                        {"inputs": {"input_ids": ids.tolist(), "attention_mask": np.ones_like(ids).tolist()}},
                        format="json")
    assert response.status_code == 200, response.content
    logits = np.array(response.json()["outputs"]["logits"], dtype=np.float64)
    with torch.no_grad():
        expected = model(input_ids=torch.from_numpy(ids)).logits.float().numpy()
    # bfloat16 weights run as float16 (exact: both hold bfloat16's 8 mantissa bits), in half precision
    np.testing.assert_allclose(logits, expected, atol=5e-2 if half else 1e-4, rtol=5e-2 if half else 1e-3)


def matmul(weights: np.ndarray) -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, weights.shape[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, weights.shape[1]])],
        [numpy_helper.from_array(weights, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


def external(model: onnx.ModelProto, location: str, folder) -> dict[str, bytes]:
    """The files of ``model`` saved with its weights in ``location`` (relative to the ONNX file)."""
    convert_model_to_external_data(model, location="weights.bin", size_threshold=0)
    onnx.save_model(model, str(folder / "model.onnx"))
    files = {"model.onnx": (folder / "model.onnx").read_bytes(), "weights.bin": (folder / "weights.bin").read_bytes()}
    for tensor in model.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = location
    files["model.onnx"] = model.SerializeToString()
    return files


def test_uploaded_onnx_reads_weights_from_its_version_only(tmp_path, shared_storage, api):
    weights = np.arange(16, dtype=np.float32).reshape(4, 4)
    x = np.ones((2, 4), np.float32).tolist()
    publish_model(api, "inside", external(matmul(weights), "weights.bin", tmp_path), {"task": "feature-extraction"})
    verified = wait_for_job(conversion_job("1", "inside").pk, timeout=120)
    assert verified.state == "succeeded", (verified.error_code, verified.error_detail)
    answered = api.post("/api/v1/artifacts/alice/inside/versions/1/infer", {"inputs": {"x": x}}, format="json")
    assert answered.status_code == 200, answered.content
    np.testing.assert_allclose(answered.json()["outputs"]["y"], np.ones((2, 4)) @ weights)

    escaping = external(matmul(weights), "../../../../etc/passwd", tmp_path)
    publish_model(api, "escaping", escaping, {"task": "feature-extraction"})
    verify = wait_for_job(conversion_job("1", "escaping").pk, timeout=120)
    assert verify.state == "failed" and "outside the model's folder" in verify.error_detail, verify.error_detail
    refused = api.post("/api/v1/artifacts/alice/escaping/versions/1/infer", {"inputs": {"x": x}}, format="json")
    assert refused.status_code == 422, refused.content
    assert refused.json()["code"] == "model_load_failed" and "outside the model's folder" in refused.json()["detail"]
    assert "root:" not in json.dumps(refused.json())


def test_a_model_past_the_workers_model_memory_is_refused_with_a_code(tmp_path, shared_storage, api):
    big = matmul(np.ones((1024, 1024), np.float32))  # 4 MiB of weights: needs ~8 MiB, the worker gives 3
    onnx.save_model(big, str(tmp_path / "big.onnx"))
    publish_model(api, "big", {"big.onnx": (tmp_path / "big.onnx").read_bytes()}, {"task": "feature-extraction"})
    wait_for_job(conversion_job("1", "big").pk, timeout=120)
    refused = api.post("/api/v1/artifacts/alice/big/versions/1/infer",
                       {"inputs": {"x": np.ones((1, 1024), np.float32).tolist()}}, format="json")
    assert refused.status_code == 422, refused.content
    error = refused.json()
    assert error["code"] == "model_too_large" and "HUB_GATEWAY_CACHE_MB" in error["detail"], error
    assert "4.0 MiB" in error["detail"] and "(3.0 MiB, HUB_GATEWAY_CACHE_MB)" in error["detail"], error
