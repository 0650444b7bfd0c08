"""The metadata schema: each required field, each checker, and the shapes generated from the same table."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from rdflib import URIRef

from ontology import shapes
from ontology.fields import ARTIFACT_KINDS, FIELDS, MetadataError, validate
from ontology.graph import to_graph
from ontology.record import FileEntry, Record
from ontology.vocab import HUB, hub_terms

COMPLETE = {
    "model": {"title": "T", "description": "D", "creators": ["Ada Lovelace"], "license": "MIT",
              "framework": "pytorch", "format": "torchscript", "task": "image-classification"},
    "dataset": {"title": "T", "description": "D", "creators": ["Ada Lovelace"], "license": "CC-BY-4.0",
                "format": "csv"},
    "project": {"title": "T", "description": "D", "creators": ["Ada Lovelace"], "license": "Apache-2.0"},
}


def errors_of(metadata: dict, kind: str) -> dict[str, list[str]]:
    with pytest.raises(MetadataError) as caught:
        validate(metadata, kind)
    return caught.value.errors


@pytest.mark.parametrize("kind", ARTIFACT_KINDS)
def test_every_required_field_is_named_when_missing(kind):
    assert validate(COMPLETE[kind], kind)["kind"] == kind
    required = [name for name, spec in FIELDS.items() if kind in spec.required]
    assert {"title", "description", "creators", "license"} <= set(required)
    for name in required:
        broken = {k: v for k, v in COMPLETE[kind].items() if k != name}
        errors = errors_of(broken, kind)
        assert list(errors) == [name], errors
        assert f"Required for a {kind}" in errors[name][0]


def test_values_are_checked_and_normalised():
    clean = validate({**COMPLETE["model"], "license": "apache-2.0", "framework": "TF", "keywords": "a, b ,a",
                      "creators": [{"name": "Ada", "orcid": "https://orcid.org/0000-0002-1825-0097"}],
                      "task": "Image Classification"}, "model")
    assert clean["license"] == "Apache-2.0" and clean["framework"] == "tensorflow"
    assert clean["keywords"] == ["a", "b"] and clean["task"] == "image-classification"
    assert clean["creators"] == [{"name": "Ada", "orcid": "https://orcid.org/0000-0002-1825-0097"}]


@pytest.mark.parametrize(("field", "value", "says"), [
    ("license", "MIT-ish", "not an SPDX license identifier"),
    ("license", "Apache2.0", "Did you mean Apache-2.0"),
    ("creators", [{"name": "Ada", "orcid": "0000-0002-1825-0098"}], "check digit"),
    ("creators", [{"orcid": "0000-0002-1825-0097"}], "needs a name"),
    ("framework", "caffe", "Expected one of pytorch"),
    ("inputs", [{"name": "x", "shape": [1, -3]}], "Shape entries"),
    ("inputs", [{"name": "x", "dtype": "float"}], "dtype 'float'"),
    ("title", "", "non-empty text"),
    ("title", "x" * 301, "At most 300"),
    ("accuracy", "high", "a number"),
    ("parameters", -1, ">= 0"),
    ("url", "ftp://x", "http(s) URL"),
])
def test_bad_values_say_what_is_expected(field, value, says):
    errors = errors_of({**COMPLETE["model"], field: value}, "model")
    assert says in " ".join(errors[field]), errors


def test_unknown_kind_specific_and_hub_only_fields():
    errors = errors_of({**COMPLETE["dataset"], "licence": "MIT", "task": "x", "verified": True}, "dataset")
    assert "Did you mean 'license'" in errors["licence"][0]
    assert "Only model artifacts" in errors["task"][0]
    assert "The hub sets this field" in errors["verified"][0]
    assert errors_of({**COMPLETE["model"], "kind": "dataset"}, "model")["kind"]


def _record(metadata: dict, kind: str = "model") -> Record:
    return Record(iri="http://hub.test/ark:/99999/fk4x", pid="ark:/99999/fk4x", kind=kind, label="1",
                  metadata=metadata, published=datetime(2026, 1, 2, tzinfo=UTC), owner="alice",
                  files=[FileEntry("m.onnx", 3, "a" * 64, "application/onnx", "http://hub.test/f/m.onnx")])


def test_shapes_accept_valid_records_and_name_the_field_they_reject():
    shapes.check(to_graph(_record(validate(COMPLETE["model"], "model"))))
    with pytest.raises(MetadataError) as caught:  # a record that bypassed the field checks
        shapes.check(to_graph(_record({"title": "T", "creators": [{"name": "A"}], "license": "MIT"})))
    assert {"description", "framework", "format", "task"} <= set(caught.value.errors)
    with pytest.raises(MetadataError) as caught:
        shapes.check(to_graph(_record({**validate(COMPLETE["model"], "model"), "parameters": "many"})))
    assert "parameters" in caught.value.errors


def test_every_hub_term_the_mapping_uses_is_declared():
    metadata = validate({**COMPLETE["model"], "opset": 17, "parameters": 10, "learning_type": "supervised",
                         "model_family": "transformer", "container_image": "x", "hyperparameters": {"lr": 0.1},
                         "metrics": {"f1": 0.9}, "inputs": [{"name": "x", "shape": [None, 3]}],
                         "outputs": [{"name": "y", "shape": [None]}],
                         "benchmarks": [{"hardware": {"kind": "gpu", "gpu_model": "H100", "cpu_model": "EPYC",
                                                      "cores": 16}, "batch_size": 1, "median_ms": 1.0,
                                         "p95_ms": 2.0, "provider": "CUDAExecutionProvider"}]}, "model")
    dataset = validate({**COMPLETE["dataset"], "records": [{"name": "a", "dtype": "int64"}], "record_count": 3,
                        "size": 10}, "dataset")
    declared = set(hub_terms().subjects())
    used = set()
    for graph in (to_graph(_record(metadata)), to_graph(_record(dataset, "dataset"))):
        used |= {term for triple in graph for term in triple
                 if isinstance(term, URIRef) and str(term).startswith(str(HUB))}
    assert used and used <= declared, used - declared
