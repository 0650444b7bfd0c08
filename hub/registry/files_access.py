"""Who reads a version's bytes: the one check every byte surface calls (downloads, the archive zip, previews,
presigned URLs, the Hugging Face ``resolve``, jobs and inference inputs), beside ``readable_by`` (who reads the
record). A version's files are open, restricted (to the owner, the owning organization's members,
collaborators, grants and share links) or embargoed until a date (restricted until then, open from then on,
whether or not the periodic task (``lift_embargoes``) has changed the row yet).

Derived versions follow the strictest source: a version made from restricted files is restricted to the
readers of those files (``files_blocker``), and its record says so (``strictest_state``). One file is read as
the record is: the ``README.md`` the hub wrote from the record (``record_card``), as a gated Hugging Face
repository's card is.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from datetime import datetime

from django.db.models import Q
from django.utils import timezone

from hub.errors import HubError
from hub.metadata import written_card
from hub.registry.access import Viewer
from hub.registry.models import File, Grant, ShareLink, Version

audit = logging.getLogger("hub.audit")

SHARE_PARAM = "share"  # ?share=<token> on a download URL
SHARE_HEADER = "X-Share-Token"  # or this header (clients)
CARRIES_BYTES = ("converted_from", "derived_from", "merged_from")
MAX_SOURCE_DEPTH = 8  # how far up the provenance chain the strictest-source rule looks


def files_state(version: Version, now: datetime | None = None) -> str:
    """``open``, ``restricted`` or ``embargoed`` as of ``now``: an embargo past its date is open already."""
    state = version.files_access
    if state == Version.FilesAccess.EMBARGOED and version.embargo_until <= (now or timezone.now()):
        return Version.FilesAccess.OPEN
    return state


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_share_token() -> str:
    """A fresh secret for a share link (only its sha256 is stored)."""
    return "hfs_" + secrets.token_urlsafe(32)


def share_link_for(version: Version, token: str | None) -> ShareLink | None:
    """The live share link to ``version`` that ``token`` opens, or None."""
    if not token or len(token) > 200:
        return None
    now = timezone.now()
    return (ShareLink.objects.filter(version=version, token_sha256=token_hash(token), revoked_at__isnull=True)
            .filter(Q(expires__isnull=True) | Q(expires__gt=now)).first())


def has_grant(user, artifact_id: int) -> bool:
    """``user`` holds a live grant on the artifact (not revoked, not expired)."""
    if user is None or not user.is_authenticated:
        return False
    now = timezone.now()
    return (Grant.objects.filter(artifact_id=artifact_id, user=user, revoked_at__isnull=True)
            .filter(Q(expires__isnull=True) | Q(expires__gt=now)).exists())


def _own_files(user, version: Version, share_token: str | None) -> bool:
    if files_state(version) == Version.FilesAccess.OPEN:
        return True
    if share_token and share_link_for(version, share_token) is not None:
        return True
    if user is None or not user.is_authenticated:
        return False
    return version.artifact.role_of(user) >= 1 or has_grant(user, version.artifact_id)


def files_blocker(user, version: Version, share_token: str | None = None) -> Version | None:
    """The version whose files keep ``user`` (or whoever holds ``share_token``) from ``version``'s bytes:
    ``version`` itself, or a source it was made from (the strictest-source rule); None when they may read them.
    A share link opens its own version only, not its sources."""
    if not _own_files(user, version, share_token):
        return version
    return _source_blocker(user, version, 0)


def _source_blocker(user, version: Version, depth: int) -> Version | None:
    if depth >= MAX_SOURCE_DEPTH:
        return None
    for source in _sources(version):
        if not _own_files(user, source, None):
            return source
        if (blocker := _source_blocker(user, source, depth + 1)) is not None:
            return blocker
    return None


def _sources(version: Version) -> list[Version]:
    """What ``version`` was made from, whose files it carries or transforms (the relations the hub's jobs
    write: conversions, optimisations, fine-tunes, merges, inference outputs); a prefetch of
    ``provenance__target`` is used. ``trained_on`` and ``revision_of`` carry no bytes of their target."""
    return [link.target for link in version.provenance.all() if link.relation in CARRIES_BYTES]


def may_read_files(user, version: Version, share_token: str | None = None) -> bool:
    """May ``user`` (or whoever holds ``share_token``) read ``version``'s bytes? The caller has checked that
    the record itself is readable (``readable_by``); this is the files' rule on top, the one every byte surface
    calls."""
    return files_blocker(user, version, share_token) is None


def record_card(file: File) -> bool:
    """Is ``file`` the ``README.md`` the hub wrote from its version's metadata (``hub.metadata.written_card``)?
    Its bytes say only what the open record says, so whoever reads the record reads it, restricted files or
    not: harvesters (F-UJI) and the Hugging Face client find a card they can read beside the closed files."""
    return file.path == written_card.NAME and written_card.is_written((file.version.metadata or {}).get("card") or "")


def strictest_state(version: Version, depth: int = 0) -> tuple[str, datetime | None]:
    """The files access a version's record states: its own, or a stricter one of a source it was made from
    (restricted over embargoed over open; of embargoes, the latest date)."""
    state = files_state(version)
    if state == Version.FilesAccess.RESTRICTED or depth >= MAX_SOURCE_DEPTH:
        return state, None
    until = version.embargo_until if state == Version.FilesAccess.EMBARGOED else None
    for source in _sources(version):
        theirs, their_until = strictest_state(source, depth + 1)
        if theirs == Version.FilesAccess.RESTRICTED:
            return theirs, None
        if theirs == Version.FilesAccess.EMBARGOED:
            state, until = theirs, max(filter(None, (until, their_until)))
    return state, until


def request_share_token(request) -> str | None:
    """The share token a request carries (``?share=`` or ``X-Share-Token``)."""
    token = request.headers.get(SHARE_HEADER) or request.GET.get(SHARE_PARAM)
    return token or None


def how_to_request(version: Version, blocker: Version | None = None, user=None) -> str:
    """The sentences a refusal says: why the files of ``version`` are closed (``blocker``: the version whose
    files close them, itself or a source) and how to ask for them."""
    blocker = blocker or version
    when = ""
    if files_state(blocker) == Version.FilesAccess.EMBARGOED:
        when = f" They are embargoed until {blocker.embargo_until.date().isoformat()} and open by themselves then."
    if blocker.pk != version.pk:
        if not Viewer(user).readable([blocker.artifact]):
            return (f"The files of {version} were made from a restricted source; only its readers may have "
                    "them. Ask the owner of this version.")
        return (f"The files of {version} were made from {blocker}, whose files are restricted: the hub's "
                f"derivatives follow their strictest source.{when} Ask for access to it with "
                f"`hpcfair request-access {blocker.artifact.full_name}`.")
    name = version.artifact.full_name
    return (f"The files of {version} are restricted: its metadata is open, its files are for those the owner "
            f"grants access.{when} Ask for access with `hpcfair request-access {name}` (or POST "
            f"/api/v1/artifacts/{name}/access-requests with a purpose); a share link from the owner opens "
            "them too.")


def require_files(request, version: Version, *, code: str = "access_restricted") -> None:
    """Raise the coded 403 ``code`` (``GatedRepo`` on the Hugging Face routes) unless the request may read the
    bytes of ``version``; before any byte, ETag or presigned URL."""
    user = request.user if request.user.is_authenticated else None
    require_files_of(user, version, request_share_token(request), code=code)


def require_files_of(user, version: Version, share_token: str | None = None, *,
                     code: str = "access_restricted") -> None:
    """``require_files`` for a user without a request: jobs and inference on ``version``."""
    user = user if user is not None and user.is_authenticated else None
    blocker = files_blocker(user, version, share_token)
    if blocker is not None:
        raise HubError(code, how_to_request(version, blocker, user), files_access=files_state(blocker),
                       request_access=f"/api/v1/artifacts/{blocker.artifact.full_name}/access-requests")


def lift_embargoes(now: datetime | None = None) -> int:
    """Open every version whose embargo date has passed; one ``hub.audit`` line each. Returns how many."""
    now = now or timezone.now()
    due = list(Version.objects.filter(files_access=Version.FilesAccess.EMBARGOED, embargo_until__lte=now)
               .select_related("artifact__owner"))
    lifted = 0
    for version in due:
        changed = Version.objects.filter(pk=version.pk, files_access=Version.FilesAccess.EMBARGOED).update(
            files_access=Version.FilesAccess.OPEN)
        if changed:
            lifted += 1
            audit.info("embargo lifted: %s (embargoed until %s); its files are open", version,
                       version.embargo_until.isoformat())
    return lifted
