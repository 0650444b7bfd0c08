"""Organizations over REST: list and create, one organization with its members, members' roles, and
service tokens (made with a password or a browser session, as personal tokens are)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hub.accounts.api.views import SignedInWithoutToken, TokenListCreate, TokenSerializer
from hub.accounts.models import ApiToken
from hub.accounts.permissions import require_scope
from hub.errors import HubError
from hub.orgs import services
from hub.orgs.models import Membership, Organization, Role
from hub.strict import StrictSerializer


class OrganizationSerializer(serializers.ModelSerializer):
    name = serializers.CharField(source="account.username", read_only=True)

    class Meta:
        model = Organization
        fields = ["name", "title", "description", "created", "storage_quota_mb", "jobs_at_once"]


class OrganizationCreateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=39)
    title = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    description = serializers.CharField(required=False, allow_blank=True, default="")


class MemberSerializer(serializers.ModelSerializer):
    username = serializers.CharField(source="user.username", read_only=True)

    class Meta:
        model = Membership
        fields = ["username", "role", "source", "created"]


class MemberSetSerializer(StrictSerializer):
    role = serializers.ChoiceField(choices=Role.choices)


def _person(username: str):
    user = get_user_model().objects.filter(username=username, organization__isnull=True).first()
    if user is None:
        raise HubError("not_found", f"No person named {username}.")
    return user


class OrganizationListCreate(APIView):
    """Organizations (GET: all of them, or ``?member=me`` yours) / a new one with you as its admin (POST)."""

    @extend_schema(responses=OrganizationSerializer(many=True))
    def get(self, request: Request) -> Response:
        orgs = Organization.objects.select_related("account")
        if request.query_params.get("member") == "me":
            if not request.user.is_authenticated:
                raise HubError("not_authenticated", "Sign in to list your organizations.")
            orgs = orgs.filter(memberships__user=request.user)
        data = OrganizationSerializer(orgs, many=True).data
        if request.query_params.get("member") == "me":
            roles = dict(Membership.objects.filter(user=request.user).values_list("org__account__username", "role"))
            for item in data:
                item["role"] = roles.get(item["name"])
        return Response(data)

    @extend_schema(request=OrganizationCreateSerializer, responses={201: OrganizationSerializer})
    def post(self, request: Request) -> Response:
        require_scope(request, "admin", "creating an organization")
        body = OrganizationCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        org = services.create_organization(request.user, body.validated_data["name"],
                                           body.validated_data["title"], body.validated_data["description"])
        return Response(OrganizationSerializer(org).data, status=status.HTTP_201_CREATED)


class OrganizationDetail(APIView):
    """One organization; its members are listed to its members."""

    @extend_schema(responses=OrganizationSerializer)
    def get(self, request: Request, org: str) -> Response:
        found = services.organization_named(org)
        data = OrganizationSerializer(found).data
        role = services.role_in(found, request.user)
        data["role"] = role
        if role is not None:
            data["members"] = MemberSerializer(found.memberships.select_related("user"), many=True).data
        return Response(data)


class MemberList(APIView):
    """The members and their roles (to members)."""

    @extend_schema(responses=MemberSerializer(many=True))
    def get(self, request: Request, org: str) -> Response:
        found = services.organization_named(org)
        services.require_role(found, request.user, Role.READ, "see the members")
        return Response(MemberSerializer(found.memberships.select_related("user"), many=True).data)


class MemberDetail(APIView):
    """Add a person or change their role (PUT ``{"role": ...}``, admins), or take them out (DELETE: admins, or
    the member themselves to leave). The last admin can be neither demoted nor removed (409)."""

    needs_scope = "admin"

    @extend_schema(request=MemberSetSerializer, responses=MemberSerializer)
    def put(self, request: Request, org: str, username: str) -> Response:
        found = services.organization_named(org)
        services.require_role(found, request.user, Role.ADMIN, "give roles")
        body = MemberSetSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        membership = services.set_member(found, _person(username), body.validated_data["role"],
                                         by=request.user.username)
        return Response(MemberSerializer(membership).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, org: str, username: str) -> Response:
        found = services.organization_named(org)
        if username != request.user.username:
            services.require_role(found, request.user, Role.ADMIN, "remove members")
        services.remove_member(found, _person(username), by=request.user.username)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ServiceTokenSerializer(StrictSerializer):
    """A service token is always limited to its organization: it takes a name and a scope only."""

    name = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    scope = serializers.ChoiceField(choices=ApiToken.Scope.choices, default=ApiToken.Scope.READ)


class ServiceTokens(APIView):
    """The organization's service tokens, for pipelines (admins; with a password or a browser session): they act
    as the organization, within their scope, on its artifacts only."""

    authentication_classes = TokenListCreate.authentication_classes
    permission_classes = [SignedInWithoutToken]

    @extend_schema(responses=TokenSerializer(many=True))
    def get(self, request: Request, org: str) -> Response:
        found = services.organization_named(org)
        services.require_role(found, request.user, Role.ADMIN, "see service tokens")
        return Response(TokenSerializer(found.account.api_tokens.all(), many=True).data)

    @extend_schema(request=ServiceTokenSerializer, responses={201: TokenSerializer})
    def post(self, request: Request, org: str) -> Response:
        found = services.organization_named(org)
        services.require_role(found, request.user, Role.ADMIN, "create service tokens")
        body = ServiceTokenSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        token, raw = ApiToken.issue(found.account, scope=data["scope"], name=data["name"], org=found)
        services.audit.info("token %s: service token %s (%s) created by %s", found.slug, token.prefix, token.scope,
                            request.user.username)
        return Response({**TokenSerializer(token).data, "token": raw}, status=status.HTTP_201_CREATED)


class ServiceTokenRevoke(APIView):
    authentication_classes = TokenListCreate.authentication_classes
    permission_classes = [SignedInWithoutToken]

    @extend_schema(responses={204: None})
    def delete(self, request: Request, org: str, pk: int) -> Response:
        found = services.organization_named(org)
        services.require_role(found, request.user, Role.ADMIN, "revoke service tokens")
        if not ApiToken.revoke(found.account, pk):
            raise HubError("not_found", f"{org} has no active token {pk}.")
        services.audit.info("token %s: service token %d revoked by %s", found.slug, pk, request.user.username)
        return Response(status=status.HTTP_204_NO_CONTENT)
