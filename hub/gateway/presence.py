"""Who serves which device, and the registry's generation: the gateway's ``Presence``, apart from the channel
that carries the calls (``hub.gateway.channel``).

A worker announces, every ``ANNOUNCE_S``, the addresses of its doors for each queue it serves (``cpu``,
``gpu``, ``generate-cpu``...): its host, an ``ipc://`` endpoint on that host and, where it listens across
hosts, a ``tcp://`` endpoint. A web process reads them (``addresses``) to know whom to connect to; a queue
with no address announced within ``ALIVE_S`` has no worker (``NoWorker``).

The *generation* is a counter bumped on every registry change that could alter who may run what
(``hub.gateway.memory``), so that web processes may cache those answers: a call carries the generation of
its caller's answers and is refused (``Stale``) when it is no longer current.

Two stores with one interface: ``RedisPresence`` (deployment, the full stack: a sorted set per queue, the
counter with a notice to subscribers, ``Heard``) and ``FilePresence`` (the embedded default: files under
``var/gateway``).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Protocol

import orjson
from django.conf import settings

from hub.errors import HubError

ALIVE_S = 6.0  # a worker that has not announced itself for this long is gone
ANNOUNCE_S = 2.0
CONNECT_TIMEOUT_S = 3.0


class NoWorker(Exception):
    """No worker serves the requested queue."""


class Stale(Exception):
    """The registry changed since the caller's cached answers were made; nothing was sent."""

    def __init__(self, generation: bytes) -> None:
        super().__init__("registry generation changed")
        self.generation = generation


class Presence(Protocol):
    def announce(self, queue: str, address: dict) -> None: ...
    def withdraw(self, queue: str, address: dict) -> None: ...
    def addresses(self, queue: str) -> list[dict]: ...
    def generation(self) -> bytes: ...
    def generation_heard(self) -> bytes | None: ...
    def bump(self) -> None: ...


def alive(presence: Presence, queue: str) -> bool:
    return bool(presence.addresses(queue))


@contextmanager
def reachable() -> Iterator[None]:
    """Redis that cannot be reached (refused, timed out) as the hub's 503 ``broker_unavailable``: the web
    process's side of presence never fails as a 500."""
    import redis

    try:
        yield
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
        raise HubError("broker_unavailable", "The hub's job queue (Redis) cannot be reached, so nothing can "
                                             "run now. Try again shortly; if it lasts, tell the hub's "
                                             "administrators.") from exc


def _member(address: dict) -> bytes:
    return orjson.dumps(address, option=orjson.OPT_SORT_KEYS)


class RedisPresence:
    GENERATION = "hub:gw:generation"
    # The counter and its notice in one step, so that notices come in the counter's order.
    BUMP = """
    local generation = redis.call('incr', KEYS[1])
    redis.call('publish', KEYS[1], generation)
    return generation
    """

    def __init__(self, url: str) -> None:
        import redis

        self.redis = redis.Redis.from_url(url, health_check_interval=30, socket_timeout=CONNECT_TIMEOUT_S + 2,
                                          socket_connect_timeout=CONNECT_TIMEOUT_S)
        self.heard = Heard(self.redis, self.GENERATION)

    @staticmethod
    def _key(queue: str) -> str:
        return f"hub:gw:doors:{queue}"

    def announce(self, queue: str, address: dict) -> None:
        now = time.time()
        pipe = self.redis.pipeline(transaction=False)
        pipe.zadd(self._key(queue), {_member(address): now})
        pipe.zremrangebyscore(self._key(queue), "-inf", now - 10 * ALIVE_S)
        pipe.execute()

    def withdraw(self, queue: str, address: dict) -> None:
        self.redis.zrem(self._key(queue), _member(address))

    def addresses(self, queue: str) -> list[dict]:
        with reachable():
            found = self.redis.zrangebyscore(self._key(queue), time.time() - ALIVE_S, "+inf")
        return [orjson.loads(raw) for raw in found]

    def generation(self) -> bytes:
        with reachable():
            return self.redis.get(self.GENERATION) or b"0"

    def bump(self) -> None:
        with reachable():
            self.heard.told(self.redis.eval(self.BUMP, 1, self.GENERATION))

    def generation_heard(self) -> bytes | None:
        """The generation as this process last heard it announced (``Heard``), without a round trip; None
        when it is not listening, or not sure it still hears (then ask: ``generation``)."""
        return self.heard.current()


