"""The Celery app. Queues: ``convert`` (conversions), ``cpu`` and ``gpu`` (inference, benchmarks).

The web process sends tasks by name with this app (``hub.jobs.services``); workers start from
``workers.celery``, which adds the worker's own steps to it: ``celery -A workers worker -Q convert,cpu``.
Settings come from Django's (``CELERY_*``), so the broker is ``HUB_BROKER_URL`` or the embedded filesystem
broker.
"""

import logging
import os
import warnings

from celery import Celery
from celery.exceptions import SecurityWarning
from kombu import Queue


class _NoHostnameNote(logging.Filter):
    """kombu's "No hostname was supplied" (every connection of the filesystem broker, which has no host)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("No hostname was supplied")


logging.getLogger("kombu.connection").addFilter(_NoHostnameNote())
if os.environ.get("HUB_BROKER_URL", "filesystem://").startswith("filesystem://") and os.geteuid() == 0:
    # the embedded default in a container runs as root: hub_serve says so once (the pickle-less worker is
    # what Celery's warning is about, and it takes JSON only), not Celery at each worker start
    warnings.filterwarnings("ignore", category=SecurityWarning)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hub.settings")

app = Celery("hpcfair")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_queues = [Queue("convert"), Queue("cpu"), Queue("gpu")]
# Task modules load in worker processes only: the web process sends tasks by name.
app.conf.imports = ["workers.tasks"]
