"""The Celery worker: the hub's app (``hub.celery``) with the worker's own steps.

Start a worker with ``celery -A workers worker -Q convert,cpu``.
"""

from hub.celery import app

__all__ = ["app"]

# Worker bootsteps are named, as Celery names its own, and loaded when a worker starts.
# Each worker also serves the synchronous gateway lanes of its device queues (workers.gateway).
app.steps["worker"].add("workers.gateway:GatewayStep")
# Each worker also looks for stuck jobs (workers.reaper).
app.steps["worker"].add("workers.reaper:ReaperStep")
# ... and collects garbage every HUB_GC_INTERVAL_S (workers.housekeeping).
app.steps["worker"].add("workers.housekeeping:HousekeepingStep")
# ... and opens the files of versions whose embargo has ended, every HUB_EMBARGO_INTERVAL_S (workers.housekeeping).
app.steps["worker"].add("workers.housekeeping:EmbargoStep")
# ... and bounds its local copies of models, dropping those of deleted blobs (workers.housekeeping).
app.steps["worker"].add("workers.housekeeping:CacheSweepStep")
# ... and follows the hub's batch jobs when HUB_EXECUTORS names a batch executor (workers.batch_poller).
app.steps["worker"].add("workers.batch_poller:BatchPollStep")
