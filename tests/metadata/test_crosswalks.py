"""Dublin Core XML, CodeMeta, CITATION.cff and DCAT-AP (issue 40, what Zenodo offers): each read back by a
parser and checked against the rules of its format; each by its own URL, by negotiation on the PID and as a
describedby link."""

from __future__ import annotations

import json
import re
from pathlib import Path
from xml.etree import ElementTree as ET

import jsonschema
import pytest
import yaml
from pyshacl import validate as shacl
from rdflib import Graph, Literal, URIRef
from rocrate.rocrate import ROCrate

from ontology import crosswalks, exports
from tests.metadata.test_exports import BASE, dataset_record, model_record
from tests.metadata.test_fair import get

DC = "{http://purl.org/dc/elements/1.1/}"
DC_ELEMENTS = {"title", "creator", "subject", "description", "publisher", "contributor", "date", "type", "format",
               "identifier", "source", "language", "relation", "coverage", "rights"}
SCHEMAS = Path(__file__).parent / "schemas"
# CodeMeta 3.0's JSON-LD context and the Citation File Format 1.2.0 JSON schema, each the format's own file
# (tests/metadata/schemas/README.md).
CODEMETA_CONTEXT = json.loads((SCHEMAS / "codemeta-3.0.jsonld").read_text())["@context"]
CFF = json.loads((SCHEMAS / "cff-1.2.0.schema.json").read_text())
# DCAT-AP 3.0.1's own SHACL shapes (tests/metadata/schemas/README.md), without inference: what the export
# says of each node (its class included) is what they check.
DCAT_AP_SHAPES = Graph().parse(SCHEMAS / "dcat-ap-3.0.1-SHACL.ttl", format="turtle")


def assert_dcat_ap(graph: Graph) -> None:
    conforms, _, report = shacl(graph, shacl_graph=DCAT_AP_SHAPES, inference="none")
    assert conforms, report


def test_dublin_core_xml_uses_only_the_fifteen_elements():
    root = ET.fromstring(exports.export(model_record(), "dublin-core").encode())  # noqa: S314 - our own output
    assert root.tag == "{http://www.openarchives.org/OAI/2.0/oai_dc/}dc"
    assert all(child.tag.startswith(DC) and child.tag[len(DC):] in DC_ELEMENTS for child in root)
    values = {}
    for child in root:
        values.setdefault(child.tag[len(DC):], []).append(child.text)
    assert values["title"] == ["Cloud mask CNN"] and values["creator"] == ["Ada Lovelace", "Alan Turing"]
    assert values["identifier"] == [f"{BASE}/ark:/99999/fk4model1", "ark:/99999/fk4model1"]
    assert values["type"] == ["Software"] and values["rights"] == [
        "https://spdx.org/licenses/Apache-2.0", "info:eu-repo/semantics/openAccess"]  # the license, OpenAIRE access


def test_codemeta_uses_codemeta_terms_and_parses():
    text = exports.export(model_record(), "codemeta")
    data = json.loads(text)
    assert data["@context"] == "https://w3id.org/codemeta/3.0" and data["@type"] == "SoftwareSourceCode"

    def keys(node):
        if isinstance(node, dict):
            yield from node
            for value in node.values():
                yield from keys(value)
        elif isinstance(node, list):
            for value in node:
                yield from keys(value)

    terms = {key for key in keys(data) if not key.startswith("@")}
    assert terms <= set(CODEMETA_CONTEXT), terms - set(CODEMETA_CONTEXT)  # every key a term of CodeMeta 3.0
    assert {"SoftwareSourceCode", "Person", "Organization"} <= set(CODEMETA_CONTEXT)
    assert data["author"][0] == {"@type": "Person", "familyName": "Lovelace", "givenName": "Ada",
                                 "@id": "https://orcid.org/0000-0002-1825-0097",
                                 "affiliation": [{"@type": "Organization", "name": "ORNL"}]}
    assert data["version"] == "1-onnx" and data["runtimePlatform"] == "onnx" and data["keywords"] == ["climate", "cnn"]
    # Read as RDF with CodeMeta's own context (offline): each term becomes the schema.org or CodeMeta property
    # the context defines, and nothing is dropped for want of a definition.
    graph = Graph().parse(data=json.dumps({**data, "@context": CODEMETA_CONTEXT}), format="json-ld")
    subject = URIRef(data["@id"])
    assert (subject, URIRef("http://schema.org/name"), Literal("Cloud mask CNN")) in graph
    assert (subject, URIRef("http://www.w3.org/1999/02/22-rdf-syntax-ns#type"),
            URIRef("http://schema.org/SoftwareSourceCode")) in graph
    assert graph.value(subject, URIRef("http://schema.org/license")) == URIRef("https://spdx.org/licenses/Apache-2.0")
    assert {str(p) for p in graph.predicates(subject, None)} >= {
        f"http://schema.org/{term}" for term in ("author", "datePublished", "version", "keywords", "runtimePlatform")}
    assert "codemeta" in exports.names_for("model") and "codemeta" not in exports.names_for("dataset")


