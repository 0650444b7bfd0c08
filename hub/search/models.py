"""The search index: one entry per artifact (its latest version's metadata), with facet values.

PostgreSQL keeps a weighted ``tsvector`` in ``search_vector`` (GIN-indexed by migration 0002); other
databases leave it empty and search the text columns instead. Every change to an entry takes the next
``SearchState.generation`` as its ``seq`` (a deleted artifact's entry stays, with ``live`` off), so that
each process (``hub.search.index_copy``) can load exactly what changed since the host's base was built.
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.contrib.postgres.search import SearchVectorField
from django.db import models

from hub.registry.models import Artifact, Version

FACETS = ("kind", "framework", "format", "task", "license", "keyword", "owner", "hardware", "standard_name",
          "variable", "quantization")


class SearchEntry(models.Model):
    artifact = models.OneToOneField(Artifact, primary_key=True, on_delete=models.CASCADE,
                                    related_name="search_entry")
    version = models.ForeignKey(Version, null=True, on_delete=models.SET_NULL, related_name="+")  # newest live
    # the version the artifact stands for (hub.registry.lineage.current_version): what a listing shows
    current = models.ForeignKey(Version, null=True, on_delete=models.SET_NULL, related_name="+")
    kind = models.CharField(max_length=16)
    visibility = models.CharField(max_length=16)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    title = models.CharField(max_length=300)
    keywords = models.TextField(blank=True)
    text = models.TextField(blank=True)  # name, description, creators, model card
    updated = models.DateTimeField()
    search_vector = SearchVectorField(null=True, editable=False)
    # Made by the hub from this artifact (its MLCube, inference outputs): listed under it, not beside it.
    parent = models.ForeignKey(Artifact, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    live = models.BooleanField(default=True)  # off once the artifact is deleted
    seq = models.BigIntegerField(default=0, db_index=True)  # the generation that last changed the entry

    class Meta:
        indexes = [models.Index(fields=["visibility", "kind"]), models.Index(fields=["-updated"])]

    def __str__(self) -> str:
        return f"search entry of {self.artifact_id}"


class FacetValue(models.Model):
    entry = models.ForeignKey(SearchEntry, on_delete=models.CASCADE, related_name="facets")
    facet = models.CharField(max_length=16)
    value = models.CharField(max_length=200)

    class Meta:
        indexes = [models.Index(fields=["facet", "value", "entry"])]
        constraints = [models.UniqueConstraint(fields=["entry", "facet", "value"], name="facet_value_unique")]

    def __str__(self) -> str:
        return f"{self.facet}={self.value}"


def new_epoch() -> str:
    return secrets.token_hex(8)


class SearchState(models.Model):
    """One row: the index's generation, raised (under the row's lock) by every change to an entry, so
    generations are handed out in commit order."""

    generation = models.BigIntegerField(default=0)
    # Made with the row: a host's base names the epoch it was built from, so that a database restored, recreated
    # or swapped under the same folder (whose generations may repeat) never answers from it.
    epoch = models.CharField(max_length=32, default=new_epoch)
    # The index.INDEX_FORMAT the entries were built with: `migrate` rebuilds them when the code's differs.
    format = models.IntegerField(default=0)

    def __str__(self) -> str:
        return f"search generation {self.generation}"
