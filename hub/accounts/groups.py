"""The site's group mapping: the identity provider's groups (an OIDC group claim's values, LDAP group DNs or
names) -> the (organization, role) pairs they give (``HUB_GROUP_MAP``, JSON).

``map_groups`` is pure. ``apply_memberships`` is the one hook a sign-in calls with its pairs; organizations live
in their own app (issue 52's organizations), which this hook hands the pairs to once it is wired: until then it
only logs them on ``hub.audit``."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

ROLES = ("read", "write", "admin")  # each includes the ones before it
audit = logging.getLogger("hub.audit")

Mapping = dict[str, list[tuple[str, str]]]


def parse_mapping(text: str) -> Mapping:
    """``{"group": "org:role" | ["org:role", ...]}`` -> {group: [(org, role), ...]}; ImproperlyConfigured with
    the wrong entry named otherwise."""
    try:
        raw = json.loads(text or "{}")
    except ValueError as exc:
        raise ImproperlyConfigured(f"HUB_GROUP_MAP is not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ImproperlyConfigured('HUB_GROUP_MAP is a JSON object: {"group": "org:role", ...}')
    mapping: Mapping = {}
    for group, targets in raw.items():
        pairs = []
        for target in [targets] if isinstance(targets, str) else targets if isinstance(targets, list) else [None]:
            org, _, role = target.partition(":") if isinstance(target, str) else ("", "", "")
            if not org or role not in ROLES:
                raise ImproperlyConfigured(f"HUB_GROUP_MAP[{group!r}]: write 'organization:role' with a role of "
                                           f"{', '.join(ROLES)}, not {target!r}")
            pairs.append((org.strip(), role))
        mapping[str(group)] = pairs
    return mapping


def map_groups(groups: Iterable[str], mapping: Mapping) -> list[tuple[str, str]]:
    """The (organization, role) pairs the groups give, one per organization with its highest role, sorted by
    organization. Groups the mapping does not name give nothing; the same group twice counts once."""
    best: dict[str, str] = {}
    for group in set(groups):
        for org, role in mapping.get(group, ()):
            if org not in best or ROLES.index(role) > ROLES.index(best[org]):
                best[org] = role
    return sorted(best.items())


def site_pairs(groups: Iterable[str]) -> list[tuple[str, str]]:
    """``map_groups`` with the site's ``HUB_GROUP_MAP``."""
    return map_groups(groups, parse_mapping(settings.HUB_GROUP_MAP))


def apply_memberships(user, pairs: list[tuple[str, str]], source: str) -> None:
    """Make ``user``'s memberships synced from ``source`` these pairs (``hub.orgs.services.sync_memberships``:
    it adds, changes and removes only the memberships that source made, leaving those given by hand)."""
    from hub.orgs.services import sync_memberships

    audit.info("memberships from %s for %s: %s", source, user.username,
               ", ".join(f"{org}:{role}" for org, role in pairs) or "none")
    sync_memberships(user, pairs, source)
