"""The authentication backend every password goes through: the web login form, the admin's, and HTTP Basic at
``/api/v1/tokens/`` (which mints tokens) all call ``django.contrib.auth.authenticate``."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend

from hub.accounts import throttle


class ThrottledModelBackend(ModelBackend):
    """Django's username/password check, refused while the account or the address is paused
    (``hub.accounts.throttle``), with each wrong password counted; no password is checked when the site turned
    local passwords off (``HUB_LOCAL_PASSWORDS``)."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if username is None:
            username = kwargs.get(get_user_model().USERNAME_FIELD)
        if username is None or password is None or not settings.HUB_LOCAL_PASSWORDS:
            return None
        counters = throttle.keys(str(username), request)
        throttle.refuse_if_paused(counters)
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is None:
            throttle.failed(counters)
        else:
            throttle.succeeded(counters)
        return user

    def get_user(self, user_id):
        """A session's person, read with the organization check in the same query (every signed-in request
        asks): an organization's account has no session of its own."""
        user = get_user_model()._default_manager.filter(pk=user_id, organization__isnull=True).first()
        return user if user is not None and super().user_can_authenticate(user) else None

    def user_can_authenticate(self, user) -> bool:
        """An organization's account never signs in: its members do, and its pipelines use its service tokens."""
        from hub.orgs.models import Organization

        return super().user_can_authenticate(user) and not Organization.objects.filter(account_id=user.pk).exists()
