"""SQLite's FTS5 index (the embedded default's text search): kept current by the entries' own writes, ranked by
bm25 with the hub's field weights, finding what word matching finds, and taking any user text as text."""

from __future__ import annotations

import pytest
from django.db import connection

from hub.registry import services
from hub.registry.models import Artifact
from hub.search import fts
from tests.conftest import staged, valid_metadata
from tests.search.test_search import names

pytestmark = [pytest.mark.django_db, pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's engine")]


def make(owner, tmp_path, name: str, title: str, description: str = ""):
    artifact = services.create_artifact(owner, kind="model", name=name)
    services.create_version(artifact, owner, files=[staged(tmp_path, "w.bin", name.encode())],
                            metadata=valid_metadata("model", title=title, description=description or title))
    return artifact


def test_the_index_follows_publishing_editing_and_deleting(owner, tmp_path, anon):
    assert fts.installed(connection)
    model = make(owner, tmp_path, "storm", "Storm tracker", "Follows cyclones over the ocean")
    assert names(anon.get("/api/v1/artifacts/", {"q": "cyclones"})) == ["storm"]
    assert list(fts.matches(connection, "cyclones")[0]) == [model.pk]  # found by FTS5 itself
    services.create_version(model, owner, files=[staged(tmp_path, "w2.bin", b"two")],
                            metadata=valid_metadata("model", title="Storm tracker", description="Hurricane paths"))
    assert names(anon.get("/api/v1/artifacts/", {"q": "hurricane"})) == ["storm"]  # a new version's words
    services.delete_artifact(model)
    assert names(anon.get("/api/v1/artifacts/", {"q": "hurricane"})) == []


def test_title_weighs_more_than_text_and_words_are_stemmed_and_prefixed(owner, tmp_path, anon):
    make(owner, tmp_path, "in-text", "A model", "This one mentions glaciers once, in its description")
    make(owner, tmp_path, "in-title", "Glacier melt", "Ice sheets")
    make(owner, tmp_path, "resnet", "ResNet50 for microscopy")
    assert names(anon.get("/api/v1/artifacts/", {"q": "glacier"})) == ["in-title", "in-text"]  # stem: glaciers
    assert names(anon.get("/api/v1/artifacts/", {"q": "resnet"})) == ["resnet"]  # a prefix of resnet50
    assert names(anon.get("/api/v1/artifacts/", {"q": "glacier -ice"})) == ["in-text"]
    assert names(anon.get("/api/v1/artifacts/", {"q": '"glacier melt"'})) == ["in-title"]
    assert sorted(names(anon.get("/api/v1/artifacts/", {"q": "microscopy or sheets"}))) == ["in-title", "resnet"]


def test_a_broad_match_is_scored_by_where_its_words_occur(owner, tmp_path, anon, monkeypatch):
    """Past RANKED_MAX matches bm25 is left out: title 3, keywords 2, elsewhere 1, as word matching scores."""
    make(owner, tmp_path, "in-text", "A model", "About glaciers, in its description")
    make(owner, tmp_path, "in-title", "Glacier melt", "Ice sheets")
    make(owner, tmp_path, "not-it", "Glacier melt", "Ice sheets, but no dogs")
    monkeypatch.setattr(fts, "RANKED_MAX", 1)
    scores = dict(zip(*(a.tolist() for a in fts.matches(connection, "glacier -dogs")), strict=True))
    titled = Artifact.objects.get(name="in-title").pk
    assert scores == {Artifact.objects.get(name="in-text").pk: 1.0, titled: 3.0}
    assert names(anon.get("/api/v1/artifacts/", {"q": "glacier -dogs"})) == ["in-title", "in-text"]
    assert sorted(names(anon.get("/api/v1/artifacts/", {"q": "-dogs"}))) == ["in-text", "in-title"]  # only a "not"


@pytest.mark.parametrize("q", ['NEAR(a b', '"', 'title:glacier', '*', 'AND OR NOT', '^x', "a'b", "-", '""', "(("])
def test_fts5_syntax_in_a_query_is_only_text(owner, tmp_path, anon, q):
    make(owner, tmp_path, "in-title", "Glacier melt")
    response = anon.get("/api/v1/artifacts/", {"q": q})
    assert response.status_code == 200, response.content
    assert names(anon.get("/api/v1/artifacts/", {"q": "title:glacier"})) == ["in-title"]  # words of it, no column


def test_fts5_finds_what_word_matching_finds(corpus, anon, settings):
    for q in ("cloud", "climate satellite", "storm", "protein contacts", "rnn", "nothing-like-this"):
        settings.HUB_SEARCH_ENGINE = "words"
        words = sorted(names(anon.get("/api/v1/artifacts/", {"q": q})))
        settings.HUB_SEARCH_ENGINE = "auto"
        assert sorted(names(anon.get("/api/v1/artifacts/", {"q": q}))) == words, q


def test_install_puts_back_what_a_table_remake_dropped(owner, tmp_path, anon):
    """A later migration that remakes the entries' table on SQLite drops its triggers; after `migrate`,
    ``install`` makes them again and indexes the entries that are there."""
    storm = make(owner, tmp_path, "storm", "Storm tracker")
    fts.uninstall(connection)
    assert not fts.installed(connection)
    assert names(anon.get("/api/v1/artifacts/", {"q": "storm"})) == ["storm"]  # word matching meanwhile
    assert fts.install(connection) is True
    assert list(fts.matches(connection, "storm")[0]) == [storm.pk]
    assert fts.install(connection) is False  # nothing missing: nothing done
