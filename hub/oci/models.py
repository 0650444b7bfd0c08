"""What was pushed: blobs linked to a repository, manifests (their bytes are a blob of the store, named by their
digest) and tags. Generated ORAS artifacts of hub versions are not stored (``hub.oci.artifacts``)."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone


class RepoBlob(models.Model):
    """A blob of the store that ``repository`` may serve: pushed into it or mounted from another one."""

    repository = models.CharField(max_length=255)
    digest = models.CharField(max_length=64, help_text="sha256 hex of the bytes (the store's key).")
    size = models.BigIntegerField()
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["repository", "digest"], name="oci_repo_blob_unique")]

    def __str__(self) -> str:
        return f"{self.repository}@sha256:{self.digest[:12]}"


class Manifest(models.Model):
    """A pushed manifest or index; ``references`` are the digests it names (config, layers, children)."""

    repository = models.CharField(max_length=255)
    digest = models.CharField(max_length=64)
    media_type = models.CharField(max_length=255)
    size = models.BigIntegerField()
    references = models.JSONField(default=list, blank=True)
    subject = models.CharField(max_length=64, blank=True, help_text="The digest its ``subject`` names (referrers).")
    artifact_type = models.CharField(max_length=255, blank=True)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["repository", "digest"], name="oci_manifest_unique")]

    def __str__(self) -> str:
        return f"{self.repository}@sha256:{self.digest[:12]}"


class Tag(models.Model):
    """``repository:name`` -> a pushed manifest (a push of the same tag moves it)."""

    repository = models.CharField(max_length=255)
    name = models.CharField(max_length=128)
    manifest = models.ForeignKey(Manifest, on_delete=models.CASCADE, related_name="tags")
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["repository", "name"], name="oci_tag_unique")]

    def __str__(self) -> str:
        return f"{self.repository}:{self.name}"


class BlobUpload(models.Model):
    """An upload session (``POST /v2/<name>/blobs/uploads/``); its chunks are staged objects ``oci/<id>/…``."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    repository = models.CharField(max_length=255)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oci_uploads")
    received = models.BigIntegerField(default=0)
    chunks = models.JSONField(default=list, blank=True)
    created = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"upload {self.id} to {self.repository} ({self.received} bytes)"
