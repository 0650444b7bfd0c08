"""The in-memory search index: the same answers as PostgreSQL's own text search, freshness after every
kind of change (delta, rebuild, generation going back), paging, and the tsquery reader."""

from __future__ import annotations

import threading

import pytest
from django.contrib.postgres.search import SearchQuery
from django.core.management import call_command

from hub.registry import services
from hub.registry.models import Artifact
from hub.search import index_copy
from hub.search.engines.postgres import parse_tsquery
from hub.search.index import INDEX_FORMAT, reindex
from hub.search.models import SearchEntry, SearchState
from tests.conftest import client_for, staged, valid_metadata
from tests.search.test_search import names

pytestmark = pytest.mark.django_db

QUERIES = ["cloud", "cloud satellite", "cloud -satellite", "protein or storm", "clouds", "cnn or rnn -storm",
           '"cloud masks"', '"cloud images" or protein', "the", "nothing-matches-this"]


@pytest.mark.postgres
@pytest.mark.parametrize("q", QUERIES)
def test_matches_equal_postgresql_text_search(corpus, anon, q):
    """Every query finds exactly the public entries that PostgreSQL's ``@@`` finds."""
    expected = set(SearchEntry.objects.filter(visibility="public", live=True, search_vector=SearchQuery(
        q, search_type="websearch", config="english")).values_list("artifact__name", flat=True))
    assert set(names(anon.get("/api/v1/artifacts/", {"q": q}))) == expected


def test_tsquery_reader():
    assert parse_tsquery("") is None
    assert parse_tsquery("'cloud' & 'satellit'") == ("and", ("word", "cloud"), ("word", "satellit"))
    assert parse_tsquery("'a' | !'b' & 'c'") == ("or", ("word", "a"), ("and", ("not", ("word", "b")),
                                                                        ("word", "c")))
    assert parse_tsquery("!( 'a' | 'b' )") == ("not", ("or", ("word", "a"), ("word", "b")))
    assert parse_tsquery("'o''brien'") == ("word", "o'brien")
    for unsupported in ("'cloud' <-> 'mask'", "'cloud' <2> 'mask'", "'clo':*", "'a' &", "( 'a'"):
        with pytest.raises(ValueError):
            parse_tsquery(unsupported)


def test_changes_after_the_index_was_built_are_seen(corpus, api, anon, tmp_path):
    assert names(anon.get("/api/v1/artifacts/", {"q": "protein"})) == ["protein-mlp"]  # builds the base
    base_generation = index_copy.current().base_generation
    api.patch("/api/v1/artifacts/alice/protein-mlp/", {"title": "Folding maps"}, format="json")
    artifact = services.get_artifact(None, "alice", "protein-mlp")
    services.create_version(artifact, artifact.owner, files=[staged(tmp_path, "w.bin", b"folding")], metadata={
        **valid_metadata("model"), "title": "Folding maps", "keywords": ["structure"], "framework": "jax"})
    assert names(anon.get("/api/v1/artifacts/", {"q": "contacts"})) == []  # the base's old words are overridden
    assert names(anon.get("/api/v1/artifacts/", {"q": "folding"})) == ["protein-mlp"]
    response = anon.get("/api/v1/artifacts/", {"framework": "jax"})
    assert names(response) == ["protein-mlp"]
    # Both live versions count: the new one's keyword, and the first one's (the base had only that).
    assert {f["value"]: f["count"] for f in response.json()["facets"]["keyword"]} == {"structure": 1, "biology": 1}
    assert index_copy.current().base_generation == base_generation  # served from base + delta, not rebuilt
    assert index_copy.current().parts[1][0].size == 1


def test_a_delta_past_its_limit_rebuilds_the_base(corpus, api, anon, monkeypatch):
    anon.get("/api/v1/artifacts/")
    monkeypatch.setattr(index_copy, "DELTA_LIMIT", 1)
    api.delete("/api/v1/artifacts/alice/storm-rnn/")
    api.patch("/api/v1/artifacts/alice/cloud-cnn/", {"visibility": "private"}, format="json")
    assert set(names(anon.get("/api/v1/artifacts/"))) == {"protein-mlp", "cloud-images"}
    view = index_copy.current()  # rebuilt here: a test runs inside a transaction
    assert len(view.parts) == 1 and view.base_generation == SearchState.objects.get().generation
    assert SearchEntry.objects.get(artifact__name="storm-rnn").pk not in view.parts[0][0].ids  # live ones only
    assert set(names(api.get("/api/v1/artifacts/"))) == {"protein-mlp", "cloud-images", "cloud-cnn", "secret-cloud"}


def test_a_generation_that_goes_back_rebuilds(corpus, anon):
    anon.get("/api/v1/artifacts/")
    SearchState.objects.update(generation=0)  # as after restoring an older database
    SearchEntry.objects.filter(artifact__name="cloud-cnn").update(title="Zebras, renamed behind the index")
    assert names(anon.get("/api/v1/artifacts/", {"sort": "name"}))[-1] == "cloud-cnn"  # "Zebras" sorts last
    assert index_copy.current().base_generation == 0