def test_citation_cff_follows_the_citation_file_format():
    for record in (model_record(), dataset_record()):
        data = yaml.safe_load(exports.export(record, "cff"))
        jsonschema.Draft7Validator(CFF, format_checker=jsonschema.FormatChecker()).validate(data)
    data = yaml.safe_load(exports.export(model_record(), "cff"))
    assert data["authors"][0] == {"family-names": "Lovelace", "given-names": "Ada",
                                  "orcid": "https://orcid.org/0000-0002-1825-0097", "affiliation": "ORNL"}
    assert data["license"] == "Apache-2.0" and data["type"] == "software" and data["version"] == "1-onnx"
    assert {"type": "other", "value": "ark:/99999/fk4model1", "description": "The ARK of this record."} in \
        data["identifiers"]
    assert data["date-released"] == "2026-03-04"


def test_dcat_ap_conforms_to_its_shapes():
    for record in (model_record(), dataset_record()):  # a model has sources (prov:wasDerivedFrom)
        assert_dcat_ap(Graph().parse(data=exports.export(record, "dcat"), format="xml"))
    graph = Graph().parse(data=exports.export(dataset_record(), "dcat"), format="xml")
    dcat = "http://www.w3.org/ns/dcat#"
    s = URIRef(dataset_record().iri)
    [dist] = graph.objects(s, URIRef(dcat + "distribution"))
    assert dist == URIRef(f"{BASE}/files/data.csv")
    assert graph.value(dist, URIRef(dcat + "mediaType")) == URIRef("http://www.iana.org/assignments/media-types/text/csv")
    assert graph.value(dist, URIRef(dcat + "byteSize")).toPython() == 10
    assert graph.value(s, URIRef("http://purl.org/dc/terms/identifier")) == Literal("ark:/99999/fk4data")


