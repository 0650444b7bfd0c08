"""Artifacts and versions over REST."""

from __future__ import annotations

import difflib
from typing import Any

from django.db import transaction
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hub.accounts.permissions import require_scope, require_within
from hub.api import OwnMediaType
from hub.bounded import JSONParser, load_json_or_yaml
from hub.errors import HubError
from hub.jobs.api.serializers import JobSerializer
from hub.jobs.api.views import accepted
from hub.jobs.quota import check_active_jobs
from hub.jobs.services import create_job
from hub.orgs.services import owner_for_new, writes_in
from hub.registry import handover, quota, services
from hub.registry.access import Viewer, publish_warnings, sharing_warnings
from hub.registry.api.serializers import (
    ArtifactSerializer,
    ArtifactUpdatedSerializer,
    ArtifactUpdateSerializer,
    VersionCreateSerializer,
    VersionPublishedSerializer,
    VersionSerializer,
)
from hub.registry.models import Artifact, Version
from hub.registry.uploads import FolderFormParser, StagedFile, StagingUploadHandler, completed_files, keep_folders
from hub.search.models import FACETS
from hub.search.services import DERIVED, SORTS, derived_under, search
from hub.strict import StrictSerializer


def require_write(request: Request, artifact: Artifact) -> None:
    """Publishing and editing: the owner, collaborators, and the owning organization's writers and admins."""
    if not artifact.can_write(request.user):
        raise HubError("permission_denied", who_to_ask(artifact, "change it", "write"))
    require_scope(request, "publish", f"changing {artifact}")


def require_admin(request: Request, artifact: Artifact) -> None:
    """Visibility, collaborators, deletion and transfer: the owner, or the owning organization's admins."""
    if not artifact.can_admin(request.user):
        raise HubError("permission_denied", who_to_ask(artifact, "do this", "admin"))
    require_scope(request, "admin", f"this change to {artifact}")


def who_to_ask(artifact: Artifact, act: str, role: str) -> str:
    """A refusal's message: who may act on ``artifact``, and whom to ask."""
    from hub.orgs.services import admins_of

    admins = admins_of(artifact.owner)
    if admins is None:
        return (f"Only the owner of {artifact} ({artifact.owner.username})"
                + (" and its collaborators" if role == "write" else "") + f" can {act}; ask {artifact.owner.username}"
                + (" to add you as a collaborator." if role == "write" else "."))
    return (f"Only members of the organization {artifact.owner.username} with the {role} role"
            + (" (or admin), and the artifact's collaborators," if role == "write" else "")
            + f" can {act} to {artifact}; ask an admin of {artifact.owner.username} ({', '.join(admins) or 'none'})"
            + f" for the {role} role.")


def as_seen_by(request: Request) -> dict[str, Any]:
    """Serializer context: versions name their sources and derivatives as this request's user may see them."""
    return {"viewer": Viewer(request.user)}


def versions_queryset():
    return Version.objects.select_related("artifact__owner", "created_by").prefetch_related(
        "files__version__artifact__owner", "provenance__target__artifact__owner",
        "derivatives__version__artifact__owner",
    )


SEARCH_PARAMETERS = [
    OpenApiParameter("q", str, description="Words to search for in titles, keywords, descriptions and model cards "
                                           "(web-search syntax on PostgreSQL: \"a phrase\", -word, or)."),
    *[OpenApiParameter(name, str, many=True, description=f"Facet filter: {name} (repeat for alternatives"
                       + ("; keywords are tags that must all be present)" if name == "keyword" else ")"))
      for name in FACETS],
    OpenApiParameter("visibility", str, enum=list(Artifact.Visibility.values)),
    OpenApiParameter("sort", str, enum=list(SORTS), description="relevance (default with q), new, name."),
    OpenApiParameter("derived", str, enum=list(DERIVED),
                     description="collapse (default): what the hub made from an artifact (its MLCube project, "
                                 "inference outputs) is listed in that artifact's `derived`, not as a result of its "
                                 "own; include: as results of their own."),
]

