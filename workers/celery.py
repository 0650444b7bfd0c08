"""The Celery app. Queues: ``convert`` (conversions), ``cpu`` and ``gpu`` (inference, benchmarks).

Start a worker with ``celery -A workers worker -Q convert,cpu``; settings come from Django's
(``CELERY_*``), so the broker is ``HUB_BROKER_URL`` or the embedded filesystem broker.
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
# Worker bootsteps are named, as Celery names its own, and loaded when a worker starts: the web process
# imports this app to send tasks, and the steps' modules use the job services that import it.
# Each worker also serves the synchronous gateway lanes of its device queues (workers.gateway).
app.steps["worker"].add("workers.gateway:GatewayStep")
# Each worker also looks for stuck jobs (workers.reaper).
app.steps["worker"].add("workers.reaper:ReaperStep")
# ... and collects garbage every HUB_GC_INTERVAL_S (workers.housekeeping).
app.steps["worker"].add("workers.housekeeping:HousekeepingStep")
# ... and follows the hub's Slurm jobs when HUB_EXECUTOR=slurm (workers.slurm_poller).
app.steps["worker"].add("workers.slurm_poller:SlurmPollStep")
