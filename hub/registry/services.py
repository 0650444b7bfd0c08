"""Registry operations that span several rows and the object store.

Writes follow one order so that a failure leaves nothing behind: validate everything first, then in
one transaction create the rows and put the blobs into the store; if anything fails, the
transaction rolls back and blobs that this call newly stored (and no row references) are removed.
"""

from __future__ import annotations

import hashlib
import logging
import mimetypes
import re
import shutil
import tempfile
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from django.db import IntegrityError, transaction
from django.utils import timezone

from hub.errors import HubError
from hub.metadata import written_card
from hub.metadata.derive import CARD_NAMES, FileInfo
from hub.metadata.services import prepare
from hub.registry import lineage, pids, references
from hub.registry.models import (
    LABEL_RE,
    RESERVED_LABELS,
    Artifact,
    Blob,
    File,
    ProvenanceLink,
    Upload,
    Version,
)
from hub.registry.signals import artifact_changed, version_published
from hub.registry.uploads import StagedFile, upload_dir
from hub.storage import StorageUnavailable, get_blob_store

log = logging.getLogger(__name__)
audit = logging.getLogger("hub.audit")

MEDIA_TYPES = {
    ".onnx": "application/onnx",
    ".npy": "application/x-npy",
    ".npz": "application/x-npz",
    ".pt": "application/x-pytorch",
    ".pt2": "application/x-pytorch",
    ".keras": "application/x-keras",
    ".h5": "application/x-hdf5",
    ".pkl": "application/x-pickle",
    ".joblib": "application/x-pickle",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".md": "text/markdown",
    ".csv": "text/csv",
    ".parquet": "application/vnd.apache.parquet",
}
_BAD_PATH_CHARS = re.compile(r"[\x00-\x1f\x7f\\]")
MAX_METADATA_BYTES = 1024 * 1024


def media_type_for(path: str) -> str:
    lower = path.lower()
    for suffix, media_type in MEDIA_TYPES.items():
        if lower.endswith(suffix):
            return media_type
    return mimetypes.guess_type(lower)[0] or "application/octet-stream"


def clean_path(path: str) -> str:
    """A safe relative POSIX path inside a version, or a 400 that says what is wrong."""
    original = path
    path = (path or "").strip()
    if not path:
        raise HubError("invalid_path", "A file needs a name.")
    if len(path) > 1024:
        raise HubError("invalid_path", "File paths are at most 1024 characters.")
    if _BAD_PATH_CHARS.search(path):
        raise HubError("invalid_path", f"File path {original!r} has a backslash or a control character.")
    if path.startswith("/"):
        raise HubError("invalid_path", f"File path {original!r} must be relative (no leading '/').")
    parts = path.split("/")
    if any(part in {"", ".", ".."} for part in parts):
        raise HubError("invalid_path", f"File path {original!r} has an empty, '.' or '..' segment.")
    return path


def distinct_paths(paths: Iterable[str]) -> None:
    """Refuse (``invalid_path``) paths that one file system would lay out as one file: the same path, the same
    after case folding and Unicode normalisation (``Data.csv`` and ``data.csv``, ``é`` in NFC and NFD: one file on
    macOS, Windows and many shares), or a file on a path that another file's folder takes."""
    seen: dict[str, str] = {}
    for path in paths:
        key = unicodedata.normalize("NFC", path).casefold()
        if key in seen:
            raise HubError("invalid_path", f"Two files share the path {path!r}." if seen[key] == path else
                           f"{seen[key]!r} and {path!r} differ only in case or Unicode normalisation, so they would "
                           "be one file on many file systems; rename one.")
        seen[key] = path
    for key, path in seen.items():
        folder = key.rpartition("/")[0]
        while folder:
            if folder in seen:
                raise HubError("invalid_path", f"{seen[folder]!r} is a file and a folder of {path!r}; rename one.")
            folder = folder.rpartition("/")[0]


def content_digest(sha256s: Iterable[str]) -> str:
    """The identity of a version's content: independent of file names and order."""
    return hashlib.sha256("\n".join(sorted(sha256s)).encode()).hexdigest()


