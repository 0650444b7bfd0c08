"""API tokens: stored hashed, shown once, with a scope (read < infer < publish < admin; the old ``write`` is
admin, so tokens made before scopes were fine-grained keep doing what they did), optionally limited to one
organization or one artifact, and an expiry; the identities a person signs in with at the site (OpenID Connect,
LDAP); the device grant's codes and refresh tokens (``hub.accounts.device``)."""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

TOKEN_PREFIX = "hpcf_"  # noqa: S105 - a prefix, not a secret


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiToken(models.Model):
    """A bearer token. Each scope includes the ones below it (``SCOPE_RANK``)."""

    class Scope(models.TextChoices):
        READ = "read"  # safe methods only
        INFER = "infer"  # also runs inference and generation (jobs billed to its person), cancels own jobs
        PUBLISH = "publish"  # also creates artifacts, publishes versions, uploads, converts, edits descriptions
        ADMIN = "admin"  # also visibility, collaborators, deletion, transfer, organization members
        WRITE = "write"  # before fine-grained scopes: everything, as admin

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True)
    key_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=16, help_text="First characters of the token, to recognise it.")
    scope = models.CharField(max_length=8, choices=Scope.choices, default=Scope.READ)
    org = models.ForeignKey("orgs.Organization", on_delete=models.CASCADE, null=True, blank=True,
                            related_name="tokens", help_text="Limited to this organization's artifacts.")
    artifact = models.ForeignKey("registry.Artifact", on_delete=models.CASCADE, null=True, blank=True,
                                 related_name="tokens", help_text="Limited to this artifact.")
    created = models.DateTimeField(default=timezone.now)
    last_used = models.DateTimeField(null=True, blank=True)
    revoked = models.DateTimeField(null=True, blank=True)
    # None: never (tokens made before expiry existed); new ones get hub.accounts.expiry's default.
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]
        constraints = [models.CheckConstraint(condition=Q(org__isnull=True) | Q(artifact__isnull=True),
                                              name="token_one_limit")]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user}, {self.scope})"

    @classmethod
    def issue(cls, user, scope: str = Scope.READ, name: str = "", expires_at=None, org=None,
              artifact=None) -> tuple[ApiToken, str]:
        """Create a token; returns the row and the raw token (the only time it is known)."""
        raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = cls.objects.create(
            user=user, name=name, scope=scope, key_hash=hash_token(raw), prefix=raw[:12], expires_at=expires_at,
            org=org, artifact=artifact,
        )
        return token, raw

    def allows(self, scope: str) -> bool:
        """Whether this token's scope includes ``scope``."""
        return SCOPE_RANK[self.scope] >= SCOPE_RANK[scope]

    @property
    def limited(self) -> bool:
        return self.org_id is not None or self.artifact_id is not None

    @property
    def limit(self) -> str:
        """What it is limited to, in words ('' for none)."""
        if self.artifact_id is not None:
            return f"artifact {self.artifact.full_name}"
        if self.org_id is not None:
            return f"organization {self.org.slug}"
        return ""

    @property
    def expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()

    @property
    def can_write(self) -> bool:
        """Publishes (the old question, kept for callers that ask it)."""
        return self.allows(self.Scope.PUBLISH)

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


SCOPE_RANK = {"read": 0, "infer": 1, "publish": 2, "admin": 3, "write": 3}


class LoginFailures(models.Model):
    """Wrong passwords counted for one account (``account:<username>``) or one client address
    (``address:<ip>``); see ``hub.accounts.throttle``."""

    key = models.CharField(max_length=200, unique=True)
    failures = models.PositiveIntegerField(default=0)
    last_failure = models.DateTimeField()
    locked_until = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.key}: {self.failures}"


class ExternalIdentity(models.Model):
    """Who a person is at the site's identity provider: an OpenID Connect issuer and subject, or an LDAP server
    and DN. A later sign-in finds the person by it (never by a username, which an IdP may hand out again)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="identities")
    issuer = models.CharField(max_length=300, help_text="The OIDC issuer URL, or ldap: and the server URI.")
    subject = models.CharField(max_length=300, help_text="The OIDC 'sub' claim, or the LDAP DN.")
    orcid = models.CharField(max_length=40, blank=True)
    created = models.DateTimeField(default=timezone.now)
    last_signed_in = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="identity_issuer_subject")]

    def __str__(self) -> str:
        return f"{self.user} at {self.issuer}"


class DeviceAuthorization(models.Model):
    """One RFC 8628 device authorization: the CLI holds the device code (stored hashed), a person types the
    user code on the verification page and approves or denies it."""

    class State(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        DENIED = "denied"
        USED = "used"  # exchanged for tokens; the device code works no more

    device_code_hash = models.CharField(max_length=64, unique=True)
    user_code = models.CharField(max_length=9, unique=True)  # XXXX-XXXX
    client_id = models.CharField(max_length=100)
    scope = models.CharField(max_length=8, choices=ApiToken.Scope.choices, default=ApiToken.Scope.WRITE)
    state = models.CharField(max_length=8, choices=State.choices, default=State.PENDING)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE)
    created = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    interval = models.PositiveIntegerField()  # seconds; raised by 5 on every slow_down (RFC 8628 3.5)
    last_polled = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.user_code} ({self.state})"


class RefreshToken(models.Model):
    """A refresh token of the device grant, used once: a refresh answers a new access token and a new refresh
    token, and revokes the old access token."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="refresh_tokens")
    key_hash = models.CharField(max_length=64, unique=True)
    access = models.ForeignKey(ApiToken, null=True, on_delete=models.SET_NULL, related_name="+")
    client_id = models.CharField(max_length=100)
    scope = models.CharField(max_length=8, choices=ApiToken.Scope.choices)
    created = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    used = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"refresh of {self.user} ({self.scope})"
