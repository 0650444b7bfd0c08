"""Issue 36, point 1, in the conversion library: the precision a Hugging Face folder is exported in, the
tolerances a float16 model is verified with, an exporter's failure said in words (protobuf's 2 GiB limit was
hidden behind "RuntimeError"), and a local conversion whose weights go beside the graph (the hub's path, with
the threshold at 0 MB so that a small model takes it)."""

from __future__ import annotations

import onnx
import pytest
from hpcfair.convert.core import FLOAT16_TOLERANCE, tolerances
from hpcfair.convert.exported import torch_error
from hpcfair.convert.huggingface import checkpoint_dtype
from onnx import TensorProto, helper


@pytest.mark.parametrize(("config", "dtype"), [({"dtype": "bfloat16"}, "float16"),
                                               ({"torch_dtype": "float16"}, "float16"),
                                               ({"torch_dtype": "torch.bfloat16"}, "float16"),
                                               ({"torch_dtype": "float32"}, "float32"), ({}, "float32"),
                                               ({"dtype": "int8"}, "float32")])
def test_a_folder_is_exported_in_its_checkpoints_precision(config, dtype):
    assert checkpoint_dtype(config) == dtype


def model_with_output(elem_type: int) -> onnx.ModelProto:
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", elem_type, [1])],
                              [helper.make_tensor_value_info("y", elem_type, [1])])
    return helper.make_model(graph)


def test_float16_outputs_are_compared_with_a_tolerance_that_suits_them():
    assert tolerances(model_with_output(TensorProto.FLOAT), 1e-4, 1e-3) == (1e-4, 1e-3, "")
    atol, rtol, note = tolerances(model_with_output(TensorProto.FLOAT16), 1e-4, 1e-3)
    assert (atol, rtol) == (FLOAT16_TOLERANCE, FLOAT16_TOLERANCE) and "y are float16" in note
    assert tolerances(model_with_output(TensorProto.FLOAT16), 0.1, 0.1) == (0.1, 0.1, "")  # asked wider


def test_an_exporters_failure_says_its_cause():
    protobuf = RuntimeError("The serialized model is larger than the 2GiB limit imposed by the protobuf library. "
                            "Therefore the output file must be a file path, so that the ONNX external data can be "
                            "written to the same directory.")
    error = torch_error(protobuf, 17)
    assert error.code == "conversion_failed" and "protobuf's 2 GiB limit" in error.detail
    assert "HUB_ONNX_EXTERNAL_DATA_MB" in error.detail
    half = torch_error(RuntimeError('"addmm_impl_cpu_" not implemented for \'Half\''), 17)
    assert "half-precision" in half.detail
    other = torch_error(ValueError("/secret/path/in/a/message"), 17)
    assert "ValueError in the model's or the exporter's code" in other.detail and "/secret" not in other.detail


@pytest.mark.slow
@pytest.mark.cpu  # converts in the sandbox
def test_a_local_conversion_writes_the_weights_beside_the_graph(tmp_path):
    import numpy as np
    import onnxruntime as ort
    import torch

    from tests.conversions.test_worker_external_data import llama_folder

    model = llama_folder(tmp_path / "llama", "float16")
    from hpcfair.convert import convert_file, report_notes

    report = convert_file(tmp_path / "llama", tmp_path / "out" / "model.onnx", external_data_mb=0)
    assert report["data_files"] == ["model.onnx.data"] and report["dtype"] == "float16"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["config.json", "generation_config.json",
                                                                    "model.onnx", "model.onnx.data"]
    graph = onnx.load(str(tmp_path / "out" / "model.onnx"), load_external_data=False)
    assert graph.graph.output[0].type.tensor_type.elem_type == TensorProto.FLOAT16
    assert (tmp_path / "out" / "model.onnx").stat().st_size < 100_000  # the graph only
    assert report["verification"]["passed"] and report["verification"]["atol"] == FLOAT16_TOLERANCE
    assert any("model.onnx.data" in note for note in report_notes(report))
    ids = np.array([[3, 1, 4, 1, 5]], dtype=np.int64)
    session = ort.InferenceSession(str(tmp_path / "out" / "model.onnx"), providers=["CPUExecutionProvider"])
    logits = session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})[0]
    with torch.no_grad():
        expected = model(input_ids=torch.from_numpy(ids)).logits.numpy()
    np.testing.assert_allclose(logits.astype(np.float32), expected.astype(np.float32), atol=2e-2, rtol=2e-2)


def test_optimising_a_model_with_external_data_writes_the_copies_weights_beside_them(tmp_path):
    import numpy as np
    from hpcfair.convert.optimize import optimize
    from onnx import numpy_helper
    from onnx.external_data_helper import convert_model_to_external_data

    weights = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 64])],
                              [numpy_helper.from_array(weights, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    convert_model_to_external_data(model, location="model.onnx.data", size_threshold=0)
    onnx.save_model(model, str(tmp_path / "model.onnx"))
    report = optimize(tmp_path / "model.onnx", tmp_path / "out")
    assert report["original"]["size"] > weights.nbytes  # the graph and its data file
    variants = report["variants"]
    assert variants["model.optimized.onnx"]["data_files"] == ["model.optimized.onnx.data"]
    assert variants["model.optimized.onnx"]["max_abs_diff"] < 1e-5
    for name, variant in variants.items():
        for data in variant.get("data_files", []):
            assert (tmp_path / "out" / data).is_file()
        assert variant["size"] == sum((tmp_path / "out" / n).stat().st_size
                                      for n in [name, *variant.get("data_files", [])])
