"""Real architectures, randomly initialised (nothing is downloaded), saved the way their users save
them. Each builder writes into ``directory`` and returns (file name, version metadata)."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

Built = tuple[str, dict[str, Any]]


def torchscript_cnn(directory: Path) -> Built:
    import torch

    class CNN(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(1, 8, 3)
            self.pool = torch.nn.MaxPool2d(2)
            self.head = torch.nn.Linear(8 * 13 * 13, 10)

        def forward(self, x):
            return self.head(self.pool(torch.relu(self.conv(x))).flatten(1))

    torch.manual_seed(0)
    torch.jit.script(CNN().eval()).save(str(directory / "cnn.pt"))
    return "cnn.pt", {"inputs": [{"name": "image", "shape": [None, 1, 28, 28], "dtype": "float32"}]}


def transformer_encoder(directory: Path) -> Built:
    import torch

    torch.manual_seed(1)
    layer = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).eval()
    batch = torch.export.Dim("batch", min=1, max=64)
    program = torch.export.export(encoder, (torch.randn(2, 10, 32),), dynamic_shapes=({0: batch},))
    torch.export.save(program, str(directory / "encoder.pt2"))
    return "encoder.pt2", {}


def bert(directory: Path) -> Built:
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(2)
    config = BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                        vocab_size=1000, max_position_embeddings=128)
    model = BertModel(config).eval()

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = model

        def forward(self, input_ids, attention_mask):
            out = self.bert(input_ids=input_ids, attention_mask=attention_mask)
            return out.last_hidden_state, out.pooler_output

    ids = torch.randint(0, 1000, (2, 16))
    batch, seq = torch.export.Dim("batch", min=1, max=32), torch.export.Dim("seq", min=2, max=128)
    program = torch.export.export(Encoder(), (ids, torch.ones_like(ids)),
                                  dynamic_shapes=({0: batch, 1: seq}, {0: batch, 1: seq}))
    torch.export.save(program, str(directory / "bert.pt2"))
    return "bert.pt2", {"inputs": [{"name": "input_ids", "shape": [None, None], "dtype": "int64", "high": 1000},
                                   {"name": "attention_mask", "shape": [None, None], "dtype": "int64", "low": 1,
                                    "high": 2}]}


def keras_sequential(directory: Path) -> Built:
    import keras

    keras.utils.set_random_seed(3)
    model = keras.Sequential([
        keras.Input((28, 28, 1)), keras.layers.Conv2D(8, 3, activation="relu"), keras.layers.MaxPooling2D(),
        keras.layers.Flatten(), keras.layers.Dense(10),
    ])
    model.save(directory / "sequential.keras")
    return "sequential.keras", {}


def mobilenet(directory: Path) -> Built:
    import keras

    keras.utils.set_random_seed(4)
    model = keras.applications.MobileNetV2(weights=None, classifier_activation=None, input_shape=(96, 96, 3),
                                           alpha=0.35)
    rng = np.random.default_rng(4)
    for layer in model.layers:  # random BatchNorm statistics, so that the layers do something
        if isinstance(layer, keras.layers.BatchNormalization):
            mean, var = layer.moving_mean, layer.moving_variance
            mean.assign(rng.normal(0, 0.1, mean.shape).astype("float32"))
            var.assign(rng.uniform(0.5, 1.5, var.shape).astype("float32"))
    model.save(directory / "mobilenet_v2.keras")
    return "mobilenet_v2.keras", {}


def _iris_like() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    features = rng.normal(size=(120, 4))
    labels = (features[:, 0] + features[:, 1] > 0).astype(int) + (features[:, 2] > 1).astype(int)
    return features, labels


def random_forest(directory: Path) -> Built:
    from sklearn.ensemble import RandomForestClassifier

    features, labels = _iris_like()
    model = RandomForestClassifier(n_estimators=10, max_depth=5, random_state=0).fit(features, labels)
    with open(directory / "forest.pkl", "wb") as handle:
        pickle.dump(model, handle)
    return "forest.pkl", {}


def scaler_logistic(directory: Path) -> Built:
    import joblib
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    features, labels = _iris_like()
    joblib.dump(make_pipeline(StandardScaler(), LogisticRegression()).fit(features, labels), directory / "pipe.joblib")
    return "pipe.joblib", {}


ARCHITECTURES = {
    "torchscript_cnn": torchscript_cnn,
    "transformer_encoder": transformer_encoder,
    "bert": bert,
    "keras_sequential": keras_sequential,
    "mobilenet_v2": mobilenet,
    "random_forest": random_forest,
    "scaler_logistic": scaler_logistic,
}


# --- files that must fail ---------------------------------------------------------------------------


class Payload:
    """Unpickling this runs a shell command that creates ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def malicious_pickle(directory: Path, marker: Path) -> str:
    with open(directory / "model.pkl", "wb") as handle:
        pickle.dump({"model": Payload(marker)}, handle)
    return "model.pkl"


