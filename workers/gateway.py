"""The synchronous gateway inside each Celery worker: a door per device queue (``cpu``, ``gpu``) and per
generation queue (``generate-cpu``...), on the gateway's channel (``hub.gateway.channel.Door``), announced
in the gateway's presence (``hub.gateway.presence``).

The doors live in the worker's main process (a bootstep), next to the Celery consumer. Behind each, handler
threads own one engine child each (``hub.gateway.engine.RunHandler``; ``hub.generation.engine.Keeper`` for
generation), which serves only its parent: the thread sends it each call, stops it past its deadline and
answers for it when it dies. A worker started with ``-Q convert,cpu`` serves ``cpu``, one with ``-Q gpu``
serves ``gpu``, but only when ONNX Runtime offers CUDA there, so GPU work is never run on a CPU by mistake.
``HUB_GATEWAY_THREADS`` handlers per device queue (default 2); ``HUB_GENERATE_ENGINES`` generation engines.
"""

from __future__ import annotations

import logging
import os
import socket
import threading

from celery import bootsteps

log = logging.getLogger(__name__)
DEVICE_QUEUES = ("cpu", "gpu")


class GatewayServer:
    """Open this worker's doors, announce them and serve them until stopped."""

    def __init__(self, queues: list[str], threads: int, generate_engines: int = 0) -> None:
        from hub.gateway.presence import get_presence

        self.presence = get_presence()
        self.queues = queues
        self.threads = threads
        self.generate_engines = generate_engines
        self.stop_event = threading.Event()
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}"
        self.doors: list = []  # hub.gateway.channel.Door
        self.announcer: threading.Thread | None = None

    def start(self) -> None:
        from hub.gateway.channel import Door, sweep
        from hub.gateway.engine import START_S, RunHandler
        from hub.generation.engine import Keeper

        sweep()
        for queue in self.queues:
            self.doors.append(Door(queue, [RunHandler(queue) for _ in range(self.threads)], self.worker_id))
            if self.generate_engines:
                self.doors.append(Door(f"generate-{queue}", [Keeper() for _ in range(self.generate_engines)],
                                       self.worker_id))
        for door in self.doors:
            door.wait_ready(START_S)  # announced once its engines are up: the first call does not wait for them
        self._announce()
        self.announcer = threading.Thread(target=self._announcer, name="gateway-announce", daemon=True)
        self.announcer.start()
        log.info("gateway: serving %s with %d thread(s) each", ", ".join(door.queue for door in self.doors),
                 self.threads)

    def stop(self) -> None:
        self.stop_event.set()
        for door in self.doors:
            try:
                self.presence.withdraw(door.queue, door.address)
            except Exception:  # noqa: BLE001 - the broker may be gone at shutdown
                log.warning("gateway: could not withdraw from %s", door.queue)
        for door in self.doors:
            door.close()
        self.doors.clear()

    def _announce(self) -> None:
        for door in self.doors:
            self.presence.announce(door.queue, door.address)

    def _announcer(self) -> None:
        from hub.gateway.presence import ANNOUNCE_S

        while not self.stop_event.wait(ANNOUNCE_S):
            try:
                self._announce()
            except Exception:  # noqa: BLE001 - a broker hiccup; try again at the next beat
                log.warning("gateway: could not announce this worker", exc_info=True)


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
