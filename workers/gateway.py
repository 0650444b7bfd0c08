"""The synchronous gateway inside each Celery worker: the lanes of the worker's device queues (``cpu``,
``gpu``) served by engine processes, one per lane thread.

The threads live in the worker's main process (a bootstep), next to the Celery consumer; each keeps an
engine process (``hub.gateway.engine``) that takes the lane's requests, runs them under a memory bound and a
deadline (and keeps the cached sessions) and answers; the thread answers for it when it dies or overruns.
A worker started with ``-Q convert,cpu`` serves the ``cpu`` lane, one with ``-Q gpu`` the ``gpu`` lane,
but only when ONNX Runtime offers CUDA there, so GPU work is never run on a CPU by mistake.
``HUB_GATEWAY_THREADS`` threads per worker (default 2) take requests concurrently. With ``HUB_GATEWAY_LOCAL``
the worker also listens on a Unix socket per lane that its engines share, and announces it, so that web
processes on this host send their runs there instead of through the lane (``hub.gateway.local``).

Each device lane also has ``HUB_GENERATE_ENGINES`` generation engines (``hub.generation.engine``), child
processes serving the lane ``generate-<device>``; a thread starts each one again when it dies.
"""

from __future__ import annotations

import logging
import os
import socket
import threading

from celery import bootsteps

log = logging.getLogger(__name__)
DEVICE_QUEUES = ("cpu", "gpu")
WATCH_S = 0.25  # how often a lane thread looks at its engine (runs are stopped GRACE_S after their deadline)


class GatewayServer:
    """Announce this worker on its lanes and serve them until stopped."""

    def __init__(self, queues: list[str], threads: int, generate_engines: int = 0) -> None:
        from hub.gateway.lane import get_lane

        self.lane = get_lane()
        self.queues = queues
        self.threads = threads
        self.stop_event = threading.Event()
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}"
        self.pool: list[threading.Thread] = []
        self.generate_engines = generate_engines
        self.listeners: dict = {}  # queue -> hub.gateway.local.Listener

    def start(self) -> None:
        from django.conf import settings

        from hub.gateway import local

        if settings.HUB_GATEWAY_LOCAL and local.host():
            for queue in self.queues:
                try:
                    self.listeners[queue] = local.Listener(queue)
                except OSError:
                    log.warning("gateway: no local socket for lane %s; web processes use the lane", queue,
                                exc_info=True)
        self._announce()
        self.pool = [threading.Thread(target=self._announcer, name="gateway-announce", daemon=True)]
        for queue in self.queues:
            for index in range(self.threads):
                self.pool.append(threading.Thread(target=self._loop, args=(queue,), name=f"gateway-{queue}-{index}",
                                                  daemon=True))
            for index in range(self.generate_engines):
                self.pool.append(threading.Thread(target=self._generate, args=(f"generate-{queue}",),
                                                  name=f"generate-{queue}-{index}", daemon=True))
        for thread in self.pool:
            thread.start()
        log.info("gateway: serving lanes %s with %d thread(s) each", ", ".join(self.queues), self.threads)

    def stop(self) -> None:
        self.stop_event.set()
        for queue in self.queues:
            try:
                self.lane.withdraw(queue, self.worker_id, self._address(queue))
            except Exception:  # noqa: BLE001 - the broker may be gone at shutdown
                log.warning("gateway: could not withdraw from %s", queue)
        for thread in self.pool:
            thread.join(timeout=5)
        for listener in self.listeners.values():
            listener.close()
        self.listeners.clear()

    def _address(self, queue: str) -> str:
        listener = self.listeners.get(queue)
        return listener.address if listener is not None else ""

    def _announce(self) -> None:
        for queue in self.queues:
            self.lane.announce(queue, self.worker_id, self._address(queue))

    def _announcer(self) -> None:
        from hub.gateway.lane import ANNOUNCE_S

        while not self.stop_event.wait(ANNOUNCE_S):
            try:
                self._announce()
            except Exception:  # noqa: BLE001 - a broker hiccup; try again at the next beat
                log.warning("gateway: could not announce this worker", exc_info=True)

    def _loop(self, queue: str) -> None:
        """Keep this thread's lane engine serving: it takes the lane's requests itself; this thread answers
        for it when it dies or runs past a deadline, and starts another (``hub.gateway.engine.Engine.watch``)."""
        from hub.gateway.engine import Engine, EngineError

        listener = self.listeners.get(queue)
        engine = Engine(lane=queue, listener=listener.fd if listener is not None else None,
                        datagram=listener.datagram_fd if listener is not None else None)
        try:
            while not self.stop_event.is_set():
                try:
                    engine.watch(self.lane)
                except (EngineError, OSError):
                    log.error("gateway: the engine of lane %s could not start", queue, exc_info=True)
                    self.stop_event.wait(5.0)
                    continue
                except Exception:  # noqa: BLE001 - the broker went away for a moment
                    log.warning("gateway: lane %s unavailable", queue, exc_info=True)
                self.stop_event.wait(WATCH_S)
        finally:
            engine.stop()


    def _generate(self, queue: str) -> None:
        """Keep a generation engine serving ``queue``: stopped a second past a request's deadline and its
        caller answered, answered for when it dies, started again (``hub.generation.engine.Keeper``)."""
        from hub.generation.engine import Keeper

        keeper = Keeper(queue)
        try:
            while not self.stop_event.is_set():
                try:
                    keeper.watch(self.lane)
                except OSError:
                    log.error("gateway: the generation engine of %s could not start", queue, exc_info=True)
                    self.stop_event.wait(5.0)
                    continue
                self.stop_event.wait(WATCH_S)
        finally:
            keeper.stop()


def lanes_for(consumed: list[str]) -> list[str]:
    """The device lanes a worker consuming these Celery queues serves."""
    from hub.gateway.sessions import gpu_available

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
            self.server = GatewayServer(lanes, settings.HUB_GATEWAY_THREADS, settings.HUB_GENERATE_ENGINES)
            self.server.start()

    def stop(self, worker) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None