def unsupported_operator(directory: Path) -> Built:
    import torch

    class LU(torch.nn.Module):
        def forward(self, x):
            return torch.linalg.lu_factor(x)[0]

    torch.jit.script(LU()).save(str(directory / "lu.pt"))
    return "lu.pt", {"inputs": [{"name": "x", "shape": [None, 4, 4]}]}


def fixed_batch(directory: Path) -> Built:
    """Declares a dynamic batch but reshapes to batch 1 inside: the second verification run fails."""
    import torch

    class Fixed(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(8, 2)

        def forward(self, x):
            return self.linear(x).reshape(1, 2)

    torch.jit.trace(Fixed().eval(), torch.randn(1, 8)).save(str(directory / "fixed.pt"))
    return "fixed.pt", {"inputs": [{"name": "x", "shape": [None, 8]}]}


def decompression_bomb(directory: Path) -> str:
    """A 1 MB compressed joblib file that unpacks to 1.2 GB of scaler statistics."""
    import joblib
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler().fit(np.zeros((2, 4)))
    scaler.mean_ = np.zeros(150_000_000)
    joblib.dump(scaler, directory / "bomb.joblib", compress=("zlib", 3))
    return "bomb.joblib"


def _gpt2(seed: int):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(n_layer=2, n_head=4, n_embd=64, vocab_size=1000, n_positions=128, use_cache=False)
    model = GPT2LMHeadModel(config).eval()

    class LM(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gpt2 = model

        def forward(self, input_ids):
            return self.gpt2(input_ids=input_ids, use_cache=False).logits

    return LM().eval()


GPT2_INPUTS = [{"name": "input_ids", "shape": [None, None], "dtype": "int64", "high": 1000}]


def gpt2_export(directory: Path) -> Built:
    """GPT-2 (2 layers, random) as a torch.export program with dynamic batch and sequence."""
    import torch

    ids = torch.randint(0, 1000, (2, 16))
    batch, seq = torch.export.Dim("batch", min=1, max=32), torch.export.Dim("seq", min=2, max=128)
    program = torch.export.export(_gpt2(7), (ids,), dynamic_shapes=({0: batch, 1: seq},))
    torch.export.save(program, str(directory / "gpt2.pt2"))
    return "gpt2.pt2", {"inputs": GPT2_INPUTS}


def gpt2_traced(directory: Path) -> Built:
    """GPT-2 (2 layers, random) traced to TorchScript, as most tutorials do."""
    import torch

    with torch.no_grad():
        traced = torch.jit.trace(_gpt2(8), (torch.randint(0, 1000, (1, 12)),), strict=False)
    traced.save(str(directory / "gpt2_traced.pt"))
    return "gpt2_traced.pt", {"inputs": GPT2_INPUTS}


def _boosting_data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(9)
    features = rng.normal(size=(300, 6)).astype(np.float32)
    return features, (features[:, 0] > 0).astype(int) + (features[:, 1] > 0.5).astype(int)


def xgboost_json(directory: Path) -> Built:
    """A 3-class XGBoost booster saved as XGBoost documents it: booster.save_model("....json")."""
    import xgboost

    features, labels = _boosting_data()
    booster = xgboost.train({"objective": "multi:softprob", "num_class": 3, "max_depth": 3, "seed": 0},
                            xgboost.DMatrix(features, label=labels), 20)
    booster.save_model(directory / "xgboost_model.json")
    return "xgboost_model.json", {}


def xgboost_ubj_regressor(directory: Path) -> Built:
    import xgboost

    features, labels = _boosting_data()
    model = xgboost.XGBRegressor(n_estimators=20, max_depth=3, random_state=0).fit(features, labels * 1.5)
    model.save_model(directory / "regressor.ubj")
    return "regressor.ubj", {}


def lightgbm_text(directory: Path) -> Built:
    """A binary LightGBM classifier's text model (booster_.save_model)."""
    import lightgbm

    features, labels = _boosting_data()
    model = lightgbm.LGBMClassifier(n_estimators=20, num_leaves=8, random_state=0, verbose=-1)
    model.fit(features, (labels > 0).astype(int))
    model.booster_.save_model(directory / "lightgbm_model.txt")
    return "lightgbm_model.txt", {}


def dataframe_pipeline(directory: Path) -> Built:
    """Pipeline(ColumnTransformer(numeric + categorical columns), classifier) fitted on a pandas DataFrame,
    with the CSV of rows it was checked on (what a scientist has beside such a model)."""
    import joblib
    import pandas as pd
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import GradientBoostingClassifier
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import Pipeline, make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    rng = np.random.default_rng(10)
    rows = 200
    frame = pd.DataFrame({"age": rng.integers(18, 90, rows).astype(float), "income": rng.normal(50, 15, rows),
                          "city": rng.choice(["Lyon", "Oslo", "Porto", "Graz"], rows),
                          "smoker": rng.choice(["yes", "no"], rows)})
    labels = ((frame["age"] > 50) ^ (frame["city"] == "Oslo")).astype(int)
    prepare = ColumnTransformer([
        ("numbers", make_pipeline(SimpleImputer(), StandardScaler()), ["age", "income"]),
        ("words", OneHotEncoder(handle_unknown="ignore"), ["city", "smoker"]),
    ])
    model = Pipeline([("prepare", prepare), ("classify", GradientBoostingClassifier(n_estimators=20, random_state=0))])
    model.fit(frame, labels)
    joblib.dump(model, directory / "patients.joblib")
    frame.head(12).to_csv(directory / "patients.csv", index=False)
    return "patients.joblib", {"sample_inputs": "patients.csv"}


def hf_classifier_zip(directory: Path) -> Built:
    """A small BERT sequence classifier (random) as Hugging Face saves it, zipped, with a WordPiece tokenizer."""
    import shutil

    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    torch.manual_seed(11)
    folder = directory / "bert_classifier"
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *[f"word{i}" for i in range(200)]]
    folder.mkdir(exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(words) + "\n")
    BertTokenizerFast(vocab_file=str(folder / "vocab.txt")).save_pretrained(folder)
    config = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                        vocab_size=len(words), max_position_embeddings=64, num_labels=3)
    BertForSequenceClassification(config).eval().save_pretrained(folder)
    shutil.make_archive(str(directory / "bert_classifier"), "zip", folder)
    return "bert_classifier.zip", {"task": "text-classification"}


