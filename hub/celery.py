"""The Celery app. Queues: ``convert`` (conversions), ``cpu`` and ``gpu`` (inference, benchmarks).

The web process sends tasks by name with this app (``hub.jobs.services``); workers start from
``workers.celery``, which adds the worker's own steps to it: ``celery -A workers worker -Q convert,cpu``.
Settings come from Django's (``CELERY_*``), so the broker is ``HUB_BROKER_URL`` or the embedded filesystem
broker.
"""

import os

from celery import Celery
from kombu import Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hub.settings")

app = Celery("hpcfair")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_queues = [Queue("convert"), Queue("cpu"), Queue("gpu")]
# Task modules load in worker processes only: the web process sends tasks by name.
app.conf.imports = ["workers.tasks"]
