"""Byte transfers: file downloads (Range, ETag = sha256, S3 redirects) and resumable uploads."""

from __future__ import annotations

import json

from django.http import HttpResponse, StreamingHttpResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hub.accounts.permissions import IsAuthenticatedReader
from hub.api import OwnMediaType
from hub.errors import HubError
from hub.jobs.api.serializers import JobSerializer
from hub.jobs.quota import check_active_jobs
from hub.jobs.services import create_job
from hub.metadata.services import version_record
from hub.registry import direct, fetch, quota, references, services, uploads
from hub.registry.access import Viewer
from hub.registry.api.serializers import UploadCompleteSerializer, UploadPartsSerializer, UploadSerializer
from hub.registry.archive import zip_stream
from hub.registry.downloads import INLINE_TYPES, count_download, file_response
from hub.registry.files_access import require_files
from hub.registry.models import File, Upload
from hub.storage import get_blob_store
from ontology.crosswalks import RO_CRATE_METADATA, ro_crate


class FileDownload(OwnMediaType, APIView):
    """Download a file. ``Range`` gives 206; ``ETag`` is the sha256; S3 storage answers a 302 to a
    presigned URL."""

    @extend_schema(responses={(200, "application/octet-stream"): OpenApiResponse(description="The bytes."),
                              206: OpenApiResponse(description="Partial content"),
                              302: OpenApiResponse(description="Redirect to a presigned S3 URL")})
    def get(self, request: Request, owner: str, name: str, version: str, path: str) -> HttpResponse:
        artifact = services.get_artifact(request.user, owner, name)
        found = services.get_version(artifact, version)
        file = File.objects.filter(version=found, path=path).select_related("blob").first()
        if file is None:
            raise HubError("not_found", f"{found} has no file {path!r}.")
        # ?inline=1: an image shown on the landing page (raster formats only: an SVG could carry script),
        # displayed rather than saved, and not counted as a download.
        inline = request.query_params.get("inline") == "1" and file.media_type in INLINE_TYPES
        return file_response(request, artifact, file, inline=inline)


class VersionArchive(OwnMediaType, APIView):
    """All of a version's files as one zip (``{name}-{version}.zip``), streamed; counted as one download. The
    zip is an RO-Crate: its ``ro-crate-metadata.json`` describes the version and its files."""

    @extend_schema(responses={(200, "application/zip"): OpenApiResponse(description="The version's files.")})
    def get(self, request: Request, owner: str, name: str, version: str) -> HttpResponse:
        artifact = services.get_artifact(request.user, owner, name)
        found = services.get_version(artifact, version)
        require_files(request, found)
        count_download(artifact, None)
        crate = ro_crate(version_record(found, Viewer(request.user)), attached=True)
        extra = {RO_CRATE_METADATA: json.dumps(crate, indent=2, ensure_ascii=False).encode()}
        response = StreamingHttpResponse(zip_stream(found, extra), content_type="application/zip")
        response["Content-Disposition"] = f'attachment; filename="{artifact.name}-{found.label}.zip"'
        return response


def _own_upload(request: Request, upload_id) -> Upload:
    upload = Upload.objects.filter(pk=upload_id, owner=request.user).first()
    if upload is None:
        raise HubError("not_found", f"You have no upload {upload_id}.")
    return upload


class UploadCreate(APIView):
    """Open a resumable upload: ``{"size": N, "filename": "...", "expected_sha256": "...", "direct": true}``.
    With ``direct`` on a store that offers it, the bytes go to the object store by presigned part URLs."""
    limited_ok = True  # bytes of your own, published only where the token may

    throttle_scope = "uploads"  # hub.ops.throttles: the rate of its writes
    permission_classes = [IsAuthenticatedReader]

    @extend_schema(request=UploadSerializer, responses={201: UploadSerializer, 202: UploadSerializer})
    def post(self, request: Request) -> Response:
        serializer = UploadSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        if "size" not in data:
            return self.remote(request, data)
        upload = uploads.open_upload(request.user, data["size"], data.get("filename", ""),
                                     data.get("expected_sha256", ""))
        if data.get("direct") and data["size"] > 0 and direct.offered():
            direct.start(upload)
        body = UploadSerializer(upload).data
        return Response(body, status=status.HTTP_201_CREATED, headers={"Location": body["url"]})

    @staticmethod
    def remote(request: Request, data: dict) -> Response:
        """A reference or a fetch: the upload, and the job that fills it (202)."""
        kind = "reference" if "reference" in data else "fetch"
        source = references.check(data["reference"]) if kind == "reference" else fetch.check_url(data["fetch"])
        check_active_jobs(request.user)
        upload = uploads.open_upload(request.user, 0, data.get("filename", "") or source.rstrip("/").rsplit("/")[-1],
                                     data.get("expected_sha256", ""))
        Upload.objects.filter(pk=upload.pk).update(source=source, reference=kind == "reference")
        upload.refresh_from_db()
        job = create_job(kind, request.user, params={"upload": str(upload.pk)}, limited=True)
        body = {**UploadSerializer(upload).data, "job": JobSerializer(job).data}
        return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": body["url"]})


