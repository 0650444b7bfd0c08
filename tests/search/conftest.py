"""The seeded corpus the search tests share."""

from __future__ import annotations

import pytest

from hub.registry import services
from tests.conftest import staged, valid_metadata

CORPUS = [
    # name, kind, metadata, visibility
    ("cloud-cnn", "model", {"title": "Cloud masks with a CNN", "framework": "pytorch", "task": "segmentation",
                            "keywords": ["climate", "satellite"], "license": "MIT",
                            "benchmarks": [{"hardware": {"kind": "gpu", "gpu_model": "A100"}, "batch_size": 1,
                                            "median_ms": 1.0, "p95_ms": 2.0}]}, "public"),
    ("storm-rnn", "model", {"title": "Storm tracks", "description": "An RNN over cloud fields.",
                            "framework": "keras", "task": "forecasting", "keywords": ["climate"],
                            "license": "Apache-2.0"}, "public"),
    ("protein-mlp", "model", {"title": "Protein contacts", "framework": "pytorch", "task": "regression",
                              "keywords": ["biology"], "license": "MIT"}, "public"),
    ("secret-cloud", "model", {"title": "Secret cloud model", "framework": "pytorch", "task": "segmentation",
                               "keywords": ["climate"], "license": "MIT"}, "private"),
    ("cloud-images", "dataset", {"title": "Cloud images", "keywords": ["climate", "satellite"],
                                 "license": "CC-BY-4.0"}, "public"),
]


@pytest.fixture
def corpus(owner, collaborator, tmp_path):
    for name, kind, metadata, visibility in CORPUS:
        artifact = services.create_artifact(owner, kind=kind, name=name, visibility=visibility,
                                            collaborators=[collaborator] if name == "secret-cloud" else [])
        files = {"data.csv": f"a,b\n1,{name}\n".encode()} if kind == "dataset" else {"w.bin": name.encode()}
        services.create_version(artifact, owner, files=[staged(tmp_path, p, d) for p, d in files.items()],
                                metadata={**valid_metadata(kind), **metadata})
