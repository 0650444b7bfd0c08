"""The gateway's lanes: how a synchronous request reaches a worker and its answer comes back.

A lane is a queue per device (``cpu``, ``gpu``) that the Celery workers serving that queue read
(``workers.gateway``), plus a reply slot per request and a presence record per worker. Two transports
with one interface:

- ``RedisLane`` (deployment and tests; the broker's Redis): a list per queue, a list per reply,
  presence in a sorted set. A request is queued only if a worker is alive (one Lua call), so a request
  for a GPU that no worker offers is refused at once rather than left waiting.
- ``FileLane`` (the embedded default, one machine, no Redis): files under ``var/gateway``, renamed
  atomically to claim and to answer.

The lanes also carry the registry's *generation*, a counter bumped on every change that could alter
who may run what (``hub.gateway.memory``), so that web processes may cache those answers.

Celery's task protocol plus a result backend costs ~4.6 ms per round trip on the reference machine
(bench/RESULTS.md), too slow for the synchronous target; the lanes cost ~0.6 ms. Long and batch work
still runs as Celery tasks with a Job row.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Protocol

from django.conf import settings

from hub.errors import HubError
from hub.gateway.wake import Watch

ALIVE_S = 6.0  # a worker that has not announced itself for this long is gone
CONNECT_TIMEOUT_S = 3.0
ANNOUNCE_S = 2.0
REPLY_TTL_S = 60


class NoWorker(Exception):
    """No worker serves the requested queue."""


class Stale(Exception):
    """The registry changed since the caller's cached answers were made; nothing was sent."""

    def __init__(self, generation: bytes) -> None:
        super().__init__("registry generation changed")
        self.generation = generation


class Lane(Protocol):
    def alive(self, queue: str) -> bool: ...
    def call(self, queue: str, message: bytes, timeout: float, generation: bytes | None = None) -> bytes | None: ...
    def announce(self, queue: str, worker_id: str, local: str = "") -> None: ...
    def withdraw(self, queue: str, worker_id: str, local: str = "") -> None: ...
    def nearby(self, queue: str) -> list[str]: ...
    def generation_soon(self) -> Callable[[], bytes]: ...
    def generation_heard(self) -> bytes | None: ...
    def wait_reply(self, request_id: str, timeout: float) -> bytes | None: ...
    def pop(self, queues: list[str], timeout: float) -> tuple[str, bytes] | None: ...
    def reply(self, request_id: str, message: bytes) -> None: ...
    def reply_and_pop(self, request_id: str, message: bytes, queues: list[str],
                      timeout: float) -> tuple[str, bytes] | None: ...
    def generation(self) -> bytes: ...
    def bump(self) -> None: ...
    def open(self, queue: str, message: bytes) -> str: ...
    def receive(self, request_id: str, seq: int, timeout: float) -> bytes | None: ...
    def send(self, request_id: str, seq: int, message: bytes) -> None: ...
    def cancel(self, request_id: str) -> None: ...
    def cancelled(self, request_id: str) -> bool: ...


def stream(lane: Lane, queue: str, message: bytes, timeout: float, last: Callable[[bytes], bool]) -> Iterator[bytes]:
    """Send ``message`` to ``queue`` and yield its answer's messages in order up to the one ``last`` knows as
    the end, each within ``timeout`` seconds (``TimeoutError`` when one does not come). A reader that stops
    early (its client went away) tells the worker to stop (``cancel``)."""
    request_id = lane.open(queue, message)
    seq, finished = 0, False
    try:
        while not finished:
            part = lane.receive(request_id, seq, timeout)
            if part is None:
                raise TimeoutError(f"no answer from {queue} in {timeout:.0f} s")
            seq += 1
            finished = last(part)
            yield part
    finally:
        if not finished:
            lane.cancel(request_id)


@contextmanager
def reachable() -> Iterator[None]:
    """Redis that cannot be reached (refused, timed out) as the hub's 503 ``broker_unavailable``: the web
    process's side of the lane (``alive``, ``call``, ``generation``, ``bump``) never fails as a 500."""
    import redis

    try:
        yield
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
        raise HubError("broker_unavailable", "The hub's job queue (Redis) cannot be reached, so nothing can "
                                             "run now. Try again shortly; if it lasts, tell the hub's "
                                             "administrators.") from exc


