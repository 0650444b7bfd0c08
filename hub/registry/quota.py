"""Per-owner storage quota (``HUB_USER_STORAGE_MB`` for each person and organization, or an organization's own
``storage_quota_mb``; 0, the default: no limit).

What a person uses is the bytes of the blobs that their live versions (of the artifacts they own) and their
completed uploads reference, each blob counted once however many files name it (storage is content-addressed),
plus the declared size of their open uploads. It is checked before anything is written, so a refusal leaves no
row and no blob behind:

- opening an upload: its declared size must fit;
- each chunk, each request for part URLs, and completing: the person must still be within the quota (the
  upload's size was counted when it was opened; a quota lowered meanwhile stops it, and the upload stays open
  for when room is made);
- publishing a version through the API or the pages: the bytes of the files whose content the artifact's owner
  does not hold yet must fit in the owner's quota.

Each check that adds bytes (opening an upload, publishing a version) runs in the transaction that writes the
upload's or the version's row, and first takes a lock of the person's own (``lock``), held until that transaction
ends: of two uploads, or an upload and a version, opened at once by one person, the second check waits for the
first's commit and then counts its bytes, so together they cannot pass the quota. With no quota no lock is taken.
``check_within`` adds nothing (an upload's bytes were counted when it opened) and takes none.

Versions that the hub's own jobs publish (conversions, generation builds, containers, inference outputs,
fine-tunes) count towards the quota but are never refused: a job must not fail for where it puts its result.
Staff are not limited. A refusal is 403 ``storage_quota`` with ``used``, ``limit`` and ``adding`` in bytes. Data by
reference (``hub.registry.references``: files whose bytes stay on the site's file system or in an S3 bucket) is
not counted: the hub holds none of its bytes.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Sum
from django.utils import timezone

from hub.errors import HubError
from hub.registry.models import Blob, File, Upload

MIB = 1024 * 1024


def limit_for(user) -> int:
    """The owner's quota in bytes; 0 when unlimited (no quota set, staff, or no person). An organization's is its
    own ``storage_quota_mb`` when set, else the site's per-owner one."""
    if user is None or not user.is_authenticated or user.is_staff:
        return 0
    from hub.orgs.models import Organization

    own = Organization.objects.filter(account_id=user.pk).values_list("storage_quota_mb", flat=True).first()
    return (own if own is not None else settings.HUB_USER_STORAGE_MB) * MIB


def _live_files_of(user):
    """The files of ``user``'s live versions whose bytes the hub stores (data by reference counts nothing)."""
    return File.objects.filter(version__artifact__owner=user, version__deleted_at__isnull=True,
                               version__artifact__deleted_at__isnull=True, location="")


def used_bytes(user) -> int:
    """The bytes ``user`` holds: distinct blobs of their live versions and completed uploads (whose bytes are
    stored, with no blob row until a version takes them), and the declared size of their open, unexpired
    uploads."""
    in_versions = _live_files_of(user).values("blob_id")
    held = Blob.objects.filter(sha256__in=in_versions).aggregate(total=Sum("size"))["total"] or 0
    completed = (Upload.objects.filter(owner=user, state=Upload.State.COMPLETED, reference=False).exclude(sha256="")
                 .exclude(sha256__in=in_versions).values_list("sha256", "size").distinct())
    held += sum(dict(completed).values())
    opened = Upload.objects.filter(owner=user, state=Upload.State.OPEN, expires__gt=timezone.now(), reference=False)
    return held + (opened.aggregate(total=Sum("size"))["total"] or 0)


class StorageQuota(HubError):
    """403 storage_quota: what is asked would take the person past their storage quota."""

    def __init__(self, used: int, limit: int, adding: int, whose: str = "your") -> None:
        asked = f"adding {adding / MIB:,.1f} MiB to " if adding else ""
        super().__init__(
            "storage_quota",
            f"This would take {whose} storage past its quota: {asked}{used / MIB:,.1f} MiB used of "
            f"{limit / MIB:,.1f} MiB. Delete versions that are no longer needed (DELETE …/versions/{{version}}/), "
            "abort open uploads (DELETE /api/v1/uploads/{id}), or ask the administrators for a larger quota.",
            used=used, limit=limit, adding=adding)


def lock(user) -> None:
    """Take ``user``'s quota lock until the current transaction ends: a second check of the same person waits here
    for the first one's commit, then counts what it wrote. The storage quota and the jobs-at-once quota
    (``hub.jobs.quota.take_slot``) share it.

    PostgreSQL: ``SELECT … FOR NO KEY UPDATE`` of the person's row (the weakest lock that two checks cannot share;
    rows that merely refer to the person, a new upload or job, do not wait for it). SQLite: the hub's transactions
    begin ``IMMEDIATE`` (``hub.settings``), so the transaction already holds the database's one write lock and
    this is a no-op. Only inside ``transaction.atomic()``: a lock outside one would end with the statement."""
    if not connection.in_atomic_block:
        raise RuntimeError("quota.lock needs a transaction: check the quota inside the atomic block that writes")
    list(get_user_model().objects.select_for_update(no_key=True).filter(pk=user.pk).values_list("pk", flat=True))


def check_adding(user, size: int) -> None:
    """Raise ``StorageQuota`` if ``size`` more bytes (an upload about to open) do not fit ``user``'s quota. Call it
    inside the transaction that writes the upload's row: it takes the person's ``lock`` first."""
    limit = limit_for(user)
    if not limit or size <= 0:
        return
    lock(user)
    used = used_bytes(user)
    if used + size > limit:
        raise StorageQuota(used, limit, size)


def check_within(user) -> None:
    """Raise ``StorageQuota`` if ``user`` already holds more than the quota (before a chunk or a completion). No
    lock: a chunk or a completion adds no bytes to what the person is counted for (the upload's declared size was
    counted when it opened, and its content, once complete, counts no more than that)."""
    limit = limit_for(user)
    if not limit:
        return
    used = used_bytes(user)
    if used > limit:
        raise StorageQuota(used, limit, 0)


def check_files(owner, files: Iterable, publisher=None) -> None:
    """Raise ``StorageQuota`` if the files of a new version (objects with ``sha256`` and ``size``) add more bytes
    than ``owner``'s quota has room for: only content the owner does not hold yet counts, each once. Call it inside
    the transaction that writes the version: it takes the owner's ``lock`` first."""
    limit = limit_for(owner)
    if not limit:
        return
    lock(owner)
    sizes = {item.sha256: item.size for item in files if not getattr(item, "location", "")}
    held = set(_live_files_of(owner).filter(blob_id__in=sizes).values_list("blob_id", flat=True).distinct())
    held |= set(Upload.objects.filter(owner=owner, state=Upload.State.COMPLETED, sha256__in=sizes)
                .values_list("sha256", flat=True))
    adding = sum(size for sha256, size in sizes.items() if sha256 not in held)
    if not adding:
        return
    used = used_bytes(owner)
    if used + adding > limit:
        mine = publisher is None or getattr(publisher, "pk", None) == owner.pk
        raise StorageQuota(used, limit, adding, "your" if mine else f"{owner.username}'s")
