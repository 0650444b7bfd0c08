"""Where a serve job's server answers (``hub.generation.serving``)."""

from __future__ import annotations

from django.db import models


class Endpoint(models.Model):
    """A serve job's server: its secret (the bearer token only the hub sends it), and its URL once it announced
    itself; the hub routes ``/v1/*`` for the job's version there while the job runs."""

    job = models.OneToOneField("jobs.Job", on_delete=models.CASCADE, primary_key=True, related_name="endpoint")
    secret = models.CharField(max_length=100)
    url = models.CharField(max_length=300, blank=True, help_text="Empty until the server announced itself.")
    announced = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"endpoint of job {self.job_id}: {self.url or 'not announced'}"
