"""hpcfair.convert on its own: failures a scientist can act on, the pickle scanner and the sandbox.

Every conversion here runs in the real sandboxed subprocess with the real frameworks."""

from __future__ import annotations

from pathlib import Path

import pytest
from hpcfair.convert import ConversionError, Limits, convert_file, pickles, sandbox

from tests.conversions import models

pytestmark = [pytest.mark.slow, pytest.mark.cpu]


def convert_error(tmp_path: Path, name: str, **kwargs) -> ConversionError:
    with pytest.raises(ConversionError) as caught:
        convert_file(tmp_path / name, tmp_path / "out.onnx", **kwargs)
    assert not (tmp_path / "out.onnx").exists()
    return caught.value


def test_malicious_pickle_is_refused_and_its_payload_never_runs(tmp_path):
    marker = tmp_path / "payload-ran"
    name = models.malicious_pickle(tmp_path, marker)
    report = pickles.scan(tmp_path / name)
    assert report.complete and any("system" in item for item in report.unsafe)
    error = convert_error(tmp_path, name)
    assert error.code == "unsafe_pickle" and "system" in error.detail
    # The restricted loader stops it as well, should the scan ever miss one.
    with pytest.raises(ConversionError):
        pickles.restricted_load(tmp_path / name)
    assert not marker.exists()


def test_scanner_accepts_real_sklearn_pickles(tmp_path):
    for build in (models.random_forest, models.scaler_logistic):
        name, _ = build(tmp_path)
        report = pickles.scan(tmp_path / name)
        assert report.unsafe == [], report.unsafe
        assert any(g.startswith("sklearn.") for g in report.globals)


def test_unsupported_operator_is_named(tmp_path):
    name, meta = models.unsupported_operator(tmp_path)
    error = convert_error(tmp_path, name, inputs=meta["inputs"])
    assert error.code == "unsupported_operator"
    assert "linalg_lu_factor" in error.detail and "opset" in error.detail
    assert "at opset 17" in error.detail and "Opsets 17 to 21 were tried" in error.detail  # no opset has it


def test_corrupt_file(tmp_path):
    (tmp_path / "model.pt").write_bytes(b"\x00not a zip file at all" * 10)
    assert convert_error(tmp_path, "model.pt").code == "corrupt_file"


def test_torchscript_without_signature_says_how_to_give_one(tmp_path):
    name, _ = models.torchscript_cnn(tmp_path)
    error = convert_error(tmp_path, name)
    assert error.code == "signature_required" and "inputs:" in error.detail


def test_batch_fixed_inside_the_model_is_recorded_fixed_not_verified_dynamic(tmp_path):
    import onnx

    name, meta = models.fixed_batch(tmp_path)
    lines: list[str] = []
    report = convert_file(tmp_path / name, tmp_path / "fixed.onnx", inputs=meta["inputs"], on_line=lines.append)
    assert report["fixed_axes"] == {"x": {"0": 1}}
    assert report["inputs"][0]["shape"] == [1, 8]  # the signature says what the model really takes
    dims = onnx.load(tmp_path / "fixed.onnx").graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_value for d in dims] == [1, 8]
    assert any("fixed at the exported size" in line and "x[0]=1" in line for line in lines), lines
    assert [list(run["inputs"].values())[0]["shape"] for run in report["verification"]["runs"]] == [[1, 8]]


def test_unbuilt_keras_sequential_is_explained(tmp_path):
    import keras

    keras.Sequential([keras.layers.Dense(4), keras.layers.Dense(2)]).save(tmp_path / "unbuilt.keras")
    error = convert_error(tmp_path, "unbuilt.keras")
    assert error.code == "keras_unbuilt" and "keras.Input" in error.detail


def test_memory_limit(tmp_path):
    name = models.decompression_bomb(tmp_path)
    assert (tmp_path / name).stat().st_size < 20_000_000
    error = convert_error(tmp_path, name, limits=Limits(memory_mb=1024))
    assert error.code == "memory_limit" and "1024 MB" in error.detail


def test_time_limit(tmp_path):
    name, meta = models.bert(tmp_path)
    error = convert_error(tmp_path, name, inputs=meta["inputs"], limits=Limits(wall_seconds=2))
    assert error.code == "time_limit" and "2 s" in error.detail


