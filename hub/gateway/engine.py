"""Where uploaded ONNX graphs run: a child process per worker thread, bounded in memory and stopped at
its deadline, so that one request cannot take the worker (or the host) down.

A graph decides at run time how much memory it asks for (``ConstantOfShape`` of a shape sent as an
input, ``Tile`` of strings) and a single kernel does not look at ``RunOptions.terminate``. So the
worker never runs a graph itself: each door handler thread (``RunHandler``, ``hub.gateway.channel``) and
each task thread that runs models owns an *engine*, a child process (``python -m hub.gateway.engine FD``)
that keeps the session cache and runs requests one at a time, sent by its parent only over a socket pair
(``Engine.call``): the parent knows what its child runs, so it stops a run past its deadline and answers for
a child that died.

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
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any

import numpy as np
from hpcfair.compute import CodedError
from hpcfair.compute.runs import bound_memory, memory_message
from hpcfair.scidata import mapped_extent

from hub.gateway import wire

log = logging.getLogger(__name__)

GRACE_S = 1.0  # how long past its deadline a run may go before its process is killed (the web waits 2 s)
START_S = 120.0  # how long a new child may take to import and get ready
OVERTIME = {"ok": False, "code": "overtime", "detail": "The run was stopped at its time limit."}


class EngineError(Exception):
    """The child could not be started."""


# --- the parent's side ---------------------------------------------------------------------------------


class Engine:
    """One child process that runs graphs for one thread of the worker, one ``call`` at a time."""

    def __init__(self) -> None:
        self.process: subprocess.Popen | None = None
        self.sock: socket.socket | None = None
        self.starts = 0

    def start(self) -> None:
        """Start the child and wait until it is ready (idempotent)."""
        if self.process is not None and self.process.poll() is None:
            return
        self.close()
        ours, theirs = socket.socketpair()
        command = [sys.executable, "-m", "hub.gateway.engine", str(theirs.fileno())]
        try:
            self.process = subprocess.Popen(command, pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
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
        """Stop the child (killed: it may be in the middle of a run) and return its exit status."""
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.process is None:
            return None
        process, self.process = self.process, None
        if process.poll() is None:
            process.kill()
        return process.wait()

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def call(self, message: bytes | memoryview | list, *, device: str, deadline: float, long: bool = False,
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


_mapped: dict[str, np.ndarray] = {}  # the one file a call engine has mapped (a job's inputs)


def _mapped_rows(source: dict[str, Any]) -> dict[str, np.ndarray]:
    """Rows ``source["rows"]`` of the ``.npy`` at ``source["path"]``, or of a variable's ``extent`` in its own
    file (``hpcfair.scidata.mapped_extent``), mapped once (page cache, no copy)."""
    path, extent = str(source["path"]), source.get("extent")
    key = f"{path}@{extent['offset']}" if extent else path
    if key not in _mapped:
        _mapped.clear()
        _mapped[key] = mapped_extent(path, extent) if extent else np.load(path, mmap_mode="r", allow_pickle=False)
    start, stop = (int(row) for row in source["rows"])
    return {str(source["name"]): _mapped[key][start:stop]}


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
    """``serve`` of a message already unpacked; ``started``: when it was taken, for ``serve_ms``."""
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


def main(fd: int) -> None:
    """The child: bound memory, say ready, answer its parent's requests until the parent goes away."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hub.settings")
    django.setup()
    from django.conf import settings

    bound_memory(settings.HUB_INFER_MEMORY_BYTES)
    ceiling = data_bytes() + settings.HUB_GATEWAY_CACHE_BYTES + 2 * settings.HUB_INFER_MEMORY_BYTES
    resource.setrlimit(resource.RLIMIT_DATA, (ceiling, resource.getrlimit(resource.RLIMIT_DATA)[1]))
    sock = socket.socket(fileno=fd)
    wire.send_frame(sock, {"state": "ready", "pid": os.getpid(), "data_limit": ceiling}, b"")
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


# --- a worker's door handler ------------------------------------------------------------------------------


class RunHandler:
    """A door handler of a device queue (``hub.gateway.channel.Door``): each call is run by this thread's
    own engine; a call whose caller has given up already (its deadline a second past) is not run."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.engine = Engine()

    def __call__(self, call) -> None:
        if time.time() > call.deadline + 1:
            return
        call.reply(self.engine.call([frame.buffer for frame in call.body], device=self.device,
                                    deadline=call.deadline))

    def idle(self) -> None:
        self.engine.start()  # a new child ready before the next call comes (idempotent)

    def close(self) -> None:
        self.engine.close()


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="engine %(process)d: %(message)s")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C stops the worker; its end closes our socket
    main(int(sys.argv[1]))
