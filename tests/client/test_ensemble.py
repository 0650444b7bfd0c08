"""A version holding several ONNX files (an ensemble, e.g. a converted XGBoost and LightGBM booster) runs from
every client route when the file is named: ``api.load_model(ref, file=…)``, ``onnx_file`` in an inference
config, ``hpcfair infer … --file``; and its page's "Use it" snippets name the file."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import numpy as np
import pytest
from django.test import Client
from hpcfair import HubClient, modelAPI
from hpcfair.errors import ConfigError, HubError, NotFoundError
from onnx import TensorProto, helper

from hub.web import snippets

X = np.array([[1.0, 2.0, 3.0, 4.0]], dtype=np.float32)


def tiny(op: str, value: float) -> bytes:
    """x [n, 4] float32 -> y = x <op> value: one model of the ensemble."""
    constant = helper.make_tensor("c", TensorProto.FLOAT, [1], [value])
    graph = helper.make_graph([helper.make_node(op, ["x", "c"], ["y"])], f"tiny_{op}",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])], [constant])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model.SerializeToString()


ENSEMBLE = {"booster.onnx": tiny("Mul", 2.0), "model.onnx": tiny("Add", 1.0)}
EXPECTED = {"booster.onnx": X * 2, "model.onnx": X + 1}


@pytest.fixture
def ensemble(live_server, owner, publish, settings, tmp_path):
    """(endpoint, a write token, ``alice/tiny-boosters@1-onnx``) on the live test server."""
    from hub.accounts.models import ApiToken

    settings.HUB_PUBLIC_URL = live_server.url
    artifact, version = publish(owner, "tiny-boosters", ENSEMBLE, label="1-onnx")
    _, token = ApiToken.issue(owner, scope="write")
    (tmp_path / "input.json").write_text(json.dumps({"x": X.tolist()}))
    return live_server.url, token, f"{artifact.full_name}@{version.label}"


@pytest.mark.django_db(transaction=True)
def test_load_model_takes_the_file_of_an_ensemble(ensemble):
    endpoint, token, ref = ensemble
    api = modelAPI(client=HubClient(endpoint, token))
    with pytest.raises(HubError) as ambiguous:
        api.load_model(ref)
    assert ambiguous.value.code == "ambiguous_model" and "booster.onnx, model.onnx" in ambiguous.value.message
    for file, expected in EXPECTED.items():
        session = api.load_model(ref, file=file)
        np.testing.assert_allclose(session.run(None, {"x": X})[0], expected)
    np.testing.assert_allclose(api.load_model(ref, file="model").run(None, {"x": X})[0], X + 1)  # .onnx optional
    with pytest.raises(NotFoundError, match="no ONNX file 'nope.onnx'; it has booster.onnx, model.onnx"):
        api.load_model(ref, file="nope.onnx")


@pytest.mark.django_db(transaction=True)
def test_an_inference_config_names_the_file_with_onnx_file(ensemble, tmp_path):
    endpoint, token, ref = ensemble
    api = modelAPI(client=HubClient(endpoint, token, retries=0))  # no_worker (503) is not retried here
    base = {"general_args": {"task": "inference"}, "device_args": {"device": "local"},
            "task_args": {"model_file": [ref], "input": str(tmp_path / "input.json")}}
    with pytest.raises(HubError, match="holds 2 ONNX models"):
        api.inference(base)
    outputs = api.inference({**base, "task_args": {**base["task_args"], "onnx_file": ["booster.onnx"]},
                             "out_args": {"export_file": str(tmp_path / "out.npz")}})
    np.testing.assert_allclose(outputs["y"], X * 2)
    with np.load(tmp_path / "out.npz") as saved:
        np.testing.assert_allclose(saved["y"], X * 2)
    with pytest.raises(ConfigError, match="has 2 entries for 1 models"):
        api.inference({**base, "task_args": {**base["task_args"], "onnx_file": ["booster.onnx", "model.onnx"]}})
    chain = {"general_args": {"task": "inference", "tag": "collaboration"}, "device_args": {"device": "local"},
             "task_args": {"model_file": [ref, ref], "onnx_file": ["booster.onnx", "model.onnx"],
                           "input": str(tmp_path / "input.json")}}
    np.testing.assert_allclose(api.collaborate(chain)["y"], X * 2 + 1)  # one file of each, in a chain here
    with pytest.raises(ConfigError, match="a chain on the hub .* runs each version's only ONNX file"):
        api.collaborate({**chain, "device_args": {"device": "cpu"}})
    # On the hub the file goes with the request: the gateway gets past choosing the model and, with no worker
    # in this test, says so (without the file it refuses the request as ambiguous, the reported failure).
    hub = {**base, "device_args": {"device": "cpu"}}
    with pytest.raises(HubError) as ambiguous:
        api.inference(hub)
    assert ambiguous.value.code == "invalid" and "name one with 'file'" in ambiguous.value.message
    with pytest.raises(HubError) as chosen:
        api.inference({**hub, "task_args": {**hub["task_args"], "onnx_file": "model.onnx"}})
    assert chosen.value.code == "no_worker", chosen.value.message


@pytest.mark.slow
@pytest.mark.cpu  # runs the CLI: over 1 s on a quiet machine
@pytest.mark.django_db(transaction=True)
def test_hpcfair_infer_takes_file(ensemble, tmp_path):
    endpoint, token, ref = ensemble
    env = {**os.environ, "HPCFAIR_ENDPOINT": endpoint, "HPCFAIR_TOKEN": token}
    done = subprocess.run([sys.executable, "-m", "hpcfair.cli", "infer", ref, "input.json", "--device", "local",
                           "--file", "model.onnx", "--output", "out.npz"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    with np.load(tmp_path / "out.npz") as saved:
        np.testing.assert_allclose(saved["y"], X + 1)


@pytest.mark.slow
@pytest.mark.cpu  # runs the snippets' CLI: over 1 s on a quiet machine
@pytest.mark.django_db(transaction=True)
def test_the_use_it_snippets_of_an_ensemble_name_its_file_and_run(ensemble, tmp_path):
    """The page's snippets name the first ONNX file and say so; the load snippet runs as shown, and the
    config and the command line run the file they name."""
    from hpcfair.config import load

    from hub.registry.models import Version

    endpoint, token, ref = ensemble
    version = Version.objects.get(label="1-onnx", artifact__name="tiny-boosters")
    signature = [{"name": "x", "shape": [None, 4], "dtype": "float32"}]
    version.metadata["members"] = {path: {"inputs": signature, "outputs": []} for path in ENSEMBLE}  # as converted
    version.save(update_fields=["metadata"])
    browser = Client()
    browser.force_login(version.artifact.owner)
    page = browser.get("/" + version.pid, follow=True).content.decode()
    assert 'id="use-note"' in page and "holds 2 ONNX models (booster.onnx, model.onnx)" in page
    assert "/versions/1-onnx/infer?file=booster.onnx" in page  # the try-it form runs the same file
    assert "<code>x</code>" in page  # its inputs: the first file's signature
    use = snippets.for_version(version.artifact, version, signature, ["booster.onnx", "model.onnx"])
    (tmp_path / use.config_name).write_text(use.yaml)
    assert load(tmp_path / use.config_name).names("onnx_file") == ["booster.onnx"]
    assert use.cli.endswith("--file booster.onnx") and 'file="booster.onnx"' in use.load_python
    env = {**os.environ, "HPCFAIR_ENDPOINT": endpoint, "HPCFAIR_TOKEN": token}
    loaded = subprocess.run([sys.executable, "-c", use.load_python], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=120)
    assert loaded.returncode == 0 and "'y'" in loaded.stdout, loaded.stderr
    # The config and the command line as shown, run on this machine (no hub worker runs in this test): zeros in,
    # so booster.onnx (x * 2) gives zeros where model.onnx (x + 1) would give ones.
    (tmp_path / use.input_name).write_text(use.input_text)
    (tmp_path / use.config_name).write_text(use.yaml.replace('device: "cpu"', 'device: "local"'))
    ran = subprocess.run([sys.executable, "-c", use.python], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert ran.returncode == 0, ran.stderr
    with np.load(tmp_path / "outputs.npz") as saved:
        np.testing.assert_array_equal(saved["y"], np.zeros((1, 4), np.float32))
    (tmp_path / "outputs.npz").unlink()
    words = shlex.split(use.cli)
    ran = subprocess.run([sys.executable, "-m", "hpcfair.cli", *words[1:], "--device", "local"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    with np.load(tmp_path / "outputs.npz") as saved:
        np.testing.assert_array_equal(saved["y"], np.zeros((1, 4), np.float32))
    single = snippets.for_version(version.artifact, version, None, ["model.onnx"])
    assert "onnx_file" not in single.yaml and "--file" not in single.cli and not single.note
