"""Dublin Core XML, CodeMeta, CITATION.cff and DCAT-AP (issue 40, what Zenodo offers): each read back by a
parser and checked against the rules of its format; each by its own URL, by negotiation on the PID and as a
describedby link."""

from __future__ import annotations

import json
import re
from xml.etree import ElementTree as ET

import jsonschema
import pytest
import yaml
from pyshacl import validate as shacl
from rdflib import Graph, Literal, URIRef

from ontology import crosswalks, exports
from tests.metadata.test_exports import BASE, dataset_record, model_record
from tests.metadata.test_fair import get

DC = "{http://purl.org/dc/elements/1.1/}"
DC_ELEMENTS = {"title", "creator", "subject", "description", "publisher", "contributor", "date", "type", "format",
               "identifier", "source", "language", "relation", "coverage", "rights"}
# CodeMeta 3.0's terms (https://w3id.org/codemeta/3.0): the ones a record may use here.
CODEMETA_TERMS = {"@context", "@type", "@id", "identifier", "name", "description", "author", "contributor",
                  "datePublished", "dateCreated", "dateModified", "publisher", "url", "applicationCategory",
                  "version", "license", "keywords", "codeRepository", "runtimePlatform", "funding", "funder",
                  "fileSize", "relatedLink", "isPartOf", "givenName", "familyName", "affiliation",
                  "softwareRequirements", "programmingLanguage", "referencePublication", "email"}
# Citation File Format 1.2.0 (its JSON schema's rules for the keys the hub writes).
CFF_PERSON = {"type": "object", "additionalProperties": False, "required": ["family-names"], "properties": {
    "family-names": {"type": "string", "minLength": 1}, "given-names": {"type": "string", "minLength": 1},
    "name-particle": {"type": "string"}, "affiliation": {"type": "string"},
    "orcid": {"type": "string", "pattern": r"^https://orcid\.org/[0-9]{4}-[0-9]{4}-[0-9]{4}-[0-9]{3}[0-9X]$"}}}
CFF_ENTITY = {"type": "object", "additionalProperties": False, "required": ["name"],
              "properties": {"name": {"type": "string", "minLength": 1}}}
CFF = {
    "type": "object", "additionalProperties": False,
    "required": ["cff-version", "message", "title", "authors"],
    "properties": {
        "cff-version": {"type": "string", "pattern": r"^1\.2\.0$"}, "message": {"type": "string", "minLength": 1},
        "type": {"enum": ["dataset", "software"]}, "title": {"type": "string", "minLength": 1},
        "authors": {"type": "array", "minItems": 1, "items": {"oneOf": [CFF_PERSON, CFF_ENTITY]}},
        "identifiers": {"type": "array", "items": {
            "type": "object", "required": ["type", "value"], "additionalProperties": False,
            "properties": {"type": {"enum": ["doi", "url", "swh", "other"]}, "value": {"type": "string"},
                           "description": {"type": "string"}}}},
        "url": {"type": "string", "format": "uri"}, "repository-code": {"type": "string", "format": "uri"},
        "date-released": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"},
        "version": {"type": "string"}, "abstract": {"type": "string"},
        "keywords": {"type": "array", "items": {"type": "string"}},
        "license": {"type": "string", "pattern": r"^[A-Za-z0-9.+-]+$"}, "license-url": {"type": "string"},
    },
}
DCAT_AP_SHAPES = """
@prefix sh: <http://www.w3.org/ns/shacl#> . @prefix dcat: <http://www.w3.org/ns/dcat#> .
@prefix dct: <http://purl.org/dc/terms/> . @prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
@prefix foaf: <http://xmlns.com/foaf/0.1/> .
<urn:shape:Dataset> a sh:NodeShape ; sh:targetClass dcat:Dataset ;
  sh:property [ sh:path dct:title ; sh:minCount 1 ; sh:nodeKind sh:Literal ] ;
  sh:property [ sh:path dct:description ; sh:minCount 1 ; sh:nodeKind sh:Literal ] ;
  sh:property [ sh:path dct:issued ; sh:maxCount 1 ; sh:datatype xsd:dateTime ] ;
  sh:property [ sh:path dct:publisher ; sh:maxCount 1 ; sh:class foaf:Agent ] ;
  sh:property [ sh:path dcat:distribution ; sh:class dcat:Distribution ] ;
  sh:property [ sh:path dcat:landingPage ; sh:nodeKind sh:IRI ] ;
  sh:property [ sh:path dct:license ; sh:nodeKind sh:IRI ] .
<urn:shape:Distribution> a sh:NodeShape ; sh:targetClass dcat:Distribution ;
  sh:property [ sh:path dcat:accessURL ; sh:minCount 1 ; sh:nodeKind sh:IRI ] ;
  sh:property [ sh:path dcat:byteSize ; sh:maxCount 1 ; sh:datatype xsd:nonNegativeInteger ] ;
  sh:property [ sh:path dcat:mediaType ; sh:maxCount 1 ; sh:nodeKind sh:IRI ] .
"""


