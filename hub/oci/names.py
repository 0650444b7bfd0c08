"""Repositories: which artifact ``owner/name`` names, and who may pull from or push to a repository.

A repository named like a live artifact reads as that artifact does (``readable_by``) and takes pushes from its
writers; any other repository belongs to its first path segment's user (``alice/anything``): only they, and
superusers, pull from it or push to it."""

from __future__ import annotations

import re

from hub.oci.errors import OciError
from hub.registry.models import Artifact
from hub.registry.rule import readable_by, token_limit

# The specification's name grammar, with capitals allowed (hub names may have them; lookups ignore case).
NAME_RE = re.compile(r"[A-Za-z0-9]+(?:(?:\.|_|__|-+)[A-Za-z0-9]+)*(?:/[A-Za-z0-9]+(?:(?:\.|_|__|-+)[A-Za-z0-9]+)*)*")
TAG_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")
DIGEST_RE = re.compile(r"sha256:([0-9a-f]{64})")


def check_name(repository: str) -> str:
    """``repository`` if it is a valid name (at most 255 characters), else ``NAME_INVALID``."""
    if len(repository) > 255 or not NAME_RE.fullmatch(repository):
        raise OciError("NAME_INVALID", f"{repository[:100]!r} is not a repository name: lowercase path "
                                       "components such as owner/name, separated by '/'.")
    return repository


def parse_digest(text: str) -> str | None:
    """The hex of a ``sha256:<64 hex>`` digest, or None for anything else (a tag)."""
    match = DIGEST_RE.fullmatch(text)
    return match.group(1) if match else None


def require_digest(text: str) -> str:
    """The hex of ``text``, or ``DIGEST_INVALID`` (only sha256 digests are stored)."""
    hex_digest = parse_digest(text or "")
    if hex_digest is None:
        raise OciError("DIGEST_INVALID", f"{(text or '')[:80]!r} is not a digest this registry knows: "
                                         "sha256:<64 lowercase hex digits>.")
    return hex_digest


def artifact_of(repository: str) -> Artifact | None:
    """The live artifact ``owner/name`` (case ignored), whoever asks."""
    parts = repository.split("/")
    if len(parts) != 2:
        return None
    return (Artifact.objects.live().select_related("owner")
            .filter(owner__username__iexact=parts[0], name__iexact=parts[1]).order_by("pk").first())


def _namespace_owner(user, repository: str) -> bool:
    """Whether ``user`` owns the namespace of a repository that is no artifact; a token limited to an organization
    or an artifact reaches no such repository."""
    return user is not None and user.is_authenticated and token_limit(user) is None and (
        user.is_superuser or repository.split("/", 1)[0].lower() == user.username.lower())


def may_pull(user, repository: str, artifact: Artifact | None) -> bool:
    """Whether ``user`` (None: anonymous) may read ``repository``."""
    if artifact is not None:
        if artifact.is_public:
            return True
        who = user if user is not None and user.is_authenticated else None
        return who is not None and Artifact.objects.filter(pk=artifact.pk).filter(readable_by(who)).exists()
    return _namespace_owner(user, repository)


def may_push(user, repository: str, artifact: Artifact | None) -> bool:
    """Whether ``user`` may push to ``repository`` (a writer of its artifact, or the namespace's owner)."""
    if user is None or not user.is_authenticated:
        return False
    if artifact is not None:
        return artifact.can_write(user)  # a superuser's role too, within a limited token's reach
    return _namespace_owner(user, repository)
