"""Files access over REST: a version's files access (open, restricted, embargoed until a date), the grants on an
artifact (person, optional expiry, revocable) and share links to one version (secret, optional expiry,
revocable). Changing any of them is the owner's (or the owning organization's admins'); each change is one
``hub.audit`` line."""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.auth import get_user_model
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hub.errors import HubError
from hub.registry import services
from hub.registry.api.views import require_admin
from hub.registry.files_access import (
    files_state,
    has_grant,
    may_read_files,
    new_share_token,
    request_share_token,
    token_hash,
)
from hub.registry.grants import ask, decide, give_grant, policy_of
from hub.registry.models import AccessPolicy, AccessRequest, Grant, ShareLink, Version
from hub.strict import StrictSerializer

audit = logging.getLogger("hub.audit")


class FilesAccessSerializer(StrictSerializer):
    files_access = serializers.ChoiceField(choices=Version.FilesAccess.choices)
    embargo_until = serializers.DateTimeField(required=False, allow_null=True)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        until = attrs.get("embargo_until")
        if attrs["files_access"] == Version.FilesAccess.EMBARGOED:
            if until is None:
                raise serializers.ValidationError({"embargo_until": "An embargo needs the date its files open "
                                                                    "(ISO 8601, e.g. 2027-06-30T00:00:00Z)."})
            if until <= timezone.now():
                raise serializers.ValidationError({"embargo_until": "The date is past: set files_access to open."})
        elif until is not None:
            raise serializers.ValidationError({"embargo_until": "Only an embargoed version has a date."})
        return attrs


def access_answer(request: Request, version: Version) -> dict[str, Any]:
    """The files access of ``version`` and what the asking person may do with it."""
    user = request.user if request.user.is_authenticated else None
    state = files_state(version)
    return {"version": str(version), "files_access": state,
            "embargo_until": version.embargo_until.isoformat() if state == "embargoed" else None,
            "may_read_files": may_read_files(user, version, request_share_token(request)),
            "granted": has_grant(user, version.artifact_id)}


class VersionAccess(APIView):
    """``GET``: a version's files access and whether you may read its files; ``PUT`` (the owner): set it."""

    @extend_schema(responses={200: None})
    def get(self, request: Request, owner: str, name: str, version: str) -> Response:
        found = services.get_version(services.get_artifact(request.user, owner, name), version)
        return Response(access_answer(request, found))

    @extend_schema(request=FilesAccessSerializer, responses={200: None})
    def put(self, request: Request, owner: str, name: str, version: str) -> Response:
        artifact = services.get_artifact(request.user, owner, name)
        require_admin(request, artifact)
        found = services.get_version(artifact, version)
        serializer = FilesAccessSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        found.files_access = serializer.validated_data["files_access"]
        found.embargo_until = serializer.validated_data.get("embargo_until")
        found.save(update_fields=["files_access", "embargo_until"])
        audit.info("files access of %s set to %s%s by %s", found, found.files_access,
                   f" until {found.embargo_until.isoformat()}" if found.embargo_until else "", request.user.username)
        return Response(access_answer(request, found))


