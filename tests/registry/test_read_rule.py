"""The read rule's two faces agree (``hub.registry.rule``): over random people x records (levels, owners that are
people or organizations, memberships of every role, collaborators, deleted records, superusers, tokens limited to
an organization or an artifact and its followers), the query (``readable_by``) and the index's mask (``visible``,
over the search index's real columns, as ``hub.search.index_copy`` loads them) pick the same records: 0
differences. The privacy matrices check each surface; this checks that the rule is one."""

from __future__ import annotations

import random

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.db.models import Q
from django.utils import timezone

from hub.accounts.models import ApiToken
from hub.orgs.models import Membership, Organization, Role
from hub.registry import rule
from hub.registry.models import Artifact
from hub.search import index_copy
from hub.search.models import SearchEntry

pytestmark = pytest.mark.django_db


def _world(rng: random.Random) -> tuple[list, list[Organization], list[Artifact]]:
    User = get_user_model()
    people = [User.objects.create(username=f"p{i}", is_superuser=i == 0) for i in range(10)]
    orgs = [Organization.objects.create(account=User.objects.create(username=f"org{i}"), title=f"o{i}")
            for i in range(4)]
    Membership.objects.bulk_create([Membership(org=org, user=person, role=rng.choice(Role.values))
                                    for org in orgs for person in people[1:] if rng.random() < 0.4])
    owners = people[1:] + [org.account for org in orgs]
    artifacts = Artifact.objects.bulk_create([
        Artifact(kind="model", owner=rng.choice(owners), name=f"a{i}", pid=f"ark:/99999/t{i}",
                 visibility=rng.choice(rule.NAMES), deleted_at=timezone.now() if rng.random() < 0.1 else None)
        for i in range(120)])
    for artifact in artifacts:
        if rng.random() < 0.2:
            artifact.collaborators.set(rng.sample(people[1:], rng.randint(1, 3)))
        if rng.random() < 0.1:
            artifact.follows = rng.choice(artifacts)
            artifact.save(update_fields=["follows"])
    SearchEntry.objects.bulk_create([  # the index's columns, as the registry's signals keep them
        SearchEntry(artifact=a, kind=a.kind, visibility=a.visibility, owner_id=a.owner_id, title=a.name,
                    updated=timezone.now(), live=a.deleted_at is None) for a in artifacts])
    return people, orgs, artifacts


def _readers(rng: random.Random, people: list, orgs: list[Organization], artifacts: list[Artifact]) -> list:
    readers = [None, AnonymousUser(), *people, *(org.account for org in orgs)]
    for person in rng.sample(people, 6):  # the same person behind a limited token
        limited = get_user_model().objects.get(pk=person.pk)
        limit = {"org_id": rng.choice(orgs).pk} if rng.random() < 0.5 else {"artifact_id": rng.choice(artifacts).pk}
        limited.hub_token = ApiToken(user=limited, **limit)
        readers.append(limited)
    return readers


@pytest.mark.parametrize("seed", range(4))
def test_the_query_and_the_mask_pick_the_same_records(seed):
    rng = random.Random(seed)
    people, orgs, artifacts = _world(rng)
    snapshot = index_copy.load(Q())  # every entry, live or not
    assert snapshot.size == len(artifacts)
    differences, compared = [], 0
    for user in _readers(rng, people, orgs, artifacts):
        by_query = set(Artifact.objects.live().filter(rule.readable_by(user)).values_list("pk", flat=True))
        by_mask = set(snapshot.ids[rule.visible(snapshot, rule.reader_of(user))].tolist())
        compared += len(artifacts)
        if by_query != by_mask:
            differences.append((getattr(user, "username", None), sorted(by_query ^ by_mask)))
    assert compared >= 20 * len(artifacts)
    assert differences == []


def test_a_superuser_reads_every_level_in_both_faces():
    """The query face once gave a superuser the public level only (``Q() | x`` is ``x``), where the mask gave all."""
    people, _, artifacts = _world(random.Random(9))
    live = {a.pk for a in artifacts if a.deleted_at is None}
    assert set(Artifact.objects.live().filter(rule.readable_by(people[0])).values_list("pk", flat=True)) == live
