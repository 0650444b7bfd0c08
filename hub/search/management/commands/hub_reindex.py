"""``python manage.py hub_reindex``: rebuild the search index from the registry."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from hub.registry.models import Artifact
from hub.search.index import reindex


class Command(BaseCommand):
    help = "Rebuild the search index of every live artifact (and retire entries of deleted ones)."

    def handle(self, *args, **options) -> None:
        for artifact in Artifact.objects.filter(deleted_at__isnull=False, search_entry__live=True):
            reindex(artifact)  # retires the entry
        count = 0
        for artifact in Artifact.objects.live().select_related("owner").iterator():
            reindex(artifact)
            count += 1
        self.stdout.write(f"indexed {count} artifacts")
