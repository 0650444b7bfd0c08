"""What the collector (``hub.registry.gc``) keeps for the registry: pushed blobs and manifests, open uploads."""

from __future__ import annotations

import uuid

from hub.oci.models import BlobUpload, Manifest, RepoBlob


def live_blobs() -> set[str]:
    """Digests of blobs some repository holds or some pushed manifest is."""
    return set(RepoBlob.objects.values_list("digest", flat=True)) | set(
        Manifest.objects.values_list("digest", flat=True))


def upload_open(pk: uuid.UUID) -> bool:
    """Whether the upload session ``pk`` (its staged chunks ``oci/<pk>/…``) is still open."""
    return BlobUpload.objects.filter(pk=pk).exists()
