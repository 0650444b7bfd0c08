"""A toy model family's one module, as a new family's would be (``tests/conversions/test_family_seam.py``): a
file ``TOY1`` + one float32 ``scale``, exported to an ONNX graph ``Y = X * scale`` whose reference is numpy's."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
from hpcfair.convert.exported import Exported, versions
from hpcfair.convert.signature import TensorSpec

MAGIC = b"TOY1"


def write(path: Path, scale: float) -> Path:
    path.write_bytes(MAGIC + struct.pack("<f", scale))
    return path


def export_toy(path: Path, opset: int, specs: list[TensorSpec], sample: dict | None, **_: object) -> Exported:
    """The family's export: the ONNX graph and the reference the verification compares it with."""
    from onnx import TensorProto, helper, numpy_helper

    scale = np.float32(struct.unpack("<f", path.read_bytes()[4:8])[0])
    graph = helper.make_graph([helper.make_node("Mul", ["X", "scale"], ["Y"])], "toy",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 3])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, 3])],
                              [numpy_helper.from_array(np.array(scale), "scale")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    return Exported(model, lambda feeds: [feeds["X"] * scale], [TensorSpec("X", [None, 3], "float32")],
                    "toy multiply", versions("onnx"))
