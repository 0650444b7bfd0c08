"""Metadata through the hub: validation at upload, derivation from files and cards, exports, content
negotiation on PIDs, FAIR signposting."""

from __future__ import annotations

import io
import json
import re
from xml.etree import ElementTree as ET

import numpy as np
import pytest
from rdflib import Graph, Literal, URIRef

from hub.registry.models import Blob, Version
from ontology.vocab import HPC, SDO
from tests.conftest import client_for, multipart_file, valid_metadata

pytestmark = pytest.mark.django_db

MODEL = "/api/v1/artifacts/alice/cnn/"
DATA = "/api/v1/artifacts/alice/iris/"
CARD = b"""---
title: Cloud mask CNN
keywords: [climate, segmentation]
creators:
  - name: Ada Lovelace
    orcid: 0000-0002-1825-0097
license: apache-2.0
task: image-segmentation
---
# Cloud mask CNN

Trained on synthetic clouds.
"""
CSV = b"sepal_length,sepal_width,species,flag\n5.1,3.5,setosa,true\n4.9,3.0,virginica,false\n6.2,2.2,setosa,true\n"


def onnx_bytes() -> bytes:
    import onnx
    from onnx import TensorProto, helper

    weight = helper.make_tensor("w", TensorProto.FLOAT, [4, 2], np.ones(8, dtype=np.float32))
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 2])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    buffer = io.BytesIO()
    onnx.save(model, buffer)
    return buffer.getvalue()


def post(api, base: str, files: dict[str, bytes], metadata=None, **fields):
    data = {"files": [multipart_file(n, d) for n, d in files.items()], **fields}
    if metadata is not None:
        data["metadata"] = metadata if isinstance(metadata, str) else json.dumps(metadata)
    return api.post(base + "versions/", data, format="multipart")


@pytest.fixture
def model(api):
    assert api.post("/api/v1/artifacts/", {"kind": "model", "name": "cnn"}, format="json").status_code == 201
    return MODEL


@pytest.fixture
def dataset(api):
    assert api.post("/api/v1/artifacts/", {"kind": "dataset", "name": "iris", "title": "Iris",
                                           "description": "Flowers."}, format="json").status_code == 201
    return DATA


@pytest.fixture
def published(api, model, dataset):
    """A converted-looking model version (card + ONNX) and a dataset version."""
    response = post(api, model, {"README.md": CARD, "cnn.onnx": onnx_bytes()},
                    {"description": "Masks clouds in satellite images."})
    assert response.status_code == 201, response.content
    data = post(api, dataset, {"data.csv": CSV}, "creators: [Ada Lovelace]\nlicense: CC0-1.0\n")
    assert data.status_code == 201, data.content
    return response.json(), data.json()


def test_card_metadata_and_derived_facts(published):
    model, dataset = published
    meta = model["metadata"]
    assert meta["title"] == "Cloud mask CNN" and meta["license"] == "Apache-2.0"
    assert meta["creators"] == [{"name": "Ada Lovelace", "orcid": "https://orcid.org/0000-0002-1825-0097"}]
    assert meta["card"].startswith("# Cloud mask CNN") and "Trained on synthetic clouds." in meta["card"]
    assert meta["format"] == "onnx" and meta["framework"] == "onnx" and meta["opset"] == 17
    assert meta["inputs"] == [{"name": "x", "shape": ["batch", 4], "dtype": "float32"}]
    assert meta["outputs"] == [{"name": "y", "shape": ["batch", 2], "dtype": "float32"}]
    assert meta["parameters"] == 8
    assert set(meta["derived"]) >= {"format", "framework", "opset", "inputs", "outputs", "parameters", "card"}
    data = dataset["metadata"]
    assert data["title"] == "Iris" and data["description"] == "Flowers."  # from the artifact
    assert data["format"] == "csv" and data["size"] == len(CSV) and data["record_count"] == 3
    assert data["records"] == [{"name": "sepal_length", "dtype": "float64"},
                               {"name": "sepal_width", "dtype": "float64"},
                               {"name": "species", "dtype": "string"}, {"name": "flag", "dtype": "bool"}]


def test_onnx_facts_win_over_what_was_typed(api, model):
    response = post(api, model, {"m.onnx": onnx_bytes()}, valid_metadata(opset=9, inputs=[{"name": "wrong"}]))
    meta = response.json()["metadata"]
    assert meta["opset"] == 17 and meta["inputs"][0]["name"] == "x"