@pytest.mark.slow
@pytest.mark.cpu  # every crosswalk: over 1 s on a quiet machine
@pytest.mark.django_db
def test_each_by_its_own_url_by_negotiation_and_as_describedby(anon, owner, publish):
    _, model = publish(owner, "m")
    own = "/api/v1/artifacts/alice/m/versions/1/metadata/"
    for name in ("dublin-core", "codemeta", "cff", "dcat"):
        media = exports.FORMATS[name].media_type
        answer = anon.get(own + name)
        assert answer.status_code == 200 and answer["Content-Type"].startswith(media), name
        profile = exports.FORMATS[name].profile
        if profile and "vnd." not in media:  # a vendor type names its profile itself
            assert f'profile="{profile}"' in answer["Content-Type"], name
    dcat = get(anon, model.pid, f'application/rdf+xml; profile="{crosswalks.DCAT_AP}"')
    assert (None, None, URIRef("http://www.w3.org/ns/dcat#Dataset")) in Graph().parse(data=dcat.content, format="xml")
    for pid in (model.pid, model.artifact.pid):  # a version and its concept, as the hub serves them
        served = Graph().parse(data=get(anon, pid, f'application/rdf+xml; profile="{crosswalks.DCAT_AP}"').content,
                               format="xml")
        assert_dcat_ap(served)
        assert served.value(URIRef(f"http://127.0.0.1:8000/{pid}"), URIRef("http://www.w3.org/ns/dcat#landingPage")) \
            == URIRef(f"http://127.0.0.1:8000/landing/{pid}")
    graph = get(anon, model.pid, "application/rdf+xml")  # no profile: the metadata graph
    assert (None, None, URIRef("http://www.w3.org/ns/dcat#Dataset")) not in \
        Graph().parse(data=graph.content, format="xml")
    assert yaml.safe_load(get(anon, model.pid, "application/yaml").content)["cff-version"] == "1.2.0"
    assert get(anon, model.pid, "application/vnd.codemeta.ld+json").json()["name"] == "Title of m"
    assert ET.fromstring(get(anon, model.pid, "application/x-dc+xml").content).tag.endswith("}dc")  # noqa: S314
    link = get(anon, model.pid, "text/html")["Link"]
    described = set(re.findall(r'rel="describedby" ; type="([^"]+)"', link))
    assert {"application/x-dc+xml", "application/vnd.codemeta.ld+json", "application/yaml"} <= described
    assert f'profile="{crosswalks.DCAT_AP}"' in link
    _, table = publish(owner, "t", {"t.csv": b"a\n1\n"}, kind="dataset")
    assert anon.get("/api/v1/artifacts/alice/t/versions/1/metadata/codemeta").json()["code"] == "unsupported_format"
    assert anon.get("/" + table.pid, HTTP_ACCEPT="application/vnd.codemeta.ld+json").status_code == 406


def assert_ro_crate(crate: dict, root_id: str) -> dict:
    """RO-Crate 1.1's rules: the metadata descriptor conforms to 1.1 and is about the root data entity, a
    Dataset with a name, description, datePublished and license; every entity it names locally (its parts,
    authors, publisher, license) is described in the graph; files are Files."""
    assert crate["@context"][0] == "https://w3id.org/ro/crate/1.1/context"
    entities = {e["@id"]: e for e in crate["@graph"]}
    assert len(entities) == len(crate["@graph"])  # no @id twice
    descriptor = entities["ro-crate-metadata.json"]
    assert descriptor["@type"] == "CreativeWork" and descriptor["conformsTo"] == {"@id": "https://w3id.org/ro/crate/1.1"}
    assert descriptor["about"] == {"@id": root_id}
    root = entities[root_id]
    assert root["@type"] == "Dataset" and all(root.get(k) for k in ("name", "description", "datePublished", "license"))
    for ref in [*root["hasPart"], *root["author"], root["publisher"], root["license"]]:
        assert ref["@id"] in entities, ref
    assert all(entities[part["@id"]]["@type"] == "File" for part in root["hasPart"])
    graph = Graph().parse(data=json.dumps({**crate, "@context": [
        {"@vocab": "https://schema.org/"}, crate["@context"][1]]}), format="json-ld")
    assert len(graph) > 10
    return root


def read_crate(folder: Path, crate: dict) -> ROCrate:
    """The crate as ro-crate-py (the RO-Crate project's Python library) reads it from ``folder``: it finds the
    metadata descriptor and the root data entity (whose id it writes as a folder's, ending in "/"), and every
    other entity of the graph."""
    (folder / "ro-crate-metadata.json").write_text(json.dumps(crate))
    read = ROCrate(folder)
    assert read.metadata.id == "ro-crate-metadata.json" and read.version == "1.1"
    root = next(e["about"]["@id"] for e in crate["@graph"] if e["@id"] == "ro-crate-metadata.json")
    assert read.root_dataset.id.rstrip("/") == root.rstrip("/")
    assert {entity.id for entity in read.get_entities()} >= {e["@id"] for e in crate["@graph"]} - {root}
    return read


