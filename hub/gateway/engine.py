"""Where uploaded ONNX graphs run: a child process per worker thread, bounded in memory and stopped at
its deadline, so that one request cannot take the worker (or the host) down.

A graph decides at run time how much memory it asks for (``ConstantOfShape`` of a shape sent as an
input, ``Tile`` of strings) and a single kernel does not look at ``RunOptions.terminate``. So the
worker never runs a graph itself: each lane thread, and each task thread that runs models, owns an
*engine*, a child process (``python -m hub.gateway.engine FD``) that keeps the session cache and runs
requests one at a time:

- a *lane engine* (``Engine(lane="cpu")``) takes synchronous requests from the lane itself and answers
  them, so that nothing is added to a request's path (and, given its worker's local sockets, those of web
  processes on the same host: ``serve_datagrams``, ``serve_local``, ``hub.gateway.local``); before each run it
  writes the request's id, deadline and asker into a slot of shared memory (``Slot``), which its lane thread
  looks at every 0.25 s
  (``Engine.watch``) to stop a run past its deadline, or to answer for an engine that died;
- a *call engine* (``engine().call``, ``run_steps``) runs what a job asks, one message at a time over a
  socket pair.

In the child (``serve``):

- ONNX Runtime's working memory comes from one arena capped at ``HUB_INFER_MEMORY_MB``
  (``hpcfair.compute.runs.bound_memory``); a run that asks for more fails at once, and the arena gives back
  what a run used when it ends;
- the kernel caps the process's data (``RLIMIT_DATA``) at what it held when ready plus the session
  cache's bound plus twice the limit (the arena, and copies of inputs and outputs), so memory that ONNX
  Runtime takes outside its arena is bounded too;
- both fail as ``memory_limit``; a child that dies instead is replaced, and its caller answered.

A run still going ``GRACE_S`` after its deadline is stopped by killing its engine, and answered
``overtime``. Messages are the gateway's wire format (``hub.gateway.wire``): nothing the child sends is
unpickled.
"""

from __future__ import annotations

import logging
import mmap
import os
import resource
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from typing import Any

import numpy as np
from hpcfair.compute import CodedError
from hpcfair.compute.runs import bound_memory, memory_message

from hub.gateway import wire

log = logging.getLogger(__name__)

GRACE_S = 1.0  # how long past its deadline a run may go before its process is killed (the web waits 2 s)
START_S = 120.0  # how long a new child may take to import and get ready
OVERTIME = {"ok": False, "code": "overtime", "detail": "The run was stopped at its time limit."}


class EngineError(Exception):
    """The child could not be started."""


class Slot:
    """What a lane engine is running: a request id, its deadline and, for a request that came as a datagram,
    the address its answer goes to, in 190 bytes of shared memory (a memfd both processes map), written under
    a sequence number (a seqlock) so that a reader never sees half."""

    FORMAT = struct.Struct("<Qd64sH108s")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.map = mmap.mmap(fd, self.FORMAT.size)

    @classmethod
    def create(cls) -> Slot:
        fd = os.memfd_create("hpcfair-engine-slot", 0)  # not close-on-exec: the child inherits it
        os.ftruncate(fd, cls.FORMAT.size)
        return cls(fd)

    def write(self, request_id: str, deadline: float, reply_to: str | bytes = b"") -> None:
        address = reply_to.encode() if isinstance(reply_to, str) else reply_to
        (sequence,) = struct.unpack_from("<Q", self.map)
        struct.pack_into("<Q", self.map, 0, sequence + 1)  # odd: being written
        self.FORMAT.pack_into(self.map, 0, sequence + 1, deadline, request_id.encode(), len(address), address)
        struct.pack_into("<Q", self.map, 0, sequence + 2)

    def clear(self) -> None:
        self.write("", 0.0)

    def read(self) -> tuple[str, float, bytes] | None:
        """(request id, deadline, the address of its asker or b"") of the run in progress, or None when idle
        (or when a writer was killed in the middle of writing)."""
        for _ in range(1000):
            sequence, deadline, raw, length, address = self.FORMAT.unpack_from(self.map)
            if sequence % 2 == 0 and struct.unpack_from("<Q", self.map)[0] == sequence:
                request_id = raw.rstrip(b"\0").decode(errors="replace")
                return (request_id, deadline, address[:length]) if request_id else None
        return None

    def close(self) -> None:
        self.map.close()
        os.close(self.fd)


