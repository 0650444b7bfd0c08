"""Organizations: creating them, their members and roles (by hand, or synced from the identity provider's
groups), and the owner a new artifact goes under. Every change is one ``hub.audit`` line."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from hub.errors import HubError
from hub.orgs.models import RANK, Membership, Organization, Role

audit = logging.getLogger("hub.audit")

SLUG_RE = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,38}$"


def organization_named(slug: str) -> Organization:
    """The organization ``slug``, or 404."""
    org = Organization.objects.select_related("account").filter(account__username=slug).first()
    if org is None:
        raise HubError("not_found", f"No organization {slug}.")
    return org


def role_in(org: Organization, user) -> str | None:
    """``user``'s role in ``org`` (None: not a member). The organization's own account (a service token) and
    superusers act as admins."""
    if user is None or not user.is_authenticated:
        return None
    if user.is_superuser or user.pk == org.account_id:
        return Role.ADMIN
    return Membership.objects.filter(org=org, user=user).values_list("role", flat=True).first()


def require_role(org: Organization, user, role: str, act: str) -> None:
    """Refuse (403) unless ``user`` has ``role`` or more in ``org``; the message names its admins."""
    have = role_in(org, user)
    if have is None or RANK[have] < RANK[role]:
        admins = ", ".join(admins_of(org.account) or []) or "none"
        now = f"your role is {have}" if have else "you are not a member"
        raise HubError("permission_denied", f"To {act} in {org.slug} you need the {role} role ({now}); ask an admin "
                                            f"of {org.slug}: {admins}.")


def admins_of(owner) -> list[str] | None:
    """The usernames of the admins of the organization ``owner`` (an account), or None when it is a person."""
    if not Organization.objects.filter(account_id=owner.pk).exists():
        return None
    return sorted(Membership.objects.filter(org_id=owner.pk, role=Role.ADMIN)
                  .values_list("user__username", flat=True))


def writes_in(user, owner_name: str) -> bool:
    """Whether ``user`` may publish under the organization ``owner_name``."""
    org = Organization.objects.filter(account__username=owner_name).first()
    role = role_in(org, user) if org is not None else None
    return role is not None and RANK[role] >= RANK[Role.WRITE]


def owner_for_new(user, owner_name: str):
    """The account a new artifact named under ``owner_name`` is owned by: ``user`` themselves, or an
    organization they write in (403 otherwise, 404 for no such organization)."""
    if owner_name == user.username:
        return user
    org = organization_named(owner_name)
    require_role(org, user, Role.WRITE, "create artifacts")
    return org.account


def create_organization(creator, slug: str, title: str = "", description: str = "") -> Organization:
    """A new organization with ``creator`` as its first admin. The slug shares the namespace of usernames."""
    if not re.match(SLUG_RE, slug or ""):
        raise HubError("invalid", "An organization's name has letters, digits, '.', '_' and '-' (up to 39), starting "
                                  "with a letter or digit.", errors={"name": ["Invalid name."]})
    users = get_user_model()
    if users.objects.filter(username__iexact=slug).exists():
        raise HubError("already_exists", f"The name {slug} is taken by a person or an organization (people and "
                                         "organizations share one namespace); choose another.")
    try:
        with transaction.atomic():
            account = users.objects.create(username=slug, first_name=title[:150])
            account.set_unusable_password()
            account.save(update_fields=["password"])
            org = Organization.objects.create(account=account, title=title, description=description)
            Membership.objects.create(org=org, user=creator, role=Role.ADMIN)
    except IntegrityError:
        raise HubError("already_exists", f"The name {slug} is taken; choose another.")
    audit.info("organization %s created by %s", slug, creator.username)
    audit.info("membership %s: %s added as admin by %s", slug, creator.username, creator.username)
    return org


def _admins_left(org: Organization, without) -> int:
    return Membership.objects.filter(org=org, role=Role.ADMIN).exclude(user=without).count()


def set_member(org: Organization, user, role: str, *, by: str, source: str = Membership.MANUAL) -> Membership:
    """Add ``user`` to ``org`` with ``role``, or change their role. The last admin is not demoted."""
    if role not in RANK:
        raise HubError("invalid", "role is read, write or admin.", errors={"role": ["Unknown role."]})
    if Organization.objects.filter(account_id=user.pk).exists():
        raise HubError("invalid", f"{user.username} is an organization; members are people.")
    with transaction.atomic():
        Organization.objects.select_for_update().filter(pk=org.pk).first()  # one change of admins at a time
        membership = Membership.objects.filter(org=org, user=user).first()
        if membership is None:
            membership = Membership.objects.create(org=org, user=user, role=role, source=source)
            audit.info("membership %s: %s added as %s by %s", org.slug, user.username, role, by)
            return membership
        if membership.role == role:
            return membership
        if membership.role == Role.ADMIN and not _admins_left(org, user):
            raise HubError("conflict", f"{user.username} is the last admin of {org.slug}: make another member admin "
                                       "first.")
        before, membership.role = membership.role, role
        membership.save(update_fields=["role"])
    audit.info("role %s: %s %s -> %s by %s", org.slug, user.username, before, role, by)
    return membership


def remove_member(org: Organization, user, *, by: str) -> None:
    """Take ``user`` out of ``org``; the last admin cannot leave (409)."""
    with transaction.atomic():
        Organization.objects.select_for_update().filter(pk=org.pk).first()
        membership = Membership.objects.filter(org=org, user=user).first()
        if membership is None:
            raise HubError("not_found", f"{user.username} is not a member of {org.slug}.")
        if membership.role == Role.ADMIN and not _admins_left(org, user):
            raise HubError("conflict", f"{user.username} is the last admin of {org.slug} and cannot leave: make "
                                       "another member admin first.")
        membership.delete()
    audit.info("membership %s: %s removed by %s", org.slug, user.username, by)


def sync_memberships(user, pairs: Iterable[tuple[str, str]], source: str) -> list[Membership]:
    """Make ``user``'s memberships from ``source`` (an identity provider's name, e.g. ``oidc`` or ``ldap``) be
    exactly ``pairs`` of (organization slug, role), as the site's group mapping gives them at sign-in.

    Only rows this source made are changed or removed: memberships given by hand stay as they are. Unknown
    organizations are skipped (a mapping names organizations that exist). The last admin is never removed or
    demoted (the sync leaves that row and logs it)."""
    wanted: dict[str, str] = {}
    for slug, role in pairs:
        if role not in RANK:
            raise HubError("invalid", f"Unknown role {role!r} for {slug}; roles are read, write, admin.")
        if slug not in wanted or RANK[role] > RANK[wanted[slug]]:
            wanted[slug] = role
    orgs = {o.slug: o for o in Organization.objects.select_related("account").filter(account__username__in=wanted)}
    by = f"{source} sync"
    for slug in sorted(set(wanted) - set(orgs)):
        audit.info("membership %s: %s not synced from %s: no such organization", slug, user.username, source)
    for membership in Membership.objects.filter(user=user, source=source).select_related("org__account"):
        if membership.org.slug not in orgs:
            try:
                remove_member(membership.org, user, by=by)
            except HubError as exc:
                audit.info("membership %s: %s kept: %s", membership.org.slug, user.username, exc.detail)
    out = []
    for slug, org in sorted(orgs.items()):
        current = Membership.objects.filter(org=org, user=user).first()
        if current is not None and current.source != source:
            out.append(current)  # given by hand: the sync does not touch it
            continue
        try:
            out.append(set_member(org, user, wanted[slug], by=by, source=source))
        except HubError as exc:
            audit.info("role %s: %s kept: %s", slug, user.username, exc.detail)
            out.append(Membership.objects.get(org=org, user=user))
    return out


def apply_memberships(user, pairs: Iterable[tuple[str, str]], source: str = "idp") -> list[Membership]:
    """``hub.accounts.groups.apply_memberships``'s signature, for the identity providers' sign-in to call."""
    return sync_memberships(user, pairs, source)
