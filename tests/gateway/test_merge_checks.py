"""A merge refuses, with a code, a model whose weights lie in external data files (their location may even
point outside the version): it was an internal_error."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hpcfair.compute import CodedError
from onnx import helper, numpy_helper
from onnx.external_data_helper import convert_model_to_external_data

from hub.gateway.jobs.collaborate import refuse_external_data


def matmul_model(weights: np.ndarray) -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [None, 4])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [None, 4])],
        [numpy_helper.from_array(weights, "w")])
    return helper.make_model(graph)


def test_weights_inside_are_merged_and_weights_outside_are_refused(tmp_path):
    weights = np.ones((4, 4), np.float32)
    refuse_external_data("alice/inside@1", matmul_model(weights))  # nothing to say
    outside = matmul_model(weights)
    convert_model_to_external_data(outside, location="../../elsewhere/weights.bin", size_threshold=0)
    with pytest.raises(CodedError) as caught:
        refuse_external_data("alice/outside@1", outside)
    assert caught.value.code == "cannot_merge" and "alice/outside@1" in caught.value.detail
    assert "external data" in caught.value.detail and "elsewhere" not in caught.value.detail
