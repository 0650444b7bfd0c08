"""What ``hub_serve`` does before it serves (issue 35): no full reindex at every start (8 minutes at 100k
artifacts), only the entries that are missing; ``--celery-workers 0`` is a web-only node; ``--no-migrate``
leaves migrations to their one-shot step."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from hub.registry import services
from hub.search import index
from hub.search.models import SearchEntry, SearchState
from hub.web.management.commands import hub_serve
from tests.conftest import staged, valid_metadata
from tests.ports import free_port

pytestmark = pytest.mark.django_db


@pytest.fixture
def commands(monkeypatch, settings, tmp_path):
    """The management commands hub_serve runs, recorded instead of run."""
    settings.VAR_DIR = tmp_path / "var"
    called: list[str] = []
    monkeypatch.setattr(hub_serve, "call_command", lambda name, *args, **kwargs: called.append(name))
    return called


def test_a_start_indexes_only_what_is_missing_never_the_whole_catalogue(commands, owner, tmp_path, monkeypatch):
    made = []
    for name in ("one", "two", "three"):
        artifact = services.create_artifact(owner, kind="model", name=name)
        services.create_version(artifact, owner, files=[staged(tmp_path, "w.bin", name.encode())],
                                metadata=valid_metadata("model"))
        made.append(artifact)
    monkeypatch.setattr(index, "rebuild", lambda: pytest.fail("a full rebuild at start"))
    generation = SearchState.objects.get(pk=1).generation

    hub_serve.Command().prepare(demo=False)
    assert commands == ["migrate", "collectstatic"]
    assert SearchState.objects.get(pk=1).generation == generation, "nothing was missing: nothing was indexed"

    SearchEntry.objects.filter(artifact=made[1]).delete()  # an older var/, an entry lost some other way
    made[2].deleted_at = made[2].created
    made[2].save(update_fields=["deleted_at"])  # deleted behind the index's back
    hub_serve.Command().prepare(migrate=False, demo=False)
    assert commands == ["migrate", "collectstatic", "collectstatic"], "--no-migrate"
    assert SearchEntry.objects.get(artifact=made[1]).live
    assert not SearchEntry.objects.get(artifact=made[2]).live
    assert SearchState.objects.get(pk=1).generation == generation + 2


class Recorded:
    started: list[str] = []

    def __init__(self, name, command, env, say) -> None:
        self.name = name
        self.proc = None  # hub.supervisor.stop_all: nothing runs

    def start(self) -> None:
        Recorded.started.append(self.name)

    def poll(self) -> None:
        raise KeyboardInterrupt  # ends hub_serve's loop at once

    def terminate(self) -> None:
        pass

    def kill(self) -> None:
        pass


@pytest.mark.parametrize(("workers", "expected"), [("0", ["the web server"]),
                                                   ("2", ["Celery worker 2", "Celery worker 1", "the web server"])])
def test_celery_workers_zero_is_a_web_only_node(commands, monkeypatch, workers, expected):
    monkeypatch.setattr(hub_serve, "Supervised", Recorded)
    monkeypatch.setattr(hub_serve.signal, "signal", lambda *args: None)
    Recorded.started = []
    with pytest.raises(KeyboardInterrupt):
        call_command("hub_serve", "--bind", f"127.0.0.1:{free_port()}", "--celery-workers", workers, "--no-demo")
    assert Recorded.started == expected


def test_a_negative_number_of_workers_is_refused(commands):
    with pytest.raises(CommandError, match="web-only"):
        call_command("hub_serve", "--celery-workers", "-1")
    assert commands == []
