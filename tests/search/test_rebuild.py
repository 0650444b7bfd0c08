"""The rebuild `migrate` runs after an upgrade that indexes differently commits artifact by artifact (issue 35,
point 4): one transaction over the catalogue held the index's generation row, and so every publish, for the
whole rebuild."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection

from hub.registry import services
from hub.search import index
from hub.search.index import INDEX_FORMAT
from hub.search.models import SearchState
from tests.conftest import staged, valid_metadata

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_rebuild_after_migrate_commits_each_entry_on_its_own(owner, tmp_path, monkeypatch):
    for name in ("one", "two"):
        artifact = services.create_artifact(owner, kind="model", name=name)
        services.create_version(artifact, owner, files=[staged(tmp_path, "w.bin", name.encode())],
                                metadata=valid_metadata("model"))
    SearchState.objects.update(format=INDEX_FORMAT - 1)
    inside: list[bool] = []
    reindex = index.reindex
    monkeypatch.setattr(index, "reindex", lambda artifact: inside.append(connection.in_atomic_block) or
                        reindex(artifact))
    call_command("migrate", verbosity=0)
    assert inside == [False, False], "each entry in its own transaction, none around them all"
    assert SearchState.objects.get().format == INDEX_FORMAT
    inside.clear()
    call_command("migrate", verbosity=0)
    assert inside == [], "a current index is not rebuilt"
