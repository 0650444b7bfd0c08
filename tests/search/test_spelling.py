"""The spelling vocabulary after a write: a change reads the words of the entries it touches, not every public
title again (issue 35: 9-13 s at 1M entries after any write, for a search that found nothing)."""

from __future__ import annotations

import re

import pytest

from hub.registry import services
from hub.search import index_copy
from tests.conftest import staged, valid_metadata

pytestmark = pytest.mark.django_db


class CountedWord:
    """``index_copy.WORD`` that counts the texts it reads."""

    def __init__(self) -> None:
        self.pattern, self.calls = re.compile(index_copy.WORD.pattern), 0

    def findall(self, text: str) -> list[str]:
        self.calls += 1
        return self.pattern.findall(text)


@pytest.fixture
def catalogue(owner, tmp_path):
    made = []
    for i in range(40):
        artifact = services.create_artifact(owner, kind="model", name=f"model-{i}", title=f"Model number{i:03d}x")
        services.create_version(artifact, owner, files=[staged(tmp_path, "w.bin", f"w{i}".encode())],
                                metadata=valid_metadata("model", title=f"Model word{chr(97 + i % 26)}tion{i}",
                                                        keywords=[f"topic{chr(97 + i % 26)}ing"]))
        made.append(artifact)
    return made


def test_a_change_reads_only_the_words_it_touches(catalogue, owner, monkeypatch, tmp_path):
    counted = CountedWord()
    monkeypatch.setattr(index_copy, "WORD", counted)
    words = index_copy.vocabulary()
    assert all(w in words for w in ("model", "wordution", "topicuing", "worddtion"))
    first = counted.calls
    assert first >= 40, "the first call reads every public title"

    assert index_copy.vocabulary() is words and counted.calls == first, "nothing changed: nothing is read"

    services.create_version(catalogue[20], owner, label="2", files=[staged(tmp_path, "w.bin", b"new")],
                            metadata=valid_metadata("model", title="Quokka detector"))
    counted.calls = 0
    words = index_copy.vocabulary()
    assert "quokka" in words and "detector" in words
    assert "wordution" not in words, "the only title with it changed"
    assert "topicuing" in words, "model-20's first version still has its keyword"
    assert "worddtion" in words
    assert counted.calls < 20, f"a one-entry change read {counted.calls} texts"


def test_an_artifact_made_private_takes_its_words_away(catalogue):
    words = index_copy.vocabulary()
    assert all(w in words for w in ("wordption", "topicping", "wordbtion", "topicbing"))
    services.update_artifact(catalogue[15], {"visibility": "private"})
    services.update_artifact(catalogue[1], {"visibility": "private"})
    words = index_copy.vocabulary()
    assert "wordption" not in words and "topicping" not in words, "only model-15 had them"
    assert "wordbtion" in words and "topicbing" in words, "model-27 has them too"


def test_the_vocabulary_after_changes_is_what_reading_every_public_entry_gives(catalogue, owner, tmp_path):
    index_copy.vocabulary()  # the base's words
    services.update_artifact(catalogue[3], {"visibility": "private"})
    services.create_version(catalogue[4], owner, label="2", files=[staged(tmp_path, "w.bin", b"v2")],
                            metadata=valid_metadata("model", title="Wombat tracker"))
    everything: set[str] = set()
    for snapshot, counted in index_copy.current().parts:
        everything |= set(index_copy._words_of(snapshot, counted & snapshot.public & snapshot.live))
    assert set(index_copy.vocabulary()) == everything and "wombat" in everything