class FutureDateTimeField(serializers.DateTimeField):
    """An optional expiry: a date still ahead, or null (no end)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(required=False, allow_null=True, **kwargs)

    def to_internal_value(self, value):
        when = super().to_internal_value(value)
        if when <= timezone.now():
            raise serializers.ValidationError("The expiry is past; give a future date or none.")
        return when


class GrantSerializer(StrictSerializer):
    user = serializers.CharField(max_length=150)
    expires = FutureDateTimeField()


def grant_data(grant: Grant) -> dict[str, Any]:
    return {"id": grant.pk, "artifact": grant.artifact.full_name, "user": grant.user.username,
            "granted_by": grant.granted_by.username if grant.granted_by else None,
            "created": grant.created.isoformat(), "expires": grant.expires.isoformat() if grant.expires else None,
            "active": grant.active}


class GrantList(APIView):
    """``GET``: the grants on an artifact (its admins: all; anyone else: their own); ``POST`` (its admins):
    grant a person its restricted and embargoed files."""

    @extend_schema(responses={200: None})
    def get(self, request: Request, owner: str, name: str) -> Response:
        artifact = services.get_artifact(request.user, owner, name)
        grants = Grant.objects.filter(artifact=artifact).select_related("artifact__owner", "user", "granted_by")
        if not artifact.can_admin(request.user):
            grants = grants.filter(user=request.user) if request.user.is_authenticated else grants.none()
        return Response([grant_data(grant) for grant in grants])

    @extend_schema(request=GrantSerializer, responses={201: None})
    def post(self, request: Request, owner: str, name: str) -> Response:
        artifact = services.get_artifact(request.user, owner, name)
        require_admin(request, artifact)
        serializer = GrantSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        username = serializer.validated_data["user"]
        person = get_user_model().objects.filter(username=username, is_active=True).first()
        if person is None or hasattr(person, "organization"):
            raise HubError("invalid", f"No person {username!r} at this hub: grants go to people by username.")
        grant = give_grant(artifact, person, request.user, serializer.validated_data.get("expires"))
        return Response(grant_data(grant), status=status.HTTP_201_CREATED)


class GrantDetail(APIView):
    """``DELETE`` (the artifact's admins, or the grantee giving it up): revoke at once."""

    needs_scope = "read"  # the grantee gives up their own; the admins' revocation checks admin (require_admin)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, owner: str, name: str, pk: int) -> Response:
        artifact = services.get_artifact(request.user, owner, name)
        grant = Grant.objects.filter(artifact=artifact, pk=pk, revoked_at__isnull=True).select_related("user").first()
        if grant is None or (grant.user_id != request.user.pk and not artifact.can_admin(request.user)):
            raise HubError("not_found", f"{artifact} has no live grant {pk} you may revoke.")
        if grant.user_id != request.user.pk:
            require_admin(request, artifact)
        grant.revoked_at = timezone.now()
        grant.save(update_fields=["revoked_at"])
        audit.info("grant on %s to %s revoked by %s", artifact, grant.user.username, request.user.username)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ShareLinkSerializer(StrictSerializer):
    note = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    expires = FutureDateTimeField()


def link_data(link: ShareLink) -> dict[str, Any]:
    return {"id": link.pk, "version": str(link.version), "note": link.note, "created": link.created.isoformat(),
            "expires": link.expires.isoformat() if link.expires else None, "active": link.active}


class ShareLinkList(APIView):
    """``GET`` (the owner): a version's share links; ``POST``: a new one. Its secret is in the answer once
    (``token``, and ``url``: the archive download with ``?share=``); the hub keeps only its sha256."""

    @extend_schema(responses={200: None})
    def get(self, request: Request, owner: str, name: str, version: str) -> Response:
        artifact = services.get_artifact(request.user, owner, name)
        require_admin(request, artifact)
        found = services.get_version(artifact, version)
        return Response([link_data(link) for link in found.share_links.select_related("version__artifact__owner")])

    @extend_schema(request=ShareLinkSerializer, responses={201: None})
    def post(self, request: Request, owner: str, name: str, version: str) -> Response:
        artifact = services.get_artifact(request.user, owner, name)
        require_admin(request, artifact)
        found = services.get_version(artifact, version)
        serializer = ShareLinkSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        token = new_share_token()
        link = ShareLink.objects.create(version=found, token_sha256=token_hash(token), created_by=request.user,
                                        note=serializer.validated_data["note"],
                                        expires=serializer.validated_data.get("expires"))
        audit.info("share link %s to %s made by %s", link.pk, found, request.user.username)
        base = f"/api/v1/artifacts/{artifact.full_name}/versions/{found.label}"
        return Response({**link_data(link), "token": token, "url": f"{base}/archive?share={token}"},
                        status=status.HTTP_201_CREATED)


class ShareLinkDetail(APIView):
    """``DELETE`` (the owner): revoke a share link; every web node refuses it from the next request."""

    @extend_schema(responses={204: None})
    def delete(self, request: Request, owner: str, name: str, version: str, pk: int) -> Response:
        artifact = services.get_artifact(request.user, owner, name)
        require_admin(request, artifact)
        found = services.get_version(artifact, version)
        changed = ShareLink.objects.filter(version=found, pk=pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now())
        if not changed:
            raise HubError("not_found", f"{found} has no live share link {pk}.")
        audit.info("share link %s to %s revoked by %s", pk, found, request.user.username)
        return Response(status=status.HTTP_204_NO_CONTENT)


class AccessPolicySerializer(StrictSerializer):
    fields = serializers.ListField(child=serializers.RegexField(r"^[a-z][a-z0-9_]{0,39}$"), max_length=10,
                                   required=False, default=list)
    terms = serializers.CharField(max_length=5000, required=False, allow_blank=True, default="")
    auto_approve = serializers.BooleanField(required=False, default=False)
    grant_days = serializers.IntegerField(min_value=1, max_value=3650, required=False, allow_null=True)


def policy_data(policy: AccessPolicy) -> dict[str, Any]:
    return {"fields": policy.fields, "terms": policy.terms, "auto_approve": policy.auto_approve,
            "grant_days": policy.grant_days}


class AccessPolicyView(APIView):
    """``GET`` (anyone who reads the artifact): what a request must say; ``PUT`` (its admins): set it."""

    @extend_schema(responses={200: None})
    def get(self, request: Request, owner: str, name: str) -> Response:
        return Response(policy_data(policy_of(services.get_artifact(request.user, owner, name))))

    @extend_schema(request=AccessPolicySerializer, responses={200: None})
    def put(self, request: Request, owner: str, name: str) -> Response:
        artifact = services.get_artifact(request.user, owner, name)
        require_admin(request, artifact)
        serializer = AccessPolicySerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        policy, _ = AccessPolicy.objects.update_or_create(artifact=artifact, defaults=serializer.validated_data)
        audit.info("access policy of %s set by %s: %s", artifact, request.user.username, policy_data(policy))
        return Response(policy_data(policy))


class AccessRequestSerializer(StrictSerializer):
    purpose = serializers.CharField(max_length=2000)
    answers = serializers.DictField(child=serializers.CharField(max_length=2000, allow_blank=True), required=False,
                                    default=dict)
    agree_terms = serializers.BooleanField(required=False, default=False)


def request_data(made: AccessRequest) -> dict[str, Any]:
    return {"id": made.pk, "artifact": made.artifact.full_name, "requester": made.requester.username,
            "purpose": made.purpose, "answers": made.answers, "agreed_terms": made.agreed_terms,
            "state": made.state, "message": made.message, "created": made.created.isoformat(),
            "decided_by": made.decided_by.username if made.decided_by else None,
            "decided_at": made.decided_at.isoformat() if made.decided_at else None}


class AccessRequestList(APIView):
    """``GET``: the requests for an artifact (its admins: all; anyone else: their own); ``POST`` (signed in):
    ask for its restricted files with a purpose and the policy's answers."""

    needs_scope = "read"  # asking changes nothing of the artifact: a read token may ask

    @extend_schema(responses={200: None})
    def get(self, request: Request, owner: str, name: str) -> Response:
        artifact = services.get_artifact(request.user, owner, name)
        found = AccessRequest.objects.filter(artifact=artifact).select_related("artifact__owner", "requester",
                                                                                 "decided_by")
        if not artifact.can_admin(request.user):
            found = found.filter(requester=request.user) if request.user.is_authenticated else found.none()
        return Response([request_data(item) for item in found])

    @extend_schema(request=AccessRequestSerializer, responses={201: None})
    def post(self, request: Request, owner: str, name: str) -> Response:
        if not request.user.is_authenticated:
            raise HubError("not_authenticated", "Sign in to ask for access (hpcfair login), so the owner knows who "
                                                "asks and the hub can tell you the answer.")
        artifact = services.get_artifact(request.user, owner, name)
        serializer = AccessRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        made = ask(artifact, request.user, data["purpose"], data["answers"], data["agree_terms"])
        return Response(request_data(made), status=status.HTTP_201_CREATED)


class DecisionSerializer(StrictSerializer):
    decision = serializers.ChoiceField(choices=["approve", "refuse"])
    message = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")


class AccessRequestDetail(APIView):
    """``POST`` (the artifact's admins): ``{"decision": "approve"|"refuse", "message": ...}``."""

    @extend_schema(request=DecisionSerializer, responses={200: None})
    def post(self, request: Request, owner: str, name: str, pk: int) -> Response:
        artifact = services.get_artifact(request.user, owner, name)
        require_admin(request, artifact)
        found = AccessRequest.objects.filter(artifact=artifact, pk=pk).select_related("artifact__owner",
                                                                                        "requester").first()
        if found is None:
            raise HubError("not_found", f"{artifact} has no access request {pk}.")
        serializer = DecisionSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        decide(found, request.user, approve=data["decision"] == "approve", message=data["message"])
        return Response(request_data(found))
