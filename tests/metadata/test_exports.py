"""Round trips: metadata -> graph -> each export -> parsed back (rdflib, an XML parser, mlcroissant)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from xml.etree import ElementTree as ET

import pytest
from rdflib import Graph, Literal, URIRef
from rdflib.namespace import PROV, RDF

from ontology import exports
from ontology.fields import validate
from ontology.record import FileEntry, Link, Record
from ontology.vocab import HPC, HUB, SDO

BASE = "http://hub.test"
MODEL = validate({
    "title": "Cloud mask CNN", "description": "Segments clouds.", "license": "Apache-2.0",
    "creators": [{"name": "Ada Lovelace", "orcid": "0000-0002-1825-0097", "affiliation": "ORNL"}, "Alan Turing"],
    "framework": "onnx", "format": "onnx", "task": "segmentation", "keywords": ["climate", "cnn"], "opset": 17,
    "parameters": 1234, "model_family": "cnn", "inputs": [{"name": "x", "shape": ["batch", 3, 64, 64]}],
    "outputs": [{"name": "y", "shape": ["batch", 1, 64, 64]}], "hyperparameters": {"lr": 0.001},
    "benchmarks": [{"hardware": {"kind": "gpu", "gpu_model": "A100"}, "batch_size": 8, "median_ms": 2.5,
                    "p95_ms": 3.1}],
}, "model")
DATASET = validate({
    "title": "Synthetic iris", "description": "Flowers.", "license": "CC0-1.0", "creators": ["Ada Lovelace"],
    "format": "csv", "records": [{"name": "sepal_length", "dtype": "float64"}, {"name": "species"}],
}, "dataset")


def model_record() -> Record:
    return Record(
        iri=f"{BASE}/ark:/99999/fk4model1", pid="ark:/99999/fk4model1", kind="model", label="1-onnx",
        metadata=MODEL, published=datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC), owner="alice",
        files=[FileEntry("cnn.onnx", 4096, "a" * 64, "application/onnx", f"{BASE}/files/cnn.onnx")],
        provenance=[Link("converted_from", f"{BASE}/ark:/99999/fk4src", "ark:/99999/fk4src"),
                    Link("trained_on", f"{BASE}/ark:/99999/fk4data", "ark:/99999/fk4data")],
        concept_iri=f"{BASE}/ark:/99999/fk4concept", concept_pid="ark:/99999/fk4concept",
        activity_iri=f"{BASE}/ark:/99999/fk4test#activity",
    )


def dataset_record() -> Record:
    return Record(
        iri=f"{BASE}/ark:/99999/fk4data", pid="ark:/99999/fk4data", kind="dataset", label="1.0", metadata=DATASET,
        published=datetime(2026, 3, 4, tzinfo=UTC), owner="alice",
        files=[FileEntry("data.csv", 10, "b" * 64, "text/csv", f"{BASE}/files/data.csv")],
    )


@pytest.mark.parametrize(("name", "rdflib_format"), [("jsonld", "json-ld"), ("turtle", "turtle"),
                                                     ("rdfxml", "xml"), ("ntriples", "nt")])
def test_rdf_exports_parse_back_with_the_expected_terms(name, rdflib_format):
    graph = Graph().parse(data=exports.export(model_record(), name), format=rdflib_format)
    s = URIRef(model_record().iri)
    assert (s, RDF.type, HPC.AIModel) in graph and (s, RDF.type, HPC.ConvolutionalNeuralNetwork) in graph
    assert (s, SDO.name, Literal("Cloud mask CNN")) in graph
    assert (s, SDO.license, URIRef("https://spdx.org/licenses/Apache-2.0")) in graph
    assert (s, HPC.machineLearningFramework, Literal("onnx")) in graph
    assert graph.value(s, HUB.onnxOpset).toPython() == 17 and graph.value(s, HPC.params).toPython() == 1234
    assert (s, HUB.convertedFrom, URIRef(f"{BASE}/ark:/99999/fk4src")) in graph
    assert (s, PROV.wasDerivedFrom, URIRef(f"{BASE}/ark:/99999/fk4src")) in graph
    assert (s, HPC.wasDerivedFromDataset, URIRef(f"{BASE}/ark:/99999/fk4data")) in graph
    orcid = URIRef("https://orcid.org/0000-0002-1825-0097")
    assert (s, SDO.creator, orcid) in graph and (orcid, SDO.name, Literal("Ada Lovelace")) in graph
    tensor = graph.value(s, HUB.input)
    assert graph.value(tensor, HUB.tensorName) == Literal("x")
    assert json.loads(graph.value(tensor, HUB.shape)) == ["batch", 3, 64, 64]
    bench = graph.value(s, HUB.benchmark)
    assert (graph.value(bench, HUB.onHardware), HPC.gpuModel, Literal("A100")) in graph
    assert graph.value(s, SDO.distribution) is None  # schema.org's distribution is a dataset's
    download = graph.value(s, SDO.hasPart)  # a creative work's content, where harvesters look for it
    assert graph.value(s, SDO.associatedMedia) == download
    assert (download, RDF.type, SDO.DataDownload) in graph and (download, RDF.type, SDO.MediaObject) in graph
    assert graph.value(download, SDO.contentSize) == Literal("4096 B")
    assert graph.value(download, SDO.encodingFormat) == Literal("application/onnx")
    assert graph.value(download, HUB.sha256) == Literal("a" * 64)
    assert graph.value(download, SDO.contentUrl) == URIRef(f"{BASE}/files/cnn.onnx")


def test_datacite_json_has_every_mandatory_property():
    data = json.loads(exports.export(model_record(), "datacite-json"))
    assert data["identifiers"] == [{"identifier": "ark:/99999/fk4model1", "identifierType": "ARK"}]
    assert [c["name"] for c in data["creators"]] == ["Ada Lovelace", "Alan Turing"]
    assert data["creators"][0]["nameIdentifiers"][0]["nameIdentifierScheme"] == "ORCID"
    assert data["titles"] == [{"title": "Cloud mask CNN"}] and data["publisher"]["name"] == "HPCFair Hub"
    assert data["publicationYear"] == "2026" and data["types"]["resourceTypeGeneral"] == "Model"
    assert data["rightsList"][0]["rightsIdentifier"] == "Apache-2.0"
    relations = {(r["relatedIdentifier"], r["relationType"]) for r in data["relatedIdentifiers"]}
    assert ("ark:/99999/fk4src", "IsVariantFormOf") in relations
    assert ("ark:/99999/fk4concept", "IsVersionOf") in relations


def test_datacite_xml_parses_with_the_mandatory_elements():
    root = ET.fromstring(exports.export(model_record(), "datacite-xml").encode())  # noqa: S314 - our own output
    ns = {"d": exports.DATACITE_NS}
    assert root.tag == f"{{{exports.DATACITE_NS}}}resource"
    assert root.find("d:identifier", ns).text == "ark:/99999/fk4model1"
    assert [c.text for c in root.findall("d:creators/d:creator/d:creatorName", ns)] == ["Ada Lovelace", "Alan Turing"]
    assert root.find("d:titles/d:title", ns).text == "Cloud mask CNN"
    assert root.find("d:publisher", ns).text == "HPCFair Hub" and root.find("d:publicationYear", ns).text == "2026"
    assert root.find("d:resourceType", ns).get("resourceTypeGeneral") == "Model"
    assert root.find("d:rightsList/d:rights", ns).get("rightsIdentifier") == "Apache-2.0"


def test_croissant_loads_with_mlcroissant():
    import mlcroissant as mlc

    data = json.loads(exports.export(dataset_record(), "croissant"))
    dataset = mlc.Dataset(jsonld=data)
    assert not dataset.metadata.ctx.issues.errors, dataset.metadata.ctx.issues.report()
    assert dataset.metadata.license == ["https://spdx.org/licenses/CC0-1.0"]
    [record_set] = dataset.metadata.record_sets
    assert [f.name for f in record_set.fields] == ["sepal_length", "species"]
    assert [f.data_types for f in record_set.fields][0] == [mlc.DataType.FLOAT]
    assert dataset.metadata.distribution[0].content_url == f"{BASE}/files/data.csv"


@pytest.fixture
def offline(monkeypatch):
    """No network: a JSON-LD context that had to be fetched fails the test instead of being read."""
    import socket

    def refuse(*args, **kwargs):
        raise AssertionError(f"network used: {args}")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)


def test_schema_org_record_for_landing_pages(offline):
    text = exports.export(model_record(), "schemaorg")
    data = json.loads(text)
    assert data["@type"] == "SoftwareSourceCode" and data["license"] == "https://spdx.org/licenses/Apache-2.0"
    assert data["identifier"][0] == "ark:/99999/fk4model1" and data["version"] == "1-onnx"
    assert "distribution" not in data and data["isAccessibleForFree"] is True
    [part] = data["hasPart"]  # files as parts (F-UJI reads hasPart of a creative work), and still as media
    assert data["associatedMedia"] == [part]
    assert part == {"@type": "DataDownload", "@id": f"{BASE}/files/cnn.onnx", "name": "cnn.onnx",
                    "contentUrl": f"{BASE}/files/cnn.onnx", "encodingFormat": "application/onnx",
                    "contentSize": "4096 B", "sha256": "a" * 64}
    assert {item["identifier"] for item in data["isBasedOn"]} == {"ark:/99999/fk4src", "ark:/99999/fk4data"}
    assert isinstance(data["@context"], dict) and data["@context"]["@vocab"] == "https://schema.org/"
    graph = Graph().parse(data=text, format="json-ld")  # the export as it is: no remote context to fetch
    s = URIRef(data["@id"])
    assert (s, SDO.name, Literal("Cloud mask CNN")) in graph
    assert (s, SDO.license, URIRef("https://spdx.org/licenses/Apache-2.0")) in graph
    download = URIRef(f"{BASE}/files/cnn.onnx")
    assert (s, SDO.hasPart, download) in graph and (download, RDF.type, SDO.DataDownload) in graph
    assert (download, SDO.contentUrl, download) in graph
    assert (download, SDO.contentSize, Literal("4096 B")) in graph


def test_schema_org_of_a_dataset_and_of_a_concept(offline):
    data = json.loads(exports.export(dataset_record(), "schemaorg"))
    assert [d["@type"] for d in data["distribution"]] == ["DataDownload"] and "hasPart" not in data
    assert Graph().parse(data=json.dumps(data), format="json-ld").value(
        URIRef(dataset_record().iri), SDO.distribution) == URIRef(f"{BASE}/files/data.csv")
    concept = model_record()
    concept.versions = [Link("version", f"{BASE}/ark:/99999/fk4model1", "ark:/99999/fk4model1", "alice/cnn@1")]
    parts = json.loads(exports.export(concept, "schemaorg"))["hasPart"]
    assert [p.get("contentUrl") for p in parts] == [f"{BASE}/files/cnn.onnx", None]  # its files, then versions
    assert parts[1]["identifier"] == "ark:/99999/fk4model1"


def test_citations():
    bib = exports.export(model_record(), "bibtex")
    assert bib.startswith("@misc{lovelace2026fk4model1,") and "author = {Lovelace, Ada and Turing, Alan}" in bib
    assert "title = {{Cloud mask CNN}}" in bib and "version = {1-onnx}" in bib
    text = exports.export(model_record(), "citation")  # APA 7th unless a style is named
    assert text == ("Lovelace, A., & Turing, A. (2026). Cloud mask CNN (Version 1-onnx) [Machine learning model]. "
                    f"HPCFair Hub. {BASE}/ark:/99999/fk4model1\n")


GRAPH_SERIALIZERS = {"jsonld": "json-ld", "turtle": "turtle", "rdfxml": "xml", "ntriples": "nt"}


@pytest.mark.parametrize("name", list(exports.FORMATS))
def test_a_restricted_source_keeps_its_relation_and_nothing_that_names_it(name):
    record = dataset_record() if name == "croissant" else model_record()
    record.provenance = [Link.hidden("trained_on", "dataset"), Link("derived_from", f"{BASE}/ark:/99999/fk4seen",
                                                                    "ark:/99999/fk4seen", "alice/seen@1")]
    text = exports.export(record, name)  # every format still exports
    if name in ("jsonld", "turtle", "rdfxml", "ntriples"):
        graph = Graph().parse(data=text, format=GRAPH_SERIALIZERS[name])
        [hidden] = list(graph.objects(URIRef(record.iri), HPC.wasDerivedFromDataset))
        assert not isinstance(hidden, URIRef) and (hidden, RDF.type, HUB.RestrictedArtifact) in graph
        assert (URIRef(record.iri), HPC.wasDerivedFrom, URIRef(f"{BASE}/ark:/99999/fk4seen")) in graph
    elif name == "datacite-xml":
        root = ET.fromstring(text.encode())  # noqa: S314 - our own output
        ns = {"d": exports.DATACITE_NS}
        assert [r.text for r in root.findall("d:relatedIdentifiers/d:relatedIdentifier", ns)] == \
            ["ark:/99999/fk4seen", "ark:/99999/fk4concept"]
        assert [(d.get("descriptionType"), d.text) for d in root.findall("d:descriptions/d:description", ns)] == \
            [("Abstract", "Segments clouds."), ("Other", "Provenance: trained on a restricted dataset.")]
    elif name == "schemaorg":
        assert json.loads(text)["isBasedOn"][0] == {"@type": "CreativeWork", "name": "a restricted dataset",
                                                    "conditionsOfAccess": exports.RESTRICTED_ACCESS}


@pytest.mark.parametrize(("text", "code"), [
    ("earth sciences", "1.5"), ("Earth and related environmental sciences", "1.5"), ("climate science", "1.5"),
    ("Computer science", "1.2"), ("computer and information sciences", "1.2"), ("physics", "1.3"), ("1.6", "1.6"),
    ("Mathematics", "1.1"), ("machine learning", None), ("sciences", None), ("other", None),
])
def test_subjects_that_name_a_field_of_science(text, code):
    from ontology.subjects import fos_term

    term = fos_term(text)
    assert (term.code if term else None) == code
    record = model_record()
    record.metadata = {**record.metadata, "discipline": text}
    data = exports.datacite(record)
    schemed = [s for s in data["subjects"] if s.get("subjectScheme")]
    assert [s["classificationCode"] for s in schemed] == ([code] if code else [])
    assert {"subject": text} in data["subjects"]  # the words as given stay
    assert {"subject": "climate"} in data["subjects"]  # a keyword is a free subject, no scheme
