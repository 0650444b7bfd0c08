"""S3 blob store through the ``minio`` SDK (MinIO in deployment, any S3 API)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path
from typing import BinaryIO
from urllib.parse import quote

import urllib3
from minio import Minio
from minio.datatypes import Part
from minio.error import S3Error

from hub.storage.base import SHA256_RE, BlobStore, StorageUnavailable, blob_key

_MISSING = {"NoSuchKey", "NoSuchObject", "NotFound", "ResourceNotFound", "NoSuchUpload"}
_FAILURES = (S3Error, urllib3.exceptions.HTTPError)
COPY_PART = 512 * 1024 * 1024  # server-side copies in parts (S3 copies at most 5 GiB in one request)


class _Body:
    """A urllib3 response as a closable binary stream."""

    def __init__(self, response: urllib3.BaseHTTPResponse) -> None:
        self._response = response

    def read(self, size: int = -1) -> bytes:
        return self._response.read(None if size is None or size < 0 else size)

    def close(self) -> None:
        self._response.close()
        self._response.release_conn()

    def __enter__(self) -> _Body:
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

    def open(self, sha256: str, start: int = 0, length: int | None = None) -> BinaryIO:
        self._ensure_bucket()
        try:
            response = self.client.get_object(self.bucket, blob_key(sha256), offset=start, length=length or 0)
        except S3Error as exc:
            if exc.code in _MISSING:
                raise FileNotFoundError(sha256) from exc
            raise StorageUnavailable(str(exc)) from exc
        except urllib3.exceptions.HTTPError as exc:
            raise StorageUnavailable(str(exc)) from exc
        return _Body(response)  # type: ignore[return-value]

    def delete(self, sha256: str) -> None:
        self._ensure_bucket()
        try:
            self.client.remove_object(self.bucket, blob_key(sha256))
        except (S3Error, urllib3.exceptions.HTTPError) as exc:
            raise StorageUnavailable(str(exc)) from exc

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
            blob_key(sha256),
            expires=self.presign_ttl,
            response_headers={"response-content-disposition": disposition, "response-content-type": media_type},
        )

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

    def open_key(self, key: str) -> BinaryIO:
        """The object ``key`` (not a blob: a direct upload's staging object) as a stream."""
        self._ensure_bucket()
        return _Body(self._call("read", self.client.get_object, self.bucket, key))  # type: ignore[return-value]

    def remove_key(self, key: str) -> None:
        self._call("remove", self.client.remove_object, self.bucket, key)

    def adopt_checked(self, key: str, sha256: str, size: int, check: Callable[[], bool]) -> bool:
        """Make the object ``key`` the blob ``sha256`` if ``check()`` (which reads ``key`` back and hashes it)
        says so, and remove ``key`` either way. Returns whether the check passed.

        The copy into the blob runs inside the store while ``check`` reads: parts copied into a pending
        multipart upload of the blob's key, which only completes (and so only appears) after the check
        passed, and is aborted otherwise. Unchecked bytes are never visible under a blob's key."""
        try:
            if self.exists(sha256):
                return check()
            target = blob_key(sha256)
            upload_id = self._call("start copy", self.client._create_multipart_upload, self.bucket, target, {})
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="s3-copy") as pool:
                copying = pool.submit(self._copy_parts, key, target, upload_id, size)
                try:
                    passed = check()
                finally:
                    try:
                        etags = copying.result()
                    except BaseException:
                        self.abort_multipart(target, upload_id)
                        raise
            if passed:
                self.complete_multipart(target, upload_id, etags)
            else:
                self.abort_multipart(target, upload_id)
            return passed
        finally:
            self.remove_key(key)

    def _copy_parts(self, key: str, target: str, upload_id: str, size: int) -> list[tuple[int, str]]:
        etags = []
        for number, start in enumerate(range(0, max(size, 1), COPY_PART), start=1):
            headers = {"x-amz-copy-source": quote(f"/{self.bucket}/{key}")}
            if size:
                headers["x-amz-copy-source-range"] = f"bytes={start}-{min(start + COPY_PART, size) - 1}"
            etag, _ = self._call("copy part", self.client._upload_part_copy, self.bucket, target, upload_id, number,
                                 headers)
            etags.append((number, etag))
        return etags
