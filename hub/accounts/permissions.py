"""Token scopes: read < infer < publish < admin (``hub.accounts.models.SCOPE_RANK``), and token limits.

An unsafe request needs the view's ``needs_scope`` (default ``publish``; inference views say ``infer``); the
admin acts (visibility, collaborators, deletion, transfer, members) check ``admin`` where they happen
(``require_scope``). A token limited to one organization or artifact may change nothing outside it: a view
that names an artifact (``owner``/``name`` in its URL) or an organization (``org``) is checked here, and the
views that create things elsewhere check the owner they create under (``require_within``).
"""

from __future__ import annotations

from rest_framework.permissions import SAFE_METHODS, BasePermission

from hub.accounts.models import ApiToken
from hub.errors import HubError


def token_of(request) -> ApiToken | None:
    auth = getattr(request, "auth", None)
    return auth if isinstance(auth, ApiToken) else None


def require_scope(request, scope: str, what: str) -> None:
    """Refuse (403 ``insufficient_scope``) a token whose scope does not include ``scope``."""
    token = token_of(request)
    if token is not None and not token.allows(scope):
        raise HubError("insufficient_scope", f"This token has the '{token.scope}' scope; {what} needs '{scope}'. "
                                             f"Create a token with --scope {scope} (or sign in).")


def require_within(request, owner: str, name: str | None = None) -> None:
    """Refuse a limited token acting outside its limit (403 ``insufficient_scope``)."""
    token = token_of(request)
    if token is None or not token.limited:
        return
    inside = (owner == token.artifact.owner.username and (name is None or name == token.artifact.name)
              if token.artifact_id is not None else owner == token.org.slug)
    if not inside or (token.artifact_id is not None and name is None):
        target = f"{owner}/{name}" if name else owner
        raise HubError("insufficient_scope", f"This token is limited to {token.limit}; it cannot change {target}. "
                                             "Use a token limited to it, or an unlimited one.")


class TokenScopePermission(BasePermission):
    """Unsafe methods need an authenticated user and, with a token, the view's scope inside the token's limit.

    Anonymous users may read; what they may read is decided by each view's queryset.
    """

    def has_permission(self, request, view) -> bool:
        if request.method in SAFE_METHODS:
            return True
        if not request.user or not request.user.is_authenticated:
            raise HubError("not_authenticated", "Sign in or send 'Authorization: Bearer <token>' to write.")
        require_scope(request, getattr(view, "needs_scope", ApiToken.Scope.PUBLISH), "this request")
        kwargs = getattr(view, "kwargs", None) or {}
        if "owner" in kwargs:
            require_within(request, kwargs["owner"], kwargs.get("name"))
        elif "org" in kwargs:
            require_within(request, kwargs["org"])
        elif token_of(request) is not None and token_of(request).limited and not getattr(view, "limited_ok", False):
            raise HubError("insufficient_scope", f"This token is limited to {token_of(request).limit}; this request "
                                                 "is not about it. Use an unlimited token.")
        return True


class IsAuthenticatedReader(BasePermission):
    """Read endpoints that only make sense for a signed-in user (their jobs, their uploads)."""

    def has_permission(self, request, view) -> bool:
        if not request.user or not request.user.is_authenticated:
            raise HubError("not_authenticated", "Sign in or send 'Authorization: Bearer <token>'.")
        return TokenScopePermission().has_permission(request, view)
