"""Revisions: what a Hugging Face revision names here. A version label (``1.0``, ``1.0-onnx``), ``main`` (the
version the artifact's page opens on: ``lineage.current_version``), a version PID, or a version's commit sha.

A version's commit sha is the sha1 of its PID: 40 hex digits, the same on every node and for ever, as a git commit
is (``X-Repo-Commit``, ``sha``)."""

from __future__ import annotations

import hashlib
import re

from hub.errors import HubError
from hub.registry import pids
from hub.registry.lineage import current_version
from hub.registry.models import Artifact, Version

MAIN = "main"
COMMIT_RE = re.compile(r"[0-9a-f]{40}")


def commit_sha(version: Version) -> str:
    """The version's commit sha: sha1 of its PID (an identifier, not a security hash)."""
    return hashlib.sha1(version.pid.encode()).hexdigest()  # noqa: S324


def split_revision(rest: str) -> tuple[str, str]:
    """``rest`` of a URL as (revision, path): ``1.0/a/b.json`` -> (``1.0``, ``a/b.json``). A PID's slashes arrive
    decoded (``ark:/99999/fk4…``), as do those of ``refs/…`` names: both keep their segments."""
    parts = rest.split("/")
    if parts[0].lower() == "ark:" or parts[0] == "refs":
        count = 3
    elif parts[0].lower().startswith("ark:"):
        count = 2  # ark:99999/fk4…
    else:
        count = 1
    return "/".join(parts[:count]), "/".join(parts[count:])


def resolve(artifact: Artifact, revision: str | None) -> Version:
    """The live version of ``artifact`` that ``revision`` names, or ``RevisionNotFound``. The full names the
    refs list gives (``refs/heads/main``, ``refs/tags/<label>``) name what their short names do."""
    revision = (revision or MAIN).strip()
    if revision == f"refs/heads/{MAIN}":
        revision = MAIN
    elif revision.startswith("refs/tags/"):
        revision = revision.removeprefix("refs/tags/")
    version: Version | None
    if revision == MAIN:
        version = current_version(artifact)
    elif COMMIT_RE.fullmatch(revision):
        version = next((v for v in artifact.versions.all() if commit_sha(v) == revision), None)
    elif revision.lower().startswith("ark:"):
        canonical = pids.normalize(revision)
        version = artifact.versions.filter(pid=canonical).first() if canonical else None
        if version is None and canonical and canonical == artifact.pid:
            version = current_version(artifact)  # the concept PID: what the page opens on
    elif revision == "latest":
        version = artifact.latest_version()
    else:
        version = artifact.versions.filter(label=revision).first()
    if version is None:
        labels = list(artifact.versions.filter(deleted_at__isnull=True).order_by("created", "id")
                      .values_list("label", flat=True)[:20])
        raise HubError("RevisionNotFound", f"{artifact.full_name} has no version {revision!r}. A revision is a "
                                           f"version label ({', '.join(labels) or 'none yet'}), 'main' (the version "
                                           "its page opens on), a version PID or a version's commit sha.")
    if version.is_deleted:
        reason = f": {version.deletion_reason}" if version.deletion_reason else ""
        raise HubError("RevisionNotFound", f"{version} was deleted{reason}; its PID {version.pid} keeps a "
                                           "tombstone.")
    return version
