"""The registry's domain: artifacts, immutable versions, files over content-addressed blobs,
provenance between versions, and resumable uploads."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from hub.orgs.models import RANK, Membership, Role, roles_at_least

NAME_RE = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"
LABEL_RE = r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$"
RESERVED_LABELS = {"latest", "current"}  # latest: the newest live version; current: lineage.current_version


def readable_by(user) -> Q:
    """Who reads what (``VISIBILITY_RULES`` in words). A token limited to one organization or artifact
    (``hub.accounts.models.ApiToken``, carried on ``user.hub_token``) reads public artifacts and, of the others
    its person may read, only those inside its limit. The search index applies the same rule to its arrays
    (``hub.search.index_copy.Snapshot.visible``): change both together."""
    if user is None or not user.is_authenticated:
        return Q(visibility=Artifact.Visibility.PUBLIC)
    limit = token_limit(user)
    if user.is_superuser:
        granted = Q()
    else:
        granted = (Q(visibility=Artifact.Visibility.INTERNAL) | Q(owner=user)
                   | Q(pk__in=shared_with(user).values("artifact_id"))
                   | Q(visibility=Artifact.Visibility.ORGANIZATION, owner_id__in=member_of(user, Role.READ))
                   | Q(visibility=Artifact.Visibility.PRIVATE, owner_id__in=member_of(user, Role.WRITE)))
    if limit is not None:
        granted &= limit
    return Q(visibility=Artifact.Visibility.PUBLIC) | granted


VISIBILITY_RULES = {
    "public": "everyone, signed in or not",
    "internal": "everyone signed in at this hub",
    "organization": "the owning organization's members (any role), and collaborators",
    "private": "the owner (for an organization: its members with the write or admin role), and collaborators",
}


def member_of(user, role: str) -> models.QuerySet:
    """The accounts (``Organization.account_id``) of the organizations ``user`` has ``role`` or more in: one
    indexed subquery (``membership_user_role``)."""
    return Membership.objects.filter(user=user, role__in=roles_at_least(role)).values("org_id")


def token_limit(user) -> Q | None:
    """The artifacts a limited token may reach beyond public ones (None: not limited)."""
    token = getattr(user, "hub_token", None)
    if token is None:
        return None
    if token.artifact_id is not None:
        return Q(pk=token.artifact_id) | Q(follows_id=token.artifact_id)
    if token.org_id is not None:
        return Q(owner_id=token.org_id)
    return None


def shared_with(user) -> models.QuerySet:
    """The collaborator rows naming ``user`` (their ``artifact_id`` are the artifacts shared with them)."""
    return Artifact.collaborators.through.objects.filter(user=user)


class ArtifactQuerySet(models.QuerySet):
    def live(self) -> ArtifactQuerySet:
        return self.filter(deleted_at__isnull=True)

    def visible_to(self, user) -> ArtifactQuerySet:
        """Public artifacts, plus private ones the user owns or collaborates on."""
        return self.filter(readable_by(user))


class Artifact(models.Model):
    """A model, dataset or project, named ``owner/name``; it has versions."""

    class Kind(models.TextChoices):
        MODEL = "model"
        DATASET = "dataset"
        PROJECT = "project"

    class Visibility(models.TextChoices):
        PUBLIC = "public"
        INTERNAL = "internal"
        ORGANIZATION = "organization"
        PRIVATE = "private"

    kind = models.CharField(max_length=16, choices=Kind.choices)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="artifacts")
    name = models.CharField(max_length=100, validators=[RegexValidator(NAME_RE)])
    title = models.CharField(max_length=300, blank=True)
    description = models.TextField(blank=True)
    visibility = models.CharField(max_length=16, choices=Visibility.choices, default=Visibility.PUBLIC)
    collaborators = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="collaborations", blank=True)
    pid = models.CharField("concept PID", max_length=64, unique=True)
    created = models.DateTimeField(default=timezone.now)
    updated = models.DateTimeField(auto_now=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
    deletion_reason = models.CharField(max_length=500, blank=True)
    downloads = models.PositiveBigIntegerField(default=0, help_text="File downloads started (popularity).")
    follows = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="followers",
        help_text="The artifact whose bytes this one carries, made by the hub (an MLCube project of a model): it "
                  "has that artifact's visibility and collaborators, always, and is deleted with it.")

    objects = ArtifactQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "name"], condition=Q(deleted_at__isnull=True), name="artifact_owner_name_live"
            ),
            models.CheckConstraint(condition=Q(kind__in=["model", "dataset", "project"]), name="artifact_kind"),
            models.CheckConstraint(condition=Q(visibility__in=["public", "internal", "organization", "private"]),
                                   name="artifact_visibility"),
        ]
        indexes = [models.Index(fields=["kind", "visibility"])]

    def __str__(self) -> str:
        return self.full_name

    @property
    def full_name(self) -> str:
        return f"{self.owner.username}/{self.name}"

    @property
    def is_public(self) -> bool:
        return self.visibility == self.Visibility.PUBLIC

    def latest_version(self) -> Version | None:
        return self.versions.filter(deleted_at__isnull=True).order_by("-created", "-id").first()

    def role_of(self, user) -> int:
        """What ``user`` may do here, as a rank: 3 owns it (the owner, a superuser, an admin of the owning
        organization), 2 writes (a collaborator, a member with the write role), 1 reads as a member, 0 none.
        A token limited elsewhere has none (public reading is not a role)."""
        if user is None or not user.is_authenticated:
            return 0
        limit = token_limit(user)
        if limit is not None and not Artifact.objects.filter(limit, pk=self.pk).exists():
            return 0
        if user.is_superuser or user.pk == self.owner_id:
            return 3
        membership = Membership.objects.filter(org_id=self.owner_id, user=user).values_list("role", flat=True).first()
        rank = RANK.get(membership, 0) if membership else 0
        if rank < 2 and self.collaborators.filter(pk=user.pk).exists():
            rank = 2
        return rank

    def can_write(self, user) -> bool:
        """The owner, collaborators and the owning organization's members with write or admin add versions and
        edit descriptions."""
        return self.role_of(user) >= 2

    def can_admin(self, user) -> bool:
        """The owner (for an organization: its admins) changes visibility and collaborators, deletes, transfers."""
        return self.role_of(user) >= 3

class Blob(models.Model):
    """Content stored once, addressed by its sha256."""

    sha256 = models.CharField(max_length=64, primary_key=True)
    size = models.BigIntegerField()
    created = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.sha256[:12]}… ({self.size} B)"


class Version(models.Model):
    """An immutable version of an artifact, with its own PID. Deleting leaves a tombstone."""

    artifact = models.ForeignKey(Artifact, on_delete=models.PROTECT, related_name="versions")
    label = models.CharField(max_length=64, validators=[RegexValidator(LABEL_RE)])
    pid = models.CharField("version PID", max_length=64, unique=True)
    metadata = models.JSONField(default=dict, blank=True)
    # sha256 over the sorted sha256s of the version's files: the papers' uniqueness check.
    content_digest = models.CharField(max_length=64, db_index=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    created = models.DateTimeField(default=timezone.now)
    deleted_at = models.DateTimeField(null=True, blank=True)
    deletion_reason = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["-created", "-id"]
        constraints = [models.UniqueConstraint(fields=["artifact", "label"], name="version_label_unique")]

    def __str__(self) -> str:
        return f"{self.artifact.full_name}@{self.label}"

    @property
    def is_deleted(self) -> bool:
        return self.deleted_at is not None

    @property
    def total_size(self) -> int:
        return sum(f.size for f in self.files.all())


class File(models.Model):
    """A named file of a version; its bytes are a blob."""

    version = models.ForeignKey(Version, on_delete=models.CASCADE, related_name="files")
    path = models.CharField(max_length=1024)
    blob = models.ForeignKey(Blob, on_delete=models.PROTECT, related_name="files")
    size = models.BigIntegerField()
    media_type = models.CharField(max_length=128, default="application/octet-stream")

    class Meta:
        ordering = ["path"]
        constraints = [models.UniqueConstraint(fields=["version", "path"], name="file_path_unique")]

    def __str__(self) -> str:
        return self.path

    @property
    def sha256(self) -> str:
        return self.blob_id


class ProvenanceLink(models.Model):
    """``version`` --relation--> ``target``, e.g. an ONNX version *converted from* a PyTorch one."""

    class Relation(models.TextChoices):
        DERIVED_FROM = "derived_from"
        CONVERTED_FROM = "converted_from"
        MERGED_FROM = "merged_from"
        TRAINED_ON = "trained_on"
        REVISION_OF = "revision_of"

    version = models.ForeignKey(Version, on_delete=models.CASCADE, related_name="provenance")
    relation = models.CharField(max_length=32, choices=Relation.choices)
    target = models.ForeignKey(Version, on_delete=models.PROTECT, related_name="derivatives")
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["version", "relation", "target"], name="provenance_unique"),
            models.CheckConstraint(condition=~Q(version=models.F("target")), name="provenance_not_self"),
        ]

    def __str__(self) -> str:
        return f"{self.version} {self.relation} {self.target}"


class Upload(models.Model):
    """A resumable upload session. Its bytes are parts in the object store until ``complete`` makes them a blob
    (``hub.registry.uploads``); the offset and the parts are kept here, so any web node takes the next chunk."""

    class State(models.TextChoices):
        OPEN = "open"
        COMPLETED = "completed"
        CONSUMED = "consumed"
        ABORTED = "aborted"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="uploads")
    filename = models.CharField(max_length=1024, blank=True)
    size = models.BigIntegerField()
    expected_sha256 = models.CharField(max_length=64, blank=True)
    sha256 = models.CharField(max_length=64, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.OPEN)
    created = models.DateTimeField(default=timezone.now)
    expires = models.DateTimeField()
    completed_at = models.DateTimeField(null=True, blank=True)
    # A direct upload (hub.registry.direct): the object store's multipart upload id and the part size.
    direct_id = models.CharField(max_length=512, blank=True)
    part_size = models.BigIntegerField(default=0)
    # A resumable upload through the hub: the bytes held, and the object-store keys of its parts in order.
    received = models.BigIntegerField(default=0)
    parts = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"upload {self.id} ({self.state})"


class FormerName(models.Model):
    """An ``owner/name`` an artifact had before a transfer: requests naming it are redirected
    (``hub.registry.handover``). The newest transfer wins when a name was used twice."""

    owner = models.CharField(max_length=150)
    name = models.CharField(max_length=100)
    artifact = models.ForeignKey(Artifact, on_delete=models.CASCADE, related_name="former_names")
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [models.Index(fields=["owner", "name"], name="former_name_lookup")]

    def __str__(self) -> str:
        return f"{self.owner}/{self.name} -> {self.artifact_id}"
