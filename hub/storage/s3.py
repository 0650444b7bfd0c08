"""S3 blob store through the ``minio`` SDK (MinIO in deployment, any S3 API).

A blob's key (``ab/cd/<sha256>``) holds either its bytes (stored through the hub) or, for a direct upload,
a small *pointer* naming the object the client's parts were assembled into (``data/<upload id>``). S3 cannot
rename, and copying would cost the store as much work as the upload itself did; the pointer is written only
after the hub has read the object back and checked its sha256, so a blob key never names unchecked bytes.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import BinaryIO
from urllib.parse import quote

import urllib3
from minio import Minio
from minio.datatypes import Part
from minio.error import S3Error

from hub.storage.base import SHA256_RE, BlobStore, StorageUnavailable, blob_key, staged_key

_MISSING = {"NoSuchKey", "NoSuchObject", "NotFound", "ResourceNotFound", "NoSuchUpload"}
_FAILURES = (S3Error, urllib3.exceptions.HTTPError)
POINTER_HEADER = "x-amz-meta-hub-data"  # on a blob key that points to a direct upload's object
POINTER_TYPE = "application/vnd.hpcfair.blob-pointer"


class Body:
    """A urllib3 response as a closable binary stream."""

    def __init__(self, response: urllib3.BaseHTTPResponse) -> None:
        self._response = response

    def read(self, size: int = -1) -> bytes:
        return self._response.read(None if size is None or size < 0 else size)

    def close(self) -> None:
        self._response.close()
        self._response.release_conn()

    def __enter__(self) -> Body:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class S3BlobStore(BlobStore):
    name = "s3"

    def __init__(
        self,
        endpoint: str,
        bucket: str,
        access_key: str,
        secret_key: str,
        region: str = "us-east-1",
        secure: bool = False,
        public_endpoint: str = "",
        presign_seconds: int = 300,
    ) -> None:
        self.bucket = bucket
        self._probe_args = {"endpoint": endpoint, "access_key": access_key, "secret_key": secret_key,
                            "secure": secure, "region": region}
        self.presign_ttl = timedelta(seconds=presign_seconds)
        self.client = Minio(endpoint, access_key=access_key, secret_key=secret_key, secure=secure, region=region)
        # Presigned URLs are signed for the host clients will use.
        self.public_client = (
            Minio(public_endpoint, access_key=access_key, secret_key=secret_key, secure=secure, region=region)
            if public_endpoint
            else self.client
        )
        self._bucket_checked = False

    def _ensure_bucket(self) -> None:
        if self._bucket_checked:
            return
        try:
            if not self.client.bucket_exists(self.bucket):
                self.client.make_bucket(self.bucket)
        except (S3Error, urllib3.exceptions.HTTPError) as exc:
            raise StorageUnavailable(f"S3 bucket {self.bucket!r} unavailable: {exc}") from exc
        self._bucket_checked = True

    def exists(self, sha256: str) -> bool:
        self._ensure_bucket()
        try:
            self.client.stat_object(self.bucket, blob_key(sha256))
            return True
        except S3Error as exc:
            if exc.code in _MISSING:
                return False
            raise StorageUnavailable(str(exc)) from exc
        except urllib3.exceptions.HTTPError as exc:
            raise StorageUnavailable(str(exc)) from exc

    def put_file(self, src: Path, sha256: str) -> bool:
        if self.exists(sha256):
            return False
        try:
            self.client.fput_object(
                self.bucket, blob_key(sha256), str(src), part_size=64 * 1024 * 1024,
                metadata={"x-amz-meta-sha256": sha256},
            )
        except (S3Error, urllib3.exceptions.HTTPError) as exc:
            raise StorageUnavailable(f"could not store blob {sha256}: {exc}") from exc
        return True

    def data_key(self, sha256: str) -> str:
        """The object holding the blob's bytes: its own key, or the one its pointer names."""
        self._ensure_bucket()
        stat = self._call(f"blob {sha256}", self.client.stat_object, self.bucket, blob_key(sha256))
        return (stat.metadata or {}).get(POINTER_HEADER) or blob_key(sha256)

    def open(self, sha256: str, start: int = 0, length: int | None = None) -> BinaryIO:
        key = self.data_key(sha256)
        return Body(self._call(f"blob {sha256}", self.client.get_object, self.bucket, key,  # type: ignore[return-value]
                                offset=start, length=length or 0))

    def delete(self, sha256: str) -> None:
        """Remove the blob: its pointer first, then the object it names (never a pointer to nothing)."""
        try:
            key = self.data_key(sha256)
        except FileNotFoundError:
            return
        self._call("remove", self.client.remove_object, self.bucket, blob_key(sha256))
        if key != blob_key(sha256):
            self._call("remove", self.client.remove_object, self.bucket, key)

    def check(self, timeout: float) -> None:
        """One HEAD of the bucket by a client that gives up after ``timeout`` (the store's own client waits
        minutes and retries). A missing bucket is fine: the first blob makes it."""
        http = urllib3.PoolManager(timeout=urllib3.Timeout(connect=timeout, read=timeout),
                                   retries=urllib3.Retry(total=0))
        try:
            Minio(**self._probe_args, http_client=http).bucket_exists(self.bucket)
        except _FAILURES as exc:
            raise StorageUnavailable(f"S3 bucket {self.bucket!r} unavailable: {exc}") from exc
        finally:
            http.clear()

    def iter_blobs(self) -> Iterator[tuple[str, datetime]]:
        self._ensure_bucket()
        for obj in self.client.list_objects(self.bucket, recursive=True):
            name = obj.object_name.rsplit("/", 1)[-1]
            if SHA256_RE.match(name):
                yield name, obj.last_modified

    def download_url(self, sha256: str, filename: str, media_type: str) -> str | None:
        disposition = f"attachment; filename*=UTF-8''{quote(filename)}"
        return self.public_client.presigned_get_object(
            self.bucket,
            self.data_key(sha256),
            expires=self.presign_ttl,
            response_headers={"response-content-disposition": disposition, "response-content-type": media_type},
        )

    # --- staging: job inputs and resumable uploads' chunks, seen by every node ---------------------------------

    def put_staged(self, key: str, src: Path, *, move: bool = False) -> None:
        self._ensure_bucket()
        self._call(f"stage {key}", self.client.fput_object, self.bucket, staged_key(key), str(src),
                   part_size=64 * 1024 * 1024)
        if move:
            src.unlink(missing_ok=True)

    def open_staged(self, key: str) -> BinaryIO:
        self._ensure_bucket()
        return Body(self._call(f"staged {key}", self.client.get_object,  # type: ignore[return-value]
                                self.bucket, staged_key(key)))

    def remove_staged(self, prefix: str) -> None:
        self._ensure_bucket()
        for obj in self._call("list", self.client.list_objects, self.bucket, prefix=staged_key(prefix),
                              recursive=True):
            try:
                self._call("remove", self.client.remove_object, self.bucket, obj.object_name)
            except FileNotFoundError:
                continue

    def iter_staged(self) -> Iterator[tuple[str, datetime]]:
        self._ensure_bucket()
        for obj in self._call("list", self.client.list_objects, self.bucket, prefix="staging/", recursive=True):
            yield obj.object_name.removeprefix("staging/"), obj.last_modified

    # --- direct uploads: presigned multipart URLs, the parts straight from the client to the store ---------

    direct_uploads = True

    def _call(self, what: str, call, *args, **kwargs):
        try:
            return call(*args, **kwargs)
        except _FAILURES as exc:
            if isinstance(exc, S3Error) and exc.code in _MISSING:
                raise FileNotFoundError(f"{what}: {exc.code}") from exc
            raise StorageUnavailable(f"{what}: {exc}") from exc

    def start_multipart(self, key: str) -> str:
        """Open a multipart upload of ``key``; its id."""
        self._ensure_bucket()
        return self._call("start multipart upload", self.client._create_multipart_upload, self.bucket, key, {})

    def part_url(self, key: str, upload_id: str, number: int) -> str:
        """A presigned PUT of part ``number``, valid for the short presign time only."""
        return self.public_client.get_presigned_url(
            "PUT", self.bucket, key, expires=self.presign_ttl,
            extra_query_params={"partNumber": str(number), "uploadId": upload_id},
        )

    def list_parts(self, key: str, upload_id: str) -> dict[int, tuple[int, str]]:
        """The parts the store holds: number -> (size, etag)."""
        parts: dict[int, tuple[int, str]] = {}
        marker = None
        while True:
            result = self._call("list parts", self.client._list_parts, self.bucket, key, upload_id,
                                max_parts=1000, part_number_marker=marker)
            for part in result.parts:
                parts[part.part_number] = (part.size, part.etag)
            if not result.is_truncated:
                return parts
            marker = result.next_part_number_marker

    def complete_multipart(self, key: str, upload_id: str, etags: list[tuple[int, str]]) -> None:
        self._call("complete multipart upload", self.client._complete_multipart_upload, self.bucket, key, upload_id,
                   [Part(number, etag) for number, etag in etags])

    def abort_multipart(self, key: str, upload_id: str) -> None:
        try:
            self._call("abort multipart upload", self.client._abort_multipart_upload, self.bucket, key, upload_id)
        except FileNotFoundError:
            pass

    def iter_direct(self) -> Iterator[tuple[str, datetime]]:
        """The objects direct uploads were assembled into (``data/<upload id>``), with their times."""
        self._ensure_bucket()
        for obj in self._call("list", self.client.list_objects, self.bucket, prefix="data/", recursive=True):
            yield obj.object_name, obj.last_modified

    def open_key(self, key: str) -> BinaryIO:
        """The object ``key`` (not a blob: a direct upload's staging object) as a stream."""
        self._ensure_bucket()
        return Body(self._call("read", self.client.get_object, self.bucket, key))  # type: ignore[return-value]

    def remove_key(self, key: str) -> None:
        self._call("remove", self.client.remove_object, self.bucket, key)

    def adopt(self, key: str, sha256: str) -> None:
        """Make the checked object ``key`` the blob ``sha256`` by writing the blob's pointer to it; if the blob
        exists already, ``key`` is removed instead. Two adoptions of one digest at once both point at checked,
        identical bytes; the one whose pointer lost removes its own object."""
        if self.exists(sha256):
            self.remove_key(key)
            return
        name = key.encode()
        self._call("point", self.client.put_object, self.bucket, blob_key(sha256), io.BytesIO(name), len(name),
                   content_type=POINTER_TYPE, metadata={POINTER_HEADER: key, "x-amz-meta-sha256": sha256})
        if self.data_key(sha256) != key:
            self.remove_key(key)