def test_dublin_core_xml_uses_only_the_fifteen_elements():
    root = ET.fromstring(exports.export(model_record(), "dublin-core").encode())  # noqa: S314 - our own output
    assert root.tag == "{http://www.openarchives.org/OAI/2.0/oai_dc/}dc"
    assert all(child.tag.startswith(DC) and child.tag[len(DC):] in DC_ELEMENTS for child in root)
    values = {}
    for child in root:
        values.setdefault(child.tag[len(DC):], []).append(child.text)
    assert values["title"] == ["Cloud mask CNN"] and values["creator"] == ["Ada Lovelace", "Alan Turing"]
    assert values["identifier"] == [f"{BASE}/ark:/99999/fk4model1", "ark:/99999/fk4model1"]
    assert values["type"] == ["Software"] and values["rights"] == ["https://spdx.org/licenses/Apache-2.0"]


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

    assert set(keys(data)) <= CODEMETA_TERMS | {"@type"}, set(keys(data)) - CODEMETA_TERMS
    assert data["author"][0] == {"@type": "Person", "familyName": "Lovelace", "givenName": "Ada",
                                 "@id": "https://orcid.org/0000-0002-1825-0097",
                                 "affiliation": [{"@type": "Organization", "name": "ORNL"}]}
    assert data["version"] == "1-onnx" and data["runtimePlatform"] == "onnx" and data["keywords"] == ["climate", "cnn"]
    # CodeMeta's terms are schema.org's: with schema.org as the vocabulary it reads offline as RDF.
    graph = Graph().parse(data=json.dumps({**data, "@context": {"@vocab": "https://schema.org/"}}), format="json-ld")
    assert (URIRef(data["@id"]), URIRef("https://schema.org/name"), Literal("Cloud mask CNN")) in graph
    assert "codemeta" in exports.FORMAT_KINDS and "dataset" not in exports.FORMAT_KINDS["codemeta"]


def test_citation_cff_follows_the_citation_file_format():
    for record in (model_record(), dataset_record()):
        data = yaml.safe_load(exports.export(record, "cff"))
        jsonschema.validate(data, CFF, format_checker=jsonschema.FormatChecker())
    data = yaml.safe_load(exports.export(model_record(), "cff"))
    assert data["authors"][0] == {"family-names": "Lovelace", "given-names": "Ada",
                                  "orcid": "https://orcid.org/0000-0002-1825-0097", "affiliation": "ORNL"}
    assert data["license"] == "Apache-2.0" and data["type"] == "software" and data["version"] == "1-onnx"
    assert {"type": "other", "value": "ark:/99999/fk4model1", "description": "The ARK of this record."} in \
        data["identifiers"]
    assert data["date-released"] == "2026-03-04"