@pytest.mark.parametrize("missing", ["description", "creators", "license", "task", "framework"])
def test_missing_required_field_is_a_400_naming_it_and_stores_nothing(api, model, missing):
    metadata = {k: v for k, v in valid_metadata().items() if k != missing}
    response = post(api, model, {"weights.bin": b"unknown format"}, metadata)
    body = response.json()
    assert response.status_code == 400 and body["code"] == "invalid_metadata", body
    assert list(body["errors"]) == [missing] and missing in body["detail"]
    assert response["X-Error-Code"] == "invalid_metadata"
    assert not Version.objects.exists() and not Blob.objects.exists()


def test_bad_values_and_bad_cards_are_400s(api, model):
    bad = post(api, model, {"m.pt": b"x"}, valid_metadata(license="MIT-ish", creators=[{"name": ""}]))
    assert bad.status_code == 400 and set(bad.json()["errors"]) == {"license", "creators"}
    card = post(api, model, {"README.md": b"---\ntitle: [unclosed\n---\n", "m.pt": b"x"}, valid_metadata())
    assert card.status_code == 400 and "line" in card.json()["errors"]["README.md"][0]
    hub_only = post(api, model, {"m.pt": b"x"}, valid_metadata(verified=True))
    assert hub_only.status_code == 400 and "hub sets" in hub_only.json()["errors"]["verified"][0]
    yaml_error = post(api, model, {"m.pt": b"x"}, "title: [unclosed\n")
    assert yaml_error.status_code == 400 and "line" in yaml_error.json()["detail"]


EXPORTS = {"jsonld": "application/ld+json", "turtle": "text/turtle", "rdfxml": "application/rdf+xml",
           "ntriples": "application/n-triples", "datacite-json": "application/vnd.datacite.datacite+json",
           "datacite-xml": "application/vnd.datacite.datacite+xml", "schemaorg": "application/ld+json",
           "bibtex": "application/x-bibtex", "citation": "text/plain"}


def test_every_export_over_the_api(api, anon, published):
    for name, media_type in EXPORTS.items():
        response = anon.get(MODEL + f"versions/1/metadata/{name}")
        assert response.status_code == 200 and response["Content-Type"].startswith(media_type), name
    graph = Graph().parse(data=anon.get(MODEL + "versions/1/metadata/turtle").content, format="turtle")
    subject = URIRef(published[0]["pid_url"])
    assert (subject, HPC.machineLearningFramework, Literal("onnx")) in graph
    assert (subject, SDO.keywords, Literal("climate")) in graph
    croissant = anon.get(DATA + "versions/1/metadata/croissant")
    assert croissant.status_code == 200 and croissant.json()["recordSet"][0]["field"][0]["name"] == "sepal_length"
    assert anon.get(MODEL + "versions/1/metadata/croissant").json()["code"] == "unsupported_format"
    assert anon.get(MODEL + "versions/1/metadata/yaml").status_code == 400
    api.delete(MODEL + "versions/1/")
    tombstone = anon.get(MODEL + "versions/1/metadata/jsonld")  # a deleted version keeps its record (FAIR A2)
    assert tombstone.status_code == 200
    withdrawn = Graph().parse(data=tombstone.content, format="json-ld")
    assert (subject, SDO.creativeWorkStatus, Literal("Withdrawn")) in withdrawn


NEGOTIATED = {
    "application/ld+json": lambda body: Graph().parse(data=body, format="json-ld"),
    "text/turtle": lambda body: Graph().parse(data=body, format="turtle"),
    "application/rdf+xml": lambda body: Graph().parse(data=body, format="xml"),
    "application/n-triples": lambda body: Graph().parse(data=body, format="nt"),
    "application/vnd.datacite.datacite+json": json.loads,
    "application/vnd.datacite.datacite+xml": ET.fromstring,
}


@pytest.mark.parametrize("media_type", list(NEGOTIATED))
def test_content_negotiation_on_version_and_concept_pids(anon, published, media_type):
    model = published[0]
    concept_pid = anon.get(MODEL).json()["pid"]
    for pid, subject in ((model["pid"], model["pid_url"]), (concept_pid, None)):
        response = anon.get(f"/{pid}", follow=True, HTTP_ACCEPT=f"{media_type}, text/html;q=0.5")
        assert response.status_code == 200 and response["Content-Type"].startswith(media_type), pid
        assert "Accept" in response["Vary"]
        parsed = NEGOTIATED[media_type](response.content)
        if isinstance(parsed, Graph):
            assert (URIRef(subject or f"http://127.0.0.1:8000/{pid}"), SDO.name, Literal("Cloud mask CNN")) in parsed
        elif isinstance(parsed, dict):
            assert parsed["identifiers"][0]["identifier"] == pid
        else:
            assert parsed.find(f"{{{'http://datacite.org/schema/kernel-4'}}}identifier").text == pid
    turtle = anon.get(f"/pid/{concept_pid}", follow=True, HTTP_ACCEPT="text/turtle")
    concept = Graph().parse(data=turtle.content, format="turtle")
    assert (URIRef(f"http://127.0.0.1:8000/{concept_pid}"), URIRef("http://purl.org/dc/terms/hasVersion"),
            URIRef(model["pid_url"])) in concept