# --- the parent's side ---------------------------------------------------------------------------------


class Engine:
    """One child process that runs graphs for one thread of the worker: requests sent with ``call``, or,
    given a ``lane`` (a device queue), the requests it takes from that lane itself."""

    def __init__(self, lane: str | None = None, listener: int | None = None, datagram: int | None = None) -> None:
        self.lane = lane
        self.listener = listener  # a lane engine's local socket (hub.gateway.local), shared with its siblings
        self.datagram = datagram  # and its datagram socket, also shared
        self.door = socket.socket(fileno=os.dup(datagram)) if datagram is not None else None  # to answer for it
        self.slot = Slot.create() if lane else None
        self.process: subprocess.Popen | None = None
        self.sock: socket.socket | None = None
        self.starts = 0

    def start(self) -> None:
        """Start the child and wait until it is ready (idempotent)."""
        if self.process is not None and self.process.poll() is None:
            return
        self.close()
        ours, theirs = socket.socketpair()
        command, fds = [sys.executable, "-m", "hub.gateway.engine", str(theirs.fileno())], [theirs.fileno()]
        if self.slot is not None:
            self.slot.clear()
            command += ["--lane", str(self.lane), "--slot", str(self.slot.fd)]
            fds.append(self.slot.fd)
            if self.listener is not None:
                command += ["--listen", str(self.listener)]
                fds.append(self.listener)
            if self.datagram is not None:
                command += ["--datagram", str(self.datagram)]
                fds.append(self.datagram)
        try:
            self.process = subprocess.Popen(command, pass_fds=fds, stdin=subprocess.DEVNULL,
                                            stdout=subprocess.DEVNULL)  # its logs go to stderr, as ours
        finally:
            theirs.close()
        self.sock = ours
        self.starts += 1
        ours.settimeout(START_S)
        try:
            ready = wire.recv_frame(ours)
        except OSError:
            ready = None
        if ready is None or ready[0].get("state") != "ready":
            code = self.close()
            raise EngineError(f"the engine process did not start (exit status {code})")
        self.sock.settimeout(None)  # blocking; each call sets its own limit (_wait_at_most)

    def close(self) -> int | None:
        """Stop the child (killed: it may be in the middle of a run) and return its exit status; the slot
        stays, for ``watch`` to read."""
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.process is None:
            return None
        process, self.process = self.process, None
        if process.poll() is None:
            process.kill()
        return process.wait()

    def stop(self) -> None:
        """Stop the child for good and free the slot."""
        self.close()
        if self.slot is not None:
            self.slot.close()
            self.slot = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def watch(self, lane) -> None:
        """A lane engine's keeper, called every 0.25 s by its thread: answer for an engine that died, or stop
        one whose run passed its deadline by ``GRACE_S``, and start a new one."""
        assert self.slot is not None
        running = self.slot.read()
        if self.process is not None and self.process.poll() is None:
            if running is None or time.time() <= running[1] + GRACE_S:
                return
            self.close()
            answer = OVERTIME
        else:
            answer = self._died() if self.process is not None else None
        if running is not None and answer is not None:
            packed = wire.pack(answer)
            lane.reply(running[0], packed)
            if running[2] and self.door is not None:  # the asker waits on its datagram socket
                answer_datagram(self.door, running[2], running[0], packed)
        self.start()

    def call(self, message: bytes | list, *, device: str, deadline: float, long: bool = False,
             describe: bool = False) -> bytes | memoryview:
        """Send one wire message (``{"steps", "threads", "outputs", ...}`` and the inputs); return the
        child's wire answer. A child that does not answer by ``deadline + GRACE_S`` is killed (``overtime``);
        one that dies is replaced (``memory_limit`` when it ran out of memory, else ``run_failed``)."""
        try:
            self.start()
        except (EngineError, OSError) as exc:
            log.error("engine: %s", exc)
            return wire.pack({"ok": False, "code": "run_failed",
                              "detail": "The worker could not start the process that runs models; tell the hub's "
                                        "administrators (the worker's log has the details)."})
        assert self.sock is not None
        try:
            wire.wait_at_most(self.sock, max(deadline - time.time(), 0) + GRACE_S)
            wire.send_frame(self.sock, {"device": device, "long": long, "describe": describe}, message)
            answer = wire.recv_frame(self.sock)
        except (TimeoutError, BlockingIOError):  # SO_RCVTIMEO passed: EAGAIN
            self.close()
            return wire.pack(OVERTIME)
        except OSError:
            answer = None
        if answer is None:
            return wire.pack(self._died())
        return answer[1]  # a view of the frame: unpacked arrays use it without a copy

    def _died(self) -> dict[str, Any]:
        from django.conf import settings


        status = self.close()
        log.warning("engine: the process running a model ended (exit status %s); starting a new one", status)
        if status in (EXIT_MEMORY, -signal.SIGABRT):  # a MemoryError it could not answer; an uncaught bad_alloc
            return {"ok": False, "code": "memory_limit", "detail": memory_message(settings.HUB_INFER_MEMORY_BYTES)}
        how = (f"was killed (signal {-status}{', as the system does when memory runs out' if status == -9 else ''})"
               if status is not None and status < 0 else f"ended (exit status {status})")
        return {"ok": False, "code": "run_failed",
                "detail": f"The process running the model {how} before it answered; nothing was kept. Try again; "
                          "if it happens again, the model may not run on these inputs on this hub."}