def _mint_unique() -> str:
    for _ in range(20):
        pid = pids.mint()
        if not Artifact.objects.filter(pid=pid).exists() and not Version.objects.filter(pid=pid).exists():
            return pid
    raise RuntimeError("could not mint a unique PID in 20 tries; lengthen the blade")


# --- artifacts ------------------------------------------------------------------------------------


def create_artifact(owner, *, kind: str, name: str, title: str = "", description: str = "",
                    visibility: str = Artifact.Visibility.PUBLIC, collaborators: Iterable = (),
                    follows: Artifact | None = None) -> Artifact:
    """A new artifact; with ``follows`` (a hub-made artifact carrying another's bytes) it takes that artifact's
    visibility and collaborators, whatever is given, and keeps following them (``update_artifact``)."""
    if Artifact.objects.live().filter(owner=owner, name=name).exists():
        raise HubError("already_exists", f"You already have an artifact named {owner.username}/{name}.")
    if follows is not None:
        visibility, collaborators = follows.visibility, list(follows.collaborators.all())
    check_visibility(owner, visibility)
    try:
        with transaction.atomic():
            artifact = Artifact.objects.create(
                owner=owner, kind=kind, name=name, title=title or name, description=description,
                visibility=visibility, pid=_mint_unique(), follows=follows,
            )
            artifact.collaborators.set(collaborators)
            artifact_changed.send(sender=Artifact, artifact=artifact)
    except IntegrityError:
        raise HubError("already_exists", f"You already have an artifact named {owner.username}/{name}.")
    return artifact


def update_artifact(artifact: Artifact, changes: dict[str, Any], collaborators: Iterable | None = None, *,
                    by: str = "") -> Artifact:
    """Set ``title``, ``description`` and ``visibility`` from ``changes``, and the collaborators when given; the
    artifacts that follow this one take the same visibility and collaborators, and public artifacts derived from
    it become private when it does (``withdraw_derivatives``). An artifact that follows another cannot be given
    its own visibility, nor can one derived from a private or deleted source be public (409
    ``follows_source``)."""
    if "visibility" in changes:
        check_visibility(artifact.owner, changes["visibility"])
    if changes.get("visibility", "private") != "private" and artifact.follows_id is None and (
            hidden := withheld_sources(artifact, changes["visibility"])):
        raise HubError("follows_source", f"{artifact.full_name} carries what its versions were derived or merged "
                                         f"from, and {hidden[0]} is private or deleted, or less open: it can be "
                                         f"{changes['visibility']} only when every such source is at least as open.")
    if artifact.follows_id is not None and ("visibility" in changes or collaborators is not None):
        source = artifact.follows
        if changes.get("visibility", artifact.visibility) != source.visibility or (
                collaborators is not None and set(collaborators) != set(source.collaborators.all())):
            raise HubError("follows_source", f"{artifact.full_name} was made by the hub from {source.full_name} and "
                                             f"carries its files: it has {source.full_name}'s visibility and "
                                             "collaborators. Change them there.")
    before = artifact.visibility
    with transaction.atomic():
        for field in ("title", "description", "visibility"):
            if field in changes:
                setattr(artifact, field, changes[field])
        if artifact.visibility != before:
            audit.info("visibility %s: %s -> %s by %s", artifact.full_name, before, artifact.visibility,
                       by or "its owner")
        artifact.save()
        if collaborators is not None:
            artifact.collaborators.set(collaborators)
        artifact_changed.send(sender=Artifact, artifact=artifact)
        if "visibility" in changes or collaborators is not None:
            shared = list(artifact.collaborators.all())
            for follower in artifact.followers.filter(deleted_at__isnull=True):
                update_artifact(follower, {"visibility": artifact.visibility}, shared)
        if "visibility" in changes and artifact.visibility != Artifact.Visibility.PUBLIC:
            withdraw_derivatives(artifact.versions.all(), f"{artifact.full_name} was made {artifact.visibility}")
    return artifact


