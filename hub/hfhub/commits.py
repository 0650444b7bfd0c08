"""The write side: a repository is created as an artifact, and a commit (``HfApi.create_commit``: its NDJSON
lines, ``header``, ``file``, ``lfsFile``, ``deletedFile``, ``deletedFolder``) becomes a new version of it,
published as any upload is (``services.create_version``: metadata read from the README card and validated, the
uniqueness check, quotas, conversion after publication). The version holds its parent's files with the commit's
changes; the parent is the version the commit's revision names (``main``: the version the page opens on)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import transaction

from hub.bounded import load_json
from hub.errors import HubError
from hub.hfhub.lfs import held_by
from hub.hfhub.revisions import MAIN, commit_sha, resolve
from hub.metadata.derive import CARD_MAX_BYTES, CARD_NAMES, split_card
from hub.orgs.services import owner_for_new
from hub.registry import quota, services
from hub.registry.lineage import current_version
from hub.registry.models import NAME_RE, Artifact, Blob, Version
from hub.registry.uploads import StagedFile, upload_dir
from hub.storage import get_blob_store
from ontology.fields import MetadataError

# create_repo's ``type`` -> the kind (None: a model, as the Hub takes it).
CREATE_KINDS = {None: "model", "model": "model", "dataset": "dataset", "space": "project"}
MAX_OPERATIONS = 10_000


def repo_url(base: str, artifact: Artifact) -> str:
    prefix = {"dataset": "datasets/", "project": "spaces/"}.get(artifact.kind, "")
    return f"{base}/{prefix}{artifact.full_name}"


def create_repo(user, payload: dict[str, Any]) -> tuple[Artifact, bool]:
    """``POST /api/repos/create``: (the artifact, whether it was made now). One that exists already is the
    caller's 409 (``exist_ok`` in the client)."""
    name, namespace = payload.get("name"), payload.get("organization") or user.username
    kind = CREATE_KINDS.get(payload.get("type")) if isinstance(payload.get("type"), str | None) else None
    if not isinstance(name, str) or not re.match(NAME_RE, name):
        raise HubError("invalid", "name is the repository's name: letters, digits and . _ - (up to 100).",
                       errors={"name": ["Invalid name."]})
    if kind is None:
        raise HubError("invalid", "type is model, dataset or space (a project).", errors={"type": ["Unknown."]})
    if not isinstance(namespace, str):
        raise HubError("invalid", "organization is the name of an organization you write in.",
                       errors={"organization": ["Expected a string."]})
    try:
        owner = owner_for_new(user, namespace)  # yourself, or an organization you write in (as the REST API's)
    except HubError as refused:
        if refused.code != "not_found":
            raise
        raise HubError("permission_denied", f"You may create repositories as {user.username}/… or in an "
                                            f"organization you write in, not in {namespace!r}.") from None
    existing = Artifact.objects.live().filter(owner=owner, name=name).first()
    if existing is not None:
        return existing, False
    private = payload.get("private") is True or payload.get("visibility") in ("private", "protected")
    artifact = services.create_artifact(owner, kind=kind, name=name, title=name,
                                        visibility="private" if private else "public")
    return artifact, True


def parent_of(artifact: Artifact, revision: str) -> Version | None:
    """The version a commit to ``revision`` builds on: None for the first commit to an empty repository."""
    if revision == MAIN and current_version(artifact) is None:
        return None
    return resolve(artifact, revision)


@dataclass
class Commit:
    summary: str
    parent: str | None
    added: dict[str, StagedFile]
    deleted_files: set[str]
    deleted_folders: set[str]


def _value(line: dict[str, Any], key: str, kind: type) -> Any:
    value = line.get("value", {}).get(key) if isinstance(line.get("value"), dict) else None
    if not isinstance(value, kind):
        raise HubError("malformed_request", f"A {line.get('key')!r} line of the commit needs {key!r}.")
    return value


