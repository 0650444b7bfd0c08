"""The version chain joins the versions people uploaded; the hub's variants (its ONNX conversion ``1-onnx``, an
optimisation ``1-onnx-opt``) link to their source by derivation, never as new versions of it
(``hub.registry.lineage``). Checked in every export that carries the chain: the Link header and linkset,
DataCite and RDF; and ``@current`` names the version the artifact's page opens on."""

from __future__ import annotations

import uuid

import pytest
from django.test import Client
from rdflib import Graph, URIRef
from rdflib.namespace import DCTERMS, PROV

from hub.registry import services
from hub.registry.models import ProvenanceLink
from ontology.vocab import HUB
from tests.conftest import staged, valid_metadata

pytestmark = pytest.mark.django_db

HOST = "http://127.0.0.1:8000"
CHAIN_RELS = {"predecessor-version", "successor-version"}
CHAIN_TYPES = {"IsNewVersionOf", "IsPreviousVersionOf"}


def _made_by_hub(artifact, owner, source, label: str, relation: str, tmp_path, job: str):
    """A version as the hub's conversion or optimisation job publishes it: same artifact, a ``job``."""
    return services.create_version(
        artifact, owner, label=label, files=[staged(tmp_path, f"{label}.onnx", label.encode())],
        metadata=valid_metadata("model", framework="onnx", format="onnx", job=str(uuid.uuid5(uuid.NAMESPACE_URL, job))),
        provenance=[services.ProvenanceRef(relation, source)], system=True)


@pytest.fixture
def chain(owner, publish, tmp_path):
    """Uploads 1 and 2 of alice/tiny-cnn, with 1-onnx and 1-onnx-opt made from 1 and 2-onnx from 2."""
    artifact, one = publish(owner, "tiny-cnn", {"model.pt": b"one"}, label="1")
    one_onnx = _made_by_hub(artifact, owner, one, "1-onnx", ProvenanceLink.Relation.CONVERTED_FROM, tmp_path, "j1")
    one_opt = _made_by_hub(artifact, owner, one_onnx, "1-onnx-opt", ProvenanceLink.Relation.DERIVED_FROM, tmp_path,
                           "j2")
    _, two = publish(owner, "tiny-cnn", {"model.pt": b"two"}, label="2")
    two_onnx = _made_by_hub(artifact, owner, two, "2-onnx", ProvenanceLink.Relation.CONVERTED_FROM, tmp_path, "j3")
    return {"artifact": artifact, "1": one, "1-onnx": one_onnx, "1-onnx-opt": one_opt, "2": two, "2-onnx": two_onnx}


def linkset(pid: str) -> dict[str, set[str]]:
    """The version's chain links in its linkset: rel -> hrefs."""
    context = Client().get(f"/linkset/{pid}").json()["linkset"][0]
    return {rel: {t["href"] for t in context[rel]} for rel in CHAIN_RELS if rel in context}


def datacite(pid: str) -> set[tuple[str, str]]:
    record = Client().get(f"/api/v1/records/datacite-json/{pid}").json()
    return {(r["relatedIdentifier"], r["relationType"]) for r in record["relatedIdentifiers"]}


def graph(pid: str) -> Graph:
    return Graph().parse(data=Client().get(f"/api/v1/records/turtle/{pid}").content, format="turtle")


def iri(version) -> URIRef:
    return URIRef(f"{HOST}/{version.pid}")


def test_the_chain_joins_uploads_and_skips_the_hubs_variants(chain):
    one, two = chain["1"], chain["2"]
    assert linkset(two.pid) == {"predecessor-version": {f"{HOST}/{one.pid}"}}
    assert linkset(one.pid) == {"successor-version": {f"{HOST}/{two.pid}"}}
    header = Client().get(f"/landing/{two.pid}")["Link"]
    assert f'<{HOST}/{one.pid}> ; rel="predecessor-version"' in header and "successor-version" not in header
    assert {r for r in datacite(two.pid) if r[1] in CHAIN_TYPES} == {(one.pid, "IsNewVersionOf")}
    assert {r for r in datacite(one.pid) if r[1] in CHAIN_TYPES} == {(two.pid, "IsPreviousVersionOf")}
    rdf = graph(two.pid)
    assert set(rdf.objects(iri(two), PROV.wasRevisionOf)) == {iri(one)}
    assert set(rdf.objects(iri(two), DCTERMS.replaces)) == {iri(one)}
    assert (iri(two), HUB.variantOf, None) not in rdf
    assert set(graph(one.pid).objects(iri(one), DCTERMS.isReplacedBy)) == {iri(two)}


@pytest.mark.parametrize(("label", "source", "datacite_type", "specific"), [
    ("1-onnx", "1", "IsVariantFormOf", HUB.convertedFrom),
    ("1-onnx-opt", "1-onnx", "IsDerivedFrom", PROV.wasDerivedFrom),
    ("2-onnx", "2", "IsVariantFormOf", HUB.convertedFrom),
])
def test_a_variant_links_to_its_source_by_derivation_only(chain, label, source, datacite_type, specific):
    variant, origin = chain[label], chain[source]
    assert linkset(variant.pid) == {}
    related = datacite(variant.pid)
    assert not {r for r in related if r[1] in CHAIN_TYPES}
    assert (origin.pid, datacite_type) in related
    rdf = graph(variant.pid)
    assert (iri(variant), PROV.wasRevisionOf, None) not in rdf
    assert (iri(variant), DCTERMS.replaces, None) not in rdf and (iri(variant), DCTERMS.isReplacedBy, None) not in rdf
    assert set(rdf.objects(iri(variant), HUB.variantOf)) == {iri(origin)}
    assert (iri(variant), specific, iri(origin)) in rdf


def test_deleted_uploads_are_skipped_where_a_live_one_exists(owner, publish, chain):
    one, two = chain["1"], chain["2"]
    _, three = publish(owner, "tiny-cnn", {"model.pt": b"three"}, label="3")
    services.delete_version(two, "superseded")
    assert linkset(three.pid) == {"predecessor-version": {f"{HOST}/{one.pid}"}}
    assert linkset(one.pid) == {"successor-version": {f"{HOST}/{three.pid}"}}
    assert set(graph(two.pid).objects(iri(two), PROV.wasRevisionOf)) == {iri(one)}  # the tombstone's place
    services.delete_version(one, "withdrawn")
    assert linkset(three.pid) == {"predecessor-version": {f"{HOST}/{two.pid}"}}  # no live one left: the nearest


def test_current_names_what_the_page_opens_on_and_latest_stays_the_newest(chain, anon, tmp_path):
    artifact, two = chain["artifact"], chain["2"]
    _made_by_hub(artifact, artifact.owner, chain["2-onnx"], "2-onnx-opt", ProvenanceLink.Relation.DERIVED_FROM,
                 tmp_path, "j4")  # an optimisation, newer than every upload: still not what the artifact stands for
    page = Client().get("/" + artifact.pid, follow=True)
    assert page.context["version"] == two
    assert anon.get("/api/v1/resolve", {"ref": "alice/tiny-cnn@current"}).json()["pid"] == two.pid
    assert anon.get("/api/v1/artifacts/alice/tiny-cnn/versions/current/").json()["pid"] == two.pid
    assert anon.get("/api/v1/resolve", {"ref": "alice/tiny-cnn@latest"}).json()["version"] == "2-onnx-opt"


def test_current_is_a_reserved_label(owner, publish):
    from hub.errors import HubError

    with pytest.raises(HubError):
        publish(owner, "tiny-cnn", {"model.pt": b"x"}, label="current")
