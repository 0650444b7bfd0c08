"""Garbage collection while the hub runs: a real Celery worker removes expired uploads and staged files that
a dead request left, on its own schedule (HUB_GC_INTERVAL_S), and leaves what is in use alone."""

from __future__ import annotations

import os
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from hub.registry.models import Upload
from hub.registry.uploads import open_upload, staged_path
from tests.conftest import start_worker, stop_process, worker_env

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_the_worker_collects_garbage_on_its_own(tmp_path, settings, owner):
    settings.HUB_UPLOAD_DIR = tmp_path / "uploads"
    expired = open_upload(owner, 10)
    staged_path(expired).write_bytes(b"x" * 10)
    Upload.objects.filter(pk=expired.pk).update(expires=timezone.now() - timedelta(hours=1))
    current = open_upload(owner, 10)
    dead = settings.HUB_UPLOAD_DIR / "form-deadrequest.part"
    dead.write_bytes(b"left by a request that died")
    two_hours_ago = time.time() - 7200
    os.utime(dead, (two_hours_ago, two_hours_ago))
    writing = settings.HUB_UPLOAD_DIR / "form-inflight.part"
    writing.write_bytes(b"a request still writes this")

    proc = start_worker(tmp_path, worker_env(tmp_path, HUB_GC_INTERVAL_S="0.5", HUB_GC_GRACE_S="3600"), "gc")
    try:
        deadline = time.monotonic() + 30
        while (dead.exists() or staged_path(expired).exists()) and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        stop_process(proc)
    assert not dead.exists() and not staged_path(expired).exists()
    assert Upload.objects.get(pk=expired.pk).state == Upload.State.ABORTED
    assert writing.exists() and staged_path(current).exists()
    assert Upload.objects.get(pk=current.pk).state == Upload.State.OPEN
    assert "garbage collected: expired uploads: 1; stale staged files: 1" in (tmp_path / "gc.log").read_text()
