"""Hub versions as ORAS artifacts, generated on the fly and deterministic (the same bytes, so the same digest,
on every node): an OCI image manifest whose ``artifactType`` names the kind, whose config blob is the version's
metadata JSON and whose layers are its files (media types, ``org.opencontainers.image.title`` = the path). The tag
is the version label (``+`` written ``_``, which tags cannot hold). Nothing is stored: the config and manifest are
rebuilt from the rows, and the layers are the files' own blobs."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from hub.registry.models import Artifact, File, Version

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG_TYPE = "application/vnd.hpcfair.metadata.v1+json"
ARTIFACT_TYPES = {"model": "application/vnd.hpcfair.model.v1", "dataset": "application/vnd.hpcfair.dataset.v1",
                  "project": "application/vnd.hpcfair.project.v1"}
TITLE = "org.opencontainers.image.title"


def _canonical(data: object) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def tag_of(version: Version) -> str:
    """The version's tag: its label with ``+`` as ``_``."""
    return version.label.replace("+", "_")


@dataclass
class Generated:
    """One version's artifact: its files, config and manifest bytes."""

    version: Version
    files: list[File]
    config: bytes
    manifest: bytes

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.manifest).hexdigest()

    @property
    def config_digest(self) -> str:
        return hashlib.sha256(self.config).hexdigest()


def build(artifact: Artifact, version: Version) -> Generated:
    """The ORAS artifact of ``version`` of ``artifact``."""
    files = list(version.files.select_related("blob").order_by("path"))
    config = _canonical({"name": artifact.full_name, "kind": artifact.kind, "version": version.label,
                         "pid": version.pid, "metadata": version.metadata})
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "artifactType": ARTIFACT_TYPES.get(artifact.kind, "application/vnd.hpcfair.artifact.v1"),
        "config": {"mediaType": CONFIG_TYPE, "digest": f"sha256:{hashlib.sha256(config).hexdigest()}",
                   "size": len(config)},
        "layers": [{"mediaType": f.media_type or "application/octet-stream", "digest": f"sha256:{f.blob_id}",
                    "size": f.size, "annotations": {TITLE: f.path}} for f in files],
        "annotations": {"org.opencontainers.image.title": artifact.full_name,
                        "org.opencontainers.image.version": version.label,
                        "org.opencontainers.image.created": version.created.strftime("%Y-%m-%dT%H:%M:%SZ"),
                        "org.opencontainers.image.ref.name": tag_of(version),
                        "io.hpcfair.pid": version.pid},
    }
    return Generated(version, files, config, _canonical(manifest))


def live_versions(artifact: Artifact) -> list[Version]:
    return list(artifact.versions.filter(deleted_at__isnull=True).order_by("created", "id"))


def by_tag(artifact: Artifact, tag: str) -> Generated | None:
    """The artifact of the live version tagged ``tag``, if any."""
    for version in live_versions(artifact):
        if tag_of(version) == tag:
            return build(artifact, version)
    return None


def by_digest(artifact: Artifact, hex_digest: str) -> Generated | None:
    """The artifact of the live version whose manifest has this digest, if any."""
    return next((g for g in map(lambda v: build(artifact, v), live_versions(artifact)) if g.digest == hex_digest),
                None)


def tags(artifact: Artifact) -> list[str]:
    return [tag_of(v) for v in live_versions(artifact)]


def find_blob(artifact: Artifact, hex_digest: str) -> tuple[File | None, bytes | None]:
    """A blob ``artifact``'s artifacts name: a live version's file (its bytes are that file's), or a config or
    manifest (the bytes themselves); (None, None) when none of them has this digest."""
    file = (File.objects.filter(version__artifact=artifact, version__deleted_at__isnull=True, blob_id=hex_digest)
            .select_related("blob").first())
    if file is not None:
        return file, None
    for generated in map(lambda v: build(artifact, v), live_versions(artifact)):
        if generated.config_digest == hex_digest:
            return None, generated.config
        if generated.digest == hex_digest:
            return None, generated.manifest
    return None, None
