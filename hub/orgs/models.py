"""Organizations: owners that are not people. An organization is a row of the user table (its account:
never signs in, owns artifacts, holds service tokens), so people and organizations share one namespace
(``owner/name``) and every owner-keyed rule (storage quota, search by owner) holds for both."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class Role(models.TextChoices):
    READ = "read"  # reads the organization's artifacts that are visible to its members
    WRITE = "write"  # also reads its private ones, publishes versions, runs jobs billed to it
    ADMIN = "admin"  # also members, visibility, delete, transfer, service tokens, accounts


RANK = {Role.READ: 1, Role.WRITE: 2, Role.ADMIN: 3}


def roles_at_least(role: str) -> list[str]:
    """The roles that include ``role`` (write: write and admin)."""
    return [r for r, rank in RANK.items() if rank >= RANK[role]]


class Organization(models.Model):
    """A lab, project or allocation. Its slug is its account's username."""

    account = models.OneToOneField(settings.AUTH_USER_MODEL, primary_key=True, on_delete=models.CASCADE,
                                   related_name="organization")
    title = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    created = models.DateTimeField(default=timezone.now)
    storage_quota_mb = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Storage quota of its artifacts in MiB (empty: the site's per-owner one).")
    jobs_at_once = models.PositiveIntegerField(
        null=True, blank=True, help_text="Jobs its artifacts may have queued or running at once (empty: no limit "
                                         "beyond each person's own).")

    class Meta:
        ordering = ["account__username"]

    def __str__(self) -> str:
        return self.slug

    @property
    def slug(self) -> str:
        return self.account.username


class Membership(models.Model):
    """``user`` is a member of ``org`` with ``role``; ``source`` says who gave it (``manual``, or the identity
    provider's sync, which only changes the rows it made)."""

    MANUAL = "manual"

    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=8, choices=Role.choices, default=Role.READ)
    source = models.CharField(max_length=32, default=MANUAL)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["org_id", "user__username"]
        constraints = [
            models.UniqueConstraint(fields=["org", "user"], name="membership_unique"),
            models.CheckConstraint(condition=models.Q(role__in=["read", "write", "admin"]), name="membership_role"),
        ]
        indexes = [models.Index(fields=["user", "role"], name="membership_user_role")]

    def __str__(self) -> str:
        return f"{self.user} in {self.org} ({self.role})"


class SlurmAccount(models.Model):
    """A Slurm account (an allocation: ``sbatch --account``) that a person or an organization may bill jobs to,
    with the partitions and QoS it may use (empty: any). Set by the site (admin, ``manage.py hub_slurm_account``);
    an organization's is used by its members with the write or admin role."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="slurm_accounts")
    account = models.CharField(max_length=64)
    partitions = models.JSONField(default=list, blank=True, help_text="Partitions it may use (empty: any).")
    qos = models.CharField(max_length=64, blank=True, help_text="sbatch --qos for its jobs (empty: the site's).")
    is_default = models.BooleanField(default=False, help_text="Billed when a job names no account.")

    class Meta:
        ordering = ["owner_id", "account"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "account"], name="slurm_account_unique"),
            models.UniqueConstraint(fields=["owner"], condition=models.Q(is_default=True),
                                    name="slurm_account_one_default"),
        ]

    def __str__(self) -> str:
        return f"{self.account} ({self.owner})"
