"""Small ONNX models built with onnx.helper (random weights, fixed seed) for the gateway tests and
bench/infer.py: the 784-256-10 MLP and a small CNN."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def _model(nodes, inputs, outputs, initializers, name: str) -> bytes:
    graph = helper.make_graph(nodes, name, inputs, outputs, [numpy_helper.from_array(a, n) for n, a in initializers])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="hpcfair-tests")
    model.ir_version = 9
    onnx.checker.check_model(model)
    return model.SerializeToString()


def mlp(seed: int = 0, hidden: int = 256) -> bytes:
    """x [batch, 784] float32 -> logits [batch, 10]: Gemm, Relu, Gemm."""
    rng = np.random.default_rng(seed)
    w1 = (rng.standard_normal((784, hidden)) * 0.05).astype(np.float32)
    b1 = (rng.standard_normal(hidden) * 0.05).astype(np.float32)
    w2 = (rng.standard_normal((hidden, 10)) * 0.05).astype(np.float32)
    b2 = (rng.standard_normal(10) * 0.05).astype(np.float32)
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"]), helper.make_node("Relu", ["h"], ["hr"]),
             helper.make_node("Gemm", ["hr", "w2", "b2"], ["logits"])]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 784])],
                  [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])],
                  [("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2)], "mlp")


def cnn(seed: int = 0) -> bytes:
    """image [batch, 1, 28, 28] -> logits [batch, 10]: Conv 8x3x3, Relu, MaxPool 2, Flatten, Gemm."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((8, 1, 3, 3)) * 0.2).astype(np.float32)
    b = np.zeros(8, np.float32)
    fc = (rng.standard_normal((8 * 13 * 13, 10)) * 0.02).astype(np.float32)
    fb = np.zeros(10, np.float32)
    nodes = [helper.make_node("Conv", ["image", "w", "b"], ["c"], kernel_shape=[3, 3]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"], axis=1),
             helper.make_node("Gemm", ["f", "fc", "fb"], ["logits"])]
    return _model(nodes, [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 1, 28, 28])],
                  [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])],
                  [("w", w), ("b", b), ("fc", fc), ("fb", fb)], "cnn")


def two_inputs() -> bytes:
    """a [n, 3] float32, k [n, 1] int64 -> y = a * k: for name, dtype and axis checks."""
    nodes = [helper.make_node("Cast", ["k"], ["kf"], to=TensorProto.FLOAT), helper.make_node("Mul", ["a", "kf"], ["y"])]
    return _model(nodes, [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["n", 3]),
                          helper.make_tensor_value_info("k", TensorProto.INT64, ["n", 1])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])], [], "two_inputs")


def reference(model: bytes, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The outputs of bare ONNX Runtime in this process (the floor the gateway is compared with)."""
    import onnxruntime as ort

    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds), strict=True))


def slow(size: int = 1024, repeats: int = 8) -> bytes:
    """x [n, size] -> y: ``repeats`` MatMuls with one size x size matrix, to take a while."""
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((size, size)) / np.sqrt(size)).astype(np.float32)
    nodes, previous = [], "x"
    for index in range(repeats):
        out = "y" if index == repeats - 1 else f"h{index}"
        nodes.append(helper.make_node("MatMul", [previous, "w"], [out]))
        previous = out
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", size])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", size])], [("w", w)], "slow")


def fill(value: float = 1.0) -> bytes:
    """n [2] int64 -> total: ConstantOfShape(n) then ReduceSum, a graph that allocates whatever it is asked."""
    nodes = [helper.make_node("ConstantOfShape", ["n"], ["big"],
                              value=helper.make_tensor("v", TensorProto.FLOAT, [1], [value])),
             helper.make_node("ReduceSum", ["big"], ["total"], keepdims=0)]
    return _model(nodes, [helper.make_tensor_value_info("n", TensorProto.INT64, [2])],
                  [helper.make_tensor_value_info("total", TensorProto.FLOAT, [])], [], "fill")


def grid(value: float = 1.0) -> bytes:
    """n [2] int64 -> grid [n0, n1] float32 of ``value``: a small request whose answer is as large as asked."""
    nodes = [helper.make_node("ConstantOfShape", ["n"], ["grid"],
                              value=helper.make_tensor("v", TensorProto.FLOAT, [1], [value]))]
    return _model(nodes, [helper.make_tensor_value_info("n", TensorProto.INT64, [2])],
                  [helper.make_tensor_value_info("grid", TensorProto.FLOAT, ["rows", "columns"])], [], "grid")


def tile_text() -> bytes:
    """s [1] string, r [1] int64 -> y: Tile of strings, whose characters live outside ONNX Runtime's arena."""
    nodes = [helper.make_node("Tile", ["s", "r"], ["tiled"]),
             helper.make_node("Shape", ["tiled"], ["y"])]
    return _model(nodes, [helper.make_tensor_value_info("s", TensorProto.STRING, [1]),
                          helper.make_tensor_value_info("r", TensorProto.INT64, [1])],
                  [helper.make_tensor_value_info("y", TensorProto.INT64, [1])], [], "tile_text")


def one_long_kernel(size: int = 6000) -> bytes:
    """n [2] int64 -> total: one MatMul of two size x size matrices made in the graph: a single kernel that
    takes seconds and never looks at ``RunOptions.terminate``."""
    nodes = [helper.make_node("ConstantOfShape", ["n"], ["a"],
                              value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.5])),
             helper.make_node("MatMul", ["a", "a"], ["p"]),
             helper.make_node("ReduceSum", ["p"], ["total"], keepdims=0)]
    return _model(nodes, [helper.make_tensor_value_info("n", TensorProto.INT64, [2])],
                  [helper.make_tensor_value_info("total", TensorProto.FLOAT, [])], [], "one_long_kernel")


def fan_out(width: int = 10) -> bytes:
    """h [n, width] -> p = h, q = -h, r = |h|: three outputs, for chains whose joints must say what feeds what."""
    nodes = [helper.make_node("Identity", ["h"], ["p"]), helper.make_node("Neg", ["h"], ["q"]),
             helper.make_node("Abs", ["h"], ["r"])]
    return _model(nodes, [helper.make_tensor_value_info("h", TensorProto.FLOAT, ["n", width])],
                  [helper.make_tensor_value_info(name, TensorProto.FLOAT, ["n", width]) for name in "pqr"], [], "fan")


def add_two(width: int = 10) -> bytes:
    """a [n, width], b [n, width] -> y = a + b."""
    nodes = [helper.make_node("Add", ["a", "b"], ["y"])]
    return _model(nodes, [helper.make_tensor_value_info(name, TensorProto.FLOAT, ["n", width]) for name in "ab"],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", width])], [], "add_two")