def hf_gpt2_folder(directory: Path) -> Built:
    """A 2-layer GPT-2 language model (random) saved with save_pretrained: a folder, task from its config."""
    folder = directory / "gpt2_hf"
    _gpt2(12).gpt2.save_pretrained(folder)
    return "gpt2_hf", {}


def hf_tiny_folder(directory: Path, family: str) -> str:
    """A tiny random Hugging Face folder (save_pretrained, no tokenizer files) of one of the families a
    scientist brings beyond BERT and GPT-2: DistilBERT (no token types), DeBERTa-v2 without a type vocabulary
    (token types ignored), T5 (encoder-decoder), a question-answering head (two outputs), ViT (images),
    Whisper (speech: refused)."""
    import torch
    import transformers as hf

    torch.manual_seed(5)
    tiny = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64}
    build = {
        "distilbert": lambda: hf.DistilBertModel(hf.DistilBertConfig(dim=32, n_layers=2, n_heads=4, hidden_dim=64,
                                                                     vocab_size=200)),
        "deberta_v2": lambda: hf.DebertaV2Model(hf.DebertaV2Config(vocab_size=200, type_vocab_size=0, **tiny)),
        "t5": lambda: hf.T5Model(hf.T5Config(vocab_size=200, d_model=32, d_kv=8, d_ff=64, num_layers=2,
                                             num_heads=4)),
        "bert_qa": lambda: hf.BertForQuestionAnswering(hf.BertConfig(vocab_size=200, **tiny)),
        "vit": lambda: hf.ViTForImageClassification(hf.ViTConfig(image_size=32, patch_size=8, num_labels=4, **tiny)),
        "whisper": lambda: hf.WhisperModel(hf.WhisperConfig(
            vocab_size=200, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
            decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, num_mel_bins=16,
            max_source_positions=50, max_target_positions=32, pad_token_id=0, bos_token_id=1, eos_token_id=2,
            decoder_start_token_id=1)),
    }[family]
    build().eval().save_pretrained(directory / family)
    return family


