"""Hardware benchmarks: latency of a model version measured by a worker, per batch size.

A version is immutable; measurements made after it was published are observations about it, kept
here and merged into its metadata record (``benchmarks``) wherever the record is exported or indexed.
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django.utils import timezone


class Benchmark(models.Model):
    version = models.ForeignKey("registry.Version", on_delete=models.CASCADE, related_name="benchmarks")
    job = models.ForeignKey("jobs.Job", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    hardware = models.JSONField(help_text="{kind: cpu|gpu, cpu_model, cores, memory_gb, gpu_model}")
    provider = models.CharField(max_length=64)
    batch_size = models.PositiveIntegerField()
    runs = models.PositiveIntegerField()
    median_ms = models.FloatField()
    p95_ms = models.FloatField()
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["version", "-created", "batch_size"]

    def __str__(self) -> str:
        return f"{self.version} on {self.hardware.get('kind')}: batch {self.batch_size}, {self.median_ms:.3f} ms"

    def as_metadata(self) -> dict[str, Any]:
        """The entry of the metadata field ``benchmarks`` (see ``ontology.fields.benchmarks``)."""
        return {"hardware": self.hardware, "batch_size": self.batch_size, "median_ms": self.median_ms,
                "p95_ms": self.p95_ms, "provider": self.provider, "runs": self.runs,
                "date": self.created.date().isoformat()}


def measured(version) -> list[dict[str, Any]]:
    """The version's latest measurement per hardware and batch size, as metadata entries (no query where
    ``benchmarks`` was prefetched, as the SPARQL store's render does for a batch)."""
    seen, out = set(), []
    for row in sorted(version.benchmarks.all(), key=lambda row: row.created, reverse=True):
        key = (repr(sorted(row.hardware.items())), row.provider, row.batch_size)
        if key not in seen:
            seen.add(key)
            out.append(row.as_metadata())
    return sorted(out, key=lambda m: (m["hardware"].get("kind", ""), m["batch_size"]))
