"""Who am I, and API tokens: create (with a password or a browser session), list, revoke."""

from __future__ import annotations

import logging

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.authentication import SessionAuthentication
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hub.accounts import expiry
from hub.accounts.auth import BearerTokenAuthentication, PasswordAuthentication
from hub.accounts.models import ApiToken
from hub.errors import HubError
from hub.strict import StrictSerializer

audit = logging.getLogger("hub.audit")


class TokenSerializer(serializers.ModelSerializer):
    org = serializers.CharField(source="org.slug", read_only=True, default=None)
    artifact = serializers.CharField(source="artifact.full_name", read_only=True, default=None)

    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "scope", "org", "artifact", "created", "last_used", "revoked", "expires_at"]


class TokenCreateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    scope = serializers.ChoiceField(choices=ApiToken.Scope.choices, default=ApiToken.Scope.READ,
                                    help_text="read < infer < publish < admin (write: as admin, for old scripts).")
    org = serializers.CharField(max_length=150, required=False, help_text="Limit it to this organization's artifacts.")
    artifact = serializers.CharField(max_length=300, required=False,
                                     help_text="Limit it to this artifact (owner/name).")
    expires_days = serializers.IntegerField(required=False, allow_null=True, default=None, min_value=0,
                                            help_text="Days the token lives (default: the hub's; at most its "
                                                      "maximum; 0: never, where the hub has no maximum).")


def token_limits(user, org: str | None, artifact: str | None) -> dict:
    """The ``org``/``artifact`` rows a new token of ``user`` is limited to, checked: a member's organization, an
    artifact they may read."""
    from hub.orgs.services import organization_named, require_role
    from hub.registry.services import get_artifact

    if org and artifact:
        raise HubError("invalid", "Limit a token to one organization or one artifact, not both.")
    if org:
        found = organization_named(org)
        require_role(found, user, "read", "make a token for its artifacts")
        return {"org": found}
    if artifact:
        owner, slash, name = artifact.partition("/")
        if not slash:
            raise HubError("invalid", "artifact is owner/name.", errors={"artifact": ["Expected owner/name."]})
        return {"artifact": get_artifact(user, owner, name)}
    return {}


class SignedInWithoutToken(BasePermission):
    """Tokens are managed with a password (HTTP Basic) or a browser session, never with another token."""

    def has_permission(self, request, view) -> bool:
        if not request.user or not request.user.is_authenticated:
            raise HubError("not_authenticated", "Send your username and password (HTTP Basic) or sign in.")
        if isinstance(request.auth, ApiToken):
            raise HubError("permission_denied", "Tokens are created and revoked with your password, not a token.")
        return True


class Me(APIView):
    """The signed-in user and, with a token, its scope."""

    @extend_schema(responses={200: {"type": "object"}})
    def get(self, request: Request) -> Response:
        user = request.user
        if not user.is_authenticated:
            return Response({"authenticated": False, "username": None, "scope": None})
        token = request.auth if isinstance(request.auth, ApiToken) else None
        return Response({"authenticated": True, "username": user.username, "name": user.get_full_name(),
                         "scope": token.scope if token else "write", "token": token.prefix if token else None,
                         "expires_at": token.expires_at if token else None,
                         "limit": token.limit or None if token else None})


class TokenListCreate(APIView):
    """Your tokens (GET) / a new token, shown once in ``token`` (POST)."""

    authentication_classes = [PasswordAuthentication, SessionAuthentication, BearerTokenAuthentication]
    permission_classes = [SignedInWithoutToken]

    @extend_schema(responses=TokenSerializer(many=True))
    def get(self, request: Request) -> Response:
        return Response(TokenSerializer(request.user.api_tokens.all(), many=True).data)

    @extend_schema(request=TokenCreateSerializer, responses={201: TokenSerializer})
    def post(self, request: Request) -> Response:
        body = TokenCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        token, raw = ApiToken.issue(request.user, scope=data["scope"], name=data["name"],
                                    expires_at=expiry.expires_at(data.get("expires_days")),
                                    **token_limits(request.user, data.get("org"), data.get("artifact")))
        audit.info("token %s: %s (%s%s) created", request.user.username, token.prefix, token.scope,
                   f", {token.limit}" if token.limited else "")
        return Response({**TokenSerializer(token).data, "token": raw}, status=status.HTTP_201_CREATED)


class TokenRevoke(APIView):
    authentication_classes = TokenListCreate.authentication_classes
    permission_classes = [SignedInWithoutToken]

    @extend_schema(responses={204: None})
    def delete(self, request: Request, pk: int) -> Response:
        if not ApiToken.revoke(request.user, pk):
            raise HubError("not_found", f"You have no active token {pk}.")
        audit.info("token %s: %d revoked", request.user.username, pk)
        return Response(status=status.HTTP_204_NO_CONTENT)
