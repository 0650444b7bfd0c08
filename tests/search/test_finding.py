"""What new users stumbled on in search: the `format` facet, artifacts found by any live version, spelling
suggestions, derived artifacts listed under their source, and multi-select facet counts."""

from __future__ import annotations

import pytest

from hub.registry import services
from hub.registry.models import ProvenanceLink
from hub.registry.services import ProvenanceRef
from tests.conftest import client_for, staged, valid_metadata
from tests.search.test_search import counts, names

pytestmark = pytest.mark.django_db


@pytest.fixture
def forest(owner, tmp_path):
    """A scikit-learn model whose latest version is its ONNX conversion (made by a hub job), a dataset, and the
    outputs a hub job made with the ONNX version (an MLCube project is made and linked the same way)."""
    model = services.create_artifact(owner, kind="model", name="iris-forest", title="Iris flower classifier")
    original = services.create_version(model, owner, label="1", files=[staged(tmp_path, "model.pkl", b"pickle")],
                                       metadata=valid_metadata("model", title="Iris flower classifier",
                                                               framework="scikit-learn", task="classification",
                                                               keywords=["random-forest"]))
    onnx = services.create_version(
        model, owner, label="1-onnx", files=[staged(tmp_path, "model.onnx", b"onnx")],
        metadata=valid_metadata("model", title="Iris flower classifier", framework="onnx", task="classification",
                                job="1"),
        provenance=[ProvenanceRef(ProvenanceLink.Relation.CONVERTED_FROM, original)], system=True)
    data = services.create_artifact(owner, kind="dataset", name="iris-data", title="Iris measurements")
    services.create_version(data, owner, files=[staged(tmp_path, "iris.csv", b"a,b\n1,2\n")],
                            metadata=valid_metadata("dataset"))
    outputs = services.create_artifact(owner, kind="dataset", name="iris-forest-outputs", title="Outputs of Iris",
                                       visibility="public")
    services.create_version(outputs, owner, label="1", files=[staged(tmp_path, "outputs.csv", b"label\n1\n")],
                            metadata=valid_metadata("dataset", title="Outputs of the Iris flower classifier",
                                                    job="2", keywords=["outputs"]),
                            provenance=[ProvenanceRef(ProvenanceLink.Relation.DERIVED_FROM, onnx)], system=True)
    return model, original, onnx, outputs


def test_every_listed_facet_filters_format_included(forest, anon):
    assert names(anon.get("/api/v1/artifacts/", {"kind": "model", "format": "onnx"})) == ["iris-forest"]
    assert names(anon.get("/api/v1/artifacts/", {"format": "csv"})) == ["iris-data"]
    everything = anon.get("/api/v1/artifacts/").json()
    for facet, values in everything["facets"].items():  # each value the API lists finds what it counts
        for item in values:
            found = anon.get("/api/v1/artifacts/", {facet: item["value"]})
            assert found.status_code == 200, (facet, item, found.content)
            assert found.json()["count"] == item["count"], (facet, item)


def test_control_characters_in_words_are_spaces_not_a_server_error(forest, anon):
    for q in ("iris\x00forest", "\x05~\x00", "\x00"):
        assert anon.get("/api/v1/artifacts/", {"q": q}).status_code == 200, q
    assert names(anon.get("/api/v1/artifacts/", {"q": "iris\x00flower"})) == ["iris-forest"]


def test_an_artifact_is_found_by_what_any_live_version_is(forest, anon, api):
    _, original, _, _ = forest
    for query in ({"q": "sklearn"}, {"framework": "scikit-learn"}, {"framework": "sklearn"}, {"format": "pickle"},
                  {"framework": "onnx"}, {"q": "random forest"}):
        assert names(anon.get("/api/v1/artifacts/", query)) == ["iris-forest"], query
    api.delete(f"/api/v1/artifacts/alice/iris-forest/versions/{original.label}/")
    assert names(anon.get("/api/v1/artifacts/", {"framework": "scikit-learn"})) == []
    assert names(anon.get("/api/v1/artifacts/", {"framework": "onnx"})) == ["iris-forest"]


def test_a_typo_gets_a_suggestion_that_finds_something(forest, anon, owner, tmp_path):
    secret = services.create_artifact(owner, kind="model", name="quokka", title="Quokka detector",
                                      visibility="private")
    services.create_version(secret, owner, files=[staged(tmp_path, "q.bin", b"q")], metadata=valid_metadata())
    answer = anon.get("/api/v1/artifacts/", {"q": "flower clasifier"}).json()
    assert answer["count"] == 0 and answer["suggestion"] == "flower classifier"
    assert names(anon.get("/api/v1/artifacts/", {"q": answer["suggestion"]})) == ["iris-forest"]
    assert anon.get("/api/v1/artifacts/", {"q": "flower classifier"}).json()["suggestion"] is None
    assert anon.get("/api/v1/artifacts/", {"q": "irsi"}).json()["suggestion"] == "iris"  # two letters swapped
    # Words of private artifacts are never offered, not even to their owner.
    assert anon.get("/api/v1/artifacts/", {"q": "quokak"}).json()["suggestion"] is None
    assert client_for(owner).get("/api/v1/artifacts/", {"q": "quokak"}).json()["suggestion"] is None
    assert anon.get("/api/v1/artifacts/", {"q": "zzzzzz"}).json()["suggestion"] is None