def sklearn_family(directory: Path, family: str) -> str:
    """A fitted scikit-learn estimator beyond classifiers with probabilities, joblib-dumped: a regressor, a
    classifier with decision scores only, a clusterer, an outlier detector, histogram gradient boosting, soft
    voting."""
    import joblib
    from sklearn import cluster, ensemble, linear_model, svm, tree

    features, labels = _iris_like()
    model = {
        "ridge": lambda: linear_model.Ridge().fit(features, features[:, 0]),
        "forest_regressor": lambda: ensemble.RandomForestRegressor(n_estimators=5, random_state=0).fit(
            features, features[:, 0]),
        "svr": lambda: svm.SVR().fit(features, features[:, 0]),
        "sgd_binary": lambda: linear_model.SGDClassifier(random_state=0).fit(features, labels > 0),
        "kmeans": lambda: cluster.KMeans(3, n_init=2, random_state=0).fit(features),
        "isolation_forest": lambda: ensemble.IsolationForest(n_estimators=5, random_state=0).fit(features),
        "hist_gradient_boosting": lambda: ensemble.HistGradientBoostingClassifier(max_iter=5).fit(features, labels),
        "soft_voting": lambda: ensemble.VotingClassifier(
            [("lr", linear_model.LogisticRegression()), ("dt", tree.DecisionTreeClassifier(random_state=0))],
            voting="soft").fit(features, labels),
    }[family]()
    joblib.dump(model, directory / f"{family}.joblib")
    return f"{family}.joblib"


def keras_gelu(directory: Path) -> str:
    """A Keras 3 model with the exact GELU (TensorFlow's Erfc, which tf2onnx does not translate by itself)."""
    import keras

    keras.utils.set_random_seed(3)
    inputs = keras.Input((6,), name="x")
    hidden = keras.layers.Dense(8, activation="gelu")(inputs)
    keras.Model(inputs, keras.layers.Dense(2)(hidden)).save(directory / "gelu.keras")
    return "gelu.keras"


def message_passing(directory: Path) -> tuple[str, str, dict]:
    """A message-passing graph layer (TorchScript): node features x [nodes, 4] and an edge list
    edge_index [2, edges] whose values must stay below the node count; each node sums its neighbours'
    transformed features. Returns the model, a sample .npz (10 nodes, 20 edges) and its declared inputs."""
    import numpy as np
    import torch

    class MessagePassing(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.message = torch.nn.Linear(4, 8)

        def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
            messages = self.message(x.index_select(0, edge_index[0]))  # [edges, 8]
            nodes = torch.arange(x.shape[0], dtype=edge_index.dtype)
            incoming = (edge_index[1].unsqueeze(0) == nodes.unsqueeze(1)).to(x.dtype)  # [nodes, edges]
            return torch.relu(incoming @ messages)

    torch.manual_seed(3)
    torch.jit.script(MessagePassing().eval()).save(str(directory / "gnn.pt"))
    rng = np.random.default_rng(3)
    np.savez(directory / "graph.npz", x=rng.standard_normal((10, 4)).astype(np.float32),
             edge_index=rng.integers(0, 10, (2, 20)).astype(np.int64))
    return "gnn.pt", "graph.npz", {"inputs": [{"name": "x", "shape": ["nodes", 4], "dtype": "float32"},
                                              {"name": "edge_index", "shape": [2, "edges"], "dtype": "int64"}]}


def hf_clip_folder(directory: Path) -> str:
    """A tiny random CLIP (text and image towers) saved with save_pretrained: a multimodal Hugging Face folder."""
    import torch
    from transformers import CLIPConfig, CLIPModel

    torch.manual_seed(0)
    tower = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2}
    config = CLIPConfig(text_config={**tower, "vocab_size": 100, "max_position_embeddings": 32,
                                     "bos_token_id": 0, "eos_token_id": 1},
                        vision_config={**tower, "image_size": 32, "patch_size": 8}, projection_dim=16)
    CLIPModel(config).eval().save_pretrained(directory / "clip_tiny")
    return "clip_tiny"