# Relations through which a version the hub made (a job's: its metadata names the job, a field no user may
# set) carries its target's content: fine-tunes, merges, inference outputs, MLCube projects. A user's own
# ``derived_from`` (an aggregate table of a private dataset) is a citation, not a copy, and is not followed.
CARRIES = (ProvenanceLink.Relation.DERIVED_FROM, ProvenanceLink.Relation.MERGED_FROM)


def _carrying(**filters):
    return ProvenanceLink.objects.filter(relation__in=CARRIES, version__metadata__has_key="job",
                                         version__deleted_at__isnull=True, **filters)


def check_visibility(owner, visibility: str) -> None:
    """Refuse a visibility that ``owner`` cannot give: ``organization`` needs an organization as owner."""
    if visibility == Artifact.Visibility.ORGANIZATION and not is_organization(owner):
        raise HubError("invalid", f"{owner.username} is a person: only an organization's artifact can be visible to "
                                  "its members. Choose internal or private, or transfer it to an organization.",
                       errors={"visibility": ["Needs an organization as owner."]})


def is_organization(owner) -> bool:
    from hub.orgs.models import Organization

    return Organization.objects.filter(account_id=owner.pk).exists()


def withheld_sources(artifact: Artifact, visibility: str = Artifact.Visibility.PUBLIC) -> list[str]:
    """The artifacts (``owner/name``) whose content this artifact's hub-made versions carry and that
    ``visibility`` would show to someone who may not read them: deleted ones, only the carried version deleted,
    or less open ones (``covers``)."""
    links = (_carrying(version__artifact=artifact).exclude(target__artifact=artifact)
             .select_related("target__artifact__owner"))
    return sorted({link.target.artifact.full_name for link in links
                   if link.target.deleted_at is not None or link.target.artifact.deleted_at is not None
                   or not covers(link.target.artifact, visibility, artifact.owner_id)})


OPENNESS = {"public": 0, "internal": 1, "organization": 2, "private": 3}


def covers(source: Artifact, visibility: str, owner_id: int) -> bool:
    """Whether an artifact with ``visibility`` owned by ``owner_id`` that carries ``source``'s content is at most
    as open as ``source``: everything derived follows the strictest source (an organization-visible one only
    within the same organization)."""
    if visibility == Artifact.Visibility.PRIVATE:
        return True
    if source.visibility == Artifact.Visibility.ORGANIZATION and visibility == Artifact.Visibility.ORGANIZATION:
        return owner_id == source.owner_id
    return OPENNESS[visibility] >= OPENNESS[source.visibility]


def withdraw_derivatives(sources, reason: str) -> None:
    """What the hub made from the versions ``sources``, after they became less open or were deleted: the
    packaging of a deleted version (an artifact that follows its source, e.g. an MLCube project) is deleted
    with it; every other artifact with a version made from them that is now more open than its source becomes
    private (its owner keeps it). Logged for the audit trail."""
    links = (_carrying(target__in=sources)
             .exclude(version__artifact__in=Artifact.objects.filter(versions__in=sources))
             .select_related("version__artifact__owner", "target__artifact"))
    for link in links:
        derived = link.version.artifact
        if derived.deleted_at is not None:
            continue
        if derived.follows_id == link.target.artifact_id:
            if link.target.deleted_at is not None:
                delete_version(link.version, f"Made from {link.target}, which was deleted.")
            continue  # a follower takes its source's visibility itself
        gone = link.target.deleted_at is not None or link.target.artifact.deleted_at is not None
        if derived.visibility != Artifact.Visibility.PRIVATE and (
                gone or not covers(link.target.artifact, derived.visibility, derived.owner_id)):
            update_artifact(derived, {"visibility": Artifact.Visibility.PRIVATE},
                            by=f"the hub ({reason}, whose content it carries: {link.target})")


