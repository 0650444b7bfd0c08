"""API tokens: stored hashed, shown once, with a read or write scope."""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone

TOKEN_PREFIX = "hpcf_"  # noqa: S105 - a prefix, not a secret


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiToken(models.Model):
    """A bearer token. ``write`` implies ``read``."""

    class Scope(models.TextChoices):
        READ = "read"
        WRITE = "write"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True)
    key_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=16, help_text="First characters of the token, to recognise it.")
    scope = models.CharField(max_length=8, choices=Scope.choices, default=Scope.READ)
    created = models.DateTimeField(default=timezone.now)
    last_used = models.DateTimeField(null=True, blank=True)
    revoked = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user}, {self.scope})"

    @classmethod
    def issue(cls, user, scope: str = Scope.READ, name: str = "") -> tuple[ApiToken, str]:
        """Create a token; returns the row and the raw token (the only time it is known)."""
        raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = cls.objects.create(
            user=user, name=name, scope=scope, key_hash=hash_token(raw), prefix=raw[:12]
        )
        return token, raw

    @property
    def can_write(self) -> bool:
        return self.scope == self.Scope.WRITE

    @classmethod
    def revoke(cls, user, pk: int) -> bool:
        """Revoke one of ``user``'s active tokens; False if there is none with that number.

        Saved, not bulk-updated, so that ``post_save`` tells the gateway's caches (``hub.gateway.memory``)."""
        token = cls.objects.filter(user=user, pk=pk, revoked__isnull=True).first()
        if token is None:
            return False
        token.revoked = timezone.now()
        token.save(update_fields=["revoked"])
        return True


class LoginFailures(models.Model):
    """Wrong passwords counted for one account (``account:<username>``) or one client address
    (``address:<ip>``); see ``hub.accounts.throttle``."""

    key = models.CharField(max_length=200, unique=True)
    failures = models.PositiveIntegerField(default=0)
    last_failure = models.DateTimeField()
    locked_until = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.key}: {self.failures}"