def test_outputs_beyond_tolerance_are_reported_unverified(tmp_path):
    name, _ = models.random_forest(tmp_path)
    lines: list[str] = []
    report = convert_file(tmp_path / name, tmp_path / "forest.onnx", atol=0.0, rtol=0.0, on_line=lines.append)
    stages = [sandbox.parse_stage(line) for line in lines if sandbox.parse_stage(line)]
    assert [fraction for fraction, _ in stages] == [0.05, 0.6, 0.95], lines  # the stages, in order, as they come
    assert "exporting to ONNX (opset 17)" in stages[0][1] and stages[2][1].startswith("outputs differ")
    check = report["verification"]
    assert check["passed"] is False and check["max_abs_diff"] > 0
    failing = [o for run in check["runs"] for o in run["outputs"] if not o["passed"]]
    assert failing and all(o["name"] == "probabilities" for o in failing)  # labels still match exactly
    assert (tmp_path / "forest.onnx").exists()  # converted, but marked unverified


def test_savedmodel_archive_h5_and_skops(tmp_path):
    import shutil

    import keras
    import skops.io
    from sklearn.linear_model import LogisticRegression

    keras.utils.set_random_seed(6)
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="tanh"), keras.layers.Dense(3)])
    model.export(str(tmp_path / "exported"), format="tf_saved_model")
    shutil.make_archive(str(tmp_path / "mlp_savedmodel"), "zip", tmp_path / "exported")
    model.save(tmp_path / "mlp.h5")
    features, labels = models._iris_like()
    skops.io.dump(LogisticRegression().fit(features, labels), tmp_path / "logistic.skops")
    for name, fmt in (("mlp_savedmodel.zip", "savedmodel"), ("mlp.h5", "keras-h5"), ("logistic.skops", "skops")):
        report = convert_file(tmp_path / name, tmp_path / f"{name}.onnx")
        assert report["source_format"] == fmt
        assert report["verification"]["passed"] is True, report["verification"]
        assert report["verification"]["compared"] is True
    # Issue 41, point 7: outputs are named after the model's own outputs, not tf2onnx's Identity:0
    import onnx

    names = {name: [o.name for o in onnx.load(tmp_path / f"{name}.onnx").graph.output]
             for name in ("mlp_savedmodel.zip", "mlp.h5")}
    assert names["mlp_savedmodel.zip"] == ["output_0"], names  # the serving signature's key
    assert names["mlp.h5"] == ["output"], names  # a Sequential model names no outputs


def test_keras_outputs_keep_their_names_and_order(tmp_path):
    """Two named outputs of a functional Keras model, as the layers name them, in the model's order."""
    import keras
    import numpy as np
    import onnx
    import onnxruntime

    keras.utils.set_random_seed(7)
    features = keras.Input((4,), name="x")
    hidden = keras.layers.Dense(6, activation="relu")(features)
    outputs = [keras.layers.Dense(3, name="scores")(hidden), keras.layers.Dense(1, name="size")(hidden)]
    model = keras.Model(features, outputs)
    model.save(tmp_path / "two.keras")
    report = convert_file(tmp_path / "two.keras", tmp_path / "two.onnx")
    assert report["verification"]["passed"] is True, report["verification"]
    assert [o.name for o in onnx.load(tmp_path / "two.onnx").graph.output] == ["scores", "size"]
    rows = np.random.default_rng(0).normal(size=(2, 4)).astype(np.float32)
    ran = onnxruntime.InferenceSession(str(tmp_path / "two.onnx")).run(None, {"x": rows})
    expected = model(rows, training=False)
    assert [r.shape for r in ran] == [(2, 3), (2, 1)]
    assert all(np.allclose(got, np.asarray(want), atol=1e-5) for got, want in zip(ran, expected, strict=True))


def test_opset_the_runtime_cannot_run(tmp_path):
    import onnx
    from onnx import helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [None, 4])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [None, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 99)], ir_version=10)
    onnx.save(model, tmp_path / "future_opset.onnx")
    error = convert_error(tmp_path, "future_opset.onnx")
    assert error.code == "opset_unsupported" and "99" in error.detail
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=14)
    onnx.save(model, tmp_path / "future_ir.onnx")
    error = convert_error(tmp_path, "future_ir.onnx")
    assert error.code == "opset_unsupported" and "IR version 14" in error.detail


