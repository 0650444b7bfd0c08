from django.apps import AppConfig
from django.db.models.signals import post_migrate


def rebuild_outdated_index(sender, verbosity: int = 1, **kwargs) -> None:
    """After ``migrate``: rebuild the search index when the code indexes differently from what made it. Each
    artifact's entry commits on its own (``index.reindex``): one transaction over the catalogue would hold the
    index's generation row, and with it every publish of every web node, for the whole rebuild (minutes at
    100k artifacts)."""
    from django.db import DatabaseError, connection, transaction

    from hub.search import fts
    from hub.search.index import outdated, rebuild

    if fts.install(connection) and verbosity:  # a migration that remade the entries' table dropped its triggers
        print("  Search: SQLite's full-text index made again.")

    try:
        with transaction.atomic():
            stale = outdated()
    except DatabaseError:  # a partial `migrate` (to an older state) left the index's tables behind
        return
    count = rebuild() if stale else None
    if count and verbosity:
        print(f"  Search index rebuilt for this version of the hub: {count} artifacts.")


class SearchConfig(AppConfig):
    name = "hub.search"
    label = "search"

    def ready(self) -> None:
        from hub.registry.signals import artifact_changed, version_published
        from hub.search import index

        version_published.connect(index.on_version_published, dispatch_uid="search.version_published")
        artifact_changed.connect(index.on_artifact_changed, dispatch_uid="search.artifact_changed")
        post_migrate.connect(rebuild_outdated_index, sender=self, dispatch_uid="search.rebuild_outdated_index")