class UploadDetail(APIView):
    """``GET``: state and ``offset`` (bytes held; resume there). ``PUT``: send bytes with
    ``Content-Range: bytes START-END/TOTAL`` (or the whole file without it). ``DELETE``: abort."""
    limited_ok = True  # bytes of your own, published only where the token may

    permission_classes = [IsAuthenticatedReader]

    @extend_schema(responses=UploadSerializer)
    def get(self, request: Request, upload_id) -> Response:
        upload = _own_upload(request, upload_id)
        return Response(UploadSerializer(upload).data, headers={"Upload-Offset": uploads.offset_of(upload)})

    @extend_schema(request={"application/octet-stream": bytes}, responses=UploadSerializer)
    def put(self, request: Request, upload_id) -> Response:
        upload = _own_upload(request, upload_id)
        quota.check_within(request.user)
        if upload.source:
            raise HubError("upload_is_direct", f"The hub reads this upload's bytes itself, from {upload.source}.")
        if upload.direct_id:
            raise HubError("upload_is_direct", "This upload goes straight to the object store: send its parts to "
                                               "the URLs that POST …/parts gives.")
        raw = request._request
        length_header = raw.META.get("CONTENT_LENGTH")
        length = int(length_header) if length_header and length_header.isdigit() else None
        start, end = uploads.parse_content_range(raw.headers.get("Content-Range"), length, upload.size)
        offset = uploads.write_chunk(upload, raw, start, end)
        return Response(UploadSerializer(upload).data, headers={"Upload-Offset": offset})

    @extend_schema(responses={204: None})
    def delete(self, request: Request, upload_id) -> Response:
        upload = _own_upload(request, upload_id)
        if upload.state == Upload.State.CONSUMED:
            raise HubError("upload_not_open", "This upload is part of a version already.")
        if upload.direct_id:
            direct.abort(upload)
        uploads.abort_upload(upload)
        return Response(status=status.HTTP_204_NO_CONTENT)


class UploadComplete(APIView):
    """Finish an upload: the hub checks the size and the sha256 (given now or when opening)."""
    limited_ok = True  # bytes of your own, published only where the token may

    permission_classes = [IsAuthenticatedReader]

    @extend_schema(request=UploadCompleteSerializer, responses=UploadSerializer)
    def post(self, request: Request, upload_id) -> Response:
        upload = _own_upload(request, upload_id)
        serializer = UploadCompleteSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        quota.check_within(request.user)
        sha256 = serializer.validated_data.get("sha256", "")
        upload = direct.complete(upload, sha256) if upload.direct_id else uploads.complete_upload(upload, sha256)
        return Response(UploadSerializer(upload).data)


class UploadParts(APIView):
    """Presigned PUT URLs for parts of a direct upload (``{"numbers": [1, 2, …]}``, at most 100): each
    valid ``url_seconds``, for the upload's owner only. ``GET`` on the upload lists the parts received."""
    limited_ok = True  # bytes of your own, published only where the token may

    permission_classes = [IsAuthenticatedReader]

    @extend_schema(request=UploadPartsSerializer, responses={200: OpenApiResponse(description="{urls, expires_in}")})
    def post(self, request: Request, upload_id) -> Response:
        upload = _own_upload(request, upload_id)
        if not upload.direct_id:
            raise HubError("invalid", "This upload goes through the hub: PUT its bytes with Content-Range.")
        serializer = UploadPartsSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        quota.check_within(request.user)
        urls = direct.part_urls(upload, serializer.validated_data["numbers"])
        return Response({"urls": urls, "expires_in": get_blob_store().presign_ttl.seconds})
