"""What public metadata names must work for the public: every IRI under the hub's own URL in a public version's
RDF answers an anonymous client (no job API behind a login: the hub's activity is a fragment of the version's
own PID URL), and the SPARQL page's and the tour's examples list what their titles say (issue: new-user review)."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from urllib.parse import urldefrag, urlsplit

import pytest
from django.test import Client
from rdflib import Graph, URIRef
from rdflib.namespace import PROV, RDF

from hub.registry import services
from hub.registry.models import ProvenanceLink
from hub.web.sparql_page import EXAMPLES
from ontology.vocab import HUB
from tests.conftest import staged, valid_metadata

pytestmark = pytest.mark.django_db

HOST = "http://127.0.0.1:8000"
BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
README = (Path(__file__).resolve().parents[2] / "docs" / "getting-started" / "tour.md").read_text()


def _made(artifact, owner, label, relations, tmp_path, extra=None):
    """A version as a hub job publishes it: a ``job`` and what the job did (``conversion``, ...)."""
    return services.create_version(
        artifact, owner, label=label, files=[staged(tmp_path, f"{label}.onnx", label.encode())],
        metadata=valid_metadata("model", title=f"{artifact.name} {label}", framework="onnx", format="onnx",
                                job=str(uuid.uuid4()), **(extra or {})),
        provenance=[services.ProvenanceRef(relation, source) for relation, source in relations], system=True)


@pytest.fixture
def world(owner, publish, tmp_path):
    """A public dataset; a model uploaded (1) trained on it, its conversion 1-onnx and optimisation 1-onnx-opt;
    a fine-tune of the model (another artifact, made by a hub job, derived from it and trained on the data)."""
    _, data = publish(owner, "iris-data", {"iris.csv": b"a,b\n1,2\n"}, kind="dataset")
    model = services.create_artifact(owner, kind="model", name="tiny-cnn", visibility="public")
    one = services.create_version(model, owner, label="1", files=[staged(tmp_path, "model.pt", b"pt")],
                                  metadata=valid_metadata("model", title="tiny-cnn 1"),
                                  provenance=[services.ProvenanceRef(ProvenanceLink.Relation.TRAINED_ON, data)])
    onnx = _made(model, owner, "1-onnx", [(ProvenanceLink.Relation.CONVERTED_FROM, one)], tmp_path,
                 {"conversion": {"model.pt": {"converter": "torch.onnx"}},
                  "execution": {"started": "2026-01-01T00:00:00Z", "ended": "2026-01-01T00:01:00Z"}})
    opt = _made(model, owner, "1-onnx-opt", [(ProvenanceLink.Relation.DERIVED_FROM, onnx)], tmp_path,
                {"optimization": {"quantized": True}})
    tuned = services.create_artifact(owner, kind="model", name="tiny-cnn-tuned", visibility="public")
    ft = _made(tuned, owner, "1", [(ProvenanceLink.Relation.DERIVED_FROM, one),
                                   (ProvenanceLink.Relation.TRAINED_ON, data)], tmp_path)
    return {"data": data, "1": one, "1-onnx": onnx, "1-onnx-opt": opt, "tuned": ft}


def bindings(query: str) -> list[dict[str, str]]:
    response = Client().get("/sparql", {"query": query}, HTTP_ACCEPT="application/sparql-results+json")
    assert response.status_code == 200, response.content
    return [{k: v["value"] for k, v in row.items()} for row in response.json()["results"]["bindings"]]


def iri(version) -> str:
    return f"{HOST}/{version.pid}"


def example(title: str) -> str:
    return next(query for label, query in EXAMPLES if label == title)


def test_as_uploaded_leaves_out_every_version_the_hub_made(world):
    """The page's first example and the tour's query (docs/getting-started/tour.md): the upload only, not 1-onnx,
    1-onnx-opt or the fine-tune (all made by hub jobs)."""
    rows = bindings(example("Models and their frameworks, as uploaded"))
    assert {row["model"] for row in rows} == {iri(world["1"])}
    from_readme = re.search(r"--data-urlencode 'query=(.*?)' \\", README, re.S).group(1)
    assert [row["t"] for row in bindings(from_readme)] == ["tiny-cnn 1"]


def test_what_was_converted_from_what_lists_conversions_only(world):
    """Not model <- training data, not an optimisation or a fine-tune <- its source: format conversions."""
    rows = bindings(example("What was converted from what"))
    assert [(row["conversion"], row["source"]) for row in rows] == [(iri(world["1-onnx"]), iri(world["1"]))]


def _hub_iris(graph: Graph) -> set[str]:
    found = set()
    for triple in graph:
        for term in triple:
            if isinstance(term, URIRef) and str(term).startswith(HOST):
                found.add(urldefrag(str(term)).url)
    return found


@pytest.mark.slow
@pytest.mark.cpu
def test_every_hub_iri_in_public_rdf_answers_the_public(world):
    """Crawl every IRI under the hub's URL in each public version's RDF with an anonymous client (as a program
    and as a browser): none is a 401, 404 or 406, i.e. no private job API. The hub's activity is described."""
    anon = Client()
    checked = set()
    for version in world.values():
        graph = Graph().parse(data=anon.get(f"/api/v1/records/turtle/{version.pid}").content, format="turtle")
        for target in sorted(_hub_iris(graph) - checked):
            checked.add(target)
            parts = urlsplit(target)
            for accept in ("", BROWSER):
                answer = anon.get(parts.path, dict(re.findall(r"([^&=]+)=([^&]*)", parts.query)),
                                  HTTP_ACCEPT=accept, follow=True)
                assert answer.status_code == 200, (version, target, accept, answer.status_code)
    assert not [iri for iri in checked if "/api/v1/jobs/" in iri]
    onnx = Graph().parse(data=anon.get(f"/api/v1/records/turtle/{world['1-onnx'].pid}").content, format="turtle")
    subject = URIRef(iri(world["1-onnx"]))
    activity = onnx.value(subject, PROV.wasGeneratedBy)
    assert str(activity) == f"{iri(world['1-onnx'])}#activity"
    assert (activity, RDF.type, HUB.HubActivity) in onnx and (activity, PROV.used, URIRef(iri(world["1"]))) in onnx
    assert (activity, PROV.startedAtTime, None) in onnx