def test_coupled_inputs_keep_their_axes_dynamic_when_the_original_refuses_other_sizes(tmp_path):
    """Issue 37, point 2: resizing the node axis of a graph network's sample without its edges gives edges to
    nodes that do not exist; the original refuses them, which says nothing of the export. The node axis is
    checked again with the edges kept below the new node count and stays dynamic (it was fixed at 10
    before); the report says how it was checked, and the ONNX model runs on a graph of another size as the
    original does."""
    import numpy as np
    import onnxruntime as ort
    import torch
    from hpcfair.convert import report_notes

    name, sample, meta = models.message_passing(tmp_path)
    report = convert_file(tmp_path / name, tmp_path / "gnn.onnx", inputs=meta["inputs"],
                          sample_inputs=tmp_path / sample)
    assert report["verification"]["passed"] is True and not report.get("fixed_axes")
    assert "x[0]" in report["coupled_axes"]
    assert any("integer inputs kept below it" in note for note in report_notes(report))
    runs = [list(run["inputs"].values())[0]["shape"] for run in report["verification"]["runs"]]
    assert [7, 4] in runs  # a run at another node count, compared with the original
    rng = np.random.default_rng(7)
    x = rng.standard_normal((6, 4)).astype(np.float32)  # another node count, with edges that fit it
    edges = rng.integers(0, 6, (2, 9)).astype(np.int64)
    (got,) = ort.InferenceSession(str(tmp_path / "gnn.onnx")).run(None, {"x": x, "edge_index": edges})
    want = torch.jit.load(str(tmp_path / name))(torch.from_numpy(x), torch.from_numpy(edges)).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(("kind", "dims"), [("torchscript", 1), ("torchscript", 2), ("pt2", 2), ("script", 1),
                                            ("script", 2)])
def test_fourier_neural_operators_convert_and_run_at_fresh_grid_sizes(tmp_path, kind, dims):
    """Issue 37, point 1: an FNO (rfft/rfft2, einsums over complex weights on the lowest and highest modes,
    irfft/irfft2) was refused by both exporters. It now converts in real arithmetic and verifies; a traced one
    keeps its batch and grid dynamic and runs in ONNX Runtime on grids it never saw (odd sizes included) as the
    original does; a torch.export program keeps what its program keeps (the batch). Issue 57, point 5: the same
    model saved by ``torch.jit.script`` (its loop over the grid's axes kept in the graph) converts the same way."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    import torch

    name, meta = models.fno(tmp_path, kind, dims)
    report = convert_file(tmp_path / name, tmp_path / "fno.onnx", inputs=meta.get("inputs"))
    assert report["verification"]["passed"] is True and not report.get("fixed_axes")
    assert "real arithmetic" in report["converter"] and "spectral" in report
    assert report["verification"]["max_abs_diff"] < 1e-5
    model = onnx.load(str(tmp_path / "fno.onnx"))
    complex_types = {onnx.TensorProto.COMPLEX64, onnx.TensorProto.COMPLEX128}
    assert not {init.data_type for init in model.graph.initializer} & complex_types  # real weights only
    session = ort.InferenceSession(str(tmp_path / "fno.onnx"))
    if kind in ("torchscript", "script"):
        original = torch.jit.load(str(tmp_path / name))
        grids = [(2, 37, 1), (3, 64, 1)] if dims == 1 else [(2, 19, 27, 1), (1, 32, 9, 1)]
    else:
        original = torch.export.load(str(tmp_path / name)).module()
        grids = [(5, 16, 12, 1)]
    rng = np.random.default_rng(11)
    for shape in grids:
        u = rng.standard_normal(shape).astype(np.float32)
        (got,) = session.run(None, {session.get_inputs()[0].name: u})
        with torch.no_grad():
            want = original(torch.from_numpy(u)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_a_traced_graph_the_torchscript_exporter_cannot_take_is_exported_by_re_running_it(tmp_path):
    """Held out of every earlier zoo: a traced transformer encoder with a padding mask stops the TorchScript
    exporter ("transpose for tensor of unknown rank" inside its attention). Its graph is re-run op by op and
    exported with dynamo instead; it verifies with batch and sequence dynamic and says which route it took."""
    import numpy as np
    import onnxruntime as ort
    import torch

    name, sample, meta = models.masked_encoder(tmp_path)
    report = convert_file(tmp_path / name, tmp_path / "encoder.onnx", inputs=meta["inputs"],
                          sample_inputs=tmp_path / sample)
    assert report["verification"]["passed"] is True and not report.get("fixed_axes")
    assert "re-run op by op" in report["converter"] and "TorchScript exporter failed" in report["exporter_note"]
    rng = np.random.default_rng(5)
    ids = rng.integers(0, 50, (3, 12))
    mask = np.zeros((3, 12), bool)
    mask[0, 7:] = True
    (got,) = ort.InferenceSession(str(tmp_path / "encoder.onnx")).run(None, {"ids": ids, "mask": mask})
    with torch.no_grad():
        want = torch.jit.load(str(tmp_path / name))(torch.from_numpy(ids), torch.from_numpy(mask)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