SEARCH_KEYS = {"q", "sort", "visibility", "derived", "page", "page_size", *FACETS}


class ArtifactListCreate(OwnMediaType, generics.ListCreateAPIView):
    """Search and list artifacts (full text, facet filters, facet counts in ``facets``) / create one."""
    limited_ok = True  # perform_create checks the owner

    throttle_scope = "versions"  # hub.ops.throttles: the rate of its writes
    serializer_class = ArtifactSerializer

    def get_queryset(self):
        return Artifact.objects.live().visible_to(self.request.user).select_related("owner")

    @extend_schema(parameters=SEARCH_PARAMETERS)
    def get(self, request: Request, *args, **kwargs) -> Response:
        params = request.query_params
        unknown = sorted(set(params) - SEARCH_KEYS)
        if unknown:  # a misspelt facet would otherwise be ignored and find everything
            close = difflib.get_close_matches(unknown[0], sorted(SEARCH_KEYS), n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}?" if close else f"the parameters are {', '.join(sorted(SEARCH_KEYS))}."
            raise HubError("invalid", f"Unknown search parameter {unknown[0]!r}; {hint}",
                           errors={name: ["Unknown parameter."] for name in unknown})
        visibility = params.get("visibility", "")
        if visibility and visibility not in Artifact.Visibility.values:
            raise HubError("invalid", f"visibility is one of {', '.join(Artifact.Visibility.values)}.",
                           errors={"visibility": ["Unknown value."]})
        result = search(request.user, q=params.get("q", ""), sort=params.get("sort", ""), visibility=visibility,
                        filters={name: params.getlist(name) for name in FACETS if name in params},
                        derived=params.get("derived", "collapse"))
        page = self.paginate_queryset(result.entries)
        artifacts = []
        for entry in page:  # the index knows each latest and current version: no query per artifact
            entry.artifact.latest_label = entry.version.label if entry.version else None
            entry.artifact.current_label = entry.current.label if entry.current else entry.artifact.latest_label
            artifacts.append(entry.artifact)
        data = ArtifactSerializer(artifacts, many=True).data
        under = derived_under(request.user, [a.pk for a in artifacts])
        for artifact, item in zip(artifacts, data, strict=True):
            item["derived"] = [{"name": d.full_name, "kind": d.kind, "title": d.title}
                               for d in under.get(artifact.pk, [])]
        response = self.get_paginated_response(data)
        response.data["facets"] = result.facets
        response.data["suggestion"] = result.suggestion or None
        return response

    def perform_create(self, serializer: ArtifactSerializer) -> None:
        data = serializer.validated_data
        owner_name = (data.get("owner") or {}).get("username") or self.request.user.username
        require_within(self.request, owner_name)
        serializer.instance = services.create_artifact(
            owner_for_new(self.request.user, owner_name), kind=data["kind"], name=data["name"],
            title=data.get("title", ""),
            description=data.get("description", ""), visibility=data.get("visibility", "public"),
            collaborators=data.get("collaborators", []),
        )


class ArtifactDetail(APIView):
    """Read, update (title, description; the owner also visibility and collaborators) or delete."""

    serializer_class = ArtifactSerializer

    @extend_schema(responses=ArtifactSerializer)
    def get(self, request: Request, owner: str, name: str) -> Response:
        return Response(ArtifactSerializer(services.get_artifact(request.user, owner, name)).data)

    @extend_schema(request=ArtifactUpdateSerializer, responses=ArtifactUpdatedSerializer)
    def patch(self, request: Request, owner: str, name: str) -> Response:
        artifact = services.get_artifact(request.user, owner, name)
        require_write(request, artifact)
        serializer = ArtifactUpdateSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        if {"visibility", "collaborators"} & data.keys():
            require_admin(request, artifact)
        services.update_artifact(artifact, data, data.get("collaborators"), by=request.user.username)
        warnings = sharing_warnings(artifact, Viewer(request.user)) if {"visibility", "collaborators"} & data.keys() \
            else []
        return Response({**ArtifactSerializer(artifact).data, "warnings": warnings})

    @extend_schema(parameters=[OpenApiParameter("reason", str, description="Shown on the tombstone page.")],
                   responses={204: None})
    def delete(self, request: Request, owner: str, name: str) -> Response:
        artifact = services.get_artifact(request.user, owner, name)
        require_admin(request, artifact)
        services.delete_artifact(artifact, reason=request.query_params.get("reason", "")[:500])
        return Response(status=status.HTTP_204_NO_CONTENT)


