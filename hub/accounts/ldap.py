"""LDAP bind sign-in (``HUB_LDAP_*``) through django-auth-ldap, the maintained Django backend over python-ldap:
it binds as the person (a DN template), searches their groups, and keeps name and e-mail from the directory.
This subclass adds what is the hub's: its settings read from plain ``HUB_LDAP_*`` values, the sign-in pause of
``hub.accounts.throttle``, the identity row, and the group mapping (``hub.accounts.groups``)."""

from __future__ import annotations

import logging

import ldap
from django.conf import settings
from django_auth_ldap.backend import LDAPBackend, LDAPSettings
from django_auth_ldap.config import GroupOfNamesType, LDAPSearch

from hub.accounts import groups, throttle
from hub.accounts.models import ExternalIdentity


def ldap_settings() -> dict:
    """django-auth-ldap's settings (``AUTH_LDAP_*`` names without the prefix) from the hub's."""
    found = {
        "SERVER_URI": settings.HUB_LDAP_URI,
        "USER_DN_TEMPLATE": settings.HUB_LDAP_USER_DN_TEMPLATE,
        "BIND_AS_AUTHENTICATING_USER": not settings.HUB_LDAP_BIND_DN,
        "BIND_DN": settings.HUB_LDAP_BIND_DN,
        "BIND_PASSWORD": settings.HUB_LDAP_BIND_PASSWORD,
        "START_TLS": settings.HUB_LDAP_START_TLS,
        "USER_ATTR_MAP": dict(settings.HUB_LDAP_ATTRS),
        "ALWAYS_UPDATE_USER": True,
        "CONNECTION_OPTIONS": {ldap.OPT_NETWORK_TIMEOUT: 10, ldap.OPT_TIMEOUT: 10},
    }
    if settings.HUB_LDAP_GROUP_BASE:
        found["GROUP_SEARCH"] = LDAPSearch(settings.HUB_LDAP_GROUP_BASE, ldap.SCOPE_SUBTREE,
                                           settings.HUB_LDAP_GROUP_FILTER)
        found["GROUP_TYPE"] = GroupOfNamesType()
    return found


audit = logging.getLogger("hub.audit")


class HubLDAPBackend(LDAPBackend):
    """A username and password checked by binding to the site's directory."""

    @property
    def settings(self) -> LDAPSettings:
        if self._settings is None:
            self._settings = LDAPSettings("HUB_LDAP_UNUSED_", ldap_settings())
        return self._settings

    @settings.setter
    def settings(self, value) -> None:
        self._settings = value

    def authenticate(self, request, username=None, password=None, **kwargs):
        if not username or not password or not settings.HUB_LDAP_URI:
            return None
        counters = throttle.keys(str(username), request)
        throttle.refuse_if_paused(counters)
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is None and not settings.HUB_LOCAL_PASSWORDS:  # else the password backend counts it
            throttle.failed(counters)
        elif user is not None:
            throttle.succeeded(counters)
        return user

    def authenticate_ldap_user(self, ldap_user, password):
        user = super().authenticate_ldap_user(ldap_user, password)
        if user is not None and hasattr(user, "organization"):  # an organization's namespace, never a person
            audit.warning("ldap sign-in of %s refused: the name is an organization's", user.username)
            return None
        if user is not None:
            self.synced(user, ldap_user)
        return user

    @staticmethod
    def synced(user, ldap_user) -> None:
        """After a bind: the identity row, and the memberships the directory's groups give."""
        ExternalIdentity.objects.update_or_create(issuer=f"ldap:{settings.HUB_LDAP_URI}", subject=ldap_user.dn,
                                                  defaults={"user": user})
        names = set(ldap_user.group_dns) | set(ldap_user.group_names) if settings.HUB_LDAP_GROUP_BASE else set()
        groups.apply_memberships(user, groups.site_pairs(names), source="ldap")
