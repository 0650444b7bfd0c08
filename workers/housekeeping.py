"""Housekeeping while the hub runs: every worker collects garbage (``hub.registry.gc``) every
``HUB_GC_INTERVAL_S``, so staged bytes of abandoned uploads and requests that died do not wait for a
manual ``hub_gc``.

Why a worker bootstep and not Celery beat: beat is one more process that must run exactly once per
deployment (hub_serve, the image, compose and every test hub would each have to start it), and a
collection sent as a task would queue behind conversions. A thread in each worker needs nothing new to
run; a PostgreSQL advisory lock lets one worker collect at a time, and any worker that is up does it.
"""

from __future__ import annotations

import logging
import threading

from celery import bootsteps

log = logging.getLogger(__name__)


class HousekeepingStep(bootsteps.StartStopStep):
    """Runs ``collect_once_across_workers`` every ``HUB_GC_INTERVAL_S`` seconds (0 turns it off)."""

    def __init__(self, worker, **kwargs) -> None:
        super().__init__(worker, **kwargs)
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self, worker) -> None:
        from django.conf import settings

        interval = settings.HUB_GC_INTERVAL_S
        if interval > 0:
            self.thread = threading.Thread(target=self.run, args=(interval,), name="hub-gc", daemon=True)
            self.thread.start()

    def run(self, interval: float) -> None:
        from django.conf import settings
        from django.db import close_old_connections

        from hub.registry.gc import collect_once_across_workers

        while not self.stopping.wait(interval):
            try:
                done = collect_once_across_workers(settings.HUB_GC_GRACE_S / 3600)
                if done is not None:
                    log.info("garbage collected: %s", done)
            except Exception:  # noqa: BLE001 - a database or store hiccup: the next round tries again
                log.exception("garbage collection failed")
            finally:
                close_old_connections()

    def stop(self, worker) -> None:
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(timeout=30)
            self.thread = None
