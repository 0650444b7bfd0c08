"""Garbage collection of what no row needs: expired upload sessions and their parts, job inputs staged in the
object store for jobs that ended (or are gone), local files left by a request that died, and blobs that no live
version references. Staged objects are in the object store, so one collector covers every node.

``python manage.py hub_gc`` runs it once; every Celery worker runs it every ``HUB_GC_INTERVAL_S``
(``workers.housekeeping``), one worker at a time where the database is PostgreSQL.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.apps import apps
from django.db import connection
from django.utils import timezone

from hub.oci.gc import live_blobs as oci_live_blobs
from hub.oci.gc import upload_open as oci_upload_open
from hub.registry import direct
from hub.registry.models import Blob, File, Upload
from hub.registry.uploads import upload_dir
from hub.storage import get_blob_store

_LOCK_KEY = 0x68756267  # "hubg": the advisory lock that keeps two workers from collecting at once


@dataclass
class Collected:
    uploads: int = 0
    staged_files: int = 0
    blobs: int = 0
    orphans: int = 0  # direct uploads' objects no blob points to

    def __str__(self) -> str:
        return (f"expired uploads: {self.uploads}; stale staged files: {self.staged_files}; "
                f"unreferenced blobs removed: {self.blobs}; orphaned upload objects removed: {self.orphans}")


def collect(grace_hours: float = 1.0) -> Collected:
    """Remove expired uploads, staged files untouched for ``grace_hours`` and unreferenced blobs older than
    that (younger ones may belong to a publish in flight)."""
    now = timezone.now()
    cutoff = now - timedelta(hours=grace_hours)
    done = Collected()
    expired = Upload.objects.filter(expires__lt=now).exclude(state__in=[Upload.State.CONSUMED, Upload.State.ABORTED])
    store = get_blob_store()
    for upload in expired:
        store.remove_staged(f"uploads/{upload.id}/")
        if upload.direct_id and upload.state == Upload.State.OPEN:
            direct.abort(upload)
    done.uploads = expired.update(state=Upload.State.ABORTED)
    done.staged_files = _stale_staged(store, cutoff)
    for path in upload_dir().glob("*.part"):  # this node's files of a request that died
        try:
            if path.stat().st_mtime < cutoff.timestamp():
                path.unlink(missing_ok=True)
                done.staged_files += 1
        except FileNotFoundError:
            continue
    live = set(File.objects.filter(version__deleted_at__isnull=True).values_list("blob_id", flat=True))
    # a checked direct upload is a blob already, waiting for its version
    live |= set(Upload.objects.filter(state=Upload.State.COMPLETED, expires__gte=now).values_list("sha256", flat=True))
    live |= oci_live_blobs()  # what the OCI registry's repositories and manifests hold (hub.oci)
    for sha256, modified in store.iter_blobs():
        if sha256 not in live and modified < cutoff:
            store.delete(sha256)
            done.blobs += 1
    Blob.objects.filter(files__isnull=True, created__lt=cutoff).delete()
    if store.direct_uploads:
        done.orphans = _orphaned_direct_objects(store, cutoff)
    return done


def _stale_staged(store, cutoff) -> int:
    """Remove staged objects older than ``cutoff`` that nothing needs: the parts of an upload no longer open
    (or gone), the inputs of a job that ended (or is gone). Returns how many objects were removed."""
    job_model = apps.get_model("jobs", "Job")
    removed, decided = 0, {}
    for key, modified in store.iter_staged():
        area, _, rest = key.partition("/")
        owner = rest.split("/", 1)[0]
        if modified >= cutoff or area not in ("uploads", "jobs", "oci"):
            continue
        if (area, owner) not in decided:
            try:
                pk = uuid.UUID(owner)
            except ValueError:
                pk = None
            if area == "oci":
                live = pk is not None and oci_upload_open(pk)
            elif area == "uploads":
                live = pk is not None and Upload.objects.filter(pk=pk, state=Upload.State.OPEN).exists()
            else:
                live = pk is not None and job_model.objects.filter(pk=pk).exclude(
                    state__in=job_model.FINAL_STATES).exists()
            decided[(area, owner)] = live
        if not decided[(area, owner)]:
            store.remove_staged(key)
            removed += 1
    return removed


def _orphaned_direct_objects(store, cutoff) -> int:
    """Remove the objects of direct uploads that no blob points to: left by two adoptions of one digest at
    once, or by a crash between removing a blob's pointer and its object. An open upload's object (being
    checked) is kept, and so is anything younger than the grace period."""
    removed = 0
    for key, modified in store.iter_direct():
        if modified >= cutoff:
            continue
        try:
            upload = Upload.objects.filter(pk=uuid.UUID(key.removeprefix("data/"))).first()
        except ValueError:
            upload = None
        if upload is not None and upload.state == Upload.State.OPEN:
            continue
        if upload is not None and upload.sha256 and _points_to(store, upload.sha256, key):
            continue
        store.remove_key(key)
        removed += 1
    return removed


def _points_to(store, sha256: str, key: str) -> bool:
    """Whether the blob ``sha256`` exists and its bytes are the object ``key`` (one stat of its pointer)."""
    try:
        return store.data_key(sha256) == key
    except FileNotFoundError:
        return False


def collect_once_across_workers(grace_hours: float = 1.0) -> Collected | None:
    """``collect``, unless another worker is collecting now (PostgreSQL advisory lock); None then."""
    if connection.vendor != "postgresql":
        return collect(grace_hours)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [_LOCK_KEY])
        if not cursor.fetchone()[0]:
            return None
        try:
            return collect(grace_hours)
        finally:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [_LOCK_KEY])
