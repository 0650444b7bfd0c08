"""The fixity job: re-read every file of a version from the object store and check its sha256 and size."""

from __future__ import annotations

import hashlib
from typing import Any

from hpcfair.compute import CodedError

from hub.jobs.kinds import JobKind, register
from hub.jobs.runner import JobContext
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
            found = check_file(store, file.blob_id, file.size)
            report.append({"path": file.path, **found})
            if "problem" in found:
                ctx.log(f"{file.path}: {found['problem']}", "error")
            else:
                ctx.log(f"{file.path}: {'ok' if found['ok'] else 'CORRUPT'} ({found['size']} bytes)",
                        "info" if found["ok"] else "error")
            ctx.progress(index / len(files))
        return {"ok": all(item["ok"] for item in report), "files": report}
