"""The JSON bodies of the protocol, in the shapes ``huggingface_hub`` parses (``hf_api.py``: ``ModelInfo``,
``DatasetInfo``, ``SpaceInfo``, ``RepoFile``/``RepoFolder``, ``GitRefs``, ``GitCommitInfo``).

Every file is stored as Git LFS stores it: its ``lfs.oid`` is the sha256 (the download's ``ETag``) and its
``oid`` (git blob id) is that of the LFS pointer file naming it, as on the Hub."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from hub.hfhub.revisions import MAIN, commit_sha
from hub.metadata.written_card import front_matter
from hub.registry.files_access import strictest_state
from hub.registry.lineage import current_version
from hub.registry.models import Artifact, File, Version


def hf_date(moment: datetime) -> str:
    """A date as the Hub writes it (``parse_datetime``'s one format)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def lfs_pointer(file: File) -> bytes:
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{file.blob_id}\nsize {file.size}\n".encode()


def git_blob_id(data: bytes) -> str:
    """What git names a blob holding ``data``."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # noqa: S324 - git's object id


def _tree_id(version: Version, folder: str) -> str:
    return hashlib.sha1(f"tree {version.pid} {folder}".encode()).hexdigest()  # noqa: S324 - an identifier


def last_commit(version: Version) -> dict[str, str]:
    return {"id": commit_sha(version), "title": f"Version {version.label}", "date": hf_date(version.created)}


def file_entry(file: File, version: Version, *, expand: bool = False) -> dict[str, Any]:
    """A tree or paths-info entry for a file."""
    pointer = lfs_pointer(file)
    entry: dict[str, Any] = {"type": "file", "oid": git_blob_id(pointer), "size": file.size, "path": file.path,
                             "lfs": {"oid": file.blob_id, "size": file.size, "pointerSize": len(pointer)}}
    if expand:
        entry["lastCommit"] = last_commit(version)
    return entry


def folder_entry(folder: str, version: Version, *, expand: bool = False) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "directory", "oid": _tree_id(version, folder), "path": folder}
    if expand:
        entry["lastCommit"] = last_commit(version)
    return entry


def folders_of(paths: Iterable[str]) -> set[str]:
    """Every folder that holds one of ``paths`` (``a/b/c.txt`` -> ``a``, ``a/b``)."""
    out: set[str] = set()
    for path in paths:
        parts = path.split("/")[:-1]
        out.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
    return out


def tree(version: Version, files: list[File], folder: str, *, recursive: bool, expand: bool) -> list[dict] | None:
    """The entries under ``folder`` ("" for the root): its children, or everything below it when ``recursive``;
    None when no such folder exists."""
    prefix = f"{folder}/" if folder else ""
    below = [f for f in files if f.path.startswith(prefix)]
    if folder and not below:
        return None
    folders = {d for d in folders_of(f.path for f in below) if d.startswith(prefix)}
    if not recursive:
        depth = prefix.count("/")
        below = [f for f in below if f.path.count("/") == depth]
        folders = {d for d in folders if d.count("/") == depth}
    return ([folder_entry(d, version, expand=expand) for d in sorted(folders)]
            + [file_entry(f, version, expand=expand) for f in below])


def paths_info(version: Version, files: list[File], paths: list[str], *, expand: bool) -> list[dict]:
    """The entries of the ``paths`` that exist, files or folders; the others are left out (as the Hub does)."""
    by_path = {f.path: f for f in files}
    folders = folders_of(by_path)
    out = []
    for path in dict.fromkeys(p.strip("/") for p in paths):
        if path in by_path:
            out.append(file_entry(by_path[path], version, expand=expand))
        elif path in folders:
            out.append(folder_entry(path, version, expand=expand))
    return out


def repo_info(artifact: Artifact, version: Version, files: list[File], *, blobs: bool) -> dict[str, Any]:
    """``/api/{models,datasets,spaces}/{id}[/revision/{rev}]``: the repository at ``version``."""
    meta = version.metadata or {}
    siblings = []
    for file in files:
        sibling: dict[str, Any] = {"rfilename": file.path}
        if blobs:
            pointer = lfs_pointer(file)
            sibling.update(size=file.size, blobId=git_blob_id(pointer),
                           lfs={"size": file.size, "sha256": file.blob_id, "pointerSize": len(pointer)})
        siblings.append(sibling)
    card = front_matter(meta)
    # files restricted or embargoed (its own or a source's) are the Hub's gated repository: "manual" approval
    gated = "manual" if strictest_state(version)[0] != Version.FilesAccess.OPEN else False
    return {**summary(artifact, version, card), "gated": gated, "cardData": card, "siblings": siblings,
            "usedStorage": sum(f.size for f in files)}


def summary(artifact: Artifact, version: Version, card: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a listing (``list_models``, ``list_datasets``, ``list_spaces``) and the repository's info both say of
    ``artifact`` at ``version``."""
    meta = version.metadata or {}
    card = front_matter(meta) if card is None else card
    tags = list(card.get("tags", []))
    if meta.get("framework"):
        tags.append(str(meta["framework"]))
    info: dict[str, Any] = {
        "_id": artifact.pid, "id": artifact.full_name, "author": artifact.owner.username,
        "sha": commit_sha(version), "lastModified": hf_date(version.created), "createdAt": hf_date(artifact.created),
        "private": not artifact.is_public, "gated": False, "disabled": False, "downloads": artifact.downloads,
        "likes": 0, "tags": tags,
    }
    if artifact.kind == Artifact.Kind.MODEL:
        info.update(modelId=artifact.full_name, pipeline_tag=meta.get("task"))
    elif artifact.kind == Artifact.Kind.DATASET:
        info.update(description=meta.get("description") or artifact.description)
    else:
        info.update(sdk="static", subdomain=artifact.name)
    return info


def refs(artifact: Artifact, *, pull_requests: bool) -> dict[str, Any]:
    """``main`` as the one branch (the version the page opens on); every live version as a tag."""
    live = list(artifact.versions.filter(deleted_at__isnull=True).order_by("created", "id"))
    main = current_version(artifact)
    body: dict[str, Any] = {
        "branches": [{"name": MAIN, "ref": f"refs/heads/{MAIN}", "targetCommit": commit_sha(main)}] if main else [],
        "converts": [],
        "tags": [{"name": v.label, "ref": f"refs/tags/{v.label}", "targetCommit": commit_sha(v)} for v in live],
    }
    if pull_requests:
        body["pullRequests"] = []
    return body


def commits(artifact: Artifact, version: Version) -> list[dict[str, Any]]:
    """The history up to ``version``: it and the live versions published before it, newest first."""
    older = (artifact.versions.filter(deleted_at__isnull=True, created__lte=version.created)
             .select_related("created_by").order_by("-created", "-id"))
    return [{"id": commit_sha(v), "title": f"Version {v.label}", "message": f"{v} ({v.pid})",
             "date": hf_date(v.created), "authors": [{"user": v.created_by.username if v.created_by else ""}]}
            for v in older]
