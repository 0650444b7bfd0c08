"""``python manage.py hub_demo``: a demo account and a few demo artifacts (idempotent)."""

from __future__ import annotations

import csv
import hashlib
import io
import random
import tempfile
from pathlib import Path

import hpcfair
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from hub.registry import services
from hub.registry.models import Artifact
from hub.registry.uploads import StagedFile

DEMO_USER = "demo"
DEMO_PASSWORD = "demo-password"  # noqa: S105 - documented demo account of the embedded default
EXAMPLE_PROJECT = Path(hpcfair.__file__).parent / "examples" / "project_dir"


# The demo content's creator: the hub's demo, an organization (its name stays whole in citations, and DataCite
# calls it Organizational), not a person named "demo, H.".
DEMO_CREATOR = {"name": "HPCFair demo", "type": "organization"}
SMALLEST_MEASURE = 0.1  # cm, as the data are rounded: no flower part is zero or negative in length or width


def _iris_like_csv() -> bytes:
    """A deterministic, synthetic three-class tabular dataset (no download). Each measurement spreads by at most
    0.3 cm and a third of its class's mean (a petal width of 0.2 cm does not reach below zero), and none is
    below ``SMALLEST_MEASURE``."""
    rng = random.Random(42)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["sepal_length", "sepal_width", "petal_length", "petal_width", "species"])
    centres = {"setosa": (5.0, 3.4, 1.5, 0.2), "versicolor": (5.9, 2.8, 4.3, 1.3), "virginica": (6.6, 3.0, 5.6, 2.0)}
    for species, centre in centres.items():
        for _ in range(50):
            writer.writerow([max(SMALLEST_MEASURE, round(rng.gauss(c, min(0.3, c / 3)), 1)) for c in centre]
                            + [species])
    return out.getvalue().encode()


def _iris_forest() -> bytes:
    """A random forest fitted on the synthetic iris rows (made here, so the pickle is trusted)."""
    import pickle

    from sklearn.ensemble import RandomForestClassifier

    rows = list(csv.reader(io.StringIO(_iris_like_csv().decode())))[1:]
    features = [[float(v) for v in row[:4]] for row in rows]
    labels = [["setosa", "versicolor", "virginica"].index(row[4]) for row in rows]
    model = RandomForestClassifier(n_estimators=12, max_depth=4, random_state=0).fit(features, labels)
    return pickle.dumps(model)


def _iris_mlp() -> bytes:
    """A small PyTorch network (4-16-3), randomly initialised with a fixed seed, saved as TorchScript: the
    tour (docs/getting-started/tour.md) fine-tunes it on the demo dataset."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    buffer = io.BytesIO()
    torch.jit.save(torch.jit.script(model), buffer)
    return buffer.getvalue()


IRIS_MLP_CARD = b"""# Iris-like MLP (untrained)