class VersionListCreate(APIView):
    """List an artifact's versions (tombstones included) / publish a new version.

    A new version takes files either as multipart parts or as completed uploads
    (``{"files": [{"path": "model.pt", "upload": "<upload id>"}]}``).
    """

    throttle_scope = "versions"  # hub.ops.throttles: the rate of its writes
    parser_classes = [JSONParser, FolderFormParser]
    serializer_class = VersionSerializer

    def initialize_request(self, request, *args, **kwargs):
        # Before anything reads the body (CSRF checks do): multipart files stream to staging, hashed.
        self.staging = StagingUploadHandler(request)
        request.upload_handlers = [self.staging]
        keep_folders(request)
        return super().initialize_request(request, *args, **kwargs)

    def dispatch(self, request, *args, **kwargs):
        """However the request ends (published, refused, the body cut off), no staged form file stays."""
        try:
            return super().dispatch(request, *args, **kwargs)
        finally:
            staging = getattr(self, "staging", None)
            if staging is not None:
                staging.remove_staged()

    @extend_schema(responses=VersionSerializer(many=True))
    def get(self, request: Request, owner: str, name: str) -> Response:
        artifact = services.get_artifact(request.user, owner, name)
        versions = versions_queryset().filter(artifact=artifact)
        return Response(VersionSerializer(versions, many=True, context=as_seen_by(request)).data)

    @extend_schema(request=VersionCreateSerializer, responses={201: VersionPublishedSerializer})
    def post(self, request: Request, owner: str, name: str) -> Response:
        body, staged = self._body_and_form_files(request)
        serializer = VersionCreateSerializer(data=body)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        with transaction.atomic():  # a new artifact exists only with its first version
            artifact = self._artifact(request, owner, name, data.get("artifact"))
            require_write(request, artifact)
            files = staged + [each for item in data["files"]
                              for each in completed_files(request.user, item["path"], item["upload"])]
            quota.check_files(artifact.owner, files, request.user)  # the owner's quota lock, held to the commit
            provenance = [
                services.ProvenanceRef(item["relation"], services.resolve_version_ref(request.user, item["target"]))
                for item in data["provenance"]
            ]
            version = services.create_version(
                artifact, request.user, files=files, label=data.get("version", ""),
                metadata=data["metadata"], provenance=provenance,
            )
        version = versions_queryset().get(pk=version.pk)
        data = VersionSerializer(version, context=as_seen_by(request)).data
        return Response({**data, "warnings": publish_warnings(version)}, status=status.HTTP_201_CREATED)

    @staticmethod
    def _artifact(request: Request, owner: str, name: str, new: dict[str, Any] | None) -> Artifact:
        """The artifact to publish into; with ``new``, made here when it does not exist and is yours."""
        try:
            return services.get_artifact(request.user, owner, name)
        except HubError as exc:
            if new is None or exc.error_code != "not_found":
                raise
            if owner != request.user.username and not writes_in(request.user, owner):
                raise
        return services.create_artifact(owner_for_new(request.user, owner), kind=new["kind"], name=name,
                                        title=new["title"],
                                        description=new["description"], visibility=new["visibility"])

    @staticmethod
    def _body_and_form_files(request: Request) -> tuple[dict[str, Any], list[StagedFile]]:
        if not (request.content_type or "").startswith("multipart/"):
            return request.data, []
        staged = [item for key in request.FILES for item in request.FILES.getlist(key)]
        if not all(isinstance(item, StagedFile) for item in staged):
            raise HubError("malformed_request", "The form was read before its files could be staged.")
        body: dict[str, Any] = {}
        for field in ("version", "metadata", "provenance", "artifact"):
            if field in request.data:
                value = request.data[field]
                if field != "version":
                    value = load_json_or_yaml(value, what=field)
                body[field] = value
        for field in request.data:  # any other text field is refused by name (VersionCreateSerializer)
            if field not in body and field not in request.FILES and field != "csrfmiddlewaretoken":
                body[field] = request.data[field]
        return body, staged