def new_id() -> str:
    """32 random hex digits (as ``uuid4().hex``, without building a UUID)."""
    return os.urandom(16).hex()


class RedisLane:
    # Queue the request if the caller's generation is current and a worker is alive. A refused request
    # gets an empty reply at once, so the caller sends this script and its wait for the reply together:
    # one round trip to Redis instead of two.
    PUSH = """
    local generation = redis.call('get', KEYS[3]) or '0'
    local status = 0
    if ARGV[3] ~= '' and generation ~= ARGV[3] then
        status = 2
    elseif redis.call('zcount', KEYS[1], ARGV[1], '+inf') > 0 then
        redis.call('lpush', KEYS[2], ARGV[2])
        return {1, generation}
    end
    redis.call('lpush', KEYS[4], '')
    redis.call('expire', KEYS[4], ARGV[4])
    return {status, generation}
    """
    GENERATION = "hub:gw:generation"

    def __init__(self, url: str) -> None:
        import redis

        # redis-py's default socket timeout (5 s) would cut a reply wait short: the longest wait is the
        # synchronous run-time limit plus the worker's grace. Connecting, though, is quick or not at all.
        self.redis = redis.Redis.from_url(url, health_check_interval=30, socket_timeout=settings.HUB_INFER_SYNC_S + 30,
                                          socket_connect_timeout=CONNECT_TIMEOUT_S)
        self.local = threading.local()
        self.heard = Heard(self.redis, self.GENERATION)

    def _round_trip(self, *commands: tuple) -> list:
        """Send ``commands`` in one write on this thread's own connection and read their replies in order.

        The lane's hot path (``call``, ``pop``, ``reply``) skips redis-py's pipeline object and the pool's
        checks on every checkout, which cost ~50 µs a round trip on each side here (bench/RESULTS.md, issue
        39); the connection is redis-py's own (the URL's host, database, password, TLS, health checks). A
        failure part-way (an error reply, a timeout) closes it, so no reply is left unread for the next
        caller. A connection that was open before and turns out closed (Redis restarted, an idle connection
        dropped) is opened again and the commands sent once more, as redis-py's own retry would."""
        import redis

        connection = self._connection()
        reused = connection.is_connected
        try:
            connection.send_packed_command(connection.pack_commands(commands))
            return [connection.read_response() for _ in commands]
        except redis.exceptions.ConnectionError:
            connection.disconnect()
            if not reused:
                raise
            return self._round_trip(*commands)  # now on a new connection: not reused, so no second retry
        except BaseException:
            connection.disconnect()
            raise

    def _connection(self):
        """This thread's own connection (``_round_trip``), made on first use in this process."""
        connection = getattr(self.local, "connection", None)
        if connection is None or self.local.pid != os.getpid():  # not one inherited across a fork
            pool = self.redis.connection_pool
            connection = self.local.connection = pool.connection_class(**pool.connection_kwargs)
            self.local.pid = os.getpid()
        return connection

    @staticmethod
    def _queue(queue: str) -> str:
        return f"hub:gw:q:{queue}"

    @staticmethod
    def _local(queue: str) -> str:
        return f"hub:gw:local:{queue}"

    @staticmethod
    def _alive(queue: str) -> str:
        return f"hub:gw:alive:{queue}"

    @staticmethod
    def _reply(request_id: str) -> str:
        return f"hub:gw:r:{request_id}"

    def alive(self, queue: str) -> bool:
        with reachable():
            return self.redis.zcount(self._alive(queue), time.time() - ALIVE_S, "+inf") > 0

    def call(self, queue: str, message: bytes, timeout: float, generation: bytes | None = None) -> bytes | None:
        request_id = new_id()
        reply = self._reply(request_id)
        with reachable():
            (status, current), answer = self._round_trip(
                ("EVAL", self.PUSH, 4, self._alive(queue), self._queue(queue), self.GENERATION, reply,
                 time.time() - ALIVE_S, request_id.encode() + message, generation or b"", REPLY_TTL_S),
                ("BRPOP", reply, max(timeout, 0.01)))
        if status == 2:
            raise Stale(current)
        if status == 0:
            raise NoWorker(queue)
        return answer[1] if answer else None

    def announce(self, queue: str, worker_id: str, local: str = "") -> None:
        """Say that ``worker_id`` serves ``queue`` (again every ``ANNOUNCE_S``); ``local``: the address of its
        local socket (``hub.gateway.local``), announced beside it with the same time."""
        now = time.time()
        pipe = self.redis.pipeline(transaction=False)
        for key, member in ((self._alive(queue), worker_id), *(((self._local(queue), local),) if local else ())):
            pipe.zadd(key, {member: now})
            pipe.zremrangebyscore(key, "-inf", now - 10 * ALIVE_S)
        pipe.execute()

    def withdraw(self, queue: str, worker_id: str, local: str = "") -> None:
        self.redis.zrem(self._alive(queue), worker_id)
        if local:
            self.redis.zrem(self._local(queue), local)

    def nearby(self, queue: str) -> list[str]:
        """The local sockets' addresses announced for ``queue`` by workers alive now (any host's)."""
        with reachable():
            return [raw.decode() for raw in self.redis.zrangebyscore(self._local(queue), time.time() - ALIVE_S, "+inf")]

    def generation_soon(self) -> Callable[[], bytes]:
        """Ask for the generation now and return the function that reads the answer: the caller does its
        own work meanwhile (``hub.gateway.local``), and must read it before it uses the lane again."""
        import redis

        with reachable():
            connection = self._connection()
            reused = connection.is_connected
            try:
                connection.send_packed_command(connection.pack_command("GET", self.GENERATION))
            except redis.exceptions.ConnectionError:
                connection.disconnect()
                if not reused:
                    raise
                return self.generation_soon()  # on a new connection now

        def read() -> bytes:
            with reachable():
                try:
                    return connection.read_response() or b"0"
                except redis.exceptions.ConnectionError:
                    connection.disconnect()
                    if not reused:
                        raise
                    return self.generation()  # an idle connection Redis had dropped: ask again
                except BaseException:
                    connection.disconnect()
                    raise

        return read

    def wait_reply(self, request_id: str, timeout: float) -> bytes | None:
        """The reply a worker gives under ``request_id`` (as its ``reply``), within ``timeout`` seconds."""
        with reachable():
            found = self.redis.brpop([self._reply(request_id)], timeout=max(timeout, 0.01))
        return found[1] if found else None

    def pop(self, queues: list[str], timeout: float) -> tuple[str, bytes] | None:
        (found,) = self._round_trip(self._brpop(queues, timeout))
        return self._taken(found)

    def _brpop(self, queues: list[str], timeout: float) -> tuple:
        return ("BRPOP", *(self._queue(q) for q in queues), timeout)

    @staticmethod
    def _taken(found: list | None) -> tuple[str, bytes] | None:
        if not found:
            return None
        raw = found[1]
        return raw[:32].decode(), raw[32:]

    def reply(self, request_id: str, message: bytes) -> None:
        key = self._reply(request_id)
        self._round_trip(("LPUSH", key, message), ("EXPIRE", key, REPLY_TTL_S))

    def reply_and_pop(self, request_id: str, message: bytes, queues: list[str],
                      timeout: float) -> tuple[str, bytes] | None:
        """``reply``, then ``pop``, in one write: a lane engine waits for its next request without a round
        trip of its own in between."""
        key = self._reply(request_id)
        *_, found = self._round_trip(("LPUSH", key, message), ("EXPIRE", key, REPLY_TTL_S),
                                     self._brpop(queues, timeout))
        return self._taken(found)

    def generation(self) -> bytes:
        with reachable():
            return self.redis.get(self.GENERATION) or b"0"

    # --- streamed answers (a generation's pieces): in order on the reply list ---
    def open(self, queue: str, message: bytes) -> str:
        request_id = new_id()
        with reachable():
            status, _ = self.redis.execute_command(
                "EVAL", self.PUSH, 4, self._alive(queue), self._queue(queue), self.GENERATION,
                self._reply(request_id), time.time() - ALIVE_S, request_id.encode() + message, b"", REPLY_TTL_S)
        if status == 0:
            raise NoWorker(queue)
        return request_id

    def receive(self, request_id: str, seq: int, timeout: float) -> bytes | None:
        with reachable():
            found = self.redis.brpop([self._reply(request_id)], timeout=max(timeout, 0.01))
        return found[1] if found else None

    def send(self, request_id: str, seq: int, message: bytes) -> None:
        self.reply(request_id, message)

    def cancel(self, request_id: str) -> None:
        with reachable():
            self.redis.set(f"hub:gw:cancel:{request_id}", b"1", ex=REPLY_TTL_S)

    def cancelled(self, request_id: str) -> bool:
        return bool(self.redis.exists(f"hub:gw:cancel:{request_id}"))

    # The counter and its notice in one step, so that notices come in the counter's order.
    BUMP = """
    local generation = redis.call('incr', KEYS[1])
    redis.call('publish', KEYS[1], generation)
    return generation
    """

    def bump(self) -> None:
        with reachable():
            self.heard.told(self.redis.eval(self.BUMP, 1, self.GENERATION))

    def generation_heard(self) -> bytes | None:
        """The generation as this process last heard it announced (``Heard``), without a round trip; None
        when it is not listening, or not sure it still hears (then ask: ``generation_soon``)."""
        return self.heard.current()