def parse_commit(body: bytes, user) -> Commit:
    """``user``'s commit, its NDJSON lines; a ``file`` line's bytes are staged on disk now (removed by ``discard``).
    An ``lfsFile`` names bytes ``user`` holds (``lfs.held_by``)."""
    commit = Commit("", None, {}, set(), set())
    lines = [load_json(line, what="A line of the commit (NDJSON: one JSON object per line)")
             for line in body.splitlines() if line.strip()]
    if len(lines) > MAX_OPERATIONS:
        raise HubError("malformed_request", f"A commit holds at most {MAX_OPERATIONS} operations.")
    try:
        for line in lines:
            key = line.get("key") if isinstance(line, dict) else None
            if key == "header":
                header = line.get("value") if isinstance(line.get("value"), dict) else {}
                commit.summary = str(header.get("summary") or "")[:300]
                commit.parent = header["parentCommit"] if isinstance(header.get("parentCommit"), str) else None
            elif key == "file":
                path = services.clean_path(_value(line, "path", str))
                try:
                    data = base64.b64decode(_value(line, "content", str), validate=True)
                except binascii.Error:
                    raise HubError("malformed_request", f"The content of {path!r} is not base64.")
                staged = upload_dir() / f"hf-{uuid.uuid4().hex}.part"
                staged.write_bytes(data)
                commit.added[path] = StagedFile(path, staged, hashlib.sha256(data).hexdigest(), len(data),
                                                temporary=True)
            elif key == "lfsFile":
                path, oid = services.clean_path(_value(line, "path", str)), _value(line, "oid", str).lower()
                if not re.fullmatch(r"[0-9a-f]{64}", oid) or not held_by(user, oid) or not get_blob_store().exists(oid):
                    raise HubError("upload_incomplete", f"The bytes of {path!r} (sha256 {oid[:64]}) never reached the "
                                                        "hub: upload them through the LFS batch first.")
                size = line["value"].get("size")
                known = Blob.objects.filter(sha256=oid).values_list("size", flat=True).first()
                if known is None or (isinstance(size, int) and size != known):
                    raise HubError("upload_size_mismatch", f"{path!r} was uploaded with another size.")
                commit.added[path] = StagedFile(path, _nowhere(oid), oid, known)
            elif key == "deletedFile":
                commit.deleted_files.add(services.clean_path(_value(line, "path", str)))
            elif key == "deletedFolder":
                commit.deleted_folders.add(_value(line, "path", str).strip("/"))
            else:
                raise HubError("malformed_request", f"Unknown commit line {key!r}: header, file, lfsFile, deletedFile "
                                                    "or deletedFolder.")
    except BaseException:
        discard(commit)
        raise
    return commit


def _nowhere(sha256: str) -> Path:
    """A staging path that does not exist: the bytes are a blob already (publishing fetches them if it reads)."""
    return upload_dir() / f"hf-blob-{sha256}.absent"


def discard(commit: Commit) -> None:
    for staged in commit.added.values():
        if staged.temporary:
            staged.staged.unlink(missing_ok=True)


def apply(artifact: Artifact, user, parent: Version | None, commit: Commit) -> Version:
    """Publish the commit as the artifact's next version."""
    if commit.parent and parent is not None and commit.parent != commit_sha(parent):
        raise HubError("conflict", f"The commit was made on {commit.parent}, but the revision is now "
                                   f"{commit_sha(parent)} ({parent}); fetch it and commit again.")
    files: dict[str, StagedFile] = {}
    if parent is not None:
        for file in parent.files.all():
            files[file.path] = StagedFile(file.path, _nowhere(file.blob_id), file.blob_id, file.size)
    for path in commit.deleted_files:
        if files.pop(path, None) is None and path not in commit.added:
            raise HubError("EntryNotFound", f"{path!r} is not in {parent or artifact} to delete.")
    for folder in commit.deleted_folders:
        for path in [p for p in files if p.startswith(f"{folder}/")]:
            del files[path]
    files.update(commit.added)
    # The Hub's cards name no authors (its namespace is the author): unless the card names creators, the person
    # who commits is the version's creator. Everything else is the card's, validated as any upload's.
    metadata = {} if "creators" in _card_front(files) else {
        "creators": [{"name": user.get_full_name() or user.username}]}
    with transaction.atomic():
        quota.check_files(artifact.owner, list(files.values()), user)
        return services.create_version(artifact, user, files=list(files.values()), metadata=metadata)


def _card_front(files: dict[str, StagedFile]) -> dict[str, Any]:
    """The front matter of the version's README card ({} without one; a broken one is publishing's to refuse)."""
    card = next((f for path, f in files.items() if path.lower() in CARD_NAMES), None)
    if card is None or card.size > CARD_MAX_BYTES:
        return {}
    if card.staged.exists():
        text = card.staged.read_bytes()
    else:
        with get_blob_store().open(card.sha256) as stream:
            text = stream.read()
    try:
        return split_card(text.decode("utf-8", errors="replace"), card.path)[0]
    except MetadataError:
        return {}