class VersionDetail(APIView):
    """One version (``latest`` works); deleting leaves a tombstone behind its PID."""

    serializer_class = VersionSerializer

    @extend_schema(responses=VersionSerializer)
    def get(self, request: Request, owner: str, name: str, version: str) -> Response:
        artifact = services.get_artifact(request.user, owner, name)
        found = services.get_version(artifact, version, allow_deleted=True)
        return Response(VersionSerializer(versions_queryset().get(pk=found.pk), context=as_seen_by(request)).data)

    @extend_schema(parameters=[OpenApiParameter("reason", str, description="Shown on the tombstone page.")],
                   responses={204: None})
    def delete(self, request: Request, owner: str, name: str, version: str) -> Response:
        artifact = services.get_artifact(request.user, owner, name)
        require_admin(request, artifact)
        services.delete_version(services.get_version(artifact, version),
                                reason=request.query_params.get("reason", "")[:500])
        return Response(status=status.HTTP_204_NO_CONTENT)


class Resolve(APIView):
    """The version a PID (``ark:/…``, version or concept) or ``owner/name[@version]`` names; or, by
    ``content``, the version you can see that holds exactly the files of that content digest (what a new
    version of them would be refused as ``duplicate_version`` for), so a client asks before uploading."""

    serializer_class = VersionSerializer

    @extend_schema(parameters=[
        OpenApiParameter("ref", str, description="ark:/… or owner/name[@version] (this or content)"),
        OpenApiParameter("content", str, description="A content digest (this or ref): the sha256 of the files' "
                                                     "sha256s (hex), sorted and joined by newlines; 404 when no "
                                                     "version you can see holds those files")],
                   responses=VersionSerializer)
    def get(self, request: Request) -> Response:
        ref = request.query_params.get("ref", "")
        content = request.query_params.get("content", "")
        if bool(ref) == bool(content):
            raise HubError("invalid", "Give ref: a PID (ark:/…) or owner/name[@version]; or content: a content "
                                      "digest.", errors={"ref": ["Give ref or content, not both."]})
        found = (services.resolve_version_ref(request.user, ref) if ref
                 else services.resolve_content(request.user, content))
        return Response(VersionSerializer(versions_queryset().get(pk=found.pk), context=as_seen_by(request)).data)


class VersionFixity(APIView):
    """Start a fixity check: re-read every file from the object store and compare its sha256."""

    @extend_schema(request=None, responses={202: JobSerializer})
    def post(self, request: Request, owner: str, name: str, version: str) -> Response:
        artifact = services.get_artifact(request.user, owner, name)
        require_write(request, artifact)
        found = services.get_version(artifact, version)
        check_active_jobs(request.user)
        return accepted(create_job("fixity", request.user, version=found, limited=True))


class TransferSerializer(StrictSerializer):
    to = serializers.CharField(max_length=150, help_text="You, or an organization you write in.")


class ArtifactTransfer(APIView):
    """Give the artifact to another owner (its owner or admins; to yourself or an organization you write in).
    PIDs and provenance stay; the old ``owner/name`` redirects (308) to the new one."""

    needs_scope = "admin"

    @extend_schema(request=TransferSerializer, responses=ArtifactSerializer)
    def post(self, request: Request, owner: str, name: str) -> Response:
        artifact = services.get_artifact(request.user, owner, name)
        require_admin(request, artifact)
        body = TransferSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        require_within(request, body.validated_data["to"])
        handover.transfer(artifact, owner_for_new(request.user, body.validated_data["to"]), by=request.user.username)
        return Response(ArtifactSerializer(artifact).data)