def test_what_the_hub_made_is_listed_under_its_source(forest, anon):
    listed = anon.get("/api/v1/artifacts/").json()
    assert [a["name"] for a in listed["results"]] == ["iris-data", "iris-forest"]
    forest_item = next(a for a in listed["results"] if a["name"] == "iris-forest")
    assert forest_item["derived"] == [{"name": "alice/iris-forest-outputs", "kind": "dataset",
                                       "title": "Outputs of Iris"}]
    assert counts(anon.get("/api/v1/artifacts/"), "kind") == {"model": 1, "dataset": 1}
    # A search lists the source, not the outputs beside it; asked for, they are listed on their own.
    assert names(anon.get("/api/v1/artifacts/", {"q": "iris"})) == ["iris-forest", "iris-data"] or \
        names(anon.get("/api/v1/artifacts/", {"q": "iris"})) == ["iris-data", "iris-forest"]
    assert set(names(anon.get("/api/v1/artifacts/", {"derived": "include"}))) == {
        "iris-data", "iris-forest", "iris-forest-outputs"}
    bad = anon.get("/api/v1/artifacts/", {"derived": "flat"})
    assert bad.status_code == 400 and bad.json()["code"] == "invalid"


def test_what_a_job_derived_is_hidden_with_its_source(forest, api, anon):
    api.patch("/api/v1/artifacts/alice/iris-forest/", {"visibility": "private"}, format="json")
    assert "iris-forest-outputs" not in names(anon.get("/api/v1/artifacts/"))  # it carries the model's outputs
    assert "iris-forest-outputs" not in names(api.get("/api/v1/artifacts/"))  # the owner sees it under the model


def test_a_chosen_facet_keeps_its_other_values(forest, anon):
    chosen = anon.get("/api/v1/artifacts/", {"kind": "model"})
    assert names(chosen) == ["iris-forest"]
    assert counts(chosen, "kind") == {"model": 1, "dataset": 1}  # dataset can still be added
    assert counts(chosen, "license") == {"MIT": 1}  # other facets count the results
    both = anon.get("/api/v1/artifacts/", {"kind": ["model", "dataset"], "task": "classification"})
    assert names(both) == ["iris-forest"]
    assert counts(both, "kind") == {"model": 1}  # the task filter still applies to the kind counts


def test_the_browse_page_offers_the_suggestion_and_lists_derived_under_their_source(forest, client):
    page = client.get("/browse/", {"q": "flower clasifier", "kind": "model"}).content.decode()
    assert 'Did you mean <a id="suggestion" href="?q=flower+classifier&amp;kind=model">' in page
    page = client.get("/browse/").content.decode()
    assert "Made from it:" in page and ">alice/iris-forest-outputs</a> (dataset)" in page
    assert page.count('class="card"') == 2  # the model and the dataset, not the outputs beside them
    chosen = client.get("/browse/", {"kind": "model"}).content.decode()
    assert "?kind=model&amp;kind=dataset" in chosen  # the other kind can still be added


def test_listings_show_the_version_an_artifact_stands_for_not_its_conversion(forest, anon, client):
    """Issue 55: the home page's cards, the browse page and ``hpcfair search`` showed ``v1-onnx`` (the newest
    version, the hub's conversion) as the model's version; they show its own newest upload, ``1``."""
    from hpcfair.cli import _search_lines

    found = anon.get("/api/v1/artifacts/", {"q": "iris flower"}).json()["results"]
    model = next(item for item in found if item["name"] == "iris-forest")
    assert model["current_version"] == "1" and model["latest_version"] == "1-onnx"
    assert anon.get("/api/v1/artifacts/alice/iris-forest/").json()["current_version"] == "1"  # the detail too
    assert _search_lines([model]).split()[:3] == ["alice/iris-forest", "model", "1"]
    for address in ("/", "/browse/"):
        page = client.get(address).content.decode()
        assert "/iris-forest · v1 ·" in page and "v1-onnx" not in page, address


@pytest.mark.parametrize("a, b, apart", [("irsi", "iris", True), ("iriss", "iris", True), ("iri", "iris", True),
                                         ("irjs", "iris", True), ("sirI", "iris", False), ("rsii", "iris", False),
                                         ("iris", "iris", False), ("ir", "iris", False)])
def test_one_edit_apart_is_a_typo_away(a, b, apart):
    from hub.search.backends.index import one_edit_apart as _one_edit_apart

    assert _one_edit_apart(a, b) is apart and _one_edit_apart(b, a) is apart
