"""The registry's jobs: fixity (re-read every file of a version, from the object store or where a reference
points, and check its sha256 and size), and the two that fill an upload without a client sending bytes:
``reference`` (read data in place once for its size and sha256) and ``fetch`` (read an allowed URL into the
upload, ``hub.registry.fetch``)."""

from __future__ import annotations

import hashlib
from typing import Any

from django.utils import timezone
from hpcfair.compute import CodedError

from hub.jobs.kinds import JobKind, register
from hub.jobs.runner import JobContext
from hub.registry import fetch, references
from hub.registry.models import File, Upload
from hub.storage import StorageUnavailable, get_blob_store

CHUNK = 8 * 1024 * 1024


def check_file(store, blob_id: str, size: int) -> dict[str, Any]:
    """What reading blob ``blob_id`` back finds: its sha256 and size, and whether they are the recorded
    ones; ``problem`` when the store has no such blob."""
    digest = hashlib.sha256()
    read = 0
    try:
        with store.open(blob_id) as stream:
            while chunk := stream.read(CHUNK):
                digest.update(chunk)
                read += len(chunk)
    except FileNotFoundError:
        return {"ok": False, "problem": "missing from the object store"}
    except StorageUnavailable as exc:
        raise CodedError("storage_unavailable", f"The object store could not be read: {exc}")
    return {"ok": digest.hexdigest() == blob_id and read == size, "sha256": digest.hexdigest(), "size": read}


def check_reference(file: File) -> dict[str, Any]:
    """What reading a referenced file where it lives finds; a change (or the data gone) is dated on the file
    once (``location_changed``), and the record says so; the version and its PID stay as they are."""
    try:
        sha256, size = references.digest(file.location)
        found = {"ok": sha256 == file.blob_id and size == file.size, "sha256": sha256, "size": size}
    except Exception as exc:  # noqa: BLE001 - gone, unreadable, refused now (a link leading out of its root)
        found = {"ok": False, "problem": f"the referenced data cannot be read ({type(exc).__name__})"}
    changed = None if found["ok"] else (file.location_changed or timezone.now())
    if changed != file.location_changed:
        File.objects.filter(pk=file.pk).update(location_changed=changed)
    if changed is not None:
        found["problem"] = f"the referenced data changed on {changed.date().isoformat()}" + (
            f": {found['problem']}" if "problem" in found else "")
    return {"location": file.location, **found}


@register
class FixityJob(JobKind):
    """Re-read every file of a version and compare it with its recorded sha256 and size (never on Slurm: it
    reads the object store, which the hub's workers see)."""

    name = "fixity"
    label = "fixity check"

    def run(self, ctx: JobContext) -> dict[str, Any]:
        version = ctx.job.version
        if version is None or version.is_deleted:
            raise CodedError("gone", "The version was deleted before its fixity could be checked.")
        store = get_blob_store()
        files = list(version.files.select_related("blob"))
        report = []
        for index, file in enumerate(files, start=1):
            found = check_reference(file) if file.location else check_file(store, file.blob_id, file.size)
            report.append({"path": file.path, **found})
            if "problem" in found:
                ctx.log(f"{file.path}: {found['problem']}", "error")
            else:
                ctx.log(f"{file.path}: {'ok' if found['ok'] else 'CORRUPT'} ({found['size']} bytes)",
                        "info" if found["ok"] else "error")
            ctx.progress(index / len(files))
        return {"ok": all(item["ok"] for item in report), "files": report}


def _upload(ctx: JobContext) -> Upload:
    upload = Upload.objects.filter(pk=ctx.job.params["upload"]).first()
    if upload is None or upload.state not in (Upload.State.OPEN, Upload.State.COMPLETED):
        raise CodedError("gone", "The upload this job fills was aborted or removed.")
    return upload


@register
class ReferenceJob(JobKind):
    """Read referenced data where it lives (a file, or every file of a folder), once, for its sizes and sha256s,
    and complete the upload that stands for it; a version then takes it without a byte copied."""

    name = "reference"
    label = "reading referenced data"

    def run(self, ctx: JobContext) -> dict[str, Any]:
        upload = _upload(ctx)
        if upload.state == Upload.State.COMPLETED:
            return {"upload": str(upload.pk), "sha256": upload.sha256, "size": upload.size}
        try:
            found = references.members(upload.source)
        except CodedError:
            raise
        except Exception as exc:  # noqa: BLE001 - gone, unreadable, an S3 error
            raise CodedError("reference_unreadable", f"{upload.source} cannot be read by the hub "
                                                     f"({type(exc).__name__}); check that it exists and that the "
                                                     "hub's workers may read it.")
        total, done, files = sum(m.size for m in found) or 1, 0, []
        for member in found:
            try:
                sha256, size = references.digest(member.location,
                                                 lambda read, base=done: ctx.progress((base + read) / total))
            except OSError as exc:
                raise CodedError("reference_unreadable", f"{member.location} cannot be read ({type(exc).__name__}).")
            files.append({"path": member.path, "location": member.location, "size": size, "sha256": sha256})
            done += size
        folder = len(files) != 1 or files[0]["path"] != ""
        sha256 = references.folder_digest(files) if folder else files[0]["sha256"]
        size = sum(item["size"] for item in files)
        Upload.objects.filter(pk=upload.pk, state=Upload.State.OPEN).update(
            size=size, received=size, sha256=sha256, parts=files if folder else [], state=Upload.State.COMPLETED,
            completed_at=timezone.now())
        ctx.log(f"read {len(files)} file(s), {size} bytes, at {upload.source}")
        return {"upload": str(upload.pk), "sha256": sha256, "size": size, "files": len(files)}


@register
class FetchJob(JobKind):
    """Fetch an allowed URL into an upload (resuming where an earlier attempt stopped) and complete it."""

    name = "fetch"
    label = "fetching data"

    def run(self, ctx: JobContext) -> dict[str, Any]:
        upload = _upload(ctx)
        if upload.state == Upload.State.OPEN:
            upload = fetch.run(upload, log=ctx.log, progress=ctx.progress)
        return {"upload": str(upload.pk), "sha256": upload.sha256, "size": upload.size}
