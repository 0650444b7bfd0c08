"""Object storage behind one small interface; the backend is chosen by ``HUB_STORAGE``."""

from __future__ import annotations

from functools import lru_cache

from django.conf import settings

from hub.storage.base import BlobStore, StorageUnavailable, blob_key

__all__ = ["BlobStore", "StorageUnavailable", "blob_key", "get_blob_store"]


def get_blob_store() -> BlobStore:
    """The configured blob store (one instance per configuration)."""
    config = settings.HUB_STORAGE
    return _build(tuple(sorted(config.items())))


@lru_cache(maxsize=8)
def _build(items: tuple[tuple[str, object], ...]) -> BlobStore:
    config = dict(items)
    backend = config["BACKEND"]
    if backend == "filesystem":
        from hub.storage.filesystem import FileSystemBlobStore

        return FileSystemBlobStore(str(config["DIR"]))
    if backend == "s3":
        from hub.storage.s3 import S3BlobStore

        return S3BlobStore(
            endpoint=str(config["S3_ENDPOINT"]),
            bucket=str(config["S3_BUCKET"]),
            access_key=str(config["S3_ACCESS_KEY"]),
            secret_key=str(config["S3_SECRET_KEY"]),
            region=str(config["S3_REGION"]),
            secure=bool(config["S3_SECURE"]),
            public_endpoint=str(config["S3_PUBLIC_ENDPOINT"]),
            presign_seconds=int(config.get("S3_PRESIGN_SECONDS", 300)),
        )
    raise ValueError(f"unknown HUB_STORAGE backend {backend!r} (use 'filesystem' or 's3')")
