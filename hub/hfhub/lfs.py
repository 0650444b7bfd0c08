"""Large files by the Git LFS batch API (``{repo}.git/info/lfs/objects/batch``): each object the hub lacks gets
an upload URL of its own, signed for the person, the sha256 and the size and valid an hour (the client PUTs to it
without its token, as to the Hub's presigned S3 URLs); an object the hub holds already gets no action, so the
client skips it. The bytes become a blob once their sha256 and size are checked, and a completed upload of the
person's (an ``Upload`` row: it keeps the blob from the collector until a version holds it, and counts in the
quota as any upload); a commit then names them.

Content is stored once, but nobody commits bytes by naming a digest alone: an object counts as held only by one
who uploaded it or may read a version that has it (``held_by``); to anyone else the batch answers an upload
action even for bytes the hub has, so it tells nobody what is stored."""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core import signing
from django.db import IntegrityError, transaction
from django.http import HttpRequest
from django.utils import timezone

from hub.errors import HubError
from hub.registry import quota, services
from hub.registry.files_access import may_read_files
from hub.registry.models import Blob, Upload, Version
from hub.registry.uploads import upload_dir
from hub.storage import StorageUnavailable, get_blob_store

SALT = "hub.hfhub.lfs"
URL_SECONDS = 3600
MAX_OBJECTS = 1000
OID_RE = re.compile(r"[0-9a-f]{64}")


def batch(request: HttpRequest, user, body: dict[str, Any], *, owner=None) -> dict[str, Any]:
    """The batch API's answer for ``user``'s ``upload`` of ``body["objects"]`` into an artifact of ``owner`` (whose
    quota the objects still to come count against; ``user`` by default)."""
    if body.get("operation") != "upload":
        raise HubError("invalid", "This hub takes LFS uploads here; downloads go through resolve.",
                       errors={"operation": ["Expected 'upload'."]})
    objects = body.get("objects")
    if not isinstance(objects, list) or len(objects) > MAX_OBJECTS:
        raise HubError("invalid", f"objects is a list of at most {MAX_OBJECTS} {{oid, size}}.",
                       errors={"objects": ["Expected a list."]})
    quota.check_within(user)
    store, out, wanted = get_blob_store(), [], []
    for item in objects:
        oid = str(item.get("oid", "")).lower() if isinstance(item, dict) else ""
        size = item.get("size") if isinstance(item, dict) else None
        if not OID_RE.fullmatch(oid) or not isinstance(size, int) or size < 0:
            out.append({"oid": oid[:64], "size": size if isinstance(size, int) else 0,
                        "error": {"code": 422, "message": "An object is a sha256 oid and a size in bytes."}})
            continue
        if size > settings.HUB_UPLOAD_MAX_SIZE:
            raise HubError("upload_too_large", f"This hub accepts files up to {settings.HUB_UPLOAD_MAX_SIZE} bytes.")
        entry: dict[str, Any] = {"oid": oid, "size": size}
        if not (held_by(user, oid) and store.exists(oid) and Blob.objects.filter(sha256=oid, size=size).exists()):
            wanted.append(Wanted(oid, size))
            signed = signing.dumps({"u": user.pk, "o": oid, "s": size}, salt=SALT)
            href = request.build_absolute_uri(f"/api/hfhub-lfs/{oid}?sig={signed}")
            entry["actions"] = {"upload": {"href": href, "header": {}, "expires_in": URL_SECONDS}}
        out.append(entry)
    with transaction.atomic():  # the bytes still to come count against the quota now, as an upload's size does
        quota.check_files(owner or user, wanted, user)
    return {"transfer": "basic", "objects": out, "hash_algo": "sha256"}


def held_by(user, oid: str) -> bool:
    """Whether ``user`` holds the bytes of ``oid``: uploaded them (a completed upload not yet expired), or may read
    a live version that has them."""
    if Upload.objects.filter(owner=user, sha256=oid, state=Upload.State.COMPLETED,
                             expires__gte=timezone.now()).exists():
        return True
    versions = (Version.objects.filter(files__blob_id=oid, deleted_at__isnull=True)
                .filter(pk__in=services.visible_versions(user).values("pk"))
                .select_related("artifact__owner").prefetch_related("provenance__target__artifact__owner"))
    # the files' own rule too: naming a restricted version's digest copies no bytes (hub.registry.files_access)
    return any(may_read_files(user, version) for version in versions.distinct()[:20])


@dataclass(frozen=True)
class Wanted:
    """An object still to upload, as the quota counts files (``sha256``, ``size``)."""

    sha256: str
    size: int


def receive(request: HttpRequest, oid: str) -> None:
    """Take the bytes of ``oid`` PUT to its signed URL: checked against the signed size and sha256, then a blob."""
    try:
        claim = signing.loads(request.GET.get("sig", ""), salt=SALT, max_age=URL_SECONDS)
    except signing.BadSignature:
        raise HubError("invalid_token", "This upload URL is not the hub's, or it expired: ask the LFS batch again.")
    if claim.get("o") != oid:
        raise HubError("invalid_token", "This upload URL is for another object.")
    size = int(claim["s"])
    staged = upload_dir() / f"hf-lfs-{uuid.uuid4().hex}.part"
    digest, received = hashlib.sha256(), 0
    try:
        with open(staged, "wb") as out:
            while chunk := request.read(1024 * 1024):
                received += len(chunk)
                if received > size:
                    raise HubError("upload_size_mismatch", f"More than the {size} bytes announced arrived.")
                digest.update(chunk)
                out.write(chunk)
        if received != size:
            raise HubError("upload_size_mismatch", f"{received} bytes arrived of the {size} announced.")
        if digest.hexdigest() != oid:
            raise HubError("checksum_mismatch", f"The bytes' sha256 is {digest.hexdigest()}, not {oid}.")
        try:
            get_blob_store().put_file(staged, oid)
        except StorageUnavailable:
            raise HubError("storage_unavailable", "The object store is unavailable; nothing was kept. Try again.")
        try:
            Blob.objects.get_or_create(sha256=oid, defaults={"size": size})
        except IntegrityError:  # another upload of the same bytes made it meanwhile
            pass
        now = timezone.now()
        Upload.objects.create(owner_id=claim["u"], filename=f"hfhub-lfs:{oid}", size=size, expected_sha256=oid,
                              sha256=oid, state=Upload.State.COMPLETED, completed_at=now,
                              expires=now + timedelta(hours=settings.HUB_UPLOAD_TTL_HOURS))
    finally:
        staged.unlink(missing_ok=True)