def test_unacceptable_types_and_private_artifacts(api, anon, published, other):
    pid = published[0]["pid"]
    refused = anon.get(f"/{pid}", follow=True, HTTP_ACCEPT="image/png")
    assert refused.status_code == 406 and refused.json()["code"] == "not_acceptable"
    api.patch(MODEL, {"visibility": "private"}, format="json")
    for accept in ("text/turtle", "application/vnd.datacite.datacite+json", "text/html"):
        assert anon.get(f"/{pid}", follow=True, HTTP_ACCEPT=accept).status_code == 404
        assert client_for(other).get(f"/{pid}", follow=True, HTTP_ACCEPT=accept).status_code == 404
    assert api.get(f"/{pid}", follow=True, HTTP_ACCEPT="text/turtle").status_code == 200
    assert anon.get(f"/linkset/{pid}").status_code == 404


def test_landing_page_embeds_schema_org_and_sends_signposting(anon, published):
    model = published[0]
    response = anon.get(f"/{model['pid']}", follow=True, HTTP_ACCEPT="text/html")
    assert response.status_code == 200
    html = response.content.decode()
    [embedded] = re.findall(r'<script type="application/ld\+json">(.*?)</script>', html, re.S)
    record = json.loads(embedded)
    assert record["@type"] == "SoftwareSourceCode" and record["name"] == "Cloud mask CNN"
    assert record["license"] == "https://spdx.org/licenses/Apache-2.0"
    assert record["creator"][0]["@id"] == "https://orcid.org/0000-0002-1825-0097"
    assert {d["name"] for d in record["associatedMedia"]} == {"README.md", "cnn.onnx"}
    assert record["hasPart"] == record["associatedMedia"]  # where harvesters look for a work's files
    assert {d["encodingFormat"] for d in record["hasPart"]} >= {"application/onnx"}
    assert all(d["contentSize"].endswith(" B") for d in record["hasPart"])
    assert all(d["contentUrl"].startswith("http://127.0.0.1:8000/api/v1/") for d in record["associatedMedia"])
    link = response["Link"]
    assert f'<{model["pid_url"]}> ; rel="cite-as"' in link
    assert 'rel="describedby" ; type="text/turtle"' in link and 'rel="item" ; type="application/onnx"' in link
    assert '<https://schema.org/AboutPage> ; rel="type"' in link
    assert '<https://spdx.org/licenses/Apache-2.0> ; rel="license"' in link
    assert '<https://orcid.org/0000-0002-1825-0097> ; rel="author"' in link


@pytest.mark.slow
@pytest.mark.cpu  # parses every representation: over 1 s on a quiet machine
def test_landing_page_signposts_in_html_and_parses_offline(anon, published):
    """Harvesters that read only the HTML head find the same signposts as the Link header; the embedded
    schema.org record needs no network (a self-contained context), and every describedby link answers the
    very media type it advertises, and */*."""
    from rdflib import Graph

    model = published[0]
    response = anon.get(f"/{model['pid']}", follow=True, HTTP_ACCEPT="text/html")
    html = response.content.decode()
    head = html[:html.index("</head>")]
    in_head = set(re.findall(r'<link rel="([^"]+)" href="([^"]+)"(?: type="([^"]+)")?(?: profile="[^"]+")?>',
                             head)) - {(rel, href, "") for rel, href in [("stylesheet", "/static/web/hub.css"),
                                                                         ("icon", "data:,")]}
    in_header = set(re.findall(r'<([^>]+)> ; rel="([^"]+)"(?: ; type="([^"]+)")?', response["Link"]))
    canonical = {(rel, href, kind) for rel, href, kind in in_head if rel == "canonical"}  # HTML's own, the PID's
    assert [href for _, href, _ in canonical] == [href for href, rel, _ in in_header if rel == "cite-as"]
    assert {(href, rel, kind) for rel, href, kind in in_head - canonical} == in_header
    [embedded] = re.findall(r'<script type="application/ld\+json">(.*?)</script>', html, re.S)
    assert json.loads(embedded)["@context"]["@vocab"] == "https://schema.org/"
    graph = Graph().parse(data=embedded, format="json-ld")  # a remote context would need the network
    assert (None, URIRef("https://schema.org/name"), Literal("Cloud mask CNN")) in graph
    described = [(href, kind) for href, rel, kind in in_header if rel == "describedby"]
    assert len(described) >= 5
    for href, kind in described:
        path = href.replace("http://127.0.0.1:8000", "")
        for accept in (kind, "*/*"):
            answer = anon.get(path, HTTP_ACCEPT=accept)
            assert answer.status_code == 200 and answer["Content-Type"].startswith(kind), (href, accept)
    wrong = anon.get(described[0][0].replace("http://127.0.0.1:8000", ""), HTTP_ACCEPT="image/png")
    assert wrong.status_code == 406 and wrong.json()["code"] == "not_acceptable"


