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
    execution = serializers.SerializerMethodField()

    class Meta:
        model = Job
        fields = [
            "id", "url", "kind", "state", "queue", "device", "params", "progress", "log", "result",
            "error_code", "error_detail", "requester", "version", "attempts", "worker", "created", "started",
            "finished", "duration", "cancel_requested", "execution", "slurm",
            "account",
        ]

    def get_url(self, job: Job) -> str:
        from hub.registry.api.serializers import absolute

        return absolute(reverse("api:job-detail", args=[job.pk]))

    @extend_schema_field({"type": "object", "nullable": True, "description": "The batch job that runs it: "
                          "executor (its module), id, partition, nodes, state, tasks, attempt; null on Celery."})
    def get_execution(self, job: Job) -> dict[str, object] | None:
        """The batch job that runs it (hub.jobs.executors), without the hub's own bookkeeping (folder, offsets)."""
        if not job.execution:
            return None
        return {key: job.execution.get(key) for key in ("executor", "id", "partition", "nodes", "state", "tasks",
                                                        "attempt")}

    @extend_schema_field({"type": "object", "nullable": True, "description": "Deprecated: ``execution`` without "
                          "``executor``, for a job Slurm runs; null otherwise."})
    def get_slurm(self, job: Job) -> dict[str, object] | None:
        found = self.get_execution(job)
        return {k: v for k, v in found.items() if k != "executor"} if found and found["executor"] == "slurm" else None

    def get_version(self, job: Job) -> dict[str, str] | None:
        if job.version is None:
            return None
        return {"name": str(job.version), "pid": job.version.pid}
