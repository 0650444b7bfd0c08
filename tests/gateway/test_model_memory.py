"""Issue 36: ONNX models with external data as the workers load them, and the memory a worker's session cache
accounts for before it loads one. Real ONNX Runtime sessions on a filesystem store; no worker process (the
whole path through the hub and its worker is tests/conversions/test_worker_external_data.py)."""

from __future__ import annotations

import hashlib
import time

import numpy as np
import onnx
import pytest
from hpcfair import external_data
from hpcfair.compute import CodedError
from hpcfair.compute.runs import open_session, run_model
from onnx import TensorProto, helper, numpy_helper
from onnx.external_data_helper import convert_model_to_external_data

from hub.gateway import sessions
from hub.jobs.files import place_model
from hub.storage import get_blob_store


def matmul(weights: np.ndarray) -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, weights.shape[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, weights.shape[1]])],
        [numpy_helper.from_array(weights, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


@pytest.fixture
def store(settings, tmp_path):
    settings.HUB_STORAGE = {**settings.HUB_STORAGE, "BACKEND": "filesystem", "DIR": str(tmp_path / "blobs")}
    settings.HUB_GATEWAY_MODEL_DIR = tmp_path / "models"
    return get_blob_store()


def put(store, tmp_path, data: bytes) -> tuple[str, int]:
    sha256 = hashlib.sha256(data).hexdigest()
    path = tmp_path / f"upload-{sha256[:8]}"
    path.write_bytes(data)
    store.put_file(path, sha256)
    return sha256, len(data)


def external_step(store, tmp_path, weights: np.ndarray, location: str = "weights/w.bin",
                  onnx_path: str = "nested/model.onnx") -> dict:
    """A version's files as a step: an ONNX file whose weights are in ``location``, and that file."""
    model = matmul(weights)
    folder = tmp_path / "src"
    (folder / "weights").mkdir(parents=True, exist_ok=True)
    convert_model_to_external_data(model, location=location, size_threshold=0)
    onnx.save_model(model, str(folder / "model.onnx"))
    sha, size = put(store, tmp_path, (folder / "model.onnx").read_bytes())
    data_sha, data_size = put(store, tmp_path, (folder / location).read_bytes())
    return {"sha256": sha, "size": size, "path": onnx_path,
            "beside": [[location, data_sha, data_size], ["tokenizer.json", data_sha, data_size]]}


def test_a_model_with_external_data_runs_from_a_folder_of_its_versions_files(store, tmp_path):
    weights = np.arange(12, dtype=np.float32).reshape(3, 4)
    step = external_step(store, tmp_path, weights)
    path, graph = sessions.model_path(step)
    assert path.name == "model.onnx" and (path.parent / "weights" / "w.bin").is_file()
    assert not (path.parent / "tokenizer.json").exists()  # only the files the graph names
    assert sessions.files_bytes(path, graph) == step["size"] + weights.nbytes
    session = open_session(path, "cpu", 1)
    out = run_model(session, {"x": np.ones((2, 3), np.float32)}, time.time() + 10)
    np.testing.assert_allclose(out["y"], np.ones((2, 3)) @ weights)
    assert sessions.model_path(step)[0] == path  # put together once

    staged = place_model(step, tmp_path / "job" / "model-0")  # a Slurm job's folder, for a node
    assert staged == tmp_path / "job" / "model-0" / "model.onnx"
    assert (staged.parent / "weights" / "w.bin").read_bytes() == weights.tobytes()
    np.testing.assert_allclose(run_model(open_session(staged, "cpu", 1), {"x": np.ones((1, 3), np.float32)},
                                         time.time() + 10)["y"], np.ones((1, 3)) @ weights)


@pytest.mark.parametrize("location", ["../w.bin", "/etc/passwd", "a/../../w.bin", "..\\w.bin", "C:/w.bin"])
def test_a_location_that_leaves_the_version_is_refused(store, tmp_path, location):
    step = external_step(store, tmp_path, np.ones((2, 2), np.float32), location="weights/w.bin")
    model = onnx.load_from_string((store.local_path(step["sha256"])).read_bytes())
    for tensor in model.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = location
    step["sha256"], step["size"] = put(store, tmp_path, model.SerializeToString())
    step["beside"].append([location, step["beside"][0][1], step["beside"][0][2]])  # even listed as a file
    for load in (sessions.model_path, lambda s: place_model(s, tmp_path / "job")):
        with pytest.raises(CodedError) as caught:
            load(step)
        assert caught.value.code == "model_load_failed" and "outside the model's folder" in caught.value.detail


def test_a_location_naming_no_file_of_the_version_or_a_link_is_refused(store, tmp_path):
    step = external_step(store, tmp_path, np.ones((2, 2), np.float32))
    with pytest.raises(CodedError, match="is not a file of the version"):
        sessions.model_path({**step, "beside": []})
    folder = tmp_path / "linked"  # a folder the hub did not put together: a link in it is not followed
    folder.mkdir()
    onnx.save_model(onnx.load_from_string(store.local_path(step["sha256"]).read_bytes()), str(folder / "model.onnx"))
    (folder / "weights").mkdir()
    (folder / "weights" / "w.bin").symlink_to(store.local_path(step["beside"][0][1]))
    with pytest.raises(CodedError, match="is a link"):
        open_session(folder / "model.onnx", "cpu", 1)


def test_externalise_streams_an_exporters_files_into_one_and_takes_small_models_in(tmp_path):
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["c"]), helper.make_node("MatMul", ["x", "c"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 64])],
        [numpy_helper.from_array(np.full((64, 64), 1.0, np.float32), "a"),
         numpy_helper.from_array(np.eye(64, dtype=np.float32), "b")]), ir_version=10,
        opset_imports=[helper.make_opsetid("", 17)])
    convert_model_to_external_data(model, all_tensors_to_one_file=False, size_threshold=0)  # one file each
    onnx.save_model(model, str(tmp_path / "model.onnx"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "model.onnx"]
    assert external_data.externalise(tmp_path / "model.onnx", limit=0) == ["model.onnx.data"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx", "model.onnx.data"]
    graph = external_data.load_graph(tmp_path / "model.onnx")
    offsets = [int(e.value) for t in graph.graph.initializer for e in t.external_data if e.key == "offset"]
    assert all(offset % external_data.ALIGN == 0 for offset in offsets)  # each can be memory-mapped
    x = np.ones((1, 64), np.float32)
    out = run_model(open_session(tmp_path / "model.onnx", "cpu", 1), {"x": x}, time.time() + 10)
    np.testing.assert_allclose(out["y"], x @ (np.ones((64, 64)) + np.eye(64)))
    assert external_data.externalise(tmp_path / "model.onnx", limit=10**9) == []  # small: one file again
    assert [p.name for p in tmp_path.iterdir()] == ["model.onnx"]
    assert not external_data.locations(onnx.load(str(tmp_path / "model.onnx")))


def test_the_cache_refuses_a_model_past_its_budget_and_evicts_to_make_room(store, tmp_path):
    steps = [external_step(store, tmp_path / str(i), np.full((256, 256), i, np.float32)) for i in range(3)]
    weights = 256 * 256 * 4
    cache = sessions.SessionCache(max_bytes=5 * weights)  # two models (2 x weights each, with the file) fit
    for step in steps[:2]:
        cache.get(step, "cpu", 1)
    assert len(cache.entries) == 2 and cache.held() <= 5 * weights
    cache.get(steps[0], "cpu", 1)  # used again: the most recent
    cache.get(steps[2], "cpu", 1)  # evicts the least recently used, steps[1], before loading
    assert [key[0] for key in cache.entries] == [steps[0]["sha256"], steps[2]["sha256"]]
    small = sessions.SessionCache(max_bytes=weights)
    with pytest.raises(CodedError) as caught:
        small.get(steps[0], "cpu", 1)
    assert caught.value.code == "model_too_large" and "HUB_GATEWAY_CACHE_MB" in caught.value.detail
    assert not small.entries


def test_an_mlcube_of_a_model_with_external_data_carries_its_data_file(tmp_path):
    from hpcfair.cube.generate import CubeInfo, generate

    model = matmul(np.ones((3, 2), np.float32))
    (tmp_path / "src" / "weights").mkdir(parents=True)
    convert_model_to_external_data(model, location="weights/w.bin", size_threshold=0)
    onnx.save_model(model, str(tmp_path / "src" / "model.onnx"))
    cube = generate(tmp_path / "cube", tmp_path / "src" / "model.onnx", CubeInfo(name="m", title="m"))
    workspace = cube / "workspace"
    assert (workspace / "weights" / "w.bin").read_bytes() == (tmp_path / "src" / "weights" / "w.bin").read_bytes()
    session = open_session(workspace / "model.onnx", "cpu", 1)
    np.testing.assert_allclose(run_model(session, {"x": np.ones((1, 3), np.float32)}, time.time() + 10)["y"],
                               [[3.0, 3.0]])
