"""The registry's endpoints (OCI Distribution specification 1.1): the base, the token endpoint, manifests, blobs,
blob uploads, tags and referrers. Plain Django views: each checks who asks (``authorize``) and answers the
specification's headers and error bodies; the work is in ``artifacts``, ``uploads`` and ``manifests``."""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from hub.errors import HubError
from hub.oci import artifacts, manifests, responses, uploads
from hub.oci.errors import OciError, error_response
from hub.oci.models import BlobUpload, Manifest, RepoBlob, Tag
from hub.oci.names import artifact_of, check_name, may_pull, may_push, require_digest
from hub.oci.tokens import Access, credentials, issue, parse_scopes
from hub.registry.downloads import file_response
from hub.registry.files_access import may_read_files
from hub.registry.models import Artifact


def registry_view(methods: tuple[str, ...]) -> Callable:
    """A registry endpoint: CSRF-exempt (tokens, not cookies), coded errors in the specification's body."""

    def wrap(view: Callable) -> Callable:
        @csrf_exempt
        @functools.wraps(view)
        def inner(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            try:
                if request.method not in methods:
                    raise OciError("UNSUPPORTED", f"{request.method} is not supported here; this endpoint takes "
                                                  f"{', '.join(methods)}.")
                return view(request, *args, **kwargs)
            except HubError as error:
                return error_response(request, error)

        return inner

    return wrap


def challenge(request: HttpRequest, name: str = "", actions: str = "pull") -> str:
    realm = request.build_absolute_uri("/v2/token")
    scope = f',scope="repository:{name}:{actions}"' if name else ""
    return f'Bearer realm="{realm}",service="{request.get_host()}"{scope}'


def authorize(request: HttpRequest, name: str, action: str) -> tuple[Access, Artifact | None]:
    """Who asks, if they may ``action`` (pull, push) on ``name``; else the refusal the specification names: 401
    with a challenge to one who has not shown who they are, 403 with a challenge to one whose registry token lacks
    the scope, ``NAME_UNKNOWN`` to one who may not read it (whether or not it exists), ``DENIED`` to a reader who
    may not push."""
    check_name(name)
    wanted = "pull,push" if action == "push" else "pull"
    try:
        access = credentials(request)
    except OciError as refused:
        refused.challenge = challenge(request, name, wanted)
        raise
    artifact = artifact_of(name)
    rule = may_pull if action == "pull" else may_push
    if access.allows(name, action) and rule(access.user, name, artifact):
        return access, artifact
    scope = [{"Type": "repository", "Name": name, "Action": action}]
    if access.user is None:
        raise OciError("UNAUTHORIZED", f"Authentication required to {action} {name}: the client asks the token "
                                       "endpoint with a hub token (podman login, or oras's username/password).",
                       detail=scope, challenge=challenge(request, name, wanted))
    if access.scopes is not None and not access.allows(name, action) and (action == "pull" or access.write):
        # a registry token for other scopes: 403 with the challenge, on which clients that keep one token (oras)
        # ask for a new one; those that keep a token per scope (containers/image) never send it here
        raise OciError("DENIED", f"This registry token does not cover {action} on {name}; ask the token endpoint "
                                 f"for scope repository:{name}:{wanted}.", detail=scope,
                       challenge=f'{challenge(request, name, wanted)},error="insufficient_scope"')
    if action == "push" and may_pull(access.user, name, artifact):
        why = "a read token cannot push: use a write token" if not access.write else \
            "only the artifact's writers (or the namespace's owner) push here"
        raise OciError("DENIED", f"You may pull {name} but not push to it: {why}.")
    raise OciError("NAME_UNKNOWN", f"No repository {name} here, or you may not read it.", detail={"name": name})


@registry_view(("GET", "HEAD"))
def base(request: HttpRequest) -> HttpResponse:
    """``GET /v2/``: 200 to a client with valid credentials, else 401 with the challenge."""
    try:
        access = credentials(request)
    except OciError as refused:
        refused.challenge = challenge(request)
        raise
    if access.user is None:
        raise OciError("UNAUTHORIZED", "Authentication required: get a token from the realm of WWW-Authenticate "
                                       "(anonymous for public artifacts).", challenge=challenge(request))
    return responses.finish(JsonResponse({}))


@registry_view(("GET",))
def catalog(request: HttpRequest) -> HttpResponse:
    """``GET /v2/_catalog`` (optional in the specification): not offered, in words, with where to look instead."""
    raise OciError("UNSUPPORTED", "This registry does not list its repositories: search the hub (its pages, or GET "
                                  "/api/v1/artifacts/?q=…); each artifact owner/name is a repository, and "
                                  "/v2/<owner>/<name>/tags/list lists its tags.")


@registry_view(("GET", "POST"))
def token(request: HttpRequest) -> HttpResponse:
    """``GET /v2/token?service=…&scope=…`` (the Docker token protocol; Basic or Bearer with a hub token, or none)
    and ``POST`` (the OAuth2 password grant). A short-lived registry token for the scopes asked for."""
    if request.method == "POST":
        grant = request.POST.get("grant_type", "")
        if grant != "password":
            raise HubError("invalid", f"grant_type {grant!r} is not offered: use 'password' with the hub token as "
                                      "the password, or GET with Basic authentication.")
        password = request.POST.get("password", "")
        header = f"Bearer {password}" if password else ""
        scope_values = request.POST.getlist("scope")
    else:
        header, scope_values = None, request.GET.getlist("scope")
    access = credentials(request, registry_tokens=False, authorization=header)
    scopes = {}
    for name, actions in parse_scopes(scope_values).items():
        check_name(name)
        artifact = artifact_of(name)
        if "push" in actions and not may_push(access.user, name, artifact):
            actions = actions - {"push"}
        scopes[name] = actions
    raw = issue(access, scopes)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    answer = {"token": raw, "access_token": raw, "expires_in": settings.HUB_OCI_TOKEN_SECONDS, "issued_at": now}
    return responses.finish(JsonResponse(answer))


@registry_view(("GET", "HEAD", "PUT", "DELETE"))
def manifest(request: HttpRequest, name: str, reference: str) -> HttpResponse:
    """``GET|HEAD|PUT /v2/<name>/manifests/<tag or digest>``."""
    if request.method == "PUT":
        authorize(request, name, "push")
        return manifests.put(request, name, reference)
    if request.method == "DELETE":
        authorize(request, name, "push")
        raise OciError("UNSUPPORTED", "Manifests are not deleted through the registry: a version is deleted on "
                                      "the hub (its page or the API), which removes its tag here.")
    _, artifact = authorize(request, name, "pull")
    data, media_type = manifests.get(name, artifact, reference)
    return responses.content(request, data, media_type, head=request.method == "HEAD")


@registry_view(("GET", "HEAD", "DELETE"))
def blob(request: HttpRequest, name: str, digest: str) -> HttpResponse:
    """``GET|HEAD /v2/<name>/blobs/<digest>``: a pushed blob, a version's file, or a config/manifest."""
    if request.method == "DELETE":
        authorize(request, name, "push")
        raise OciError("UNSUPPORTED", "Blobs are not deleted through the registry; the hub's collector removes "
                                      "those no manifest or version needs.")
    access, artifact = authorize(request, name, "pull")
    hex_digest = require_digest(digest)
    head = request.method == "HEAD"
    if access.user is not None:  # a registry token's person: whose grants the files' check reads
        request.user = access.user
    pushed = RepoBlob.objects.filter(repository=name, digest=hex_digest).first()
    if pushed is not None:
        return responses.stored(request, hex_digest, pushed.size, "application/octet-stream", head=head)
    if artifact is not None:
        file, data = artifacts.find_blob(artifact, hex_digest)
        if file is not None:
            response = file_response(request, artifact, file, head=head)
            response["Docker-Content-Digest"] = f"sha256:{hex_digest}"
            return responses.finish(response)
        if data is not None:
            return responses.content(request, data, "application/octet-stream", head=head)
        if Manifest.objects.filter(repository=name, digest=hex_digest).exists():
            stored = Manifest.objects.get(repository=name, digest=hex_digest)
            return responses.stored(request, hex_digest, stored.size, stored.media_type, head=head)
    raise OciError("BLOB_UNKNOWN", f"{name} has no blob {digest}.", detail={"digest": digest})


def _upload_headers(response: HttpResponse, name: str, upload: BlobUpload) -> HttpResponse:
    response["Location"] = f"/v2/{name}/blobs/uploads/{upload.id}"
    response["Range"] = f"0-{max(upload.received - 1, 0)}"
    response["Docker-Upload-UUID"] = str(upload.id)
    return responses.finish(response)


def _created(name: str, hex_digest: str) -> HttpResponse:
    response = HttpResponse(status=201)
    response["Location"] = f"/v2/{name}/blobs/sha256:{hex_digest}"
    return responses.finish(response, hex_digest)


def _mountable(access: Access, source: str, hex_digest: str) -> int | None:
    """The size of blob ``hex_digest`` if ``source`` serves it to ``access`` from the store (a mount needs no
    bytes), else None."""
    try:
        check_name(source)
    except OciError:
        return None
    artifact = artifact_of(source)
    if not (access.allows(source, "pull") and may_pull(access.user, source, artifact)):
        return None
    pushed = RepoBlob.objects.filter(repository=source, digest=hex_digest).first()
    if pushed is not None:
        return pushed.size
    if artifact is not None:
        file, _ = artifacts.find_blob(artifact, hex_digest)
        # A restricted version's file mounts only for who may read its bytes (a mount copies no bytes, then
        # serves them from the new repository).
        if file is not None and may_read_files(access.user, file.version):
            return file.size
    return None


@registry_view(("POST",))
def upload_start(request: HttpRequest, name: str) -> HttpResponse:
    """``POST /v2/<name>/blobs/uploads/``: a session (202), a monolithic upload (``?digest=``, 201) or a
    cross-repository mount (``?mount=<digest>&from=<name>``: 201, or a session when it cannot be mounted)."""
    access, _ = authorize(request, name, "push")
    mount, source = request.GET.get("mount"), request.GET.get("from")
    if mount and source:
        hex_digest = require_digest(mount)
        size = _mountable(access, source, hex_digest)
        if size is not None:
            RepoBlob.objects.get_or_create(repository=name, digest=hex_digest, defaults={"size": size})
            return _created(name, hex_digest)
    if "digest" in request.GET:
        stored = uploads.monolithic(request, name, require_digest(request.GET["digest"]))
        return _created(name, stored.digest)
    session = uploads.start(name, access.user)
    return _upload_headers(HttpResponse(status=202), name, session)


@registry_view(("GET", "PATCH", "PUT", "DELETE"))
def upload_session(request: HttpRequest, name: str, upload_id: str) -> HttpResponse:
    """``GET`` (where it stands), ``PATCH`` (a chunk), ``PUT ?digest=`` (the last chunk, closing), ``DELETE``."""
    access, _ = authorize(request, name, "push")
    try:
        session = BlobUpload.objects.filter(pk=uuid.UUID(upload_id), repository=name, user=access.user).first()
    except ValueError:
        session = None
    if session is None:
        raise OciError("BLOB_UPLOAD_UNKNOWN", f"No open upload {upload_id} to {name} of yours: start one with "
                                              f"POST /v2/{name}/blobs/uploads/.")
    if request.method == "GET":
        return _upload_headers(HttpResponse(status=204), name, session)
    if request.method == "DELETE":
        uploads.cancel(session)
        return responses.finish(HttpResponse(status=204))
    if request.method == "PATCH":
        return _upload_headers(HttpResponse(status=202), name, uploads.append(session, request))
    hex_digest = require_digest(request.GET.get("digest", ""))
    stored = uploads.finish(session, request, hex_digest)
    return _created(name, stored.digest)


@registry_view(("GET",))
def tags_list(request: HttpRequest, name: str) -> HttpResponse:
    """``GET /v2/<name>/tags/list?n=&last=``: tags in lexical order, a ``Link`` to the next page."""
    _, artifact = authorize(request, name, "pull")
    names = set(Tag.objects.filter(repository=name).values_list("name", flat=True))
    if artifact is not None:
        names.update(artifacts.tags(artifact))
    elif not names:
        raise OciError("NAME_UNKNOWN", f"No repository {name} here, or you may not read it.", detail={"name": name})
    ordered = sorted(names)
    last = request.GET.get("last")
    if last:
        ordered = [tag for tag in ordered if tag > last]
    n_text = request.GET.get("n")
    response_link = ""
    if n_text is not None:
        if not n_text.isdigit():
            raise HubError("invalid", f"n is a number of tags (0 or more), not {n_text[:20]!r}.")
        n = int(n_text)
        if len(ordered) > n and n > 0:
            response_link = f'</v2/{name}/tags/list?n={n}&last={ordered[n - 1]}>; rel="next"'
        ordered = ordered[:n]
    response = JsonResponse({"name": name, "tags": ordered})
    if response_link:
        response["Link"] = response_link
    return responses.finish(response)


@registry_view(("GET",))
def referrers(request: HttpRequest, name: str, digest: str) -> HttpResponse:
    """``GET /v2/<name>/referrers/<digest>[?artifactType=]``: an image index of the pushed manifests whose
    ``subject`` is ``digest``."""
    authorize(request, name, "pull")
    hex_digest = require_digest(digest)
    rows = Manifest.objects.filter(repository=name, subject=hex_digest).order_by("created", "pk")
    wanted = request.GET.get("artifactType")
    if wanted:
        rows = rows.filter(artifact_type=wanted)
    index = {"schemaVersion": 2, "mediaType": manifests.OCI_INDEX,
             "manifests": [{"mediaType": row.media_type, "digest": f"sha256:{row.digest}", "size": row.size,
                            **({"artifactType": row.artifact_type} if row.artifact_type else {})} for row in rows]}
    response = HttpResponse(json.dumps(index), content_type=manifests.OCI_INDEX)
    if wanted:
        response["OCI-Filters-Applied"] = "artifactType"
    return responses.finish(response)
