"""Workers' local copies of models (hub.gateway.localcache): bounded by what they cost the disk, least recently used
out first, never one a process holds or has just used, and those of deleted blobs dropped."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hub.gateway import localcache
from hub.gateway.localcache import Root, held_bytes, hold, sweep

NOW = 1_900_000_000.0


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def roots(tmp_path) -> list[Root]:
    models = tmp_path / "models"
    (models / "with-data").mkdir(parents=True)
    (tmp_path / "generation").mkdir()
    return [Root(models, "files"), Root(models / "with-data", "folders"), Root(tmp_path / "generation", "folders")]


def copy(roots, name: str, size: int, used: float) -> Path:
    path = roots[0].path / f"{sha(name)}.onnx"
    path.write_bytes(b"x" * size)
    os.utime(path, (used, used))
    return path


def folder(root: Root, name: str, files: dict[str, tuple[str, int]], used: float, link_from: Path | None = None,
           manifest: bool = True) -> Path:
    made = root.path / name
    made.mkdir()
    for filename, (blob, size) in files.items():
        if link_from is not None:
            os.link(link_from / blob, made / filename)
        else:
            (made / filename).write_bytes(b"y" * size)
    if manifest:
        localcache.write_manifest(made, [blob for blob, _ in files.values()])
    os.utime(made, (used, used))
    return made


def test_least_recently_used_copies_go_first_until_they_fit(roots):
    old = copy(roots, "old", 400, NOW - 3000)
    middle = copy(roots, "middle", 400, NOW - 2000)
    recent = copy(roots, "recent", 400, NOW - 1000)
    assert held_bytes(roots) == 1200
    report = sweep(roots, 900, now=NOW)
    assert report.evicted == [old] and report.held_bytes == 800
    assert middle.exists() and recent.exists()
    assert sweep(roots, 900, now=NOW).evicted == []  # within the bound: nothing more
    assert sweep(roots, 0, now=NOW).evicted == []  # 0: no bound


def test_links_to_the_store_cost_nothing_until_the_store_lets_go(roots, tmp_path):
    store = tmp_path / "blobs"
    store.mkdir()
    weights = sha("weights")
    (store / weights).write_bytes(b"w" * 5000)
    linked = folder(roots[2], "gen1", {"model.onnx.data": (weights, 5000)}, NOW - 5000, link_from=store)
    manifest = 65  # the folder's list of its blobs
    assert held_bytes(roots) == manifest
    assert sweep(roots, 1000, now=NOW).evicted == []
    (store / weights).unlink()  # the registry deleted the blob: the copy now holds its bytes alone
    assert held_bytes(roots) == 5000 + manifest
    assert sweep(roots, 1000, now=NOW).evicted == [linked]
    assert not linked.exists()


def test_links_between_copies_count_once(roots):
    model = copy(roots, "graph", 300, NOW - 3000)
    made = roots[1].path / f"{model.stem}-abc"
    made.mkdir()
    os.link(model, made / "model.onnx")
    (made / "model.onnx.data").write_bytes(b"d" * 700)
    assert held_bytes(roots) == 1000
    model.unlink()
    assert held_bytes(roots) == 1000  # the folder's link still holds the graph


@pytest.mark.slow
@pytest.mark.cpu  # kills a process: out of the fast tier
def test_an_entry_a_process_holds_is_never_removed(roots):
    """Held by another process, as an engine holds the copy its session or generation model was loaded from."""
    held = copy(roots, "held", 600, NOW - 9000)
    other = copy(roots, "other", 600, NOW - 1000)
    code = ("import sys, time\nfrom pathlib import Path\nfrom hub.gateway.localcache import hold\n"
            "h = hold(Path(sys.argv[1])); print('held' if h else 'gone', flush=True); time.sleep(60)\n")
    engine = subprocess.Popen([sys.executable, "-c", code, str(held)], stdout=subprocess.PIPE, text=True,
                              cwd=Path(__file__).resolve().parents[2])
    try:
        assert engine.stdout.readline().strip() == "held"
        report = sweep(roots, 500, now=NOW)
        assert held.exists() and report.evicted == [other]  # the next least recently used went instead
        engine.kill()
        engine.wait()
        assert sweep(roots, 500, now=NOW).evicted == [held]  # the kernel let go of the dead process's hold
    finally:
        engine.kill()
        engine.wait()


def test_a_hold_marks_use_and_its_release_too(roots):
    entry = copy(roots, "used", 10, NOW - 9000)
    found = hold(entry)
    assert found is not None and time.time() - entry.stat().st_mtime < 60
    os.utime(entry, (NOW - 9000, NOW - 9000))
    found.release()
    assert time.time() - entry.stat().st_mtime < 60
    entry.unlink()
    assert hold(entry) is None


def test_what_was_used_within_the_grace_period_stays(roots):
    fresh = copy(roots, "fresh", 800, NOW - 5)
    assert sweep(roots, 100, grace_s=60, now=NOW).evicted == []
    assert sweep(roots, 100, grace_s=60, now=NOW + 120).evicted == [fresh]


def test_copies_of_deleted_blobs_are_dropped_and_the_rest_kept(roots):
    kept_blob, gone_blob = sha("kept"), sha("gone")
    kept = copy(roots, "kept", 10, NOW - 100)
    gone = copy(roots, "gone", 10, NOW - 100)
    mixed = folder(roots[1], f"{kept_blob}-x", {"model.onnx": (kept_blob, 10), "w.data": (gone_blob, 10)}, NOW - 100)
    whole = folder(roots[2], "g1", {"model.onnx": (kept_blob, 10)}, NOW - 100)
    unknown = folder(roots[2], "g0", {"model.onnx": (kept_blob, 10)}, NOW - 100, manifest=False)
    asked = []

    def referenced(digests: set[str]) -> set[str]:
        asked.append(set(digests))
        return digests & {kept_blob}

    report = sweep(roots, 0, referenced=referenced, now=NOW)
    assert asked == [{kept_blob, gone_blob}]
    assert sorted(report.dropped) == sorted([gone, mixed, unknown])
    assert kept.exists() and whole.exists()


def test_leftovers_of_dead_processes_are_removed_and_fresh_ones_kept(roots):
    stale = roots[0].path / f".{sha('a')}.123.456"
    stale.write_bytes(b"partial")
    os.utime(stale, (NOW - 7200, NOW - 7200))
    making = roots[2].path / ".digest.789"
    making.mkdir()
    os.utime(making, (NOW - 10, NOW - 10))
    sweep(roots, 0, now=NOW)
    assert not stale.exists() and making.exists()


def test_the_entry_a_session_file_belongs_to(roots):
    models, with_data, generation = (root.path for root in roots)
    assert localcache.entry_of(models / "abc.onnx", roots) == models / "abc.onnx"
    assert localcache.entry_of(with_data / "abc-1" / "model.onnx", roots) == with_data / "abc-1"
    assert localcache.entry_of(generation / "d1" / "sub" / "x", roots) == generation / "d1"
    assert localcache.entry_of(Path("/srv/blobs/ab/abc"), roots) is None  # the store's own file
    assert localcache.entry_of(models / ".abc.1.2", roots) is None


@pytest.mark.django_db
def test_still_referenced_names_only_blobs_of_live_versions(owner, publish):
    from hub.registry import services

    _, live = publish(owner, "live", {"a.bin": b"kept bytes"})
    _, dead = publish(owner, "dead", {"b.bin": b"deleted bytes"})
    services.delete_version(dead)
    kept, deleted = live.files.get(path="a.bin").blob_id, dead.files.get(path="b.bin").blob_id
    assert localcache.still_referenced({kept, deleted, sha("never")}) == {kept}


def test_a_cached_session_holds_its_copy_until_the_cache_lets_it_go(settings, tmp_path):
    """The engine's session cache (real ONNX Runtime sessions on a filesystem store): a model with external data
    is loaded from a folder of links; while its session is cached no sweep drops the folder, even once its blobs
    are deleted; evicted for another model, the folder goes at the next sweep."""
    import numpy as np

    from hub.gateway import sessions
    from hub.storage import get_blob_store
    from tests.gateway.test_model_memory import external_step

    settings.HUB_STORAGE = {**settings.HUB_STORAGE, "BACKEND": "filesystem", "DIR": str(tmp_path / "blobs")}
    settings.HUB_GATEWAY_MODEL_DIR = tmp_path / "models"
    settings.VAR_DIR = tmp_path / "var"
    store = get_blob_store()
    first = external_step(store, tmp_path / "a", np.ones((64, 64), np.float32))
    second = external_step(store, tmp_path / "b", np.full((64, 64), 2, np.float32))
    cache = sessions.SessionCache(max_bytes=3 * (first["size"] + 64 * 64 * 4))  # room for one model only
    cache.get(first, "cpu", 1)
    [held] = (tmp_path / "models" / "with-data").iterdir()
    roots = localcache.configured_roots()
    nothing_live = lambda digests: set()  # noqa: E731 - every blob deleted
    assert sweep(roots, 0, grace_s=0, referenced=nothing_live).dropped == []
    assert held.exists()
    cache.get(second, "cpu", 1)  # evicts the first session, which lets go of its folder
    report = sweep(roots, 0, grace_s=0, referenced=nothing_live)
    assert report.dropped == [held] and not held.exists()
    assert len(list((tmp_path / "models" / "with-data").iterdir())) == 1  # the second model's, held
    cache.clear()
