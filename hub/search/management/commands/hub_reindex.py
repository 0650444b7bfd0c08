"""``python manage.py hub_reindex``: rebuild the search index from the registry (``migrate`` does it by
itself when the index's format changed; this is for an index that went out of step some other way)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from hub.search.backends import backend
from hub.search.index import rebuild


class Command(BaseCommand):
    help = "Rebuild the search index of every live artifact (and retire entries of deleted ones)."

    def handle(self, *args, **options) -> None:
        self.stdout.write(f"indexed {rebuild()} artifacts")
        backend().rebuild()  # a store of the backend's own (the default has none)
