"""A local conversion config gives what a model file does not record (issue 21): ``inputs`` with null for
dynamic axes, ``task_args.input`` as the data to verify on, ``memory_mb``; converted in the real sandbox."""

from __future__ import annotations

import numpy as np
import pytest
from hpcfair.api import modelAPI
from hpcfair.errors import HubError

from tests.conversions import models

pytestmark = [pytest.mark.slow, pytest.mark.cpu]


def test_torchscript_converts_with_the_configs_inputs_and_verifies_on_task_args_input(tmp_path):
    name, _ = models.torchscript_cnn(tmp_path)
    image = np.random.default_rng(3).uniform(size=(2, 1, 28, 28)).astype(np.float32)
    np.save(tmp_path / "digits.npy", image)
    config = {"general_args": {"task": "conversion", "backend": "pt"},
              "model_args": {"model_name": "cnn", "model_file": str(tmp_path / name), "onnx_version": 13},
              "task_args": {"input": str(tmp_path / "digits.npy"), "memory_mb": 6000,
                            "inputs": [{"name": "image", "shape": [None, 1, 28, 28], "dtype": "float32"}]},
              "out_args": {"export_file": str(tmp_path / "cnn.onnx")}}
    api = modelAPI("http://127.0.0.1:9")
    [report] = api.conversion(config)
    assert report["verified"] is True and report["opset"] == 13 and report["notes"] == []
    runs = report["verification"]["runs"]
    assert runs[0]["inputs"]["image"] == {"shape": [2, 1, 28, 28], "dtype": "float32", "source": "sample inputs"}
    assert runs[1]["inputs"]["image"]["shape"] == [4, 1, 28, 28]  # the batch, run at a second size

    without = {**config, "task_args": {"input": str(tmp_path / "digits.npy")}}  # a sample alone gives the shapes
    assert api.conversion(without)[0]["verified"] is True

    config["task_args"] = {"inputs": {"other": []}}
    with pytest.raises(HubError) as caught:
        api.conversion(config)
    assert "task_args.inputs" in str(caught.value) and "'other' is not one of the models (cnn" in str(caught.value)
    config["task_args"] = {"memory_mb": 300}  # far too little for torch: a coded error that says what to do
    with pytest.raises(HubError) as caught:
        api.conversion(config)
    assert caught.value.code == "memory_limit" and "memory_mb" in str(caught.value) and name in str(caught.value)


def test_a_hugging_face_archive_converts_locally_with_its_own_head(tmp_path):
    """A task that would drop the folder's classifier head is refused by name (issue 57: the export would not be
    the uploaded model); without one, the folder's own architecture converts, head and all."""
    from hpcfair.errors import HubError

    name, _ = models.hf_classifier_zip(tmp_path)
    config = {"general_args": {"task": "conversion"},
              "model_args": {"model_name": "classifier", "model_file": str(tmp_path / name)},
              "task_args": {"metadata": {"task": "feature-extraction"}},  # the encoder alone: it drops the head
              "out_args": {"export_file": str(tmp_path / "out" / "encoder.onnx")}}
    with pytest.raises(HubError) as refused:
        modelAPI("http://127.0.0.1:9").conversion(config)
    said = str(refused.value)
    assert "unsupported_format" in said and "would drop 2 of its weights" in said and "without a task" in said
    del config["task_args"]
    config["out_args"]["export_file"] = str(tmp_path / "out" / "classifier.onnx")
    [report] = modelAPI("http://127.0.0.1:9").conversion(config)
    assert report["format"] == "huggingface" and report["verified"] is True
    assert [o["name"] for o in report["verification"]["runs"][0]["outputs"]] == ["logits"]
    assert (tmp_path / "out" / "tokenizer.json").is_file()  # the tokenizer beside the ONNX file


@pytest.mark.parametrize(("backend", "fmt"), [("xgboost", "xgboost"), ("lightgbm", "lightgbm"),
                                              ("huggingface", "huggingface"), ("transformers", "huggingface"),
                                              ("scikit-learn", "pickle"), ("onnx", "onnx")])
def test_every_family_the_converter_takes_has_a_backend_name(backend, fmt):
    from hpcfair import config
    from hpcfair.convert.formats import check_backend

    loaded = config.load({"general_args": {"task": "conversion", "backend": backend},
                          "model_args": {"model_file": "m.bin"}})
    assert loaded.args.general_args.backend == backend
    check_backend(fmt, backend, "m")  # the file's family matches: nothing to say


def test_a_huggingface_backend_wants_a_folder_not_any_pytorch_file():
    from hpcfair.convert import ConversionError
    from hpcfair.convert.formats import check_backend

    with pytest.raises(ConversionError) as caught:
        check_backend("torchscript", "huggingface", "model.pt")
    assert caught.value.code == "backend_mismatch"


def test_a_typo_in_per_model_inputs_is_refused_before_any_model_converts(tmp_path, monkeypatch):
    from hpcfair import _conversion, config

    for name in ("a.pt", "b.pt"):
        (tmp_path / name).write_bytes(b"not converted: the config is refused first")
    ran = []
    monkeypatch.setattr(_conversion, "convert_here", lambda *args, **kwargs: ran.append(args))
    loaded = config.load({"general_args": {"task": "conversion"},
                          "model_args": {"model_name": ["encoder", "decoder"],
                                         "model_file": [str(tmp_path / "a.pt"), str(tmp_path / "b.pt")]},
                          "task_args": {"inputs": {"encoder": [{"name": "x", "shape": [1, 4]}],
                                                   "decodr": [{"name": "h", "shape": [1, 8]}]}}})
    with pytest.raises(HubError, match="'decodr' is not one of the models \\(encoder, decoder"):
        _conversion.convert(None, loaded)
    assert ran == []


def test_a_model_left_out_of_per_model_inputs_simply_has_none(tmp_path):
    from hpcfair import config

    loaded = config.load({"general_args": {"task": "conversion"},
                          "model_args": {"model_name": ["encoder", "decoder"], "model_file": ["a.pt", "b.pt"]},
                          "task_args": {"inputs": {"encoder": [{"name": "x", "shape": [1, 4]}]}}})
    assert loaded.conversion_options(1, "decoder")["inputs"] is None
    assert loaded.conversion_options(0, "encoder")["inputs"] == [{"name": "x", "shape": [1, 4]}]
