"""Manifests: reading one by tag or digest (a pushed one first, else a version's generated artifact) and the push
of one (``PUT``): checked as JSON of a known media type whose blobs (or, for an index, child manifests) the
repository holds, then kept as a blob of the store named by its digest, with a row and, for a tag, a tag row."""

from __future__ import annotations

import hashlib
import os
import uuid

from django.db import transaction
from django.http import HttpRequest, HttpResponse

from hub.bounded import load_json
from hub.errors import HubError
from hub.oci import artifacts
from hub.oci.body import reader
from hub.oci.errors import OciError
from hub.oci.models import Manifest, RepoBlob, Tag
from hub.oci.names import TAG_RE, artifact_of, parse_digest
from hub.oci.responses import finish
from hub.registry.models import Artifact
from hub.registry.uploads import upload_dir
from hub.storage import get_blob_store

OCI_MANIFEST = artifacts.OCI_MANIFEST
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
IMAGE_TYPES = (OCI_MANIFEST, DOCKER_MANIFEST)
INDEX_TYPES = (OCI_INDEX, DOCKER_LIST)
MAX_MANIFEST = 4 * 1024 * 1024  # the specification's floor for what a registry accepts


def _unknown(name: str, reference: str) -> OciError:
    return OciError("MANIFEST_UNKNOWN", f"{name} has no manifest {reference!r}: a tag is a version label "
                                        "(GET /v2/<name>/tags/list lists them) or a pushed tag.",
                    detail={"name": name, "reference": reference})


def get(name: str, artifact: Artifact | None, reference: str) -> tuple[bytes, str]:
    """The bytes and media type of the manifest ``reference`` (tag or digest) of ``name``."""
    hex_digest = parse_digest(reference)
    if hex_digest is None and not TAG_RE.fullmatch(reference):
        raise OciError("MANIFEST_INVALID", f"{reference[:140]!r} is neither a tag nor a sha256 digest.")
    if hex_digest:
        row = Manifest.objects.filter(repository=name, digest=hex_digest).first()
    else:
        tag = Tag.objects.filter(repository=name, name=reference).select_related("manifest").first()
        row = tag.manifest if tag else None
    if row is not None:
        with get_blob_store().open(row.digest) as stream:
            return stream.read(), row.media_type
    if artifact is not None:
        generated = artifacts.by_digest(artifact, hex_digest) if hex_digest else artifacts.by_tag(artifact, reference)
        if generated is not None:
            return generated.manifest, OCI_MANIFEST
    raise _unknown(name, reference)


def _references(name: str, artifact: Artifact | None, data: dict, media_type: str) -> list[str]:
    """The digests ``data`` names, each checked to be in ``name`` (blobs, or manifests for an index)."""
    def digest_of(descriptor: object, where: str) -> str:
        hex_digest = parse_digest(descriptor.get("digest", "")) if isinstance(descriptor, dict) else None
        if hex_digest is None:
            raise OciError("MANIFEST_INVALID", f"{where} needs a descriptor with a sha256 digest.")
        return hex_digest

    if media_type in INDEX_TYPES:
        children = data.get("manifests")
        if not isinstance(children, list):
            raise OciError("MANIFEST_INVALID", "An image index needs a 'manifests' list.")
        digests = [digest_of(child, f"manifests[{i}]") for i, child in enumerate(children)]
        known = set(Manifest.objects.filter(repository=name, digest__in=digests).values_list("digest", flat=True))
        missing = [d for d in digests if d not in known]
        if missing:
            raise OciError("MANIFEST_UNKNOWN", f"Push the index's manifests first: {name} lacks sha256:{missing[0]}.",
                           detail={"digest": f"sha256:{missing[0]}"})
        return digests
    layers = data.get("layers")
    if not isinstance(layers, list):
        raise OciError("MANIFEST_INVALID", "An image manifest needs a 'layers' list.")
    digests = [digest_of(data.get("config"), "config"),
               *(digest_of(layer, f"layers[{i}]") for i, layer in enumerate(layers))]
    known = set(RepoBlob.objects.filter(repository=name, digest__in=digests).values_list("digest", flat=True))
    for hex_digest in digests:
        if hex_digest not in known and not (artifact and artifacts.find_blob(artifact, hex_digest) != (None, None)):
            raise OciError("MANIFEST_BLOB_UNKNOWN", f"Push blob sha256:{hex_digest} to {name} before the manifest "
                                                    "that names it.", detail={"digest": f"sha256:{hex_digest}"})
    return digests


