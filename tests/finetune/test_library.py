"""The fine-tuning library run directly (the hub runs the same code in its sandbox): each family improves on
its base model, the same seed gives the same metrics, and bad configs get coded errors before training."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from hpcfair.finetune import FinetuneError, Hyper, data
from hpcfair.finetune.loop import EarlyStopping
from hpcfair.finetune.run import finetune

from tests.finetune import fixtures


def run(model: Path, dataset: Path, out: Path, **hyper):
    lines: list[str] = []
    report = finetune(model, dataset, out, Hyper.from_dict({"target": "label", **hyper}),
                      stage=lambda fraction, what: lines.append(what))
    return report, lines


def improved(report) -> None:
    metric = report["metric"]
    assert report["final"][metric] > report["base"][metric] + 0.1, report
    assert report["final"]["loss"] < report["base"]["loss"]


@pytest.mark.slow
@pytest.mark.cpu  # trains with torch: over 1 s on a quiet machine
def test_torchscript_improves_and_the_seed_repeats(tmp_path):
    fixtures.blobs_csv(tmp_path / "data")
    model = fixtures.torchscript_mlp(tmp_path)
    first, lines = run(model, tmp_path / "data", tmp_path / "out1", epochs=4, learning_rate=0.01, seed=3)
    improved(first)
    assert [line for line in lines if line.startswith("epoch ")][0].startswith("epoch 1/4: train loss ")
    assert first["files"] == ["model.pt"] and (tmp_path / "out1" / "model.pt").is_file()
    assert first["inputs"] == [{"name": "input", "shape": [None, 4], "dtype": "float32"}]
    again, _ = run(model, tmp_path / "data", tmp_path / "out2", epochs=4, learning_rate=0.01, seed=3)
    assert [r | {"seconds": 0} for r in again["history"]] == [r | {"seconds": 0} for r in first["history"]]
    other, _ = run(model, tmp_path / "data", tmp_path / "out3", epochs=4, learning_rate=0.01, seed=4)
    assert other["history"][-1]["val_loss"] != first["history"][-1]["val_loss"]
    png = (tmp_path / "out1" / "loss_curve.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and struct.unpack(">II", png[16:24])[0] > 100
    with np.load(tmp_path / "out1" / "sample_inputs.npz") as sample:
        assert sample["input"].shape[1:] == (4,)


@pytest.mark.slow
@pytest.mark.cpu  # trains with torch: over 1 s on a quiet machine
def test_torch_export_freeze_backbone_trains_the_last_layer_only(tmp_path):
    import torch

    fixtures.blobs_csv(tmp_path / "data")
    model = fixtures.exported_mlp(tmp_path)
    report, _ = run(model, tmp_path / "data", tmp_path / "out", epochs=3, learning_rate=0.05, freeze="backbone")
    improved(report)
    assert report["parameters"] == {"trainable": 16 * 3 + 3, "frozen": 4 * 16 + 16}
    before = torch.export.load(str(model)).module().state_dict()
    after = torch.export.load(str(tmp_path / "out" / "model.pt2")).module().state_dict()
    assert torch.equal(before["0.weight"], after["0.weight"]) and torch.equal(before["0.bias"], after["0.bias"])
    assert not torch.equal(before["2.weight"], after["2.weight"])
    assert after["2.weight"].shape == (3, 16)
    assert torch.export.load(str(tmp_path / "out" / "model.pt2")).module()(torch.zeros(7, 4)).shape == (7, 3)


@pytest.mark.slow
@pytest.mark.cpu  # trains in this process
def test_keras_improves_and_saves_keras(tmp_path):
    fixtures.blobs_csv(tmp_path / "data")
    report, _ = run(fixtures.keras_mlp(tmp_path), tmp_path / "data", tmp_path / "out", epochs=3, learning_rate=0.02)
    improved(report)
    assert report["family"] == "keras" and report["files"] == ["model.keras"]
    assert report["inputs"][0]["shape"] == [None, 4]


@pytest.mark.slow
@pytest.mark.cpu  # fits estimators in child processes: about 4 s
def test_sklearn_partial_fit_and_warm_start(tmp_path):
    fixtures.blobs_csv(tmp_path / "data")
    sgd, _ = run(fixtures.sgd_pickle(tmp_path), tmp_path / "data", tmp_path / "sgd", epochs=3)
    improved(sgd)
    assert sgd["strategy"] == "partial_fit" and sgd["files"] == ["model.pkl"]
    boost, _ = run(fixtures.boosting_skops(tmp_path), tmp_path / "data", tmp_path / "boost", epochs=3)
    assert boost["strategy"] == "warm_start" and boost["files"] == ["model.skops"]
    improved(boost)
    assert boost["hyperparameters"]["random_state"] == 0
    import skops.io

    path = tmp_path / "boost" / "model.skops"
    estimator = skops.io.load(str(path), trusted=skops.io.get_untrusted_types(file=str(path)))
    assert estimator.n_estimators == 2 + 3 and estimator.warm_start is False


def test_sklearn_without_warm_start_is_refitted_once(tmp_path):
    from sklearn.neighbors import KNeighborsClassifier

    fixtures.blobs_csv(tmp_path / "data")
    x, y = fixtures.blobs()
    import pickle

    with open(tmp_path / "knn.pkl", "wb") as handle:
        pickle.dump(KNeighborsClassifier(3).fit(x[:6], y[:6]), handle)
    report, _ = run(tmp_path / "knn.pkl", tmp_path / "data", tmp_path / "out", epochs=5)
    assert report["strategy"] == "refit" and len(report["history"]) == 1
    improved(report)


@pytest.mark.slow
@pytest.mark.cpu  # trains in this process
def test_minilm_text_classifier(tmp_path):
    fixtures.sentences_csv(tmp_path / "data")
    report = finetune(fixtures.minilm(), tmp_path / "data", tmp_path / "out",
                      Hyper.from_dict({"target": "sentiment", "text": "text", "epochs": 2, "learning_rate": 0.05,
                                       "batch_size": 4, "validation_split": 0.25, "max_length": 16,
                                       "freeze": "backbone"}))
    assert report["family"] == "huggingface" and report["classes"] == ["negative", "positive"]
    assert report["final"]["loss"] < report["base"]["loss"]
    assert report["final"]["accuracy"] >= report["base"]["accuracy"]
    assert report["parameters"]["trainable"] == 384 * 2 + 2
    assert {"model.pt", "tokenizer.json", "vocab.txt"} <= set(report["files"])
    assert [s["name"] for s in report["inputs"]] == ["input_ids", "attention_mask"]


@pytest.mark.slow
@pytest.mark.cpu  # trains with torch: over 1 s on a quiet machine
def test_datasets_npz_and_croissant(tmp_path):
    fixtures.blobs_npz(tmp_path / "npz")
    model = fixtures.torchscript_mlp(tmp_path)
    report = finetune(model, tmp_path / "npz", tmp_path / "o1", Hyper.from_dict({"target": "y", "epochs": 2,
                                                                                  "learning_rate": 0.01}))
    assert report["data_file"] == "blobs.npz" and report["rows"] == {"train": 240, "validation": 60}
    fixtures.blobs_csv(tmp_path / "cr")
    fixtures.croissant(tmp_path / "cr")
    report = finetune(model, tmp_path / "cr", tmp_path / "o2", Hyper.from_dict({"target": "species", "epochs": 2,
                                                                                 "features": ["f1", "f2", "f3", "f4"]}))
    assert report["data_file"] == "croissant.json"
    with pytest.raises(FinetuneError) as caught:
        finetune(model, tmp_path / "cr", tmp_path / "o3", Hyper.from_dict({"target": "label"}))
    assert caught.value.code == "unknown_column" and "columns are f1, f2, f3, f4, species" in caught.value.detail


def test_schema_reads_headers_and_names_the_columns(tmp_path):
    csv_path = fixtures.blobs_csv(tmp_path)
    npz_path = fixtures.blobs_npz(tmp_path)

    def opener(path):
        return open(tmp_path / path, "rb")

    _, columns = data.schema(csv_path.name, opener, [csv_path.name])
    assert columns == {"a": "float64", "b": "float64", "c": "float64", "d": "float64", "label": "int64"}
    _, arrays = data.schema(npz_path.name, opener, [npz_path.name])
    assert arrays == {"x": "float32[300, 4]", "y": "int64[300]"}
    with pytest.raises(FinetuneError) as caught:
        data.check(columns, "lable", None, None)
    assert caught.value.code == "unknown_column" and "a, b, c, d, label" in caught.value.detail
    with pytest.raises(FinetuneError) as caught:
        data.choose(["a.csv", "b.npz"])
    assert caught.value.code == "ambiguous_dataset"
    assert data.choose(["a.csv", "b.npz"], "b.npz") == "b.npz"


@pytest.mark.slow
@pytest.mark.cpu  # trains with torch: over 1 s on a quiet machine
def test_parquet(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    x, y = fixtures.blobs()
    (tmp_path / "data").mkdir()
    pq.write_table(pa.table({"a": x[:, 0], "b": x[:, 1], "c": x[:, 2], "d": x[:, 3], "label": y}),
                   tmp_path / "data" / "blobs.parquet")
    report, _ = run(fixtures.torchscript_mlp(tmp_path), tmp_path / "data", tmp_path / "out", epochs=3,
                    learning_rate=0.01)
    improved(report)


def test_split_is_seeded_and_disjoint():
    train, val = data.split(100, 0.2, 7)
    assert len(val) == 20 and not set(train) & set(val) and len(set(train) | set(val)) == 100
    again = data.split(100, 0.2, 7)
    assert np.array_equal(again[1], val) and not np.array_equal(data.split(100, 0.2, 8)[1], val)


def test_untrainable_models_say_what_to_upload(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4])])
    onnx.save(helper.make_model(graph), str(tmp_path / "m.onnx"))
    fixtures.blobs_csv(tmp_path / "data")
    with pytest.raises(FinetuneError) as caught:
        run(tmp_path / "m.onnx", tmp_path / "data", tmp_path / "out")
    assert caught.value.code == "not_trainable"
    assert "ONNX" in caught.value.detail and "TorchScript (.pt" in caught.value.detail
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("bad, key", [({"epochs": 0}, "epochs"), ({"learning_rate": -1}, "learning_rate"),
                                      ({"validation_split": 1.5}, "validation_split"), ({"freeze": "all"}, "freeze"),
                                      ({"target": ""}, "target"), ({"features": ["label"]}, "features"),
                                      ({"epochs": True}, "epochs")])
def test_bad_hyperparameters(bad, key):
    with pytest.raises(FinetuneError) as caught:
        Hyper.from_dict({"target": "label", **bad})
    assert caught.value.code == "invalid_config" and f"task_args.{key}" in caught.value.detail


def test_early_stopping_counts_epochs_without_improvement():
    stop = EarlyStopping(2)
    assert stop.improved(1, 1.0) and stop.improved(2, 0.5)
    assert not stop.improved(3, 0.6) and not stop.stopped
    assert not stop.improved(4, 0.7) and stop.stopped and stop.best_epoch == 2
    assert not EarlyStopping(0).stopped


@pytest.mark.slow
@pytest.mark.cpu  # trains with torch: over 1 s on a quiet machine
def test_early_stopping_keeps_the_best_epoch(tmp_path):
    fixtures.blobs_csv(tmp_path / "data")
    report, lines = run(fixtures.torchscript_mlp(tmp_path), tmp_path / "data", tmp_path / "out", epochs=30,
                        learning_rate=0.5, early_stopping=2)
    history = report["history"]
    assert report["stopped_early"] and len(history) < 30
    best = min(history, key=lambda r: r["val_loss"])
    assert report["epoch_kept"] == best["epoch"] == len(history) - 2
    assert report["final"]["loss"] == best["val_loss"]
    assert any(line.startswith("stopping early") for line in lines)


def test_png_without_matplotlib_decodes():
    from hpcfair import png as encoder
    from hpcfair.finetune import curve

    png = encoder.encode(curve._raster([1, 2, 3], {"t": [1.0, 0.5, 0.2], "v": [1.1, 0.7, 0.6]}))
    assert png[12:16] == b"IHDR"
    width, height = struct.unpack(">II", png[16:24])
    idat = png[33 + 8:]
    raw = zlib.decompress(idat[:struct.unpack(">I", png[33:37])[0]])
    assert len(raw) == height * (1 + 3 * width)
    assert bytes(curve.TRAIN) in raw and bytes(curve.VALIDATION) in raw


def test_the_curve_caption_says_the_losses_in_the_epochs_order():
    """Issue 55: "from 0.1602 to 1.027" (min to max) read as if the loss rose; the caption says each loss at the
    first and last epoch, in that order, and its lowest."""
    from hpcfair.finetune import curve

    history = [{"epoch": e, "train_loss": t, "val_loss": v}
               for e, t, v in ((1, 1.027, 1.2), (2, 0.4, 0.5), (3, 0.1602, 0.55))]
    assert curve.caption(history) == (
        "Loss per epoch (1 to 3), training in blue, validation in orange: training 1.027 at epoch 1, 0.1602 at "
        "epoch 3 (lowest 0.1602, epoch 3); validation 1.2 at epoch 1, 0.55 at epoch 3 (lowest 0.5, epoch 2).")
    assert curve.caption([]) == "No epochs were run."
