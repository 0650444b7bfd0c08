"""``python manage.py hub_gc``: remove expired uploads and blobs that no row references."""

from __future__ import annotations

from datetime import timedelta

from django.core.management.base import BaseCommand
from django.utils import timezone

from hub.registry.models import Blob, File, Upload
from hub.registry.uploads import staged_path, upload_dir
from hub.storage import get_blob_store


class Command(BaseCommand):
    help = "Delete expired upload sessions and their staged bytes, and unreferenced blobs."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--grace-hours", type=float, default=1.0,
                            help="leave blobs and staged files younger than this (uploads in flight)")

    def handle(self, grace_hours: float, **options) -> None:
        now = timezone.now()
        cutoff = now - timedelta(hours=grace_hours)
        expired = Upload.objects.filter(expires__lt=now).exclude(state=Upload.State.CONSUMED)
        for upload in expired:
            staged_path(upload).unlink(missing_ok=True)
        removed_uploads = expired.update(state=Upload.State.ABORTED)
        # Staged form files left by a crashed request.
        stale_forms = 0
        for path in upload_dir().glob("form-*.part"):
            if path.stat().st_mtime < cutoff.timestamp():
                path.unlink(missing_ok=True)
                stale_forms += 1
        store = get_blob_store()
        live = set(File.objects.filter(version__deleted_at__isnull=True).values_list("blob_id", flat=True))
        removed_blobs = 0
        for sha256, modified in store.iter_blobs():
            if sha256 not in live and modified < cutoff:
                store.delete(sha256)
                removed_blobs += 1
        Blob.objects.filter(files__isnull=True, created__lt=cutoff).delete()
        self.stdout.write(f"expired uploads: {removed_uploads}; stale staged files: {stale_forms}; "
                          f"unreferenced blobs removed: {removed_blobs}")
