"""The SPARQL store (Oxigraph) follows every change exactly: publish, visibility both ways, deletions, a source
that goes private; each change renders again only what it touched; a store removed or ahead of the database is
built again. The same checks run on the shared Oxigraph server when the test services started one."""

from __future__ import annotations

import os
import shutil

import pytest

from hub.metadata import rdfstore
from hub.registry import services
from hub.registry.models import Artifact
from hub.registry.services import ProvenanceRef
from tests.conftest import staged, valid_metadata

pytestmark = pytest.mark.django_db

NAMES = "SELECT ?t WHERE { ?s a hpc:AIModel ; <https://schema.org/name> ?t } ORDER BY ?t"
SOURCES = "SELECT ?src WHERE { ?s <http://www.w3.org/ns/prov#wasDerivedFrom> ?src }"


def titles(client) -> list[str]:
    response = client.get("/sparql", {"query": NAMES})
    assert response.status_code == 200, response.content
    return [row["t"]["value"] for row in response.json()["results"]["bindings"]]


# The Oxigraph server is one for the whole run, and these tests clear it: they run in the serial tier (services), where
# no other test that uses it (tests/test_nodes.py) runs at the same time.
@pytest.fixture(params=["embedded", pytest.param("server", marks=pytest.mark.services)])
def backend(request, settings):
    """Each test on the embedded store, and on the Oxigraph server `scripts/services.sh` starts (its graphs and
    generation cleared first: every test's database starts afresh)."""
    if request.param == "server":
        url = os.environ.get("HUB_TEST_SPARQL_URL")
        if not url:
            pytest.skip("no Oxigraph server: run through scripts/services.sh (sets HUB_TEST_SPARQL_URL)")
        settings.HUB_SPARQL_STORE_URL = url
        rdfstore.Server(url).clear()
    return request.param


@pytest.mark.slow
@pytest.mark.cpu  # builds the store: over 1 s on a quiet machine
def test_visibility_and_deletion_are_followed_exactly(anon, api, owner, publish, backend):
    shown, _ = publish(owner, "shown", {"w.bin": b"1"})
    hidden, _ = publish(owner, "hidden", {"w.bin": b"2"}, visibility="private")
    _, first = publish(owner, "two-versions", {"w.bin": b"3"})
    publish(owner, "two-versions", {"w.bin": b"4"})
    assert titles(anon) == ["Title of shown", "Title of two-versions", "Title of two-versions"]
    assert titles(api) == titles(anon)  # the owner asks the public's store too

    services.update_artifact(hidden, {"visibility": "public"})
    services.update_artifact(shown, {"visibility": "private"})
    services.delete_version(first)
    assert titles(anon) == ["Title of hidden", "Title of two-versions"]

    services.delete_artifact(hidden)
    everything = anon.get("/sparql", {"query": "SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s ?p ?o } }"}).json()
    assert len(everything["results"]["bindings"]) == 1  # one live public version left, in its own graph
    assert titles(anon) == ["Title of two-versions"]


def derived_pair(owner, tmp_path):
    """A model ``source`` and a model ``made`` derived from it; returns the source's version."""
    source = services.create_artifact(owner, kind="model", name="source")
    target = services.create_version(source, owner, files=[staged(tmp_path, "w.bin", b"s")],
                                     metadata=valid_metadata("model"))
    made = services.create_artifact(owner, kind="model", name="made")
    services.create_version(made, owner, files=[staged(tmp_path, "w.bin", b"m")], metadata=valid_metadata("model"),
                            provenance=[ProvenanceRef("derived_from", target)])
    return target


def test_a_source_that_goes_private_loses_its_name_in_what_cites_it(anon, owner, tmp_path, backend):
    target = derived_pair(owner, tmp_path)
    source = target.artifact
    cited = {row["src"]["value"] for row in anon.get("/sparql", {"query": SOURCES}).json()["results"]["bindings"]}
    assert any(target.pid.split("/")[-1] in iri for iri in cited)

    services.update_artifact(source, {"visibility": "private"})
    text = anon.get("/sparql", {"query": "SELECT * WHERE { ?s ?p ?o }"}).content.decode()
    assert target.pid not in text and "source" not in text.replace("Source", "")


def test_each_change_renders_only_what_it_touched(owner, publish, backend):
    for index in range(4):
        publish(owner, f"model-{index}", {"w.bin": bytes([index])})
    store = rdfstore.current()
    assert rdfstore.sync(store) == 4  # built afresh
    assert rdfstore.sync(store) == 0 and not rdfstore.pending(store)  # nothing changed: nothing done
    publish(owner, "model-1", {"w.bin": b"again"})
    assert rdfstore.pending(store) and rdfstore.sync(store) == 1


