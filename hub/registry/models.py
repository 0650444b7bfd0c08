"""The registry's domain: artifacts, immutable versions, files over content-addressed blobs,
provenance between versions, and resumable uploads."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from hub.orgs.models import RANK, Membership
from hub.registry import rule
from hub.registry.rule import readable_by, token_limit

NAME_RE = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"
LABEL_RE = r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$"
RESERVED_LABELS = {"latest", "current"}  # latest: the newest live version; current: lineage.current_version


class ArtifactQuerySet(models.QuerySet):
    def live(self) -> ArtifactQuerySet:
        return self.filter(deleted_at__isnull=True)

    def visible_to(self, user) -> ArtifactQuerySet:
        """The artifacts ``user`` may read (``hub.registry.rule``)."""
        return self.filter(readable_by(user))


class Artifact(models.Model):
    """A model, dataset or project, named ``owner/name``; it has versions."""

    class Kind(models.TextChoices):
        MODEL = "model"
        DATASET = "dataset"
        PROJECT = "project"

    Visibility = models.TextChoices("Visibility", [(name.upper(), name) for name in rule.NAMES])  # hub.registry.rule

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
            models.CheckConstraint(condition=Q(visibility__in=rule.NAMES),
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

    class FilesAccess(models.TextChoices):
        OPEN = "open"  # whoever reads the record reads its files
        RESTRICTED = "restricted"  # metadata as the record's visibility says; files to members, grants, links
        EMBARGOED = "embargoed"  # restricted until ``embargo_until``, then open (hub.registry.files_access)

    # Who reads the bytes, apart from who reads the record (``hub.registry.files_access.may_read_files``).
    files_access = models.CharField(max_length=16, choices=FilesAccess.choices, default=FilesAccess.OPEN)
    embargo_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["artifact", "label"], name="version_label_unique"),
            models.CheckConstraint(condition=Q(files_access__in=["open", "restricted", "embargoed"]),
                                   name="version_files_access"),
            models.CheckConstraint(condition=~Q(files_access="embargoed") | Q(embargo_until__isnull=False),
                                   name="version_embargo_has_date"),
        ]

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
    # Data by reference (hub.registry.references): where the bytes live (an absolute path under a declared root, or
    # s3://bucket/key); empty: the blob is in the hub's object store. Its size and sha256 are the ones read when
    # it was registered; ``location_changed`` is when fixity first found them different (or the data gone).
    location = models.CharField(max_length=2048, blank=True)
    location_changed = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["path"]
        constraints = [models.UniqueConstraint(fields=["version", "path"], name="file_path_unique")]

    def __str__(self) -> str:
        return self.path

    @property
    def sha256(self) -> str:
        return self.blob_id

    @property
    def where(self) -> str:
        """Where a referenced file's bytes live, in words (the landing page)."""
        if self.location.startswith("s3://"):
            return f"in the S3 bucket {self.location[5:].partition('/')[0]}"
        return "on the site's file system" if self.location else "in the hub's store"


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
    # Fetched (``source`` a URL the hub reads through this upload's resumable path) or a reference (``reference``:
    # the bytes stay at ``source``, a path or s3:// URL; ``parts`` holds a folder's files once read).
    source = models.CharField(max_length=2048, blank=True)
    reference = models.BooleanField(default=False)

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


class Grant(models.Model):
    """``user`` may read the files of ``artifact``'s restricted and embargoed versions, until ``expires`` (None:
    no end) or until revoked. Made by an owner, or by approving an access request."""

    artifact = models.ForeignKey(Artifact, on_delete=models.CASCADE, related_name="grants")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="file_grants")
    granted_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    created = models.DateTimeField(default=timezone.now)
    expires = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]
        constraints = [models.UniqueConstraint(fields=["artifact", "user"], condition=Q(revoked_at__isnull=True),
                                               name="grant_one_live")]

    def __str__(self) -> str:
        return f"{self.user} -> {self.artifact_id}"

    @property
    def active(self) -> bool:
        return self.revoked_at is None and (self.expires is None or self.expires > timezone.now())


class ShareLink(models.Model):
    """A secret link to one version's files (for a paper's reviewer). Only the sha256 of its token is stored, so
    the database is the one truth: a revocation is seen by every web node at the next request."""

    version = models.ForeignKey(Version, on_delete=models.CASCADE, related_name="share_links")
    token_sha256 = models.CharField(max_length=64, unique=True)
    note = models.CharField(max_length=200, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    created = models.DateTimeField(default=timezone.now)
    expires = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"share link {self.pk} to {self.version_id}"

    @property
    def active(self) -> bool:
        return self.revoked_at is None and (self.expires is None or self.expires > timezone.now())


class AccessPolicy(models.Model):
    """How people ask for an artifact's restricted files: the fields the owner requires beside the purpose
    (e.g. affiliation), terms to agree to, and whether a complete request is approved at once."""

    artifact = models.OneToOneField(Artifact, on_delete=models.CASCADE, related_name="access_policy")
    fields = models.JSONField(default=list, blank=True, help_text="Names of required answers, e.g. affiliation.")
    terms = models.TextField(blank=True, help_text="Terms a requester must agree to; empty: none.")
    auto_approve = models.BooleanField(default=False)
    grant_days = models.PositiveIntegerField(null=True, blank=True, help_text="Approved grants expire after this.")

    def __str__(self) -> str:
        return f"access policy of {self.artifact_id}"


class AccessRequest(models.Model):
    """A person asks for an artifact's restricted files, with a purpose and the policy's answers; its owner
    (or the owning organization's admins) approves (a ``Grant``) or refuses, with a message."""

    class State(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        REFUSED = "refused"
        WITHDRAWN = "withdrawn"

    artifact = models.ForeignKey(Artifact, on_delete=models.CASCADE, related_name="access_requests")
    requester = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="access_requests")
    purpose = models.TextField()
    answers = models.JSONField(default=dict, blank=True)
    agreed_terms = models.BooleanField(default=False)
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    message = models.TextField(blank=True, help_text="The decider's message to the requester.")
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    decided_at = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created", "-id"]
        constraints = [models.UniqueConstraint(fields=["artifact", "requester"], condition=Q(state="pending"),
                                               name="access_request_one_pending")]

    def __str__(self) -> str:
        return f"{self.requester} asks {self.artifact_id} ({self.state})"
