"""Class names (issue 41, point 4): a model's or dataset's ``labels`` (a list, or Hugging Face's ``id2label``),
read from a Hugging Face folder's config.json, and offered as a version's ``class_labels``: its own, the
version it was converted from, or those of a dataset it was trained on that the reader may see."""

from __future__ import annotations

import json

import pytest

from hub.registry import services
from hub.registry.models import ProvenanceLink
from hub.registry.services import ProvenanceRef
from ontology.fields import MetadataError, validate
from tests.conftest import client_for, staged, valid_metadata

pytestmark = pytest.mark.django_db
CLASSES = ["setosa", "versicolor", "virginica"]


def test_labels_are_a_list_or_an_id2label_mapping_without_gaps():
    assert validate(valid_metadata(labels={"1": "dog", "0": "cat"}, format="onnx"), "model")["labels"] == ["cat", "dog"]
    assert validate(valid_metadata("dataset", labels=CLASSES, format="csv"), "dataset")["labels"] == CLASSES
    with pytest.raises(MetadataError, match="without gaps"):
        validate(valid_metadata(labels={0: "cat", 2: "dog"}, format="onnx"), "model")
    with pytest.raises(MetadataError, match="index order"):
        validate(valid_metadata(labels="cat", format="onnx"), "model")


def publish(owner, tmp_path, name: str, kind: str = "model", files: dict | None = None, visibility: str = "public",
            provenance: list | None = None, **metadata):
    artifact = services.create_artifact(owner, kind=kind, name=name, visibility=visibility)
    default = {"model.onnx": f"onnx of {name}".encode()} if kind == "model" else {"data.csv": f"a\n{name}\n".encode()}
    files = files or default
    return services.create_version(artifact, owner, files=[staged(tmp_path, p, d) for p, d in files.items()],
                                   metadata=valid_metadata(kind, **metadata), provenance=provenance or [])


def test_a_hugging_face_folder_s_id2label_becomes_its_labels_and_placeholders_do_not(owner, tmp_path):
    weights = {"model.safetensors": b"\x00" * 8}
    named = {"config.json": json.dumps({"id2label": {"0": "NEGATIVE", "1": "POSITIVE"}}).encode(), **weights}
    assert publish(owner, tmp_path, "sst2", files=named).metadata["labels"] == ["NEGATIVE", "POSITIVE"]
    unnamed = {"config.json": json.dumps({"id2label": {"0": "LABEL_0", "1": "LABEL_1"}}).encode(), **weights}
    assert "labels" not in publish(owner, tmp_path, "plain", files=unnamed).metadata


def test_a_model_s_class_labels_come_from_the_dataset_it_was_trained_on_if_the_reader_may_see_it(
        owner, other, tmp_path):
    public = publish(owner, tmp_path, "flowers", kind="dataset", labels=CLASSES)
    secret = publish(owner, tmp_path, "secret-flowers", kind="dataset", visibility="private", labels=["a", "b"])
    trained = ProvenanceLink.Relation.TRAINED_ON
    publish(owner, tmp_path, "rf", provenance=[ProvenanceRef(trained, public)])
    publish(owner, tmp_path, "rf-secret", provenance=[ProvenanceRef(trained, secret)])
    publish(owner, tmp_path, "own", labels=["x", "y"], provenance=[ProvenanceRef(trained, public)])
    reader = client_for(other, scope="read")
    url = "/api/v1/artifacts/alice/{}/versions/latest/"
    assert reader.get(url.format("rf")).json()["class_labels"] == CLASSES
    assert reader.get(url.format("own")).json()["class_labels"] == ["x", "y"]  # its own win
    assert reader.get(url.format("rf-secret")).json()["class_labels"] is None  # not for a reader of the model only
    assert client_for(owner).get(url.format("rf-secret")).json()["class_labels"] == ["a", "b"]
    assert reader.get(url.format("flowers")).json()["class_labels"] is None  # a dataset has labels, not outputs