def delete_artifact(artifact: Artifact, reason: str = "") -> None:
    """Tombstone the artifact and all its versions; their PIDs keep resolving to tombstones. The artifacts that
    follow it (which carry its files) are deleted with it."""
    with transaction.atomic():
        for version in artifact.versions.filter(deleted_at__isnull=True):
            _tombstone(version, reason)
        artifact.deleted_at = timezone.now()
        artifact.deletion_reason = reason
        artifact.save(update_fields=["deleted_at", "deletion_reason"])
        artifact_changed.send(sender=Artifact, artifact=artifact)
    _purge_files_of(artifact.versions.all())
    for follower in artifact.followers.filter(deleted_at__isnull=True):
        delete_artifact(follower, f"Made from {artifact.full_name}, which was deleted.")
    withdraw_derivatives(artifact.versions.all(), f"{artifact.full_name} was deleted")


# --- versions -------------------------------------------------------------------------------------


@dataclass
class ProvenanceRef:
    relation: str
    target: Version


def next_label(artifact: Artifact) -> str:
    numbers = [int(label) for label in artifact.versions.values_list("label", flat=True) if label.isdigit()]
    return str(max(numbers, default=0) + 1)


def find_duplicate(user, digest: str, artifact: Artifact | None = None) -> Version | None:
    """A live version with the same content that ``user`` may see (private ones stay secret); within
    ``artifact`` only when given."""
    among = Artifact.objects.filter(pk=artifact.pk) if artifact is not None else Artifact.objects.live()
    return (
        Version.objects.filter(content_digest=digest, deleted_at__isnull=True, artifact__in=among.visible_to(user))
        .select_related("artifact__owner")
        .first()
    )


def create_version(
    artifact: Artifact,
    user,
    *,
    files: list[StagedFile],
    label: str = "",
    metadata: dict[str, Any] | None = None,
    provenance: list[ProvenanceRef] | None = None,
    system: bool = False,
    duplicates: Literal["hub", "artifact"] = "hub",
) -> Version:
    """Publish a new immutable version from staged files.

    The metadata is validated and completed by ``hub.metadata`` (``system``: the hub itself publishes,
    e.g. a conversion result, and may write the fields users cannot; ``duplicates``: where the same files
    refuse it, ``"hub"``, or ``"artifact"`` for what the hub derives into its source's own artifact). A version
    a person publishes without a card gets a ``README.md`` written from its metadata
    (``hub.metadata.written_card``), a file like the others; its content digest stays that of the files sent,
    which the client asks about before uploading them (the hub's README.md sent back, by a download published
    again or a Hugging Face commit, is not counted either)."""
    metadata = metadata or {}
    if not isinstance(metadata, dict):
        raise HubError("invalid", "metadata must be a JSON object.", errors={"metadata": ["Expected an object."]})
    if len(repr(metadata)) > MAX_METADATA_BYTES:
        raise HubError("invalid", "metadata is larger than 1 MiB.", errors={"metadata": ["Too large."]})
    if not files:
        raise HubError("invalid", "A version needs at least one file.", errors={"files": ["No files."]})
    paths = [clean_path(f.path) for f in files]
    distinct_paths(paths)
    label = label or next_label(artifact)
    if not re.match(LABEL_RE, label) or label.lower() in RESERVED_LABELS:
        raise HubError(
            "invalid", f"Version {label!r} is not a valid label: use letters, digits and . _ + -, not 'latest'.",
            errors={"version": ["Invalid label."]},
        )
    if artifact.versions.filter(label=label).exists():
        raise HubError("already_exists", f"{artifact.full_name} already has a version {label!r}.")
    store = get_blob_store()
    local = [_file_info(store, f, p) for f, p in zip(files, paths, strict=True)]
    metadata = prepare(artifact, metadata, local, system=system)
    carried = written_card.is_written(metadata.get("card") or "")  # a README.md the hub wrote, sent back
    digest = content_digest(f.sha256 for f, p in zip(files, paths, strict=True)
                            if not (carried and p == written_card.NAME))
    # duplicates="artifact": a version the hub derives into its source's own artifact (a conversion, a build) is
    # that artifact's, whatever another artifact holds (equal weights convert to equal bytes); "hub": anywhere.
    existing = find_duplicate(user, digest, artifact if duplicates == "artifact" else None)
    if existing is not None:
        raise HubError(
            "duplicate_version",
            f"These files are identical to {existing} ({existing.pid}); it is already in the hub.",
            existing_pid=existing.pid,
            existing=str(existing),
        )

    card = None if system else _written_card(artifact, metadata, paths)
    if card is not None:
        files, paths = [*files, card], [*paths, card.path]
    newly_stored: list[str] = []
    try:
        with transaction.atomic():
            version = Version.objects.create(
                artifact=artifact, label=label, pid=_mint_unique(), metadata=metadata,
                content_digest=digest, created_by=user,
            )
            for staged, path in zip(files, paths, strict=True):
                blob, _ = Blob.objects.get_or_create(sha256=staged.sha256, defaults={"size": staged.size})
                if not staged.location and store.put_file(staged.staged, staged.sha256):
                    newly_stored.append(staged.sha256)
                File.objects.create(version=version, path=path, blob=blob, size=staged.size,
                                    media_type=media_type_for(path), location=staged.location)
                if staged.upload is not None:
                    consumed = Upload.objects.filter(pk=staged.upload.pk, state=Upload.State.COMPLETED).update(
                        state=Upload.State.CONSUMED
                    )
                    if not consumed:
                        raise HubError("upload_not_open", f"Upload {staged.upload.pk} was used meanwhile.")
            for ref in provenance or []:
                ProvenanceLink.objects.create(version=version, relation=ref.relation, target=ref.target)
            named = named_by(artifact, metadata)
            Artifact.objects.filter(pk=artifact.pk).update(updated=timezone.now(), **named)
            for key, value in named.items():
                setattr(artifact, key, value)
            version_published.send(sender=Version, version=version, user=user)
    except IntegrityError as exc:
        _remove_blobs(newly_stored)
        if "version_label_unique" in str(exc) or "label" in str(exc):
            raise HubError("already_exists", f"{artifact.full_name} already has a version {label!r}.")
        raise
    except StorageUnavailable:
        _remove_blobs(newly_stored)
        raise HubError("storage_unavailable", "The object store is unavailable; nothing was saved. Try again.")
    except BaseException:
        _remove_blobs(newly_stored)
        raise
    finally:
        if card is not None:
            card.staged.unlink(missing_ok=True)
    for staged in files:
        if staged.upload is not None and not staged.location:  # never the referenced data itself
            transaction.on_commit(lambda path=staged.staged: path.unlink(missing_ok=True))
    return version


