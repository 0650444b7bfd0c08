"""The ``finetune`` task from the client: config checks, a local run (the same sandbox the hub uses), and the
tour's fine-tune (docs/getting-started/tour.md: its finetune.yaml as written) against the embedded hub (the demo MLP
fine-tuned on the demo dataset, its ONNX downloaded)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from hpcfair import modelAPI
from hpcfair.config import load
from hpcfair.errors import ConfigError, HubError

from tests.finetune import fixtures

TOUR = Path(__file__).resolve().parents[2] / "docs" / "getting-started" / "tour.md"


def config(**task) -> dict:
    return {"general_args": {"task": "finetune"}, "device_args": {"device": "local"},
            "model_args": {"model_file": ["mlp.pt"]}, "task_args": {"dataset": "data", "target": "label", **task}}


def test_config_keys_are_checked():
    assert load(config(epochs=3, freeze="backbone", seed=1)).task.freeze == "backbone"
    with pytest.raises(ConfigError) as caught:
        load(config(epochs=0))
    assert caught.value.key == "task_args.epochs"
    with pytest.raises(ConfigError) as caught:
        load(config(freze="backbone"))
    assert "did you mean freeze" in str(caught.value)


def test_unknown_column_before_any_work(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fixtures.torchscript_mlp(tmp_path)
    fixtures.blobs_csv(tmp_path / "data")
    with pytest.raises(HubError) as caught:
        modelAPI("http://127.0.0.1:9").finetune(config(target="lable", epochs=1))
    assert caught.value.code == "unknown_column" and "a, b, c, d, label" in caught.value.message


@pytest.mark.slow
@pytest.mark.cpu  # trains in this process
def test_local_run_writes_a_verified_onnx(tmp_path, monkeypatch):
    import onnxruntime as ort

    monkeypatch.chdir(tmp_path)
    fixtures.torchscript_mlp(tmp_path)
    fixtures.blobs_csv(tmp_path / "data")
    cfg = config(epochs=3, learning_rate=0.01)
    cfg["out_args"] = {"export_file": ["tuned.onnx"]}
    report = modelAPI("http://127.0.0.1:9").finetune(cfg)  # no hub needed
    assert report["where"] == "local" and report["final"]["accuracy"] > report["base"]["accuracy"] + 0.1
    x, y = fixtures.blobs()
    session = ort.InferenceSession(str(tmp_path / "tuned.onnx"))
    logits = session.run(None, {session.get_inputs()[0].name: x})[0]
    assert np.mean(logits.argmax(axis=1) == y) > 0.8


@pytest.mark.slow
@pytest.mark.worker
def test_readme_tour_finetunes_the_demo_mlp(embedded_hub, tmp_path, monkeypatch):
    import onnxruntime as ort

    url, token, _ = embedded_hub
    monkeypatch.chdir(tmp_path)
    api = modelAPI(url, token)
    tour = TOUR.read_text()
    start = tour.index("cat > finetune.yaml <<'YAML'\n") + len("cat > finetune.yaml <<'YAML'\n")
    cfg = yaml.safe_load(tour[start:tour.index("\nYAML\n", start)])  # the tour's config, as written
    assert cfg["model_args"]["model_file"] == ["demo/iris-mlp@1.0"] and cfg["task_args"]["epochs"] == 20
    result = api.finetune(cfg)
    assert result["where"] == "hub" and result["version"] == "demo/iris-mlp-finetuned@1"
    assert result["final"]["accuracy"] > result["base"]["accuracy"] + 0.2
    info = api.client.resolve(result["pid"])
    assert info["metadata"]["training"]["dataset"] == api.client.resolve("demo/synthetic-iris@1.0")["pid"]
    session = ort.InferenceSession(str(tmp_path / "iris-tuned.onnx"))
    assert session.get_inputs()[0].name == "measurements"
    rows = np.array([[5.0, 3.4, 1.5, 0.2], [6.6, 3.0, 5.6, 2.0]], dtype=np.float32)
    assert session.run(None, {"measurements": rows})[0].shape == (2, 3)
