"""The metadata app's one table: where a shared SPARQL store stands (``hub.metadata.rdfstore``)."""

from __future__ import annotations

from django.db import models


class SparqlState(models.Model):
    """One row: the registry generation the shared SPARQL server holds. Its lock is held while a web node
    syncs the server, so syncs apply changes one after the other."""

    generation = models.BigIntegerField(default=0)
    format = models.IntegerField(default=1)  # rdfstore.RENDER_FORMAT of the graphs the server holds

    def __str__(self) -> str:
        return f"SPARQL store at generation {self.generation}"
