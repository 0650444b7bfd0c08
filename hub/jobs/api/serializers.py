"""Shape of a job resource."""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from hub.jobs.models import Job


class JobSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()
    requester = serializers.CharField(source="requester.username", default=None)
    version = serializers.SerializerMethodField()
    duration = serializers.FloatField(read_only=True, allow_null=True)
    slurm = serializers.SerializerMethodField()

    class Meta:
        model = Job
        fields = [
            "id", "url", "kind", "state", "queue", "device", "params", "progress", "log", "result",
            "error_code", "error_detail", "requester", "version", "attempts", "worker", "created", "started",
            "finished", "duration", "cancel_requested", "slurm", "account",
        ]

    def get_url(self, job: Job) -> str:
        from hub.registry.api.serializers import absolute

        return absolute(reverse("api:job-detail", args=[job.pk]))

    @extend_schema_field({"type": "object", "nullable": True, "description": "The Slurm job that runs it: id, "
                          "partition, nodes, state, tasks (of its array), attempt; null on Celery."})
    def get_slurm(self, job: Job) -> dict[str, object] | None:
        """The Slurm job that runs it (hub.jobs.slurm), without the hub's own bookkeeping (folder, offsets)."""
        if not job.slurm:
            return None
        return {key: job.slurm.get(key) for key in ("id", "partition", "nodes", "state", "tasks", "attempt")}

    def get_version(self, job: Job) -> dict[str, str] | None:
        if job.version is None:
            return None
        return {"name": str(job.version), "pid": job.version.pid}