def test_dcat_ap_conforms_to_its_shapes():
    graph = Graph().parse(data=exports.export(dataset_record(), "dcat"), format="xml")
    conforms, _, report = shacl(graph, shacl_graph=Graph().parse(data=DCAT_AP_SHAPES, format="turtle"))
    assert conforms, report
    dcat = "http://www.w3.org/ns/dcat#"
    s = URIRef(dataset_record().iri)
    [dist] = graph.objects(s, URIRef(dcat + "distribution"))
    assert dist == URIRef(f"{BASE}/files/data.csv")
    assert graph.value(dist, URIRef(dcat + "mediaType")) == URIRef("http://www.iana.org/assignments/media-types/text/csv")
    assert graph.value(dist, URIRef(dcat + "byteSize")).toPython() == 10
    assert graph.value(s, URIRef("http://purl.org/dc/terms/identifier")) == Literal("ark:/99999/fk4data")


@pytest.mark.django_db
def test_each_by_its_own_url_by_negotiation_and_as_describedby(anon, owner, publish):
    _, model = publish(owner, "m")
    own = "/api/v1/artifacts/alice/m/versions/1/metadata/"
    for name in ("dublin-core", "codemeta", "cff", "dcat"):
        media = exports.FORMATS[name][0]
        answer = anon.get(own + name)
        assert answer.status_code == 200 and answer["Content-Type"].startswith(media), name
        profile = exports.PROFILES.get(name)
        if profile and "vnd." not in media:  # a vendor type names its profile itself
            assert f'profile="{profile}"' in answer["Content-Type"], name
    dcat = get(anon, model.pid, f'application/rdf+xml; profile="{crosswalks.DCAT_AP}"')
    assert (None, None, URIRef("http://www.w3.org/ns/dcat#Dataset")) in Graph().parse(data=dcat.content, format="xml")
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


def test_ro_crate_metadata_attached_and_detached():
    record = model_record()
    root = assert_ro_crate(crosswalks.ro_crate(record), "./")
    assert root["hasPart"] == [{"@id": "cnn.onnx"}] and root["hpc:machineLearningFramework"] == "onnx"
    assert root["isBasedOn"] == [{"@id": f"{BASE}/ark:/99999/fk4src"}, {"@id": f"{BASE}/ark:/99999/fk4data"}]
    crate = crosswalks.ro_crate(record)
    action = next(e for e in crate["@graph"] if e["@type"] == "CreateAction")
    assert action["@id"] == f"{BASE}/api/v1/jobs/1/" and action["result"] == {"@id": "./"}
    detached = json.loads(exports.export(record, "ro-crate"))
    assert assert_ro_crate(detached, record.iri)["hasPart"] == [{"@id": f"{BASE}/files/cnn.onnx"}]


@pytest.mark.django_db
def test_a_versions_zip_is_an_ro_crate(anon, owner, publish):
    import io
    import zipfile

    _, version = publish(owner, "crated", {"a.csv": b"x\n1\n", "sub/b.bin": b"\x00\x01"}, kind="dataset")
    archive = anon.get("/api/v1/artifacts/alice/crated/versions/1/archive")
    with zipfile.ZipFile(io.BytesIO(b"".join(archive.streaming_content))) as held:
        crate = json.loads(held.read("ro-crate-metadata.json"))
        names = set(held.namelist())
    root = assert_ro_crate(crate, "./")
    assert {part["@id"] for part in root["hasPart"]} == names - {"ro-crate-metadata.json"} == {"a.csv", "sub/b.bin"}
    assert root["identifier"][0] == version.pid
    detached = get(anon, version.pid, 'application/ld+json; profile="https://w3id.org/ro/crate/1.1"')
    assert detached["Content-Type"].startswith("application/ld+json") and "ro/crate" in detached["Content-Type"]
    assert_ro_crate(detached.json(), f"http://127.0.0.1:8000/{version.pid}")
    _, own = publish(owner, "own-crate", {"ro-crate-metadata.json": b'{"mine": true}', "c.txt": b"c"},
                     kind="dataset")
    archive = anon.get("/api/v1/artifacts/alice/own-crate/versions/1/archive")
    with zipfile.ZipFile(io.BytesIO(b"".join(archive.streaming_content))) as held:
        assert held.read("ro-crate-metadata.json") == b'{"mine": true}'  # the version's own file, once
        assert sorted(held.namelist()) == ["c.txt", "ro-crate-metadata.json"]