def test_deleted_artifacts_stay_retired(corpus, api, anon):
    api.delete("/api/v1/artifacts/alice/cloud-images/")
    entry = SearchEntry.objects.get(artifact__name="cloud-images")
    assert not entry.live and not entry.facets.exists()
    call_command("hub_reindex", verbosity=0)
    assert not SearchEntry.objects.get(artifact__name="cloud-images").live
    assert "cloud-images" not in names(anon.get("/api/v1/artifacts/", {"q": "cloud"}))
    assert "cloud-images" not in names(api.get("/api/v1/artifacts/"))  # not even for its owner


def test_migrate_rebuilds_an_index_made_by_an_older_format_and_leaves_a_current_one(corpus, anon):
    """An upgrade whose index holds something new needs no hand-run hub_reindex: `migrate` sees the older
    format and rebuilds; run again, it touches nothing."""
    SearchEntry.objects.filter(artifact__name="cloud-cnn").delete()  # as if the old code had not indexed it
    SearchState.objects.update(format=INDEX_FORMAT - 1)
    assert "cloud-cnn" not in names(anon.get("/api/v1/artifacts/", {"q": "cloud"}))
    call_command("migrate", verbosity=0)
    assert SearchState.objects.get().format == INDEX_FORMAT
    assert "cloud-cnn" in names(anon.get("/api/v1/artifacts/", {"q": "cloud"}))
    generation = SearchState.objects.get().generation
    call_command("migrate", verbosity=0)
    assert SearchState.objects.get().generation == generation, "a current index is not rebuilt"


def test_pages_follow_one_order(corpus, api, collaborator, tmp_path):
    everything = names(api.get("/api/v1/artifacts/", {"sort": "name", "page_size": 50}))
    assert everything == ["cloud-images", "cloud-cnn", "protein-mlp", "secret-cloud", "storm-rnn"]
    paged = []
    for page in (1, 2, 3):
        response = api.get("/api/v1/artifacts/", {"sort": "name", "page_size": 2, "page": page})
        assert response.json()["count"] == 5
        paged += names(response)
    assert paged == everything
    newest = names(client_for(collaborator).get("/api/v1/artifacts/", {"sort": "new"}))
    artifact = services.get_artifact(None, "alice", "storm-rnn")
    services.create_version(artifact, artifact.owner, files=[staged(tmp_path, "w.bin", b"again")],
                            metadata={**valid_metadata("model"), "title": "Storm tracks, again"})
    assert names(client_for(collaborator).get("/api/v1/artifacts/", {"sort": "new"}))[0] == "storm-rnn"
    assert newest[0] != "storm-rnn"


def test_superuser_sees_everything_and_others_only_what_is_shared(corpus, django_user_model, other, anon):
    root = django_user_model.objects.create_superuser("root", password="x")
    assert len(names(client_for(root).get("/api/v1/artifacts/"))) == 5
    assert len(names(client_for(other).get("/api/v1/artifacts/"))) == 4
    assert len(names(anon.get("/api/v1/artifacts/", {"visibility": "private"}))) == 0
    assert names(client_for(root).get("/api/v1/artifacts/", {"visibility": "private"})) == ["secret-cloud"]


@pytest.mark.django_db(transaction=True)
def test_background_rebuild_serves_the_old_view_until_the_new_base_is_ready(owner, tmp_path, monkeypatch):
    """Outside a transaction a grown delta is folded into a new base by a thread; queries keep answering."""
    for i in range(3):
        artifact = services.create_artifact(owner, kind="model", name=f"m{i}")
        services.create_version(artifact, owner, files=[staged(tmp_path, "w.bin", f"{i}".encode())],
                                metadata={**valid_metadata("model"), "title": f"Model number {i}"})
    first = index_copy.current()
    monkeypatch.setattr(index_copy, "DELTA_LIMIT", 1)
    for i in range(3):
        services.update_artifact(services.get_artifact(owner, "alice", f"m{i}"), {"title": f"Renamed {i}"}, None)
    view = index_copy.current()  # delta of 3 > 1: answers at once, rebuild started
    assert view.base_generation == first.base_generation and len(view.parts) == 2
    for thread in [t for t in threading.enumerate() if t.name == "search-index-rebuild"]:
        thread.join(30)
    assert not [t for t in threading.enumerate() if t.name == "search-index-rebuild"]
    assert not index_copy._rebuilding.is_set()
    rebuilt = index_copy.current()
    assert rebuilt.base_generation > first.base_generation and len(rebuilt.parts) <= 2
    assert sorted(rebuilt.parts[0][0].titles) == [f"Model number {i}" for i in range(3)]  # titles come from versions


def test_a_delta_read_in_chunks_counts_each_value_once(corpus, anon, monkeypatch):
    before = anon.get("/api/v1/artifacts/").json()["facets"]
    monkeypatch.setattr(index_copy, "IN_CHUNK", 1)  # every entry's facet values come in a query of their own
    for artifact in Artifact.objects.all():
        reindex(artifact)  # the same content, now all of it in the delta
    after = anon.get("/api/v1/artifacts/").json()["facets"]
    assert index_copy.current().parts[1][0].size == 5
    assert after == before and {f["value"]: f["count"] for f in after["keyword"]} == {
        "climate": 3, "satellite": 2, "biology": 1}
