"""Garbage collection while the hub runs: a real Celery worker removes expired uploads' parts and job inputs
staged in the object store, and local files that a dead request left, on its own schedule (HUB_GC_INTERVAL_S),
and leaves what is in use alone."""

from __future__ import annotations

import os
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from hub.jobs.models import Job
from hub.registry.models import Upload
from hub.registry.uploads import open_upload
from hub.storage import get_blob_store
from tests.conftest import start_worker, stop_process, worker_env

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def _stage(key: str, data: bytes, tmp_path, *, old: bool = False) -> None:
    """Stage ``data`` as ``key`` in the object store, dated two hours back with ``old``."""
    local = tmp_path / "one-part"
    local.write_bytes(data)
    store = get_blob_store()
    store.put_staged(key, local)
    if old:  # the filesystem store dates an object by its file's time
        path = store.root / "staging" / key
        os.utime(path, (time.time() - 7200, time.time() - 7200))


def _staged(prefix: str) -> list[str]:
    return [key for key, _ in get_blob_store().iter_staged() if key.startswith(prefix)]


def test_the_worker_collects_garbage_on_its_own(tmp_path, settings, owner):
    settings.HUB_UPLOAD_DIR = tmp_path / "uploads"
    settings.HUB_UPLOAD_DIR.mkdir()
    expired = open_upload(owner, 10)
    _stage(f"uploads/{expired.id}/part", b"x" * 10, tmp_path)
    Upload.objects.filter(pk=expired.pk).update(expires=timezone.now() - timedelta(hours=1))
    current = open_upload(owner, 10)
    _stage(f"uploads/{current.id}/part", b"x" * 10, tmp_path, old=True)  # open: kept, however old
    ended = Job.objects.create(kind="infer", requester=owner, state=Job.State.FAILED)
    _stage(f"jobs/{ended.id}/inputs.npz", b"inputs", tmp_path, old=True)  # a job that failed: removed
    queued = Job.objects.create(kind="infer", requester=owner)
    _stage(f"jobs/{queued.id}/inputs.npz", b"inputs", tmp_path, old=True)  # still waiting: kept
    _stage(f"jobs/{ended.id}/fresh.npz", b"inputs", tmp_path)  # younger than the grace period: kept
    dead = settings.HUB_UPLOAD_DIR / "form-deadrequest.part"
    dead.write_bytes(b"left by a request that died")
    two_hours_ago = time.time() - 7200
    os.utime(dead, (two_hours_ago, two_hours_ago))
    writing = settings.HUB_UPLOAD_DIR / "form-inflight.part"
    writing.write_bytes(b"a request still writes this")

    proc = start_worker(tmp_path, worker_env(tmp_path, HUB_GC_INTERVAL_S="0.5", HUB_GC_GRACE_S="3600"), "gc")
    try:
        deadline = time.monotonic() + 30
        while (dead.exists() or _staged(f"uploads/{expired.id}/")) and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        stop_process(proc)
    assert not dead.exists() and not _staged(f"uploads/{expired.id}/")
    assert Upload.objects.get(pk=expired.pk).state == Upload.State.ABORTED
    assert writing.exists() and _staged(f"uploads/{current.id}/")
    assert Upload.objects.get(pk=current.pk).state == Upload.State.OPEN
    assert _staged(f"jobs/{ended.id}/") == [f"jobs/{ended.id}/fresh.npz"]
    assert _staged(f"jobs/{queued.id}/") == [f"jobs/{queued.id}/inputs.npz"]
    assert "garbage collected: expired uploads: 1; stale staged files: 2" in (tmp_path / "gc.log").read_text()