def _written_card(artifact: Artifact, metadata: dict[str, Any], paths: list[str]) -> StagedFile | None:
    """The ``README.md`` the hub writes for a version whose files hold no card at their root (``card`` in
    ``metadata`` then becomes its body, as an uploaded card's would), staged in a new local file; None when
    the files have a card (or a folder named README.md)."""
    if any(p.lower() in CARD_NAMES or p.lower().startswith("readme.md/") for p in paths):
        return None
    text, body = written_card.readme(artifact.kind, metadata)
    metadata["card"] = body.strip()
    metadata["derived"] = sorted({*metadata.get("derived", []), "card"})
    data = text.encode()
    with tempfile.NamedTemporaryFile(dir=upload_dir(), prefix="card-", suffix=".md", delete=False) as out:
        out.write(data)
    return StagedFile(path=written_card.NAME, staged=Path(out.name), sha256=hashlib.sha256(data).hexdigest(),
                      size=len(data))


def named_by(artifact: Artifact, metadata: dict[str, Any]) -> dict[str, str]:
    """The title and description ``artifact`` takes from a new version's metadata (its card's, say) where it has
    none of its own (a title that is only its name counts as none), so that its heading, search results and
    the API name it as the card does, not by its slug."""
    out = {}
    title, description = metadata.get("title"), metadata.get("description")
    if isinstance(title, str) and title.strip() and artifact.title in ("", artifact.name):
        out["title"] = title.strip()[:300]
    if isinstance(description, str) and description.strip() and not artifact.description:
        out["description"] = description.strip()[:20000]
    return out


