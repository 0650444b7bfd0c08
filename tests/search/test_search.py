"""Search over a seeded corpus: ranking, facet filters and counts, tags, visibility, deletion."""

from __future__ import annotations

import pytest

from tests.conftest import client_for

pytestmark = pytest.mark.django_db

def names(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [item["name"] for item in response.json()["results"]]


def counts(response, facet: str) -> dict[str, int]:
    return {item["value"]: item["count"] for item in response.json()["facets"][facet]}


@pytest.fixture(params=["auto", "words"])
def engine(request, settings):
    """PostgreSQL full-text search, and the word-matching fallback that SQLite uses."""
    settings.HUB_SEARCH_ENGINE = request.param
    return request.param


def test_ranking_puts_title_matches_first(corpus, anon, engine):
    found = names(anon.get("/api/v1/artifacts/", {"q": "cloud"}))
    assert set(found) == {"cloud-cnn", "cloud-images", "storm-rnn"}  # not the private one
    assert found[-1] == "storm-rnn"  # "cloud" only in its description
    assert names(anon.get("/api/v1/artifacts/", {"q": "cloud satellite"}))[:2] in (["cloud-cnn", "cloud-images"],
                                                                                  ["cloud-images", "cloud-cnn"])
    assert names(anon.get("/api/v1/artifacts/", {"q": "nothing-matches-this"})) == []


def test_facet_counts_follow_the_results(corpus, anon, engine):
    everything = anon.get("/api/v1/artifacts/")
    assert counts(everything, "kind") == {"model": 3, "dataset": 1}
    assert counts(everything, "framework") == {"pytorch": 2, "keras": 1}
    assert counts(everything, "keyword") == {"climate": 3, "satellite": 2, "biology": 1}
    assert counts(everything, "license") == {"MIT": 2, "Apache-2.0": 1, "CC-BY-4.0": 1}
    assert counts(everything, "hardware") == {"gpu": 1, "A100": 1}
    assert counts(everything, "owner") == {"alice": 4}
    climate = anon.get("/api/v1/artifacts/", {"q": "cloud", "kind": "model"})
    assert set(names(climate)) == {"cloud-cnn", "storm-rnn"}
    assert counts(climate, "framework") == {"pytorch": 1, "keras": 1}


def test_facet_filters_and_tags(corpus, anon):
    assert set(names(anon.get("/api/v1/artifacts/", {"framework": ["pytorch", "keras"]}))) == {
        "cloud-cnn", "storm-rnn", "protein-mlp"}
    assert set(names(anon.get("/api/v1/artifacts/", {"keyword": ["climate", "satellite"]}))) == {
        "cloud-cnn", "cloud-images"}  # tags: all must be present
    assert names(anon.get("/api/v1/artifacts/", {"hardware": "gpu"})) == ["cloud-cnn"]
    assert names(anon.get("/api/v1/artifacts/", {"task": "segmentation", "license": "MIT"})) == ["cloud-cnn"]
    assert names(anon.get("/api/v1/artifacts/", {"sort": "name", "kind": "model"})) == [
        "cloud-cnn", "protein-mlp", "storm-rnn"]  # by title: Cloud…, Protein…, Storm…
    bad = anon.get("/api/v1/artifacts/", {"sort": "random"})
    assert bad.status_code == 400 and bad.json()["code"] == "invalid"


def test_private_artifacts_only_for_those_who_may_read_them(corpus, anon, api, collaborator, other):
    for client, sees in ((anon, False), (client_for(other), False), (api, True), (client_for(collaborator), True)):
        response = client.get("/api/v1/artifacts/", {"q": "cloud"})
        assert ("secret-cloud" in names(response)) is sees
        assert counts(response, "task").get("segmentation") == (2 if sees else 1)


def test_index_follows_edits_and_deletions(corpus, api, anon):
    api.patch("/api/v1/artifacts/alice/protein-mlp/", {"visibility": "private"}, format="json")
    assert "protein-mlp" not in names(anon.get("/api/v1/artifacts/", {"q": "protein"}))
    api.delete("/api/v1/artifacts/alice/cloud-cnn/")
    assert names(anon.get("/api/v1/artifacts/", {"hardware": "gpu"})) == []
    api.post("/api/v1/artifacts/", {"kind": "project", "name": "fresh", "title": "Fresh hydrology recipe"},
             format="json")
    assert names(anon.get("/api/v1/artifacts/", {"q": "hydrology"})) == ["fresh"]  # no version yet