A multilayer perceptron (4 inputs, 16 hidden units, 3 outputs: logits of setosa, versicolor, virginica)
whose weights are random (seed 0). It is a starting point: fine-tune it on the demo dataset
*Synthetic Iris-like measurements* (see the README's tour) to get a trained, verified model of your own.
"""

IRIS_CARD = b"""# Iris-like flower classifier

A random forest (12 trees, depth 4) that tells three flower classes apart from four measurements
(sepal length and width, petal length and width, in cm). Trained on the demo dataset
*Synthetic Iris-like measurements*.

| class | index |
|---|---|
| setosa | 0 |
| versicolor | 1 |
| virginica | 2 |

The hub converts it to ONNX and checks the conversion against scikit-learn's own answers.
"""

DEMOS = [
    {
        "kind": "dataset", "name": "synthetic-iris",
        "title": "Synthetic Iris-like measurements",
        "description": "150 synthetic flower measurements in three classes, generated with a fixed seed. "
                       "A small tabular dataset to try the hub with.",
        "files": {"data.csv": _iris_like_csv,
                  "README.md": lambda: b"# Synthetic Iris-like measurements\n\nFour features, three classes.\n"},
        "metadata": {"license": "CC0-1.0", "keywords": ["tabular", "classification", "demo"],
                     "creators": [DEMO_CREATOR],
                     "labels": ["setosa", "versicolor", "virginica"]},  # the classes' names, index order
    },
    {
        "kind": "model", "name": "iris-classifier",
        "title": "Iris-like flower classifier (scikit-learn)",
        "description": "A random forest that classifies the synthetic iris-like flowers from four measurements. "
                       "Uploaded as a scikit-learn pickle; the hub converts it to ONNX and verifies it.",
        "files": {"model.pkl": _iris_forest, "README.md": lambda: IRIS_CARD},
        "metadata": {"license": "CC0-1.0", "keywords": ["tabular", "classification", "random-forest", "demo"],
                     "creators": [DEMO_CREATOR], "framework": "scikit-learn", "task": "classification",
                     "learning_type": "supervised", "model_family": "random-forest"},
        "trained_on": "synthetic-iris",
    },
    {
        "kind": "model", "name": "iris-mlp",
        "title": "Iris-like MLP to fine-tune (PyTorch)",
        "description": "A small PyTorch multilayer perceptron (4-16-3) with random weights, saved as TorchScript: "
                       "the tour fine-tunes it on the synthetic iris-like flowers.",
        "files": {"model.pt": _iris_mlp, "README.md": lambda: IRIS_MLP_CARD},
        "metadata": {"license": "CC0-1.0", "keywords": ["tabular", "classification", "mlp", "demo", "fine-tuning"],
                     "creators": [DEMO_CREATOR], "framework": "pytorch", "task": "classification",
                     "model_family": "mlp", "is_tunable": True,
                     "inputs": [{"name": "measurements", "shape": [None, 4], "dtype": "float32"}]},
    },
    {
        "kind": "project", "name": "linear-regression-project",
        "title": "Linear regression project (MLCube)",
        "description": "An AI project as an MLCube: a prepare task makes a synthetic regression data set, a train "
                       "task fits a ridge regression with NumPy. The client's Listing 4 example runs it.",
        "files": {path: (lambda p=path: (EXAMPLE_PROJECT / p).read_bytes()) for path in
                  ("mlcube.yaml", "Containerfile", "requirements.txt", "main.py", "workspace/parameters.yaml")},
        "metadata": {"license": "Apache-2.0", "keywords": ["mlcube", "training", "demo"],
                     "creators": [DEMO_CREATOR]},
    },
]


class Command(BaseCommand):
    help = "Create the demo account and demo artifacts if they are missing."

    def handle(self, *args, **options) -> None:
        User = get_user_model()
        user, created = User.objects.get_or_create(username=DEMO_USER)
        if created:
            user.set_password(DEMO_PASSWORD)
            user.save()
        with tempfile.TemporaryDirectory() as tmp:
            for demo in DEMOS:
                if Artifact.objects.live().filter(owner=user, name=demo["name"]).exists():
                    continue
                artifact = services.create_artifact(
                    user, kind=demo["kind"], name=demo["name"], title=demo["title"], description=demo["description"]
                )
                staged = []
                for path, make in demo["files"].items():
                    data = make()
                    target = Path(tmp) / demo["name"] / path
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(data)
                    staged.append(StagedFile(path=path, staged=target, sha256=hashlib.sha256(data).hexdigest(),
                                             size=len(data)))
                source = Artifact.objects.live().filter(owner=user, name=demo.get("trained_on", "")).first()
                trained_on = source.latest_version() if source else None
                provenance = [services.ProvenanceRef("trained_on", trained_on)] if trained_on else []
                services.create_version(artifact, user, files=staged, label="1.0", metadata=demo["metadata"],
                                        provenance=provenance)
                self.stdout.write(f"demo: created {artifact.full_name} ({artifact.pid})")
        self.stdout.write(f"demo account: {DEMO_USER} / {DEMO_PASSWORD}")
