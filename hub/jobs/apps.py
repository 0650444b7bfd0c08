from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "hub.jobs"
    label = "jobs"

    def ready(self) -> None:
        """Register every kind of job: import the ``jobs`` module of each installed app (``hub.jobs.kinds``)."""
        from django.utils.module_loading import autodiscover_modules

        autodiscover_modules("jobs")
