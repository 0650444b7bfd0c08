"""Who reads what: one rule, written once as data (``LEVELS``), with two faces beside each other, as
invenio-records-permissions' generators give ``query_filter`` and ``needs``:

- ``readable_by(user)``: the rule as a query (a ``Q`` over artifacts), for the database;
- ``visible(columns, reader)``: the same rule as a mask over the search index's columns (``hub.search.index_copy``),
  with ``reader_of(user)``: what the person reads beyond the levels, read from the database once per search.

Everyone reads the levels marked ``anyone``; everyone signed in those marked ``signed_in``; the owning
organization's members with ``role`` or more those that name it; the owner and the collaborators every level of
theirs; a superuser everything. A token limited to one organization or artifact (``ApiToken``, carried on
``user.hub_token``) reads the ``anyone`` levels and, of the rest, only what lies inside its limit. A new level is
one more entry of ``LEVELS`` (and the migration of the model's choices that ``makemigrations`` writes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from django.db.models import Q, QuerySet, Value

from hub.orgs.models import RANK, Membership, Role, roles_at_least


@dataclass(frozen=True)
class Level:
    """A visibility level and who reads it (besides the owner, the collaborators and superusers)."""

    name: str
    words: str  # who reads it, for people (the API's schema, the pages)
    anyone: bool = False  # everyone, signed in or not
    signed_in: bool = False  # everyone signed in at this hub
    role: str | None = None  # the owning organization's members with this role or more


LEVELS = (
    Level("public", "everyone, signed in or not", anyone=True),
    Level("internal", "everyone signed in at this hub", signed_in=True),
    Level("organization", "the owning organization's members (any role), and collaborators", role=Role.READ),
    Level("private", "the owner (for an organization: its members with the write or admin role), and collaborators",
          role=Role.WRITE),
)
NAMES = [level.name for level in LEVELS]
SPELLED = f"{', '.join(NAMES[:-1])} or {NAMES[-1]}"  # the levels in a message: "public, internal, ... or private"
CODES = {level.name: code for code, level in enumerate(LEVELS)}  # the index's level column holds these
VISIBILITY_RULES = {level.name: level.words for level in LEVELS}
assert len(LEVELS) <= 8, "the index's masks keep the levels as the bits of one byte"


def _bits(levels) -> int:
    return sum(1 << CODES[level.name] for level in levels)


ANYONE = _bits(level for level in LEVELS if level.anyone)
SIGNED_IN = ANYONE | _bits(level for level in LEVELS if level.signed_in)
EVERY = _bits(LEVELS)


def signed_in(user) -> bool:
    return user is not None and user.is_authenticated


# --- the query face ----------------------------------------------------------------------------------------------

def readable_by(user) -> Q:
    """The artifacts ``user`` may read, as a query (three indexed subqueries for a member)."""
    everyone = Q(visibility__in=[level.name for level in LEVELS if level.anyone])
    if not signed_in(user):
        return everyone
    if user.is_superuser:
        granted = Q(visibility__in=NAMES)
    else:
        granted = Q(owner=user) | Q(pk__in=shared_with(user).values("artifact_id"))
        for level in LEVELS:
            if level.signed_in:
                granted |= Q(visibility=level.name)
            elif level.role is not None:
                granted |= Q(visibility=level.name, owner_id__in=member_of(user, level.role))
    limit = token_limit(user)
    return everyone | (granted & limit if limit is not None else granted)


def member_of(user, role: str) -> QuerySet:
    """The accounts (``Organization.account_id``) of the organizations ``user`` has ``role`` or more in: one
    indexed subquery (``membership_user_role``)."""
    return Membership.objects.filter(user=user, role__in=roles_at_least(role)).order_by().values("org_id")  # no join


def shared_with(user) -> QuerySet:
    """The collaborator rows naming ``user`` (their ``artifact_id`` are the artifacts shared with them)."""
    return user.collaborations.through.objects.filter(user=user)


def token_limit(user) -> Q | None:
    """The artifacts a limited token may reach beyond the ``anyone`` levels (None: not limited)."""
    token = getattr(user, "hub_token", None)
    if token is None:
        return None
    if token.artifact_id is not None:
        return Q(pk=token.artifact_id) | Q(follows_id=token.artifact_id)
    if token.org_id is not None:
        return Q(owner_id=token.org_id)
    return None


# --- the index's face --------------------------------------------------------------------------------------------

class Columns(Protocol):
    """What the mask face reads of an index: one entry per position."""

    level: np.ndarray  # CODES
    owner: np.ndarray
    live: np.ndarray

    def positions(self, artifact_ids: np.ndarray) -> np.ndarray: ...

    def owned(self, accounts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The positions of each account's entries, one account after the other, and how many each has."""