def test_a_store_rendered_in_an_older_format_is_built_again_at_its_next_sync(owner, publish, backend):
    """An upgrade that renders versions differently needs no manual rebuild, on either backend."""
    for index in range(3):
        publish(owner, f"model-{index}", {"w.bin": bytes([index])})
    store = rdfstore.current()
    rdfstore.sync(store)
    assert rdfstore.sync(store) == 0
    with store.writing() as state:
        state[1] = rdfstore.RENDER_FORMAT - 1  # what a store written before the upgrade holds
    assert rdfstore.pending(store) and rdfstore.sync(store) == 3  # every graph again, not only what changed
    assert not rdfstore.pending(store) and rdfstore.sync(store) == 0


@pytest.mark.slow
@pytest.mark.cpu  # builds the store: over 1 s on a quiet machine
def test_a_removed_store_or_one_ahead_of_the_database_is_built_again(anon, owner, publish, settings):
    publish(owner, "kept", {"w.bin": b"k"})
    assert titles(anon) == ["Title of kept"]
    shutil.rmtree(settings.HUB_SPARQL_STORE_DIR)
    assert titles(anon) == ["Title of kept"]
    store = rdfstore.current()
    store.state_path.write_text("999999")  # it followed another (or a restored) database
    assert rdfstore.pending(store) and rdfstore.sync(store) == 1
    assert titles(anon) == ["Title of kept"]


@pytest.mark.parametrize(("query", "accept"), [
    (NAMES, "application/sparql-results+json"), (NAMES, "text/csv"), (NAMES, "text/tab-separated-values"),
    ("ASK { ?s hpc:machineLearningFramework \"pytorch\" }", "application/sparql-results+json"),
    ("CONSTRUCT { ?s <https://schema.org/name> ?t } WHERE { ?s <https://schema.org/name> ?t }", "text/turtle"),
])
@pytest.mark.services  # clears the run's one Oxigraph server (see ``backend``)
def test_the_server_answers_as_the_embedded_store(anon, owner, publish, settings, query, accept):
    url = os.environ.get("HUB_TEST_SPARQL_URL") or pytest.skip("no Oxigraph server (scripts/services.sh)")
    publish(owner, "one", {"w.bin": b"1"})
    publish(owner, "two", {"w.bin": b"2"})
    embedded = anon.get("/sparql", {"query": query}, HTTP_ACCEPT=accept)
    settings.HUB_SPARQL_STORE_URL = url
    rdfstore.Server(url).clear()
    served = anon.get("/sparql", {"query": query}, HTTP_ACCEPT=accept)
    assert served.status_code == embedded.status_code == 200 and served["Content-Type"] == embedded["Content-Type"]
    if accept == "text/turtle":
        from rdflib import Graph
        from rdflib.compare import isomorphic

        assert isomorphic(Graph().parse(data=served.content, format="turtle"),
                          Graph().parse(data=embedded.content, format="turtle"))
    else:
        assert served.content == embedded.content


@pytest.mark.slow
@pytest.mark.cpu  # builds the store: over 1 s on a quiet machine
def test_a_first_build_loads_exactly_what_the_per_change_updates_write(owner, publish, tmp_path, settings):
    """The bulk loader's N-Quads (a first build) and the SPARQL Updates (each change) give the same quads."""
    from pyoxigraph import Store

    publish(owner, "public", {"w.bin": b"1"})
    _, gone = publish(owner, "two", {"w.bin": b"2"})
    publish(owner, "two", {"w.bin": b"3"})
    services.delete_version(gone)
    publish(owner, "private", {"w.bin": b"4"}, visibility="private")
    derived_pair(owner, tmp_path)
    odd = services.create_artifact(owner, kind="dataset", name="odd-text")  # line breaks N-Triples leaves raw
    services.create_version(odd, owner, files=[staged(tmp_path, "o.bin", b"o")], metadata=valid_metadata(
        "dataset", description="pasted\u2028from\x85a\x0cPDF\r\nand \"quoted\""))
    artifacts = list(Artifact.objects.order_by("pk").values_list("pk", flat=True))

    def quads(store) -> list[tuple[str, ...]]:  # blank nodes differ between renders: named alike
        return sorted(tuple("_:b" if type(term).__name__ == "BlankNode" else str(term) for term in quad)
                      for quad in store)

    bulk, updated = rdfstore.Embedded(tmp_path / "bulk"), rdfstore.Embedded(tmp_path / "updated")
    with bulk.writing():
        assert rdfstore.build(bulk) == len(artifacts)
    with updated.writing():
        updated.update(rdfstore.render(artifacts))
    loaded, written = quads(Store.read_only(str(bulk.folder))), quads(Store.read_only(str(updated.folder)))
    assert loaded == written
    assert len({quad[3] for quad in loaded}) == 5  # public, two@2 (two@1 deleted), source, made, odd; not private
    assert '"pasted\u2028from\x85a\\fPDF\\r\\nand \\"quoted\\""' in {quad[2] for quad in loaded}