def test_ro_crate_metadata_attached_and_detached(tmp_path):
    record = model_record()
    (tmp_path / "attached").mkdir()
    (tmp_path / "attached" / "cnn.onnx").write_bytes(b"onnx")
    read = read_crate(tmp_path / "attached", crosswalks.ro_crate(record))
    assert read.root_dataset.id == "./" and read.name == "Cloud mask CNN"
    assert [part.id for part in read.root_dataset["hasPart"]] == ["cnn.onnx"]
    assert read.dereference("cnn.onnx").type == "File"
    assert [author["name"] for author in read.root_dataset["author"]] == ["Ada Lovelace", "Alan Turing"]
    assert read.license.id == "https://spdx.org/licenses/Apache-2.0"
    (tmp_path / "detached").mkdir()
    detached = read_crate(tmp_path / "detached", json.loads(exports.export(record, "ro-crate")))
    assert [part.id for part in detached.root_dataset["hasPart"]] == [f"{BASE}/files/cnn.onnx"]
    root = assert_ro_crate(crosswalks.ro_crate(record), "./")
    assert root["hasPart"] == [{"@id": "cnn.onnx"}] and root["hpc:machineLearningFramework"] == "onnx"
    assert root["isBasedOn"] == [{"@id": f"{BASE}/ark:/99999/fk4src"}, {"@id": f"{BASE}/ark:/99999/fk4data"}]
    crate = crosswalks.ro_crate(record)
    action = next(e for e in crate["@graph"] if e["@type"] == "CreateAction")
    assert action["@id"] == f"{BASE}/ark:/99999/fk4test#activity" and action["result"] == {"@id": "./"}
    detached = json.loads(exports.export(record, "ro-crate"))
    assert assert_ro_crate(detached, record.iri)["hasPart"] == [{"@id": f"{BASE}/files/cnn.onnx"}]


@pytest.mark.django_db
def test_a_versions_zip_is_an_ro_crate(anon, owner, publish, tmp_path):
    import io
    import zipfile

    _, version = publish(owner, "crated", {"a.csv": b"x\n1\n", "sub/b.bin": b"\x00\x01"}, kind="dataset")
    archive = anon.get("/api/v1/artifacts/alice/crated/versions/1/archive")
    with zipfile.ZipFile(io.BytesIO(b"".join(archive.streaming_content))) as held:
        crate = json.loads(held.read("ro-crate-metadata.json"))
        names = set(held.namelist())
    root = assert_ro_crate(crate, "./")
    parts = {"README.md", "a.csv", "sub/b.bin"}  # README.md: the card the hub wrote
    assert {part["@id"] for part in root["hasPart"]} == names - {"ro-crate-metadata.json"} == parts
    zipped = tmp_path / "crated.zip"
    zipped.write_bytes(b"".join(anon.get("/api/v1/artifacts/alice/crated/versions/1/archive").streaming_content))
    read = ROCrate(zipped)  # ro-crate-py reads the zip itself, its files beside the metadata
    assert {part.id for part in read.root_dataset["hasPart"]} == {"README.md", "a.csv", "sub/b.bin"}
    assert read.dereference("a.csv").type == "File" and read.root_dataset["identifier"][0] == version.pid
    assert root["identifier"][0] == version.pid
    detached = get(anon, version.pid, 'application/ld+json; profile="https://w3id.org/ro/crate/1.1"')
    assert detached["Content-Type"].startswith("application/ld+json") and "ro/crate" in detached["Content-Type"]
    assert_ro_crate(detached.json(), f"http://127.0.0.1:8000/{version.pid}")
    _, own = publish(owner, "own-crate", {"ro-crate-metadata.json": b'{"mine": true}', "c.txt": b"c"},
                     kind="dataset")
    archive = anon.get("/api/v1/artifacts/alice/own-crate/versions/1/archive")
    with zipfile.ZipFile(io.BytesIO(b"".join(archive.streaming_content))) as held:
        assert held.read("ro-crate-metadata.json") == b'{"mine": true}'  # the version's own file, once
        assert sorted(held.namelist()) == ["README.md", "c.txt", "ro-crate-metadata.json"]  # the card the hub wrote
