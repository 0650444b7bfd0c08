"""Token scopes: a ``read`` token may only use safe methods."""

from __future__ import annotations

from rest_framework.permissions import SAFE_METHODS, BasePermission

from hub.accounts.models import ApiToken
from hub.errors import HubError


class TokenScopePermission(BasePermission):
    """Unsafe methods need an authenticated user and, with a token, the ``write`` scope.

    Anonymous users may read; what they may read is decided by each view's queryset.
    """

    def has_permission(self, request, view) -> bool:
        if request.method in SAFE_METHODS:
            return True
        if not request.user or not request.user.is_authenticated:
            raise HubError("not_authenticated", "Sign in or send 'Authorization: Bearer <token>' to write.")
        if isinstance(request.auth, ApiToken) and not request.auth.can_write:
            raise HubError(
                "insufficient_scope",
                "This token has the 'read' scope; create one with --scope write to change anything.",
            )
        return True


class IsAuthenticatedReader(BasePermission):
    """Read endpoints that only make sense for a signed-in user (their jobs, their uploads)."""

    def has_permission(self, request, view) -> bool:
        if not request.user or not request.user.is_authenticated:
            raise HubError("not_authenticated", "Sign in or send 'Authorization: Bearer <token>'.")
        return TokenScopePermission().has_permission(request, view)