def test_a_card_cannot_inject_script_into_the_landing_page(api, anon, dataset):
    evil = b"---\ntitle: </script><script>alert(1)</script>\ncreators: [x]\nlicense: MIT\n---\nbody"
    response = post(api, dataset, {"README.md": evil, "d.csv": CSV})
    assert response.status_code == 201, response.content
    html = anon.get(f"/{response.json()['pid']}", follow=True, HTTP_ACCEPT="text/html").content.decode()
    assert "<script>alert(1)</script>" not in html
    scripts = re.findall(r"<script[^>]*>", html)  # the JSON-LD block and the hub's own script, nothing else
    assert sorted(scripts) == ['<script src="/static/web/hub.js" defer>', '<script type="application/ld+json">']


def test_field_table_is_published(anon):
    fields = {f["name"]: f for f in anon.get("/api/v1/metadata/fields/").json()["fields"]}
    assert fields["license"]["required_for"] == ["dataset", "model", "project"]
    assert fields["opset"]["derived"] is True and "verified" not in fields


@pytest.mark.django_db(transaction=True)
def test_signposting_parses_with_the_signposting_package(live_server, owner, tmp_path):
    import requests
    import signposting

    api = client_for(owner)
    api.post("/api/v1/artifacts/", {"kind": "model", "name": "cnn"}, format="json")
    version = post(api, MODEL, {"README.md": CARD, "cnn.onnx": onnx_bytes()}, {"description": "Clouds."}).json()
    resolved = requests.get(f"{live_server.url}/{version['pid']}", allow_redirects=False, timeout=10)
    assert resolved.status_code == 303 and resolved.headers["Location"].endswith(f"/landing/{version['pid']}")
    landing = f"{live_server.url}/landing/{version['pid']}"
    signposts = signposting.find_signposting_http(landing)
    assert str(signposts.citeAs.target) == version["pid_url"]
    assert {str(s.type) for s in signposts.describedBy} >= {"application/ld+json", "text/turtle",
                                                             "application/vnd.datacite.datacite+xml"}
    assert {str(s.type) for s in signposts.items} == {"text/markdown", "application/onnx"}
    assert str(signposts.license.target) == "https://spdx.org/licenses/Apache-2.0"
    assert [str(a.target) for a in signposts.authors] == ["https://orcid.org/0000-0002-1825-0097"]
    assert {str(t.target) for t in signposts.types} == {"https://schema.org/SoftwareSourceCode",
                                                        "https://schema.org/AboutPage"}
    linkset_url = str(signposts.linksets.pop().target) if isinstance(signposts.linksets, set) else \
        str(next(iter(signposts.linksets)).target)
    linkset = signposting.find_signposting_linkset(linkset_url.replace("http://127.0.0.1:8000", live_server.url))
    from_linkset = linkset.for_context(resolved.headers["Location"])
    assert str(from_linkset.citeAs.target) == version["pid_url"]
    assert len(from_linkset.items) == 2 and from_linkset.license is not None


@pytest.mark.slow
@pytest.mark.cpu
@pytest.mark.django_db
def test_a_tree_ensembles_learned_values_count_as_its_parameters(owner, tmp_path):
    """ONNX-ML trees keep thresholds and leaf weights in attributes, not initializers ("Parameters: 0" before)."""
    import numpy as np
    from skl2onnx import to_onnx
    from sklearn.ensemble import RandomForestClassifier

    from hub.registry import services
    from tests.conftest import staged, valid_metadata

    x = np.random.default_rng(0).standard_normal((60, 4)).astype(np.float32)
    forest = RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0).fit(x, (x[:, 0] > 0).astype(int))
    onnx_bytes = to_onnx(forest, x[:1], options={"zipmap": False}).SerializeToString()
    artifact = services.create_artifact(owner, kind="model", name="forest-onnx")
    version = services.create_version(artifact, owner, files=[staged(tmp_path, "forest.onnx", onnx_bytes)],
                                      metadata=valid_metadata("model", task="classification"))
    nodes = sum(tree.tree_.node_count for tree in forest.estimators_)
    assert version.metadata["parameters"] >= nodes  # one threshold per node at least, plus the leaves' weights
