"""The synchronous path without database queries: per web process, tokens and model resolutions are
remembered while the registry's generation (``Lane.generation``) stays the same, and for at most
``TTL_S`` seconds. Every save or delete of a token, user, artifact, collaborator list, version, file or
provenance link bumps the generation after its transaction commits, so a revoked token or a deleted
or newly private model is never served from memory. (Changes made with raw SQL, outside Django,
are seen after ``TTL_S`` at most.)"""

from __future__ import annotations

import threading
import time
from typing import Any

from django.db import transaction
from django.db.models.signals import m2m_changed, post_delete, post_save
from rest_framework.authentication import get_authorization_header

from hub.accounts.auth import BearerTokenAuthentication
from hub.gateway.lane import get_lane

TTL_S = 60.0


class Memory:
    """Answers valid for one generation of the registry."""

    def __init__(self) -> None:
        self.generation: bytes | None = None
        self.entries: dict[tuple, tuple[float, Any]] = {}
        self.lock = threading.Lock()

    def sync(self) -> None:
        """Forget everything when the registry changed; called once per request."""
        current = get_lane().generation()
        if current != self.generation:
            with self.lock:
                self.entries.clear()
                self.generation = current

    def get(self, key: tuple) -> Any:
        found = self.entries.get(key)
        if found is None or found[0] < time.monotonic():
            return None
        return found[1]

    def put(self, key: tuple, value: Any) -> None:
        with self.lock:
            if len(self.entries) > 10_000:
                self.entries.clear()
            self.entries[key] = (time.monotonic() + TTL_S, value)


memory = Memory()


class CachedBearerAuthentication(BearerTokenAuthentication):
    """Bearer tokens checked against the database once per generation (and per ``TTL_S``)."""

    def authenticate(self, request):
        memory.sync()
        header = get_authorization_header(request)
        key = ("token", header)
        found = memory.get(key) if header else None
        if found is not None:
            return found
        result = super().authenticate(request)
        if result is not None:
            memory.put(key, result)
        return result


def remembered(key: tuple, compute):
    """``compute()``, remembered under ``key`` for this generation."""
    found = memory.get(key)
    if found is None:
        found = compute()
        memory.put(key, found)
    return found


def bump(**kwargs) -> None:
    transaction.on_commit(get_lane().bump)


def connect() -> None:
    from django.contrib.auth import get_user_model

    from hub.accounts.models import ApiToken
    from hub.registry.models import Artifact, File, ProvenanceLink, Version

    for model in (ApiToken, get_user_model(), Artifact, Version, File, ProvenanceLink):
        post_save.connect(bump, sender=model, dispatch_uid=f"gateway.bump.save.{model.__name__}")
        post_delete.connect(bump, sender=model, dispatch_uid=f"gateway.bump.delete.{model.__name__}")
    m2m_changed.connect(bump, sender=Artifact.collaborators.through, dispatch_uid="gateway.bump.collaborators")
