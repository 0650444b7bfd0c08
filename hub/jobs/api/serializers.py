"""Shape of a job resource."""

from __future__ import annotations

from django.urls import reverse
from rest_framework import serializers

from hub.jobs.models import Job


class JobSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()
    requester = serializers.CharField(source="requester.username", default=None)
    version = serializers.SerializerMethodField()
    duration = serializers.FloatField(read_only=True, allow_null=True)

    class Meta:
        model = Job
        fields = [
            "id", "url", "kind", "state", "queue", "device", "params", "progress", "log", "result",
            "error_code", "error_detail", "requester", "version", "attempts", "worker", "created", "started",
            "finished", "duration", "cancel_requested",
        ]

    def get_url(self, job: Job) -> str:
        from hub.registry.api.serializers import absolute

        return absolute(reverse("api:job-detail", args=[job.pk]))

    def get_version(self, job: Job) -> dict[str, str] | None:
        if job.version is None:
            return None
        return {"name": str(job.version), "pid": job.version.pid}
