"""Issue 37, point 9: each failure's advice fits the file and never sends the user where they already are.
These run the real message-making code on real files (safetensors written here, a real invalid ONNX graph)."""

from __future__ import annotations

import numpy as np
import pytest
from hpcfair.convert import ConversionError, core, formats
from hpcfair.convert.exported import Exported, torch_error


def _safetensors(path, names: list[str]) -> None:
    from safetensors.numpy import save_file

    save_file({name: np.zeros((2, 3), np.float32) for name in names}, str(path))


def test_a_lone_safetensors_of_a_transformer_is_told_to_come_with_its_config(tmp_path):
    path = tmp_path / "model.safetensors"
    _safetensors(path, ["bert.embeddings.word_embeddings.weight", "bert.encoder.layer.0.attention.self.query.weight"])
    with pytest.raises(ConversionError) as caught:
        formats.detect(path)
    assert caught.value.code == "weights_only" and "Hugging Face transformer" in caught.value.detail
    assert "config.json" in caught.value.detail and "torch.export" not in caught.value.detail


def test_a_lone_safetensors_state_dict_is_told_to_save_the_model_not_to_find_a_config(tmp_path):
    """Before, every .safetensors was told to come with its config.json and tokenizer files: advice for a
    Hugging Face model, which a plain PyTorch state_dict is not."""
    path = tmp_path / "weights.safetensors"
    _safetensors(path, ["conv1.weight", "conv1.bias", "fc.weight"])
    with pytest.raises(ConversionError) as caught:
        formats.detect(path)
    detail = caught.value.detail
    assert caught.value.code == "weights_only" and "state_dict" in detail and "'conv1.bias'" in detail
    assert "torch.export.save" in detail and "config.json" not in detail and "tokenizer" not in detail


def test_a_damaged_safetensors_is_called_damaged_not_weights(tmp_path):
    path = tmp_path / "broken.safetensors"
    path.write_bytes((10**9).to_bytes(8, "little") + b"{}")
    with pytest.raises(ConversionError) as caught:
        formats.detect(path)
    assert caught.value.code == "corrupt_file"


def test_a_torch_export_program_is_not_told_to_export_with_torch_export():
    """The TorchScript exporter's way out (a .pt2) is no way out for a file that is a .pt2 already."""
    failure = RuntimeError("Exporting the operator 'aten::weird_op' to ONNX opset version 17 is not supported.")
    script = torch_error(failure, 17)
    program = torch_error(failure, 17, program=True)
    assert "aten::weird_op" in torch_error(RuntimeError("export of operator aten::weird_op failed"), 17).detail
    assert "aten::weird_op" in script.detail and "torch.export (.pt2)" in script.detail
    assert "aten::weird_op" in program.detail and "torch.export" not in program.detail
    assert "Replace that operation" in program.detail


def test_a_failed_export_is_not_told_to_try_another_opset_the_converter_tried():
    error = torch_error(ValueError("shapes do not match"), 17)
    assert error.code == "conversion_failed" and "opset" in error.detail
    assert "another opset" not in error.detail


def test_an_exporter_writing_invalid_graphs_at_every_opset_is_not_told_to_try_another(monkeypatch, tmp_path):
    """export_lowest tries every opset up to 21 when the graph is invalid; the checker's advice for an uploaded
    file ("export it again, with another opset") would send the user to what the converter just did."""
    import onnx
    from onnx import TensorProto, helper

    node = helper.make_node("Relu", ["missing"], ["y"])  # reads a value nothing defines: onnx.checker refuses it
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    invalid = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(invalid, full_check=True)
    # the family exporter is ours; it hands back the real invalid graph at every opset asked for
    monkeypatch.setattr(core, "export", lambda *args: Exported(invalid, None, [], "test exporter", {}))
    with pytest.raises(ConversionError) as caught:
        core.export_lowest(tmp_path / "model.pt", "torchscript", 17, [], None, lambda *a: None)
    assert caught.value.code == "invalid_onnx" and "Opsets 17 to 21 were tried" in caught.value.detail
    assert "another opset" not in caught.value.detail



def test_a_diffusers_folder_a_catboost_model_and_a_lightning_checkpoint_are_told_what_works(tmp_path):
    """Issue 57, point 6. diffusers, CatBoost and Lightning do not install here: the files are written in their
    layouts by hand (a UNet folder as ``save_pretrained`` writes it; a checkpoint as Lightning's
    ``trainer.save_checkpoint`` does: ``torch.save`` of a dict with its version key and the state_dict)."""
    import json

    import torch
    from safetensors.torch import save_file

    unet = tmp_path / "unet"
    unet.mkdir()
    (unet / "config.json").write_text(json.dumps({"_class_name": "UNet2DModel", "_diffusers_version": "0.31.0"}))
    save_file({"conv_in.weight": torch.zeros(4, 3, 3, 3)}, str(unet / "diffusion_pytorch_model.safetensors"))
    (tmp_path / "booster.cbm").write_bytes(b"CBM1" + bytes(64))
    torch.save({"epoch": 3, "global_step": 30, "pytorch-lightning_version": "2.4.0",
                "state_dict": {"layer.weight": torch.zeros(2, 2)}, "optimizer_states": [], "lr_schedulers": []},
               tmp_path / "epoch=3.ckpt")
    for name, code, said in (("unet", "unsupported_format", "torch.export.save(torch.export.export(unet"),
                             ("booster.cbm", "unsupported_format", "save_model('model.onnx', format='onnx')"),
                             ("epoch=3.ckpt", "weights_only", "model.to_torchscript(")):
        with pytest.raises(ConversionError) as caught:
            formats.detect(tmp_path / name)
        assert caught.value.code == code and said in caught.value.detail, caught.value.detail


@pytest.mark.slow
@pytest.mark.cpu
def test_a_keras_file_with_a_registered_custom_layer_names_it_and_the_export_that_works(tmp_path):
    """Issue 57, point 6: not "the file is damaged": the class its config names, and model.export(), whose
    SavedModel converts (checked here too)."""
    from hpcfair.convert import convert_file

    from tests.conversions import models

    keras_file, saved = models.keras_custom_layer(tmp_path)
    with pytest.raises(ConversionError) as caught:
        convert_file(tmp_path / keras_file, tmp_path / "out" / "model.onnx")
    assert caught.value.code == "unsupported_format" and "lab>Scaled" in caught.value.detail
    assert "model.export(" in caught.value.detail and "damaged" not in caught.value.detail
    report = convert_file(tmp_path / saved, tmp_path / "saved" / "model.onnx")
    assert report["verification"]["passed"] is True
