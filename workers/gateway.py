"""The synchronous gateway inside each Celery worker: threads that take requests from the lanes of the
worker's device queues (``cpu``, ``gpu``), have them run and answer.

The threads live in the worker's main process (a bootstep), next to the Celery consumer; each hands its
requests to its own engine process (``workers.engine``), which runs them under a memory bound and a
deadline (and keeps the cached sessions). A worker started with ``-Q convert,cpu`` serves the ``cpu``
lane, one with ``-Q gpu`` the ``gpu`` lane, but only when ONNX Runtime offers CUDA there, so GPU work is
never run on a CPU by mistake.
``HUB_GATEWAY_THREADS`` threads per worker (default 2) take requests concurrently.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import traceback

from celery import bootsteps

log = logging.getLogger(__name__)
DEVICE_QUEUES = ("cpu", "gpu")


def answer_request(lane, request_id: str, message: bytes, device: str) -> None:
    """Have this thread's engine (``workers.engine``) run one lane request and put its answer (outputs, or
    a code and a message) on its reply slot."""
    from hub.gateway import wire
    from workers.engine import engine

    try:
        meta, _ = wire.unpack(message)
        deadline = float(meta.get("deadline", 0))
    except (wire.WireError, ValueError, KeyError, TypeError) as exc:
        log.warning("gateway: dropped a malformed request: %s", exc)
        return
    if time.time() > deadline + 1:
        return  # its caller has given up already
    try:
        answer = engine().call(message, device=device, deadline=deadline)
    except Exception:  # noqa: BLE001 - logged here with its traceback; the caller gets a code only
        log.error("gateway: request %s failed:\n%s", request_id, traceback.format_exc())
        answer = wire.pack({"ok": False, "code": "internal_error", "detail": "The worker failed unexpectedly."})
    lane.reply(request_id, answer)


class GatewayServer:
    """Announce this worker on its lanes and serve them until stopped."""

    def __init__(self, queues: list[str], threads: int) -> None:
        from hub.gateway.lane import get_lane

        self.lane = get_lane()
        self.queues = queues
        self.threads = threads
        self.stop_event = threading.Event()
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}"
        self.pool: list[threading.Thread] = []

    def start(self) -> None:
        self._announce()
        self.pool = [threading.Thread(target=self._announcer, name="gateway-announce", daemon=True)]
        for queue in self.queues:
            for index in range(self.threads):
                self.pool.append(threading.Thread(target=self._loop, args=(queue,), name=f"gateway-{queue}-{index}",
                                                  daemon=True))
        for thread in self.pool:
            thread.start()
        log.info("gateway: serving lanes %s with %d thread(s) each", ", ".join(self.queues), self.threads)

    def stop(self) -> None:
        self.stop_event.set()
        for queue in self.queues:
            try:
                self.lane.withdraw(queue, self.worker_id)
            except Exception:  # noqa: BLE001 - the broker may be gone at shutdown
                log.warning("gateway: could not withdraw from %s", queue)
        for thread in self.pool:
            thread.join(timeout=5)

    def _announce(self) -> None:
        for queue in self.queues:
            self.lane.announce(queue, self.worker_id)

    def _announcer(self) -> None:
        from hub.gateway.lane import ANNOUNCE_S

        while not self.stop_event.wait(ANNOUNCE_S):
            try:
                self._announce()
            except Exception:  # noqa: BLE001 - a broker hiccup; try again at the next beat
                log.warning("gateway: could not announce this worker", exc_info=True)

    def _loop(self, queue: str) -> None:
        from django.db import connection

        from workers.engine import engine

        try:
            engine().start()  # ready before the first request (a new one replaces it if it dies)
            while not self.stop_event.is_set():
                try:
                    found = self.lane.pop([queue], timeout=1.0)
                except Exception:  # noqa: BLE001 - the broker went away for a moment
                    log.warning("gateway: lane %s unavailable", queue, exc_info=True)
                    self.stop_event.wait(1.0)
                    continue
                if found is not None:
                    answer_request(self.lane, found[0], found[1], queue)
        finally:
            engine().close()
            connection.close()


def lanes_for(consumed: list[str]) -> list[str]:
    """The device lanes a worker consuming these Celery queues serves."""
    from workers.sessions import gpu_available

    lanes = [queue for queue in DEVICE_QUEUES if queue in consumed]
    if "gpu" in lanes and not gpu_available():
        log.error("gateway: this worker consumes the gpu queue but ONNX Runtime has no CUDA provider; it will "
                  "not serve GPU requests (install onnxruntime-gpu on a GPU node)")
        lanes.remove("gpu")
    return lanes


class GatewayStep(bootsteps.StartStopStep):
    """Runs a ``GatewayServer`` for the lifetime of a Celery worker."""

    requires = {"celery.worker.components:Pool"}

    def __init__(self, worker, **kwargs) -> None:
        super().__init__(worker, **kwargs)
        self.server: GatewayServer | None = None

    def start(self, worker) -> None:
        from django.conf import settings

        consumed = list(worker.app.amqp.queues.consume_from or worker.app.amqp.queues)
        lanes = lanes_for(consumed)
        if lanes and settings.HUB_GATEWAY_THREADS > 0:
            self.server = GatewayServer(lanes, settings.HUB_GATEWAY_THREADS)
            self.server.start()

    def stop(self, worker) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None