def fno(directory: Path, kind: str = "torchscript", dims: int = 2) -> Built:
    """A Fourier Neural Operator as in Li et al.'s reference code (neuraloperator's FNO1d/FNO2d): a lifting
    layer over the field and its grid, spectral layers (``rfft``/``rfft2``, einsums over complex weights on the
    lowest and highest retained modes, ``irfft``/``irfft2``) beside 1x1 convolutions, GELU and a projection.
    ``dims`` 1 or 2; saved as TorchScript (``fno.pt``: ``torchscript`` traced, ``script`` by ``torch.jit.script``)
    or a torch.export program (``fno.pt2``, with a dynamic batch)."""
    import torch

    class SpectralConv1d(torch.nn.Module):
        def __init__(self, channels: int, modes: int) -> None:
            super().__init__()
            self.modes = modes
            scale = 1 / (channels * channels)
            self.weights = torch.nn.Parameter(scale * torch.rand(channels, channels, modes, dtype=torch.cfloat))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x_ft = torch.fft.rfft(x)
            out_ft = torch.zeros(x.shape[0], x.shape[1], x.size(-1) // 2 + 1, dtype=torch.cfloat, device=x.device)
            out_ft[:, :, :self.modes] = torch.einsum("bix,iox->box", x_ft[:, :, :self.modes], self.weights)
            return torch.fft.irfft(out_ft, n=x.size(-1))

    class SpectralConv2d(torch.nn.Module):
        def __init__(self, channels: int, modes: int) -> None:
            super().__init__()
            self.modes = modes
            scale = 1 / (channels * channels)
            shape = (channels, channels, modes, modes)
            self.weights1 = torch.nn.Parameter(scale * torch.rand(*shape, dtype=torch.cfloat))
            self.weights2 = torch.nn.Parameter(scale * torch.rand(*shape, dtype=torch.cfloat))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            m = self.modes
            x_ft = torch.fft.rfft2(x)
            out_ft = torch.zeros(x.shape[0], x.shape[1], x.size(-2), x.size(-1) // 2 + 1, dtype=torch.cfloat,
                                 device=x.device)
            out_ft[:, :, :m, :m] = torch.einsum("bixy,ioxy->boxy", x_ft[:, :, :m, :m], self.weights1)
            out_ft[:, :, -m:, :m] = torch.einsum("bixy,ioxy->boxy", x_ft[:, :, -m:, :m], self.weights2)
            return torch.fft.irfft2(out_ft, s=(x.size(-2), x.size(-1)))

    class FNO(torch.nn.Module):
        def __init__(self, dims: int, width: int = 8, modes: int = 4, layers: int = 2) -> None:
            super().__init__()
            self.dims = dims
            conv = torch.nn.Conv1d if dims == 1 else torch.nn.Conv2d
            spectral = SpectralConv1d if dims == 1 else SpectralConv2d
            self.lift = torch.nn.Linear(1 + dims, width)
            self.spectral = torch.nn.ModuleList(spectral(width, modes) for _ in range(layers))
            self.pointwise = torch.nn.ModuleList(conv(width, width, 1) for _ in range(layers))
            self.head = torch.nn.Sequential(torch.nn.Linear(width, 16), torch.nn.GELU(), torch.nn.Linear(16, 1))

        def forward(self, u: torch.Tensor) -> torch.Tensor:  # u: [batch, *grid, 1]
            axes = [torch.linspace(0, 1, n, dtype=u.dtype) for n in u.shape[1:-1]]
            grid = torch.stack(torch.meshgrid(axes, indexing="ij"), -1).expand(list(u.shape[:-1]) + [self.dims])
            x = self.lift(torch.cat([u, grid], -1)).movedim(-1, 1)
            for spectral, pointwise in zip(self.spectral, self.pointwise):  # noqa: B905 - torch.jit.script
                x = torch.nn.functional.gelu(spectral(x) + pointwise(x))
            return self.head(x.movedim(1, -1))

    torch.manual_seed(2)
    model = FNO(dims).eval()
    grid = (24,) if dims == 1 else (16, 12)
    u = torch.randn(2, *grid, 1)
    if kind in ("torchscript", "script"):
        saved = torch.jit.script(model) if kind == "script" else torch.jit.trace(model, u)
        saved.save(str(directory / "fno.pt"))
        shape = [None, *[None] * dims, 1]
        return "fno.pt", {"inputs": [{"name": "u", "shape": shape, "dtype": "float32"}]}
    batch = torch.export.Dim("batch", max=64)  # torch.export specialises the grid's sizes (fft, linspace)
    torch.export.save(torch.export.export(model, (u,), dynamic_shapes=({0: batch},)), str(directory / "fno.pt2"))
    return "fno.pt2", {}


def masked_encoder(directory: Path) -> tuple[str, str, dict]:
    """A transformer encoder over token ids with a padding mask (bool), mean-pooled over the kept tokens, traced
    (TorchScript): the TorchScript exporter loses a rank inside its attention. Returns the model, a sample .npz
    (no row fully masked) and its declared inputs."""
    import torch

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(50, 32)
            layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, dropout=0.0)
            self.encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.head = torch.nn.Linear(32, 3)

        def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            hidden = self.encoder(self.embed(ids), src_key_padding_mask=mask)
            keep = (~mask).unsqueeze(-1).to(hidden.dtype)
            return self.head((hidden * keep).sum(1) / keep.sum(1).clamp(min=1))

    torch.manual_seed(4)
    ids = torch.randint(0, 50, (2, 9))
    mask = torch.zeros(2, 9, dtype=torch.bool)
    mask[1, 6:] = True
    torch.jit.trace(Encoder().eval(), (ids, mask), check_trace=False).save(str(directory / "masked_encoder.pt"))
    np.savez(directory / "tokens.npz", ids=ids.numpy(), mask=mask.numpy())
    return "masked_encoder.pt", "tokens.npz", {"inputs": [
        {"name": "ids", "shape": [None, None], "dtype": "int64", "low": 0, "high": 50},
        {"name": "mask", "shape": [None, None], "dtype": "bool"}]}