class Heard:
    """The registry's generation as this process hears it: a subscription to the bumps' notices (one
    connection per process), read without waiting on each ask, so that a web process on the local path
    (``hub.gateway.local``) checks a request's generation with no round trip to Redis.

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


class FileLane:
    """Requests as files in ``root/<queue>/``, replies in ``root/replies/``, presence as file times. A
    waiting side sleeps until a file is renamed into its folder (``hub.gateway.wake``, inotify; each
    thread its own watch), looking again at least every ``LOOK_S``; without inotify it looks every
    ``POLL_S``."""

    POLL_S = 0.002
    LOOK_S = 0.5

    def __init__(self, root: Path, wake: bool = True) -> None:
        self.root = root
        self.wake = wake
        self.made: set[str] = set()
        self.watches = threading.local()
        for sub in ("replies", "claimed", "alive"):
            (root / sub).mkdir(parents=True, exist_ok=True)

    def _dir(self, queue: str) -> Path:
        path = self.root / "q" / queue
        if queue not in self.made:  # made once; pop() asks for it every few milliseconds
            path.mkdir(parents=True, exist_ok=True)
            self.made.add(queue)
        return path

    def _watch(self, folders: list[Path]) -> Watch:
        """This thread's watch on ``folders`` (made on first use)."""
        key = tuple(folders)
        found = getattr(self.watches, "by_folders", None)
        if found is None:
            found = self.watches.by_folders = {}
        if key not in found:
            found[key] = Watch(folders if self.wake else [])
        return found[key]

    def _sleep(self, watch: Watch, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if watch.works:
            watch.wait(min(remaining, self.LOOK_S))
        else:
            time.sleep(min(self.POLL_S, max(remaining, 0)))

    def _await(self, answer: Path, watch: Watch, timeout: float) -> bytes | None:
        """The reply file ``answer``'s bytes once it is there (then removed), or None after ``timeout``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                data = answer.read_bytes()
            except FileNotFoundError:
                self._sleep(watch, deadline)
                continue
            answer.unlink(missing_ok=True)
            return data
        return None

    def alive(self, queue: str) -> bool:
        limit = time.time() - ALIVE_S
        folder = self.root / "alive" / queue
        return folder.is_dir() and any(self._fresh(entry, limit) for entry in os.scandir(folder))

    @staticmethod
    def _fresh(entry: os.DirEntry, limit: float) -> bool:
        """A worker's file touched after ``limit`` (not a temporary one, which a rename may take away)."""
        try:
            return not entry.name.startswith(".") and entry.stat().st_mtime > limit
        except FileNotFoundError:
            return False

    def _write(self, target: Path, message: bytes) -> None:
        temp = target.with_name(f".{target.name}.tmp")
        temp.write_bytes(message)
        os.replace(temp, target)

    def call(self, queue: str, message: bytes, timeout: float, generation: bytes | None = None) -> bytes | None:
        if generation and (current := self.generation()) != generation:
            raise Stale(current)
        if not self.alive(queue):
            raise NoWorker(queue)
        request_id = new_id()
        watch = self._watch([self.root / "replies"])  # watching before the request exists: no reply is missed
        self._write(self._dir(queue) / f"{time.time_ns()}-{request_id}", message)
        return self._await(self.root / "replies" / request_id, watch, timeout)

    def announce(self, queue: str, worker_id: str, local: str = "") -> None:
        """A file per worker whose time says it is alive; ``local`` (its local socket's address) as the
        file's content."""
        folder = self.root / "alive" / queue
        folder.mkdir(parents=True, exist_ok=True)
        if local:
            self._write(folder / worker_id.replace("/", "_"), local.encode())
        else:
            (folder / worker_id.replace("/", "_")).touch()

    def withdraw(self, queue: str, worker_id: str, local: str = "") -> None:
        (self.root / "alive" / queue / worker_id.replace("/", "_")).unlink(missing_ok=True)

    def nearby(self, queue: str) -> list[str]:
        limit = time.time() - ALIVE_S
        found = []
        folder = self.root / "alive" / queue
        if not folder.is_dir():
            return found
        for entry in os.scandir(folder):
            if not self._fresh(entry, limit):
                continue
            try:
                content = Path(entry.path).read_text()
            except (FileNotFoundError, UnicodeDecodeError):
                continue
            if content:
                found.append(content)
        return found

    def generation_soon(self) -> Callable[[], bytes]:
        return self.generation  # a file's time: read when asked, nothing to send first

    def generation_heard(self) -> bytes | None:
        return self.generation()

    def wait_reply(self, request_id: str, timeout: float) -> bytes | None:
        return self._await(self.root / "replies" / request_id, self._watch([self.root / "replies"]), timeout)

    def pop(self, queues: list[str], timeout: float) -> tuple[str, bytes] | None:
        deadline = time.monotonic() + timeout
        watch = self._watch([self._dir(queue) for queue in queues])
        while True:
            for queue in queues:
                for name in sorted(os.listdir(self._dir(queue))):
                    if name.startswith("."):
                        continue
                    claimed = self.root / "claimed" / name
                    try:
                        os.rename(self._dir(queue) / name, claimed)
                    except FileNotFoundError:
                        continue  # another worker thread took it
                    data = claimed.read_bytes()
                    claimed.unlink()
                    return name.split("-", 1)[1], data
            if time.monotonic() >= deadline:
                return None
            self._sleep(watch, deadline)

    def reply(self, request_id: str, message: bytes) -> None:
        self._write(self.root / "replies" / request_id, message)

    def reply_and_pop(self, request_id: str, message: bytes, queues: list[str],
                      timeout: float) -> tuple[str, bytes] | None:
        self.reply(request_id, message)
        return self.pop(queues, timeout)

    # --- streamed answers: replies/<id>.<seq>, a cancel mark in cancel/<id> ---
    def open(self, queue: str, message: bytes) -> str:
        if not self.alive(queue):
            raise NoWorker(queue)
        request_id = new_id()
        self._write(self._dir(queue) / f"{time.time_ns()}-{request_id}", message)
        return request_id

    def receive(self, request_id: str, seq: int, timeout: float) -> bytes | None:
        return self._await(self.root / "replies" / f"{request_id}.{seq}", self._watch([self.root / "replies"]), timeout)

    def send(self, request_id: str, seq: int, message: bytes) -> None:
        self._write(self.root / "replies" / f"{request_id}.{seq}", message)

    def cancel(self, request_id: str) -> None:
        (self.root / "cancel").mkdir(exist_ok=True)
        (self.root / "cancel" / request_id).touch()

    def cancelled(self, request_id: str) -> bool:
        """Whether the reader went away; the mark is removed when seen (asked until it is, then no more)."""
        try:
            (self.root / "cancel" / request_id).unlink()
            return True
        except FileNotFoundError:
            return False

    def generation(self) -> bytes:
        try:
            return str(os.stat(self.root / "generation").st_mtime_ns).encode()
        except FileNotFoundError:
            return b"0"

    def bump(self) -> None:
        path = self.root / "generation"
        path.touch()
        os.utime(path, ns=(time.time_ns(), max(time.time_ns(), os.stat(path).st_mtime_ns + 1)))


@cache
def _lane(url: str, var: Path) -> Lane:
    return RedisLane(url) if url.startswith(("redis://", "rediss://")) else FileLane(Path(var) / "gateway",
                                                                                      settings.HUB_FILE_LANE_WAKE)


def get_lane() -> Lane:
    """The lane for this configuration: Redis when the broker is Redis, files otherwise."""
    return _lane(settings.HUB_GATEWAY_URL, settings.VAR_DIR)  # (asked on every request: no path built here)
