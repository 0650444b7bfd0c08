"""Issue 57, point 1: a Hugging Face folder is exported with its own head (segmentation, detection, depth,
CTC, audio classification) at the size its preprocessor gives, never as its base model; a head the
converter cannot name, or a task that would drop or invent weights, is refused by name. Random weights of
real architectures, each through the sandboxed converter and compared with transformers' own model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hpcfair.convert import ConversionError, convert_file

from tests.conversions import models

pytestmark = [pytest.mark.slow, pytest.mark.cpu]


def _transformers_outputs(folder: Path, class_name: str, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The original model's head outputs on ``feeds``, loaded by transformers itself (not by the converter)."""
    import torch
    import transformers

    model = getattr(transformers, class_name).from_pretrained(str(folder)).eval()
    with torch.no_grad():
        out = model(**{name: torch.from_numpy(value) for name, value in feeds.items()})
    return {key: value.numpy() for key, value in out.items() if isinstance(value, torch.Tensor)}


@pytest.mark.parametrize(("family", "task", "class_name", "outputs"), [
    ("segformer", "image-segmentation", "SegformerForSemanticSegmentation", ["logits"]),
    ("detr", "object-detection", "DetrForObjectDetection", ["logits", "pred_boxes"]),
    ("glpn", "depth-estimation", "GLPNForDepthEstimation", ["predicted_depth"]),
])
def test_an_image_head_is_kept_at_the_preprocessor_size(tmp_path: Path, family, task, class_name, outputs):
    import onnxruntime as ort

    name = models.hf_head_folder(tmp_path, family)
    report = convert_file(tmp_path / name, tmp_path / "out" / "model.onnx")
    assert report["task"] == task and report["hf_class"] == class_name
    assert report["verification"]["passed"] is True and report["verification"]["compared"] is True
    assert [o["name"] for o in report["outputs"]] == outputs
    assert report["inputs"] == [{"name": "pixel_values", "shape": ["batch", 3, 48, 64], "dtype": "float32"}]
    assert "preprocessor_config.json" in report["kept_files"]
    # the ONNX file answers like transformers' own model of the folder, on inputs of this test's own
    pixels = np.random.default_rng(7).uniform(-1, 1, (2, 3, 48, 64)).astype(np.float32)
    got = ort.InferenceSession(str(tmp_path / "out" / "model.onnx")).run(None, {"pixel_values": pixels})
    want = _transformers_outputs(tmp_path / name, class_name, {"pixel_values": pixels})
    assert len(got) == len(outputs)
    for output, value in zip(outputs, got, strict=True):
        assert value.shape == want[output].shape and np.allclose(value, want[output], atol=1e-4, rtol=1e-3)


@pytest.mark.parametrize(("family", "task", "outputs"), [
    ("wav2vec2_ctc", "automatic-speech-recognition", [3, 399, 12]),
    ("wav2vec2_audio_classification", "audio-classification", [3, 3]),
])
def test_a_waveform_head_takes_a_second_at_the_preprocessor_rate(tmp_path: Path, family, task, outputs):
    name = models.hf_head_folder(tmp_path, family)
    report = convert_file(tmp_path / name, tmp_path / "out" / "model.onnx")
    assert report["task"] == task and report["verification"]["passed"] is True
    assert report["inputs"] == [{"name": "input_values", "shape": ["batch", 8000], "dtype": "float32"}]
    assert [o["name"] for o in report["outputs"]] == ["logits"]
    assert report["verification"]["runs"][-1]["outputs"][0]["shape"] == outputs


def test_every_head_of_a_pretraining_model_is_kept(tmp_path: Path):
    """BERT's pretraining head has two outputs (masked-token and next-sentence logits): both are exported."""
    name = models.hf_head_folder(tmp_path, "bert_pretraining")
    report = convert_file(tmp_path / name, tmp_path / "out" / "model.onnx")
    assert report["task"] == "pretraining" and report["hf_class"] == "BertForPreTraining"
    assert [o["name"] for o in report["outputs"]] == ["prediction_logits", "seq_relationship_logits"]
    assert report["verification"]["passed"] is True


def test_an_architecture_transformers_does_not_ship_is_refused_by_name(tmp_path: Path):
    name = models.hf_head_folder(tmp_path, "custom_architecture")
    with pytest.raises(ConversionError) as caught:
        convert_file(tmp_path / name, tmp_path / "out" / "model.onnx")
    assert caught.value.code == "unsupported_format" and "LabBertForPlasmaRegression" in caught.value.detail
    assert "torch.export" in caught.value.detail


def test_a_task_that_would_drop_the_head_or_invent_one_is_refused(tmp_path: Path):
    """Asking for the base model of a segmenter would drop its decode head; asking a base encoder for a
    classifier would export a random head: both are refused, naming the weights."""
    name = models.hf_head_folder(tmp_path, "segformer")
    with pytest.raises(ConversionError) as caught:
        convert_file(tmp_path / name, tmp_path / "out" / "model.onnx", task="image-feature-extraction")
    assert caught.value.code == "unsupported_format" and "drop" in caught.value.detail
    assert "decode_head" in caught.value.detail
    base = models.hf_tiny_folder(tmp_path, "distilbert")
    with pytest.raises(ConversionError) as caught:
        convert_file(tmp_path / base, tmp_path / "base" / "model.onnx", task="token-classification")
    assert caught.value.code == "unsupported_format" and "random" in caught.value.detail
    assert "classifier" in caught.value.detail


def test_the_task_table_is_transformers_own():
    """Every head transformers' pipelines name is in the table, found from the architecture's class."""
    from hpcfair.convert.huggingface import plan, task_classes, tasks_of_architecture

    table = task_classes()
    assert {"image-segmentation", "object-detection", "depth-estimation", "audio-classification",
            "automatic-speech-recognition"} <= set(table)
    assert "object-detection" in tasks_of_architecture("DetrForObjectDetection", "detr")
    assert "image-segmentation" in tasks_of_architecture("SegformerForSemanticSegmentation", "segformer")
    assert tasks_of_architecture("BertForPreTraining", "bert") == ["pretraining"]
    assert tasks_of_architecture("T5ForConditionalGeneration", "t5")[0] == "text2text-generation"
    with pytest.raises(ConversionError) as caught:  # a config whose head does not belong to its model type
        plan(Path("/nonexistent"), {"model_type": "gpt2", "architectures": ["BertForQuestionAnswering"]}, None)
    assert "not exported as its base model" in caught.value.detail and "'gpt2'" in caught.value.detail
    config = {"model_type": "detr", "architectures": ["DetrForObjectDetection"]}
    assert plan(Path("/nonexistent"), config, None) == ("object-detection", "DetrForObjectDetection")
    assert plan(Path("/nonexistent"), config, "unspecified") == ("object-detection", "DetrForObjectDetection")
    assert json.dumps(plan(Path("/nonexistent"), {"model_type": "bert"}, None)) == '["feature-extraction", "BertModel"]'