def _file_info(store, staged: StagedFile, path: str) -> FileInfo:
    """What metadata derivation reads of a staged file: a local one, a path reference in place, or one whose bytes
    are only in the object store (a direct upload, checked when it completed) or in an S3 reference: copied to the
    local path when derivation first reads it whole, read by ranges otherwise."""
    if staged.location and not references.is_s3(staged.location):
        return FileInfo(path, references.resolved(staged.location), staged.size)
    if staged.location:
        def opener(start: int = 0, length: int | None = None):
            return references.open_bytes(staged.location, start, length)
    else:
        def opener(start: int = 0, length: int | None = None):
            return store.open(staged.sha256, start, length)
        if not staged.staged.exists() and not store.exists(staged.sha256):
            raise HubError("upload_not_open", f"The bytes of {staged.path!r} are gone from the hub (the upload "
                                              "expired); upload the file again.")

    def fetch(local: Path) -> None:
        partial = local.with_name(f"{local.name}.fetching")
        with opener() as source, open(partial, "wb") as out:
            shutil.copyfileobj(source, out, 8 * 1024 * 1024)
        partial.replace(local)

    def read_range(start: int, length: int) -> bytes:
        length = min(length, staged.size - start)
        if length <= 0:
            return b""
        with opener(start, length) as part:
            return part.read()

    local = staged.staged.exists() and not staged.location
    return FileInfo(path, staged.staged, staged.size, fetch=None if local else fetch, read_range=read_range)


def _remove_blobs(sha256s: list[str]) -> None:
    """After a rollback: remove the blobs this call stored that no live version uses, and their rows."""
    if not sha256s:
        return
    try:
        purge_blobs(sha256s)
        Blob.objects.filter(sha256__in=sha256s, files__isnull=True).delete()
    except Exception:  # the garbage collector (hub_gc) retries
        log.exception("could not remove orphan blobs %s", sha256s)


def _tombstone(version: Version, reason: str) -> None:
    version.deleted_at = timezone.now()
    version.deletion_reason = reason
    version.save(update_fields=["deleted_at", "deletion_reason"])


def delete_version(version: Version, reason: str = "") -> None:
    """Tombstone a version: its PID keeps resolving (410 Gone), its bytes are purged."""
    with transaction.atomic():
        _tombstone(version, reason)
        artifact_changed.send(sender=Artifact, artifact=version.artifact)
    _purge_files_of([version])
    withdraw_derivatives(Version.objects.filter(pk=version.pk), f"{version} was deleted")


def _purge_files_of(versions: Iterable[Version]) -> None:
    """Delete from the store the blobs that only deleted versions referenced."""
    sha256s = set(File.objects.filter(version__in=list(versions)).values_list("blob_id", flat=True))
    purge_blobs(sha256s)


def purge_blobs(sha256s: Iterable[str]) -> list[str]:
    """Delete the blobs among ``sha256s`` that no live version references; returns them."""
    sha256s = set(sha256s)
    live = set(
        File.objects.filter(blob_id__in=sha256s, version__deleted_at__isnull=True).values_list("blob_id", flat=True)
    )
    store = get_blob_store()
    purged = []
    for sha256 in sorted(sha256s - live):
        store.delete(sha256)
        purged.append(sha256)
    return purged


# --- references -----------------------------------------------------------------------------------


def get_artifact(user, owner: str, name: str) -> Artifact:
    """A live artifact ``user`` may read, or 404 (a private artifact's existence does not leak)."""
    artifact = (
        Artifact.objects.live().visible_to(user).select_related("owner")
        .filter(owner__username=owner, name=name).first()
    )
    if artifact is None:
        hint = did_you_mean(user, owner, name)
        raise HubError("not_found", f"No artifact {owner}/{name} (or you may not see it).{hint}")
    return artifact