class Heard:
    """The registry's generation as this process hears it: a subscription to the bumps' notices (one
    connection per process), read without waiting on each ask, so that a web process checks a call's
    generation with no round trip to Redis.

    A bump publishes its new value in the same script that counts it, and Redis writes the notice to every
    subscriber's socket before it goes on with other commands: a request that comes after the bump's caller
    has heard its answer finds the notice waiting (strict in the same way as asking Redis). The
    subscription is checked with a ``PING`` every ``PING_S`` (its answer read with the notices, never
    waited for); one unanswered after ``PONG_S`` or a closed connection means not sure any more (None), and
    the next ask subscribes again, then reads the counter."""

    PING_S = 5.0
    PONG_S = 2.0
    RETRY_S = 1.0  # after a failure to subscribe, the next try

    def __init__(self, client, channel: str) -> None:
        self.client = client
        self.channel = channel
        self.lock = threading.Lock()
        self.connection = None
        self.pid = 0
        self.value: bytes | None = None
        self.pinged = self.ponged = self.failed = 0.0

    def current(self) -> bytes | None:
        import redis

        with self.lock:
            try:
                return self._current()
            except (redis.exceptions.RedisError, OSError):
                self._forget()
                self.failed = time.monotonic()
                return None

    def told(self, value: int | bytes) -> None:
        """This process's own bump: known at once (its notice comes too)."""
        with self.lock:
            if self.connection is not None:
                self._raise_to(value)

    def _raise_to(self, value: int | bytes) -> None:
        """The counter only grows: a notice read after a newer one (or this process's own) changes nothing."""
        if self.value is None or int(value) > int(self.value):
            self.value = str(int(value)).encode()

    def _current(self) -> bytes | None:
        now = time.monotonic()
        if self.connection is None or self.pid != os.getpid():  # not one inherited across a fork
            if now - self.failed < self.RETRY_S:
                return None
            self._subscribe()
        connection = self.connection
        while connection.can_read(timeout=0):
            reply = connection.read_response(push_request=True)  # [b"message", channel, value], or a pong
            if isinstance(reply, list) and reply[0] == b"message":
                self._raise_to(reply[2])
            elif reply == b"PONG" or (isinstance(reply, list) and reply[0] == b"pong"):
                self.ponged = now
        if self.pinged > self.ponged and now - self.pinged > self.PONG_S:
            self._forget()  # the connection says nothing back: not sure we would hear a bump
            return None
        if now - self.pinged > self.PING_S and self.ponged >= self.pinged:
            connection.send_command("PING")
            self.pinged = now
        return self.value

    def _subscribe(self) -> None:
        kwargs = {**self.client.connection_pool.connection_kwargs, "health_check_interval": 0}
        connection = self.client.connection_pool.connection_class(**kwargs)
        connection.send_command("SUBSCRIBE", self.channel)
        connection.read_response(push_request=True)  # subscribed: a bump from now on is heard
        self.connection, self.pid = connection, os.getpid()
        self.value = self.client.get(self.channel) or b"0"
        self.pinged = self.ponged = time.monotonic()

    def _forget(self) -> None:
        if self.connection is not None and self.pid == os.getpid():
            self.connection.disconnect()
        self.connection, self.value = None, None


class FilePresence:
    """The embedded default's presence, one host and no Redis: a file per worker and queue under
    ``root/alive/<queue>/`` holding its address (its time says it is alive), the generation as the time of
    ``root/generation``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _file(self, queue: str, address: dict) -> Path:
        folder = self.root / "alive" / queue
        folder.mkdir(parents=True, exist_ok=True)
        return folder / str(address.get("worker", "worker")).replace("/", "_")

    def announce(self, queue: str, address: dict) -> None:
        target = self._file(queue, address)
        temp = target.with_name(f".{target.name}.tmp")
        temp.write_bytes(_member(address))
        os.replace(temp, target)

    def withdraw(self, queue: str, address: dict) -> None:
        self._file(queue, address).unlink(missing_ok=True)

    def addresses(self, queue: str) -> list[dict]:
        folder, limit, found = self.root / "alive" / queue, time.time() - ALIVE_S, []
        try:
            entries = list(os.scandir(folder))
        except FileNotFoundError:
            return found
        for entry in entries:
            try:
                if entry.name.startswith(".") or entry.stat().st_mtime <= limit:
                    continue
                found.append(orjson.loads(Path(entry.path).read_bytes()))
            except (FileNotFoundError, orjson.JSONDecodeError):
                continue
        return found

    def generation(self) -> bytes:
        try:
            return str(os.stat(self.root / "generation").st_mtime_ns).encode()
        except FileNotFoundError:
            return b"0"

    def generation_heard(self) -> bytes | None:
        return self.generation()

    def bump(self) -> None:
        path = self.root / "generation"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
        os.utime(path, ns=(time.time_ns(), max(time.time_ns(), os.stat(path).st_mtime_ns + 1)))


@cache
def _presence(url: str, var: Path) -> Presence:
    return RedisPresence(url) if url.startswith(("redis://", "rediss://")) else FilePresence(Path(var) / "gateway")


def get_presence() -> Presence:
    """The presence for this configuration: Redis when the gateway's URL is Redis, files otherwise."""
    return _presence(settings.HUB_GATEWAY_URL, settings.VAR_DIR)
