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


class PeriodicStep(bootsteps.StartStopStep):
    """A worker thread that calls ``tick()`` every ``interval()`` seconds (0: not started), with fresh database
    connections each round; an error is logged and the next round tries again."""

    name_of_thread = "hub-periodic"

    def __init__(self, worker, **kwargs) -> None:
        super().__init__(worker, **kwargs)
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None

    def interval(self) -> float:
        raise NotImplementedError

    def tick(self) -> None:
        raise NotImplementedError

    def start(self, worker) -> None:
        interval = self.interval()
        if interval > 0:
            self.thread = threading.Thread(target=self.run, args=(interval,), name=self.name_of_thread, daemon=True)
            self.thread.start()

    def run(self, interval: float) -> None:
        from django.db import close_old_connections

        while not self.stopping.wait(interval):
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - a database or store hiccup: the next round tries again
                log.exception("%s failed", self.name_of_thread)
            finally:
                close_old_connections()

    def stop(self, worker) -> None:
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(timeout=30)
            self.thread = None


class HousekeepingStep(PeriodicStep):
    """Runs ``collect_once_across_workers`` every ``HUB_GC_INTERVAL_S`` seconds (0 turns it off)."""

    name_of_thread = "hub-gc"

    def interval(self) -> float:
        from django.conf import settings

        return settings.HUB_GC_INTERVAL_S

    def tick(self) -> None:
        from django.conf import settings

        from hub.registry.gc import collect_once_across_workers

        done = collect_once_across_workers(settings.HUB_GC_GRACE_S / 3600)
        if done is not None:
            log.info("garbage collected: %s", done)


class EmbargoStep(PeriodicStep):
    """Opens the files of versions whose embargo date has passed (``hub.registry.files_access.lift_embargoes``)
    every ``HUB_EMBARGO_INTERVAL_S`` seconds (0 turns it off). Any worker may: the update is conditional, so two
    that race write one audit line between them. Until it runs, ``files_state`` treats a past date as open."""

    name_of_thread = "hub-embargo"

    def interval(self) -> float:
        from django.conf import settings

        return settings.HUB_EMBARGO_INTERVAL_S

    def tick(self) -> None:
        from hub.registry.files_access import lift_embargoes

        lifted = lift_embargoes()
        if lifted:
            log.info("embargoes lifted: %d", lifted)


class CacheSweepStep(PeriodicStep):
    """Sweeps this worker's local copies of models (``hub.gateway.localcache``) as it starts and every
    ``HUB_WORKER_CACHE_SWEEP_S`` seconds: the copies of blobs no live version references are dropped (the
    registry's deletion cannot reach this disk), and the least recently used go while they take more than
    ``HUB_WORKER_CACHE_MB``."""

    name_of_thread = "hub-cache-sweep"

    def interval(self) -> float:
        from django.conf import settings

        return settings.HUB_WORKER_CACHE_SWEEP_S

    def start(self, worker) -> None:
        threading.Thread(target=self._first, args=(worker,), name=self.name_of_thread, daemon=True).start()

    def _first(self, worker) -> None:
        """One sweep at start, then the periodic ones (if any)."""
        from django.db import close_old_connections

        try:
            self.tick()
        except Exception:  # noqa: BLE001 - the next round tries again
            log.exception("%s failed", self.name_of_thread)
        finally:
            close_old_connections()
        super().start(worker)

    def tick(self) -> None:
        from django.conf import settings

        from hub.gateway import localcache

        report = localcache.sweep(localcache.configured_roots(), settings.HUB_WORKER_CACHE_BYTES,
                                  grace_s=settings.HUB_WORKER_CACHE_GRACE_S, referenced=localcache.still_referenced)
        if report:
            log.info("local model copies: dropped %d of deleted blobs, evicted %d for room; %d bytes held",
                     len(report.dropped), len(report.evicted), report.held_bytes)
