from django.apps import AppConfig


class SearchConfig(AppConfig):
    name = "hub.search"
    label = "search"

    def ready(self) -> None:
        from hub.registry.signals import artifact_changed, version_published
        from hub.search import index

        version_published.connect(index.on_version_published, dispatch_uid="search.version_published")
        artifact_changed.connect(index.on_artifact_changed, dispatch_uid="search.artifact_changed")