def _preprocessor(folder: Path, settings: dict[str, Any]) -> None:
    import json

    (folder / "preprocessor_config.json").write_text(json.dumps(settings))


def hf_head_folder(directory: Path, family: str) -> str:
    """A tiny random Hugging Face folder with a head beyond classification, as ``save_pretrained`` writes it,
    with the ``preprocessor_config.json`` its processor saves: a SegFormer segmenter and a DETR detector at a
    non-square preprocessor size, a GLPN depth model, wav2vec2 CTC and audio classification at 8 kHz; and
    a BERT pretraining head (two outputs); and one the converter refuses: an architecture
    transformers does not ship."""
    import json

    import torch
    import transformers as hf

    torch.manual_seed(3)
    image = {"do_resize": True, "size": {"height": 48, "width": 64}, "image_mean": [0.5] * 3, "image_std": [0.5] * 3}
    audio = {"feature_size": 1, "sampling_rate": 8000, "padding_value": 0.0, "do_normalize": True,
             "return_attention_mask": False}
    tiny_audio = {"vocab_size": 12, "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
                  "intermediate_size": 32, "conv_dim": (8, 8), "conv_stride": (5, 4), "conv_kernel": (10, 4),
                  "num_conv_pos_embeddings": 8, "num_conv_pos_embedding_groups": 2, "do_stable_layer_norm": False}
    build = {
        "segformer": (lambda: hf.SegformerForSemanticSegmentation(hf.SegformerConfig(
            num_channels=3, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[8, 16],
            patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2],
            decoder_hidden_size=16, num_labels=5)), image),
        "detr": (lambda: hf.DetrForObjectDetection(hf.DetrConfig(
            use_timm_backbone=False, use_pretrained_backbone=False, backbone=None,
            backbone_config=hf.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
                                            out_features=["stage2"]),
            d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
            encoder_ffn_dim=32, decoder_ffn_dim=32, num_queries=6, num_labels=4)), image),
        "glpn": (lambda: hf.GLPNForDepthEstimation(hf.GLPNConfig(
            num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[8, 16], patch_sizes=[7, 3],
            strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2], decoder_hidden_size=16)),
            {**image, "size_divisor": 32}),
        "wav2vec2_ctc": (lambda: hf.Wav2Vec2ForCTC(hf.Wav2Vec2Config(**tiny_audio)), audio),
        "wav2vec2_audio_classification": (lambda: hf.Wav2Vec2ForSequenceClassification(hf.Wav2Vec2Config(
            num_labels=3, classifier_proj_size=8, **tiny_audio)), audio),
        "bert_pretraining": (lambda: hf.BertForPreTraining(hf.BertConfig(
            vocab_size=200, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)), None),
    }
    if family == "custom_architecture":
        folder = directory / family
        hf.BertModel(hf.BertConfig(vocab_size=200, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                   intermediate_size=64)).eval().save_pretrained(folder)
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, "architectures": ["LabBertForPlasmaRegression"]}))
        return family
    model, settings = build[family]
    model().eval().save_pretrained(directory / family)
    if settings:
        _preprocessor(directory / family, settings)
    return family


