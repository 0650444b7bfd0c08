"""The per-process memory of the synchronous path, so that it needs no database query: tokens, model
resolutions and the express path's grants are remembered for one generation of the registry
(``hub.gateway.presence``), and for at most ``TTL_S`` seconds.

Every save or delete of a token, user, artifact, collaborator list, version, file or provenance link
bumps the generation after its transaction commits. A request uses remembered answers tentatively and
sends the generation they belong to with its call; the channel sends it only if that generation is still
current (against the one this process heard announced: ``hub.gateway.channel``), else answers ``Stale``
and the view authenticates and resolves again from the database (``hub.gateway.pipeline.retry_when_stale``).
Requests that start jobs check the generation first. So a revoked token or a deleted or newly private model
is never acted on from memory. (Changes made with raw SQL, outside Django, or while the broker was
unreachable, are seen after ``TTL_S`` at most.)

A *grant* (``grant``/``granted``) is the express path's permission: this bearer token ran this model
(owner, name, version, file) synchronously through Django and was answered 200 in this generation."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from django.db import transaction
from django.db.models.signals import m2m_changed, post_delete, post_save
from rest_framework.authentication import get_authorization_header

from hub.accounts.auth import BearerTokenAuthentication
from hub.accounts.models import ApiToken
from hub.errors import HubError
from hub.gateway.presence import Stale, get_presence
from hub.gateway.protocol import ModelRef

TTL_S = 60.0
log = logging.getLogger(__name__)


class Memory:
    """Answers valid for one generation of the registry."""

    def __init__(self) -> None:
        self.generation: bytes | None = None
        self.entries: dict[tuple, tuple[float, Any]] = {}
        self.lock = threading.Lock()

    def reset(self, generation: bytes) -> None:
        with self.lock:
            self.entries.clear()
            self.generation = generation

    def ensure(self) -> None:
        """Learn the generation before the first answer is remembered."""
        if self.generation is None:
            self.reset(get_presence().generation())

    def validate(self) -> None:
        """Raise ``Stale`` when the registry changed since the remembered answers were made."""
        current = get_presence().generation()
        if current != self.generation:
            raise Stale(current)

    def get(self, key: tuple) -> Any:
        found = self.entries.get(key)
        if found is None or found[0] < time.monotonic():
            return None
        return found[1]

    def put(self, key: tuple, value: Any, generation: bytes | None = None) -> None:
        """Remember ``value``; given the ``generation`` it was made in, only if that is still the current one."""
        with self.lock:
            if generation is not None and generation != self.generation:
                return
            if len(self.entries) > 10_000:
                self.entries.clear()
            self.entries[key] = (time.monotonic() + TTL_S, value)


answers = Memory()  # this process's remembered answers


class CachedBearerAuthentication(BearerTokenAuthentication):
    """Bearer tokens checked against the database once per generation (and per ``TTL_S``)."""

    def authenticate(self, request):
        answers.ensure()
        generation = answers.generation  # read first: an answer found later is at least this recent
        request._request.hub_generation = generation
        header = get_authorization_header(request)
        key = ("token", header)
        found = answers.get(key) if header else None
        if found is not None and not found[1].expired:  # an expired token is refused by the database path
            return found
        result = super().authenticate(request)
        if result is not None:
            answers.put(key, result, generation)
        return result


def who(user) -> tuple:
    """The part of a remembered answer's key that says who asked: the person, and a limited token's own number
    (what a limited token reads differs from what its person reads)."""
    token = getattr(user, "hub_token", None)
    return (user.pk, token.pk if token is not None and token.limited else None)


def remembered(key: tuple, compute):
    """``compute()``, remembered under ``key`` for this generation."""
    generation = answers.generation
    found = answers.get(key)
    if found is None:
        found = compute()
        answers.put(key, found, generation)
    return found


def refresh(request, generation: bytes) -> None:
    """After ``Stale``: forget, then authenticate the request again from the database."""
    answers.reset(generation)
    request._request.hub_generation = generation
    header = get_authorization_header(request)
    if not header:
        return
    result = BearerTokenAuthentication().authenticate(request)
    if result is not None:
        answers.put(("token", header), result, generation)
        request.user, request.auth = result


def _grant_key(authorization: str, owner: str, name: str, version: str, file: str) -> tuple:
    return ("express", authorization, owner, name, version, file)


def grant(request, owner: str, name: str, version: str, file: str, model: ModelRef) -> None:
    """Remember that this bearer token may run ``model`` as named, for the generation it was checked in."""
    generation = getattr(request._request, "hub_generation", None)
    authorization = request.META.get("HTTP_AUTHORIZATION", "")
    if generation is None or not isinstance(request.auth, ApiToken) or not authorization:
        return
    answers.put(_grant_key(authorization, owner, name, version, file), (generation, model, request.user.pk),
                generation)


def granted(authorization: str, owner: str, name: str, version: str,
            file: str) -> tuple[bytes, ModelRef, int] | None:
    """(the generation of the grant, the model, the person's id) when this token was granted the model as named."""
    return answers.get(_grant_key(authorization, owner, name, version, file))


def bump(**kwargs) -> None:
    transaction.on_commit(_announce_change)


def _announce_change() -> None:
    """Bump the generation; with the broker unreachable, a save that has committed already does not fail:
    nothing can run meanwhile, and remembered answers expire within ``TTL_S`` of it coming back."""
    try:
        get_presence().bump()
    except HubError:
        log.warning("the gateway's Redis is unreachable: a registry change was not announced; web processes "
                    "forget their remembered answers within %g s", TTL_S)


def connect() -> None:
    from django.contrib.auth import get_user_model

    from hub.accounts.models import ApiToken
    from hub.orgs.models import Membership, Organization
    from hub.registry.models import Artifact, File, ProvenanceLink, Version

    for model in (ApiToken, get_user_model(), Artifact, Version, File, ProvenanceLink, Membership, Organization):
        post_save.connect(bump, sender=model, dispatch_uid=f"gateway.bump.save.{model.__name__}")
        post_delete.connect(bump, sender=model, dispatch_uid=f"gateway.bump.delete.{model.__name__}")
    m2m_changed.connect(bump, sender=Artifact.collaborators.through, dispatch_uid="gateway.bump.collaborators")
