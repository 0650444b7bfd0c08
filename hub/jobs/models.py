"""The Job row: the source of truth for every long operation."""

from __future__ import annotations

import os
import socket
import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

from hub.jobs import kinds


def log_line(level: str, message: str) -> dict[str, str]:
    """One entry of ``Job.log``."""
    return {"time": timezone.now().isoformat(), "level": level, "message": message}


def stale_limit() -> datetime:
    """A running job whose last heartbeat is older than this has lost its worker."""
    return timezone.now() - timedelta(seconds=settings.HUB_JOB_STALE_S)


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


class Job(models.Model):
    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"

    FINAL_STATES = (State.SUCCEEDED, State.FAILED, State.CANCELLED)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    kind = models.CharField(max_length=32, choices=kinds.choices)  # every registered kind (hub.jobs.kinds)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED, db_index=True)
    queue = models.CharField(max_length=32, default="cpu")
    device = models.CharField(max_length=16, default="cpu")
    params = models.JSONField(default=dict, blank=True)
    progress = models.FloatField(default=0.0)
    log = models.JSONField(default=list, blank=True, help_text="Log lines: [{time, level, message}]")
    result = models.JSONField(null=True, blank=True)
    error_code = models.CharField(max_length=64, blank=True)
    error_detail = models.TextField(blank=True)
    requester = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="jobs"
    )
    version = models.ForeignKey(
        "registry.Version", on_delete=models.SET_NULL, null=True, blank=True, related_name="jobs"
    )
    counted = models.BooleanField(default=False, help_text="Asked for by its requester, so it counts in their "
                                                           "jobs-at-once quota (the hub's own jobs do not).")
    attempts = models.PositiveIntegerField(default=0)
    worker = models.CharField(max_length=200, blank=True)
    heartbeat = models.DateTimeField(null=True, blank=True, help_text="Last sign of life from a running job's worker.")
    dispatched = models.DateTimeField(null=True, blank=True, help_text="When its task message was last sent.")
    cancel_requested = models.DateTimeField(null=True, blank=True, help_text="When someone asked to cancel it.")
    account = models.CharField(max_length=64, blank=True, help_text="The Slurm account it is billed to "
                               "(hub.orgs.billing; empty: the site's HUB_SLURM_ACCOUNT).")
    qos = models.CharField(max_length=64, blank=True, help_text="Its account's QoS (empty: the site's HUB_SLURM_QOS).")
    execution = models.JSONField(null=True, blank=True, help_text="The batch job that runs it (hub.jobs.executors): "
                                 "executor, id, partition, nodes, state, folder; null for Celery jobs.")
    created = models.DateTimeField(default=timezone.now, db_index=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.kind} job {self.id} ({self.state})"

    @property
    def is_final(self) -> bool:
        return self.state in self.FINAL_STATES

    def append_log(self, level: str, message: str) -> None:
        self.log = self.log + [log_line(level, message)]

    def mark_failed(self, code: str, detail: str) -> None:
        """Set the failed state, its error and its log line (the caller saves)."""
        self.state = self.State.FAILED
        self.finished = timezone.now()
        self.error_code, self.error_detail = code, detail
        self.append_log("error", detail)

    def mark_cancelled(self, detail: str) -> None:
        """Set the cancelled state (code ``cancelled``) and its log line (the caller saves)."""
        self.state = self.State.CANCELLED
        self.finished = timezone.now()
        self.error_code, self.error_detail = "cancelled", detail
        self.append_log("warning", detail)

    @property
    def worker_is_gone(self) -> bool:
        """True when the process named in ``worker`` ran on this host and has ended (it was killed): no need
        to wait ``HUB_JOB_STALE_S`` for its heartbeats to stop. Unknown (another host) is False."""
        host, _, pid = self.worker.rpartition(":")
        if host != socket.gethostname() or not pid.isdigit():
            return False
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return _is_zombie(int(pid))

    def mark_worker_lost(self) -> None:
        self.mark_failed("worker_lost", (
            f"The job was started {self.attempts} times and its worker was lost each time (killed, or out of "
            "memory). Try smaller inputs or ask the administrators."))

    @property
    def duration(self) -> float | None:
        if self.started and self.finished:
            return (self.finished - self.started).total_seconds()
        return None