def _none() -> np.ndarray:
    return np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class Reader:
    """What one person reads beyond the levels, as arrays (``reader_of``); ``user_id`` None: anyone."""

    user_id: int | None = None
    superuser: bool = False
    shared: np.ndarray = field(default_factory=_none)  # artifact ids
    orgs: np.ndarray = field(default_factory=_none)  # accounts of their organizations
    ranks: np.ndarray = field(default_factory=_none)  # their RANK in each of ``orgs``
    limit_owner: int | None = None  # a token limited to one organization's artifacts
    limit_artifacts: np.ndarray | None = None  # a token limited to one artifact and those that follow it


def reader_of(user) -> Reader:
    """``user``'s Reader: one query for a person (two indexed scans), one more for a token limited to an artifact."""
    if not signed_in(user):
        return Reader()

    def ids(rows) -> np.ndarray:
        return np.sort(np.fromiter(rows, dtype=np.int64))
    token = getattr(user, "hub_token", None)
    limit_owner = token.org_id if token is not None and token.artifact_id is None else None
    limit_artifacts = None
    if token is not None and token.artifact_id is not None:
        artifacts = token._meta.get_field("artifact").related_model.objects  # models import this module
        limit_artifacts = ids(artifacts.filter(token_limit(user)).values_list("pk", flat=True))
    if user.is_superuser:
        return Reader(user.pk, True, limit_owner=limit_owner, limit_artifacts=limit_artifacts)
    rows = list(shared_with(user).annotate(role=Value("")).values_list("artifact_id", "role").union(
        member_of(user, Role.READ).values_list("org_id", "role"), all=True))  # one query: collaborations, roles
    memberships = [(org, role) for org, role in rows if role]
    return Reader(user.pk, False, ids(artifact for artifact, role in rows if not role),
                  np.fromiter((org for org, _ in memberships), dtype=np.int64, count=len(memberships)),
                  np.fromiter((RANK[role] for _, role in memberships), dtype=np.int64, count=len(memberships)),
                  limit_owner, limit_artifacts)


def _levels_read(columns: Columns, bits: int) -> np.ndarray:
    """The entries whose level is one of ``bits``."""
    return ((np.uint8(bits) >> columns.level.view(np.uint8)) & 1).view(bool)


def visible(columns: Columns, reader: Reader) -> np.ndarray:
    """The entries of ``columns`` that ``reader`` may read: ``readable_by`` over the index. Everyone signed in
    reads the signed-in levels (one pass over the levels); only the entries of the reader's own accounts (theirs and
    their organizations') are read one by one, each with the bits of the levels the reader reads of that owner (an
    organization's member the levels of their role; the reader's own, all), so that a member of many
    organizations costs what those organizations own, not a lookup per entry."""
    if reader.user_id is None:
        return _levels_read(columns, ANYONE) & columns.live
    size = len(columns.owner)
    if reader.superuser:
        granted = np.ones(size, dtype=bool)
    else:
        granted = _levels_read(columns, SIGNED_IN)
        bits = np.zeros(len(reader.orgs) + 1, dtype=np.uint8)
        for level in LEVELS:
            if level.role is not None:
                bits[:-1][reader.ranks >= RANK[level.role]] |= 1 << CODES[level.name]
        bits[-1] = EVERY
        ordinals, lengths = columns.owned(np.append(reader.orgs, reader.user_id))
        reads = ((np.repeat(bits, lengths) >> columns.level[ordinals].view(np.uint8)) & 1).view(bool)
        granted[ordinals[reads]] = True  # an assignment, not |=: an account named twice cannot undo a grant
        granted[columns.positions(reader.shared)] = True
    if reader.limit_artifacts is not None or reader.limit_owner is not None:
        within = np.zeros(size, dtype=bool)
        within[columns.positions(reader.limit_artifacts) if reader.limit_artifacts is not None
               else columns.owned(np.array([reader.limit_owner]))[0]] = True
        granted = (granted & within) | _levels_read(columns, ANYONE)
    return granted & columns.live
