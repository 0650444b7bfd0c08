"""The Celery app. Queues: ``convert`` (conversions), ``cpu`` and ``gpu`` (inference, benchmarks).

Start a worker with ``celery -A workers worker -Q convert,cpu``; settings come from Django's
(``CELERY_*``), so the broker is ``HUB_BROKER_URL`` or the embedded filesystem broker.
"""

import os

from celery import Celery
from kombu import Queue

from workers.gateway import GatewayStep
from workers.housekeeping import HousekeepingStep
from workers.reaper import ReaperStep
from workers.slurm_poller import SlurmPollStep

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hub.settings")

app = Celery("hpcfair")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_queues = [Queue("convert"), Queue("cpu"), Queue("gpu")]
# Task modules load in worker processes only: the web process sends tasks by name.
app.conf.imports = ["workers.tasks"]
# Each worker also serves the synchronous gateway lanes of its device queues (workers.gateway).
app.steps["worker"].add(GatewayStep)
# Each worker also looks for stuck jobs (workers.reaper).
app.steps["worker"].add(ReaperStep)
# ... and collects garbage every HUB_GC_INTERVAL_S (workers.housekeeping).
app.steps["worker"].add(HousekeepingStep)
# ... and follows the hub's Slurm jobs when HUB_EXECUTOR=slurm (workers.slurm_poller).
app.steps["worker"].add(SlurmPollStep)