def did_you_mean(user, owner: str, name: str) -> str:
    """``" Did you mean owner/other?"`` for the closest name of what ``user`` may read, or "" (only names the
    user could list anyway: a private artifact is never suggested to someone who may not see it)."""
    import difflib

    names = (Artifact.objects.live().visible_to(user).filter(owner__username__iexact=owner)
             .values_list("owner__username", "name")[:2000])
    known = {f"{o}/{n}": f"{o}/{n}".lower() for o, n in names}
    close = difflib.get_close_matches(f"{owner}/{name}".lower(), list(known.values()), n=1, cutoff=0.8)
    match = next((full for full, lower in known.items() if close and lower == close[0]), "")
    return f" Did you mean {match}?" if match else ""


def get_version(artifact: Artifact, label: str, *, allow_deleted: bool = False) -> Version:
    if label == "latest":
        version = artifact.latest_version()
    elif label == "current":
        version = lineage.current_version(artifact)
    else:
        version = artifact.versions.filter(label=label).first()
    if version is None:
        raise HubError("not_found", f"{artifact.full_name} has no version {label!r}.")
    if version.is_deleted and not allow_deleted:
        raise HubError(
            "gone", f"{version} was deleted{': ' + version.deletion_reason if version.deletion_reason else ''}.",
            pid=version.pid,
        )
    return version


def resolve_version_ref(user, ref: str) -> Version:
    """A version named by PID (``ark:/…``) or ``owner/name[@version]``, readable by ``user``."""
    ref = (ref or "").strip()
    if ref.lower().startswith("ark:"):
        canonical = pids.normalize(ref)
        visible = Artifact.objects.live().visible_to(user)
        version = Version.objects.filter(pid=canonical, artifact__in=visible).first() if canonical else None
        if version is None:
            artifact = Artifact.objects.live().visible_to(user).filter(pid=canonical).first() if canonical else None
            version = artifact.latest_version() if artifact else None
        if version is None or version.is_deleted:
            raise HubError("not_found", f"No version with PID {ref} (or you may not see it).")
        return version
    name, _, label = ref.partition("@")
    owner, slash, artifact_name = name.partition("/")
    if not slash or not owner or not artifact_name:
        raise HubError("invalid", f"{ref!r} is neither a PID (ark:/…) nor owner/name[@version].")
    return get_version(get_artifact(user, owner, artifact_name), label or "latest")


def resolve_content(user, digest: str) -> Version:
    """The version ``user`` may see whose files have the content digest ``digest`` (``content_digest``)."""
    digest = (digest or "").strip().lower()
    if not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise HubError("invalid", "content is a content digest: 64 hexadecimal digits.",
                       errors={"content": ["Expected a sha256 in hex."]})
    found = find_duplicate(user, digest)
    if found is None:
        raise HubError("not_found", "No version you can see holds exactly these files.")
    return found


def visible_versions(user):
    return Version.objects.filter(artifact__in=Artifact.objects.live().visible_to(user))


def pid_lookup(pid: str) -> Artifact | Version | None:
    """The artifact (concept PID) or version a PID names, deleted or not; access is the caller's."""
    return (
        Version.objects.select_related("artifact__owner").filter(pid=pid).first()
        or Artifact.objects.select_related("owner").filter(pid=pid).first()
    )


def readable_pid(user, pid: str) -> tuple[str, Artifact, Version | None] | None:
    """(canonical PID, artifact, version or None for a concept PID) when ``user`` may read what ``pid``
    names, deleted or not; None for unknown PIDs and for private artifacts alike."""
    canonical = pids.normalize(pid)
    found = pid_lookup(canonical) if canonical else None
    if found is None:
        return None
    version = found if isinstance(found, Version) else None
    artifact = version.artifact if version else found
    if not Artifact.objects.visible_to(user).filter(pk=artifact.pk).exists():
        return None
    return canonical, artifact, version


__all__ = [
    "ProvenanceRef", "StagedFile", "create_artifact", "create_version", "delete_artifact", "delete_version",
    "find_duplicate", "get_artifact", "get_version", "pid_lookup", "purge_blobs", "readable_pid", "resolve_content",
    "resolve_version_ref",
    "visible_versions",
]