def keras_custom_layer(directory: Path) -> tuple[str, str]:
    """A Keras 3 model with a custom layer registered with ``register_keras_serializable`` (the converter's
    process does not have its class), saved as ``.keras``, and the same model's ``model.export()``
    SavedModel zipped under a name containing "savedmodel" (what the refusal advises)."""
    import shutil

    import keras

    @keras.saving.register_keras_serializable(package="lab")
    class Scaled(keras.layers.Layer):
        def __init__(self, factor: float = 2.0, **kwargs) -> None:
            super().__init__(**kwargs)
            self.factor = factor

        def call(self, x):
            return x * self.factor

        def get_config(self):
            return {**super().get_config(), "factor": self.factor}

    keras.utils.set_random_seed(4)
    inputs = keras.Input((5,), name="x")
    model = keras.Model(inputs, keras.layers.Dense(3)(Scaled(3.0)(inputs)))
    model.save(directory / "scaled.keras")
    model.export(str(directory / "scaled_savedmodel"))
    shutil.make_archive(str(directory / "scaled_savedmodel"), "zip", directory / "scaled_savedmodel")
    return "scaled.keras", "scaled_savedmodel.zip"


def moe_program(directory: Path) -> Built:
    """A random Mixtral (mixture of experts) exported with torch.export as its users export it (transformers'
    own experts implementation: the program holds ``transformers::grouped_mm_fallback`` and ``aten::histc``),
    with a dynamic sequence; ``mixtral.pt2``."""
    import torch
    from transformers import AutoModelForCausalLM

    from tests.generation.lm import save_lm

    model = AutoModelForCausalLM.from_pretrained(save_lm(directory / "mixtral", "mixtral")).eval()

    class Logits(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids):
            return self.model(input_ids=input_ids, use_cache=False).logits

    ids = torch.randint(3, 250, (2, 8), generator=torch.Generator().manual_seed(0))
    program = torch.export.export(Logits(), (ids,), dynamic_shapes=({1: torch.export.Dim("sequence", max=128)},))
    torch.export.save(program, str(directory / "mixtral.pt2"))
    return "mixtral.pt2", {}