_local = threading.local()


def engine() -> Engine:
    """This thread's engine (started on first use)."""
    found = getattr(_local, "engine", None)
    if found is None:
        found = _local.engine = Engine()
    return found


def run_steps(steps: list[dict[str, Any]], arrays: dict[str, np.ndarray], *, device: str, threads: int,
              deadline: float, outputs: list[str] | None = None, deadline_is_long: bool = False,
              repeat: int = 1, source: dict[str, Any] | None = None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """``hub.gateway.sessions.run_steps`` in this thread's engine: the last step's outputs and what ran where;
    raises ``CodedError``. ``repeat``: run it that many times (``info["times_ms"]``, for benchmarks);
    ``source``: ``{"path", "name", "rows": [start, stop]}``, inputs the engine maps from a ``.npy`` of this
    worker's instead of being sent them."""

    meta = {"steps": steps, "threads": threads, "deadline": deadline, "outputs": outputs, "repeat": repeat,
            **({"source": source} if source else {})}
    answer, results = wire.unpack(engine().call(wire.parts(meta, arrays), device=device, deadline=deadline,
                                                long=deadline_is_long))
    if not answer.get("ok"):
        raise CodedError(answer.get("code") or "run_failed", answer.get("detail") or "The run failed.")
    return dict(results), answer


def describe(step: dict[str, Any], device: str, threads: int = 0) -> dict[str, Any]:
    """The model's inputs and outputs (``[[name, shape, type], ...]``) and provider, as its session sees
    them; raises ``CodedError`` (``model_load_failed``, ``gpu_unavailable``, ``memory_limit``)."""

    meta = {"steps": [step], "threads": threads}
    answer, _ = wire.unpack(engine().call(wire.pack(meta), device=device, deadline=time.time() + START_S,
                                          describe=True))
    if not answer.get("ok"):
        raise CodedError(answer.get("code") or "run_failed", answer.get("detail") or "The model could not be loaded.")
    return answer


# --- the child's side ----------------------------------------------------------------------------------

EXIT_MEMORY = 3


def data_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    return 0


_mapped: dict[str, np.ndarray] = {}  # the one .npy a call engine has mapped (a job's inputs)


def _mapped_rows(source: dict[str, Any]) -> dict[str, np.ndarray]:
    """Rows ``source["rows"]`` of the ``.npy`` at ``source["path"]``, mapped once (page cache, no copy)."""
    path = str(source["path"])
    if path not in _mapped:
        _mapped.clear()
        _mapped[path] = np.load(path, mmap_mode="r", allow_pickle=False)
    start, stop = (int(row) for row in source["rows"])
    return {str(source["name"]): _mapped[path][start:stop]}


def serve(control: dict[str, Any], message: bytes) -> bytes:
    """One request in the child: run it (or describe the model) and pack the answer."""
    started = time.perf_counter()
    try:
        meta, arrays = wire.unpack(message)
    except (wire.WireError, KeyError, ValueError, TypeError) as exc:
        log.warning("engine: a malformed request: %s", exc)
        return wire.pack({"ok": False, "code": "run_failed", "detail": f"The request could not be run: {exc}"})
    return serve_unpacked(control, meta, arrays, started)


def serve_unpacked(control: dict[str, Any], meta: dict[str, Any], arrays: dict[str, np.ndarray],
                   started: float) -> bytes:
    """``serve`` of a message already unpacked (a lane engine reads its deadline first); ``started``: when
    it was taken, for ``serve_ms``."""
    from hub.gateway import sessions

    try:
        device, threads = control["device"], int(meta.get("threads") or 0)
        if control.get("describe"):
            session = sessions.cache().get(meta["steps"][0], device, threads)
            return wire.pack({"ok": True, "provider": session.hub_provider,
                              "inputs": [[i.name, list(i.shape), i.type] for i in session.get_inputs()],
                              "outputs": [[o.name, list(o.shape), o.type] for o in session.get_outputs()]})
        if meta.get("source") and control.get("long"):  # a job's batch, read from the worker's own file
            arrays = _mapped_rows(meta["source"])
        times = []
        for _ in range(max(int(meta.get("repeat") or 1), 1)):
            began = time.perf_counter()
            outputs, info = sessions.run_steps(meta["steps"], arrays, device=device, threads=threads,
                                               deadline=float(meta["deadline"]), outputs=meta.get("outputs") or None,
                                               deadline_is_long=bool(control.get("long")))
            times.append(round((time.perf_counter() - began) * 1e3, 4))
        if len(times) > 1:
            info["times_ms"] = times
        info["serve_ms"] = round((time.perf_counter() - started) * 1e3, 3)  # from taking it to answering
        return wire.pack({"ok": True, **info}, sessions.sendable(outputs))
    except CodedError as exc:
        return wire.pack({"ok": False, "code": exc.code, "detail": exc.detail, "device": control.get("device")})
    except MemoryError:
        from django.conf import settings

        return wire.pack({"ok": False, "code": "memory_limit", "detail": memory_message(
            settings.HUB_INFER_MEMORY_BYTES)})
    except (wire.WireError, KeyError, ValueError, TypeError) as exc:
        log.warning("engine: a malformed request: %s", exc)
        return wire.pack({"ok": False, "code": "run_failed", "detail": f"The request could not be run: {exc}"})


def _parent_gone(sock: socket.socket) -> bool:
    try:
        return sock.recv(1, socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False


def take(request_id: str, message: bytes | memoryview, queue: str, slot: Slot, running: threading.Lock,
         reply_to: str | bytes = b"") -> bytes | None:
    """A lane engine's run of one request, from the lane or from its local socket: its answer, or None when
    its caller has given up already. One at a time (``running``), each written into the slot first, so that
    the parent can stop a run past its deadline and answer for it."""
    started = time.perf_counter()
    try:
        meta, arrays = wire.unpack(message)
        deadline = float(meta.get("deadline", 0))
    except (wire.WireError, ValueError, KeyError, TypeError) as exc:
        log.warning("engine: a malformed request: %s", exc)
        return wire.pack({"ok": False, "code": "run_failed", "detail": f"The request could not be run: {exc}"})
    if time.time() > deadline + 1:
        return None
    with running:
        slot.write(request_id, deadline, reply_to)
        try:
            answer = serve_unpacked({"device": queue}, meta, arrays, started)
        except MemoryError:
            os._exit(EXIT_MEMORY)  # not even the answer could be made: the parent answers for us
        except Exception:  # noqa: BLE001 - logged with its traceback; the caller gets a code only
            log.exception("engine: request %s failed", request_id)
            answer = wire.pack({"ok": False, "code": "internal_error", "detail": "The worker failed unexpectedly."})
        slot.clear()  # before the wait for the next request, which the watchdog must not take for a run
    return answer


def serve_lane(queue: str, slot: Slot, sock: socket.socket, running: threading.Lock) -> None:
    """A lane engine's loop: take requests from the lane, run them and answer, until the parent goes."""
    from hub.gateway.lane import get_lane

    lane = get_lane()
    found = None  # the next request, when answering the last one brought it
    while not _parent_gone(sock):
        if found is None:
            try:
                found = lane.pop([queue], timeout=1.0)
            except Exception:  # noqa: BLE001 - the broker went away for a moment
                log.warning("engine: lane %s unavailable", queue, exc_info=True)
                time.sleep(1.0)
                continue
            if found is None:
                continue
        (request_id, message), found = found, None
        answer = take(request_id, message, queue, slot, running)
        if answer is None:
            continue  # its caller has given up already
        try:
            found = lane.reply_and_pop(request_id, answer, [queue], timeout=1.0)
        except Exception:  # noqa: BLE001 - the broker went away: this caller times out, as with a lost reply
            log.warning("engine: lane %s unavailable; the answer to %s was not delivered", queue, request_id,
                        exc_info=True)
            time.sleep(1.0)


LOCAL_READ_S = 5.0  # a web process sends its request as soon as it has connected


def serve_local(listener: socket.socket, queue: str, slot: Slot, running: threading.Lock,
                ready: threading.Event) -> None:
    """A lane engine's second door (``hub.gateway.local``): one request per connection from a web process on
    this host (one too large for a datagram: ``serve_datagrams``), taken when this engine is the idle one that
    accepts it; answered on the same connection."""
    ready.wait()
    while True:
        try:
            connection, _ = listener.accept()
        except OSError:
            log.warning("engine: the local socket of lane %s failed", queue, exc_info=True)
            time.sleep(1.0)
            continue
        with connection:
            try:
                wire.wait_at_most(connection, LOCAL_READ_S)
                found = wire.recv_frame(connection)
            except (OSError, ValueError) as exc:
                log.warning("engine: a local request could not be read: %s", exc)
                continue
            if found is None:
                continue
            control, message = found
            answer = take(str(control.get("id", "")), message, queue, slot, running)
            if answer is None:
                continue  # its caller has given up already
            try:
                wire.send_frame(connection, {}, answer)
            except OSError:
                pass  # the web process went away


def serve_datagrams(datagram: socket.socket, queue: str, slot: Slot, running: threading.Lock,
                    ready: threading.Event, buffer: bytearray) -> None:
    """A lane engine's third door (``hub.gateway.local``): a request from a web process on this host as one
    datagram on the worker's datagram socket, read by whichever of the lane's engines waits for one (a blocking
    read wakes one waiter, where a poll would wake them all); answered as a datagram to its sender."""
    ready.wait()
    while True:
        _serve_datagram(datagram, queue, slot, running, buffer)


def _serve_datagram(datagram: socket.socket, queue: str, slot: Slot, running: threading.Lock,
                    buffer: bytearray) -> None:
    try:
        size, sender = datagram.recvfrom_into(buffer)
    except OSError:
        log.warning("engine: the datagram socket of lane %s failed", queue, exc_info=True)
        time.sleep(1.0)
        return
    if not sender:
        return  # an unbound sender: nowhere to answer
    try:
        control, message = wire.parse_frame(memoryview(buffer)[:size])
    except wire.WireError as exc:
        log.warning("engine: a local request could not be read: %s", exc)
        return
    request_id = str(control.get("id", ""))
    answer = take(request_id, message, queue, slot, running, reply_to=sender)
    if answer is not None:
        answer_datagram(datagram, sender, request_id, answer)


def answer_datagram(door: socket.socket, address: str | bytes, request_id: str, answer: bytes | memoryview) -> None:
    """Send the answer to a datagram's sender from the lane's datagram socket (``door``, whose address the
    sender checks). One too large for a datagram goes to the lane under the request's id, and the datagram
    says so (``{"lane": true}``). A sender gone, or one whose queue is full, is not waited for."""
    try:
        if not wire.send_datagram(door, address, {"id": request_id}, answer, wire.DATAGRAM_BYTES):
            from hub.gateway.lane import get_lane

            get_lane().reply(request_id, answer)
            wire.send_datagram(door, address, {"id": request_id, "lane": True}, b"", wire.DATAGRAM_BYTES)
    except OSError:
        pass  # the web process went away, or stopped waiting
    except Exception:  # noqa: BLE001 - the lane unreachable: the caller times out, as with a lost reply
        log.warning("engine: the answer to %s was not delivered", request_id, exc_info=True)


def main(fd: int, lane: str | None = None, slot: int | None = None, listen: int | None = None,
         datagram: int | None = None) -> None:
    """The child: bound memory, say ready, answer requests until the parent goes away. A lane engine given
    a listening socket (``listen``, and a ``datagram`` socket) also answers requests on them, one at a time
    with the lane's."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hub.settings")
    django.setup()
    from django.conf import settings

    bound_memory(settings.HUB_INFER_MEMORY_BYTES)
    running, ready = threading.Lock(), threading.Event()
    if lane is not None and slot is not None and listen is not None:
        # Started before the data limit is measured (a thread's stack counts as data), serving once it is set.
        threading.Thread(target=serve_local, args=(socket.socket(fileno=listen), lane, Slot(slot), running, ready),
                         name="local", daemon=True).start()
        if datagram is not None:
            buffer = bytearray(wire.DATAGRAM_BYTES)  # before the limit is measured, too
            threading.Thread(target=serve_datagrams, args=(socket.socket(fileno=datagram), lane, Slot(slot), running,
                                                           ready, buffer), name="datagrams", daemon=True).start()
    ceiling = data_bytes() + settings.HUB_GATEWAY_CACHE_BYTES + 2 * settings.HUB_INFER_MEMORY_BYTES
    resource.setrlimit(resource.RLIMIT_DATA, (ceiling, resource.getrlimit(resource.RLIMIT_DATA)[1]))
    ready.set()
    sock = socket.socket(fileno=fd)
    wire.send_frame(sock, {"state": "ready", "pid": os.getpid(), "data_limit": ceiling}, b"")
    if lane is not None and slot is not None:
        return serve_lane(lane, Slot(slot), sock, running)
    buffer = bytearray(0)
    while True:
        request = wire.recv_frame(sock, buffer)
        if request is not None and len(request[1]) > len(buffer) and len(request[1]) <= 256 * 2**20:
            buffer = request[1].obj  # the largest frame so far, kept for the next ones (up to 256 MiB)
        if request is None:
            return
        try:
            answer = serve(*request)
        except MemoryError:
            os._exit(EXIT_MEMORY)  # not even the answer could be made: the parent answers for us
        wire.send_frame(sock, {}, answer)


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="engine %(process)d: %(message)s")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C stops the worker; its end closes our socket
    arguments = sys.argv[1:]
    main(int(arguments[0]), arguments[arguments.index("--lane") + 1] if "--lane" in arguments else None,
         int(arguments[arguments.index("--slot") + 1]) if "--slot" in arguments else None,
         int(arguments[arguments.index("--listen") + 1]) if "--listen" in arguments else None,
         int(arguments[arguments.index("--datagram") + 1]) if "--datagram" in arguments else None)