def _keep(body: bytes, hex_digest: str) -> None:
    store = get_blob_store()
    if store.exists(hex_digest):
        return
    path = upload_dir() / f"oci-manifest-{uuid.uuid4().hex}.part"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(body)
        store.put_file(path, hex_digest)
    finally:
        path.unlink(missing_ok=True)


def put(request: HttpRequest, name: str, reference: str) -> HttpResponse:
    """``PUT /v2/<name>/manifests/<reference>``: 201 with ``Location`` and ``Docker-Content-Digest``."""
    body = reader(request)(MAX_MANIFEST + 1)
    if len(body) > MAX_MANIFEST:
        raise OciError("SIZE_INVALID", f"A manifest here is at most {MAX_MANIFEST} bytes.")
    hex_digest = hashlib.sha256(body).hexdigest()
    wanted = parse_digest(reference)
    if wanted is None and not TAG_RE.fullmatch(reference):
        raise OciError("MANIFEST_INVALID", f"{reference[:140]!r} is neither a tag ([A-Za-z0-9_][A-Za-z0-9._-], at "
                                           "most 128) nor a sha256 digest.")
    if wanted is not None and wanted != hex_digest:
        raise OciError("DIGEST_INVALID", f"The manifest hashes to sha256:{hex_digest}, not {reference}.",
                       detail={"digest": f"sha256:{hex_digest}"})
    try:
        data = load_json(body, what="The manifest")  # bounded: a deep nesting is refused, not a RecursionError
    except HubError as refused:
        raise OciError("MANIFEST_INVALID", refused.detail)
    if not isinstance(data, dict) or data.get("schemaVersion") != 2:
        raise OciError("MANIFEST_INVALID", "A manifest is a JSON object with schemaVersion 2.")
    header_type = request.content_type or ""
    media_type = data.get("mediaType") or header_type
    if media_type not in IMAGE_TYPES + INDEX_TYPES:
        raise OciError("MANIFEST_INVALID", f"Media type {media_type[:100]!r} is none this registry keeps: "
                                           f"{', '.join(IMAGE_TYPES + INDEX_TYPES)}.")
    if header_type and header_type != media_type and header_type in IMAGE_TYPES + INDEX_TYPES:
        raise OciError("MANIFEST_INVALID", f"Content-Type {header_type} and the manifest's mediaType {media_type} "
                                           "differ.")
    references = _references(name, artifact_of(name), data, media_type)
    subject = parse_digest((data.get("subject") or {}).get("digest", "")) if isinstance(data.get("subject"), dict) \
        else None
    artifact_type = data.get("artifactType") or (data.get("config") or {}).get("mediaType", "") \
        if media_type in IMAGE_TYPES else data.get("artifactType", "")
    _keep(body, hex_digest)
    with transaction.atomic():
        row, _ = Manifest.objects.update_or_create(
            repository=name, digest=hex_digest,
            defaults={"media_type": media_type, "size": len(body), "references": references,
                      "subject": subject or "", "artifact_type": str(artifact_type)[:255]})
        if wanted is None:
            Tag.objects.update_or_create(repository=name, name=reference, defaults={"manifest": row})
    response = HttpResponse(status=201)
    response["Location"] = f"/v2/{name}/manifests/sha256:{hex_digest}"
    if subject:
        response["OCI-Subject"] = f"sha256:{subject}"
    return finish(response, hex_digest)
