"""The search seam (``hub.search.backends``): a backend answers words, facets, access and order, is one module
named by ``HUB_SEARCH_BACKEND``, and the pages and the API call only ``hub.search.services``. A second backend of
one module (``tests/search/database_backend.py``: the database alone, the read rule's query face) answers what
the default (the mapped index, the rule's mask face) answers, for every reader of the corpus."""

from __future__ import annotations

import ast
import io
from pathlib import Path

import pytest
from django.core.management import call_command

from hub.registry import services as registry
from hub.search import services
from tests.conftest import client_for, staged, valid_metadata
from tests.search.database_backend import DatabaseBackend

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
DEFAULT, SECOND = "hub.search.backends.index.IndexBackend", "tests.search.database_backend.DatabaseBackend"
SEARCHES = [{}, {"q": "cloud"}, {"q": "climate cloud", "sort": "new"}, {"filters": {"framework": ["pytorch"]}},
            {"filters": {"keyword": ["climate", "satellite"]}}, {"sort": "name"}, {"visibility": "private"},
            {"q": "cloud", "filters": {"kind": ["model"], "license": ["MIT", "CC-BY-4.0"]}}]


def _answer(settings, backend: str, user, params: dict) -> tuple:
    settings.HUB_SEARCH_BACKEND = backend
    answer = services.search(user, **params)
    return [entry.artifact.full_name for entry in answer.entries[:50]], answer.total, answer.facets


@pytest.mark.slow  # 64 searches through both backends: 10-30 s
@pytest.mark.cpu  # the database only
def test_a_second_backend_answers_what_the_default_answers(settings, corpus, owner, collaborator, other):
    settings.HUB_SEARCH_ENGINE = "words"  # one way of matching words for both: LIKE
    for user in (None, owner, collaborator, other):
        for params in SEARCHES:
            default = _answer(settings, DEFAULT, user, params)
            assert _answer(settings, SECOND, user, params) == default, (user, params)
            assert default[1] == len(default[0])
    names = _answer(settings, DEFAULT, other, {"q": "cloud"})[0]
    assert "alice/secret-cloud" not in names and "alice/cloud-cnn" in names
    assert "alice/secret-cloud" in _answer(settings, SECOND, collaborator, {"q": "cloud"})[0]


def test_the_api_answers_through_the_backend_the_setting_names(settings, corpus, collaborator):
    settings.HUB_SEARCH_ENGINE, settings.HUB_SEARCH_BACKEND = "words", SECOND
    anonymous = client_for(None).get("/api/v1/artifacts/", {"q": "cloud"}).json()
    shared = client_for(collaborator, scope="read").get("/api/v1/artifacts/", {"q": "cloud"}).json()
    assert "secret-cloud" not in {a["name"] for a in anonymous["results"]}
    assert "secret-cloud" in {a["name"] for a in shared["results"]}
    assert {"value": "pytorch", "count": 1} in anonymous["facets"]["framework"]
    assert {"value": "pytorch", "count": 2} in shared["facets"]["framework"]


def _search_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hub.search"):
            found |= {f"{node.module}.{alias.name}" if node.module == "hub.search" else node.module
                      for alias in node.names}
    return found


def test_a_backend_is_one_module_and_the_views_call_only_the_seam():
    views = [*ROOT.glob("hub/web/*.py"), *ROOT.glob("hub/*/api/*.py")]
    reached = set().union(*(_search_imports(path) for path in views))
    assert reached <= {"hub.search.services", "hub.search.models"}, reached
    backends = [p for p in (ROOT / "hub/search/backends").iterdir() if p.suffix == ".py" and p.name != "__init__.py"]
    assert "index.py" in [p.name for p in backends]  # the default
    assert not [p for p in (ROOT / "hub/search/backends").iterdir() if p.is_dir() and p.name != "__pycache__"]
    assert ROOT.joinpath(*SECOND.split(".")[:-1]).with_suffix(".py").is_file()  # the second one: one file
    assert _search_imports(ROOT / "tests/search/database_backend.py") <= {
        "hub.search.backends", "hub.search.engines.words", "hub.search.models"}


class Heard(DatabaseBackend):
    """The second backend, with a store of its own: what it was told."""

    calls: list[tuple] = []

    def changed(self, artifact) -> None:
        self.calls.append(("changed", artifact.full_name, artifact.visibility, artifact.deleted_at is None))

    def rebuild(self) -> None:
        self.calls.append(("rebuild",))


def test_a_backend_with_a_store_of_its_own_hears_every_change_and_the_rebuild(settings, owner, tmp_path):
    settings.HUB_SEARCH_BACKEND = f"{__name__}.Heard"
    Heard.calls.clear()
    artifact = registry.create_artifact(owner, kind="model", name="heard", visibility="public")
    registry.create_version(artifact, owner, files=[staged(tmp_path, "w.bin", b"w")], metadata=valid_metadata("model"))
    registry.update_artifact(artifact, {"visibility": "private"})
    registry.delete_artifact(artifact, "test")
    call_command("hub_reindex", stdout=io.StringIO())
    assert Heard.calls[0] == ("changed", "alice/heard", "public", True)
    assert ("changed", "alice/heard", "private", True) in Heard.calls
    assert Heard.calls[-2:] == [("changed", "alice/heard", "private", False), ("rebuild",)]
    assert len([c for c in Heard.calls if c[0] == "changed"]) >= 3
