"""The gateway's one channel (``hub.gateway.channel``) with real ZeroMQ sockets and doors, presence in files: a
call reaches whichever handler is idle, a streamed answer comes in order and a reader that stops early
cancels it, no door is ``NoWorker``, a stale generation sends nothing, and across hosts (``tcp://`` with
CURVE, a door in another process on 127.0.0.1) a caller with the hub's keys is answered and one with other
keys is refused."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hub.gateway import channel, presence
from hub.gateway.presence import NoWorker, Stale, get_presence

ROOT = Path(__file__).resolve().parents[2]


class Echo:
    """A handler that answers each call with its message and the name of the thread that ran it, after
    ``delay`` seconds; with ``pieces``, streams that many until the caller cancels."""

    def __init__(self, delay: float = 0.0, pieces: int = 0) -> None:
        self.delay, self.pieces, self.seen, self.cancelled = delay, pieces, [], []

    def __call__(self, call) -> None:
        self.seen.append(threading.current_thread().name)
        time.sleep(self.delay)
        if not self.pieces:
            name = threading.current_thread().name.encode()
            return call.reply(b"".join(frame.bytes for frame in call.body) + b"|" + name)
        for index in range(self.pieces):
            if call.cancelled:
                self.cancelled.append(index)
                return None
            call.reply(str(index).encode())
            time.sleep(0.05)
        return None

    def idle(self) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.fixture
def doors(settings, tmp_path):
    """Doors opened by a test, announced in file presence under ``tmp_path`` and closed afterwards."""
    settings.HUB_GATEWAY_URL = "filesystem://"
    settings.VAR_DIR = tmp_path
    settings.HUB_GATEWAY_KEYS_DIR = tmp_path / "keys"
    settings.HUB_GATEWAY_IPC = True
    channel.doors.clear()
    opened = []

    def open_door(queue: str, handlers: list) -> channel.Door:
        door = channel.Door(queue, handlers, f"test:{len(opened)}")
        get_presence().announce(queue, door.address)
        opened.append(door)
        return door

    yield open_door
    for door in opened:
        door.close()
    channel.doors.clear()


def test_a_call_is_answered_by_an_idle_handler(doors):
    handlers = [Echo(delay=0.4), Echo(delay=0.4)]
    doors("cpu", handlers)
    assert bytes(channel.call("cpu", [b"ab", memoryview(b"cd")], 5)).startswith(b"abcd|door-cpu-")
    answers: list[bytes] = []
    started = time.monotonic()
    threads = [threading.Thread(target=lambda: answers.append(bytes(channel.call("cpu", [b"x"], 5))))
               for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    took = time.monotonic() - started
    assert sorted(answer.split(b"|")[1] for answer in answers) == [b"door-cpu-0", b"door-cpu-1"], answers
    assert took < 0.75, f"the two calls ran one after the other ({took:.2f} s): not given to the idle handler"


def test_an_answer_after_the_timeout_is_not_taken_for_the_next_call(doors):
    doors("cpu", [Echo(delay=0.5)])
    assert channel.call("cpu", [b"late"], 0.1) is None
    time.sleep(0.6)
    assert bytes(channel.call("cpu", [b"next"], 5)).startswith(b"next|")


def test_a_streamed_answer_comes_in_order_and_a_reader_that_stops_cancels_it(doors):
    handler = Echo(pieces=1000)
    doors("generate-cpu", [handler])
    parts = channel.stream("generate-cpu", b"go", 5, lambda piece: False)
    assert [next(parts) for _ in range(3)] == [b"0", b"1", b"2"]
    parts.close()
    deadline = time.monotonic() + 5
    while not handler.cancelled and time.monotonic() < deadline:
        time.sleep(0.05)
    assert handler.cancelled and handler.cancelled[0] < 20, handler.cancelled


class Burst:
    """A handler that streams ``count`` pieces of 1 KiB as fast as it can, then ``end`` (a small model's tokens)."""

    def __init__(self, count: int) -> None:
        self.count = count

    def __call__(self, call) -> None:
        for index in range(self.count):
            call.reply(f"{index:06d}".encode().ljust(1024, b"."))
        call.reply(b"end")

    def idle(self) -> None:
        pass

    def close(self) -> None:
        pass


def test_a_streamed_answer_reaches_a_slow_reader_whole(doors):
    """The engine outruns its reader (a client on a slow link): no piece is dropped, however far behind the
    reader falls (a ROUTER drops what its high-water mark leaves no room for)."""
    doors("generate-cpu", [Burst(1000)])
    got = []
    for piece in channel.stream("generate-cpu", b"go", 5, lambda piece: piece == b"end"):
        got.append(piece[:6])
        time.sleep(0.0005)
    assert got == [f"{index:06d}".encode() for index in range(1000)] + [b"end"]


def test_a_link_dropped_is_opened_again_at_once(doors):
    """A link dropped (its door's connection went: ``LOST``) and the next call's new one: closing a socket is
    asynchronous, so the new socket's monitor must not need a name the closed one may still hold."""
    doors("cpu", [Echo()])
    for _ in range(1000):  # unconnected, so the next socket comes before the reaper has closed the last
        channel._sockets.drop(channel._sockets.get("cpu", [], False))
    assert bytes(channel.call("cpu", [b"x"], 5)).startswith(b"x|")


def test_no_door_is_no_worker_and_a_stale_generation_sends_nothing(doors):
    with pytest.raises(NoWorker):
        channel.call("gpu", [b"x"], 1)
    handler = Echo()
    doors("cpu", [handler])
    get_presence().bump()
    with pytest.raises(Stale) as stale:
        channel.call("cpu", [b"x"], 1, generation=b"1")
    assert stale.value.generation == get_presence().generation()
    assert handler.seen == []
    assert channel.call("cpu", [b"x"], 5, generation=get_presence().generation()) is not None


def test_a_door_gone_takes_no_call(doors):
    door = doors("cpu", [Echo()])
    assert channel.call("cpu", [b"x"], 5) is not None
    door.close()
    assert presence.alive(get_presence(), "cpu"), "still announced: the caller finds out by itself"
    started = time.monotonic()
    assert channel.call("cpu", [b"x"], 0.5) is None
    assert time.monotonic() - started < 1.5


DOOR = """
import os, sys, time
os.environ["DJANGO_SETTINGS_MODULE"] = "hub.settings"
import django
django.setup()
from hub.gateway import channel
from hub.gateway.presence import get_presence

class Echo:
    def __call__(self, call):
        call.reply(b"over tcp: " + b"".join(frame.bytes for frame in call.body))
    def idle(self):
        pass
    def close(self):
        pass

door = channel.Door("cpu", [Echo()], "far:1")
get_presence().announce("cpu", door.address)
print(door.tcp, flush=True)
while True:
    time.sleep(1)
    get_presence().announce("cpu", door.address)
"""


@pytest.mark.slow  # starts a door in a process of its own (Django set up there too)
def test_across_hosts_a_caller_with_the_hubs_keys_is_answered_and_other_keys_are_refused(settings, tmp_path):
    """A door in another process listening on tcp://127.0.0.1 (CURVE); this process as a web node on another
    host (``HUB_GATEWAY_IPC=0``). The keys folder is the hub's: a caller whose client key is not in its
    ``clients/`` gets no answer."""
    settings.HUB_GATEWAY_URL = "filesystem://"
    settings.VAR_DIR = tmp_path
    settings.HUB_GATEWAY_KEYS_DIR = tmp_path / "keys"
    settings.HUB_GATEWAY_IPC = False
    channel.doors.clear()
    env = {**os.environ, "HUB_GATEWAY_URL": "filesystem://", "HUB_VAR_DIR": str(tmp_path),
           "HUB_GATEWAY_KEYS_DIR": str(tmp_path / "keys"), "HUB_GATEWAY_TCP": "127.0.0.1:0",
           "PYTHONPATH": f"{ROOT}:{ROOT / 'client'}"}
    far = subprocess.Popen([sys.executable, "-c", DOOR], env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        endpoint = far.stdout.readline().strip()
        assert endpoint.startswith("tcp://127.0.0.1:"), endpoint
        (address,) = get_presence().addresses("cpu")
        assert address["tcp"] == endpoint and address["key"] == channel.keys()[0].decode()
        assert bytes(channel.call("cpu", [b"hello"], 10)) == b"over tcp: hello"

        import zmq.auth

        other = tmp_path / "other"
        other.mkdir()
        public, secret = zmq.auth.create_certificates(other, "client")
        channel._sockets.clear()
        real = channel.keys()
        with pytest.MonkeyPatch.context() as patch:
            stranger = (real[0], b"", *zmq.auth.load_certificate(secret))
            patch.setattr(channel, "keys", lambda: stranger)
            assert channel.call("cpu", [b"hello"], 1.5) is None, "a client key the hub does not know is refused"
        channel._sockets.clear()
        assert bytes(channel.call("cpu", [b"again"], 10)) == b"over tcp: again"
    finally:
        far.kill()
        far.wait()
        channel._sockets.clear()
        channel.doors.clear()


@pytest.mark.slow
@pytest.mark.cpu  # starts an engine child and kills it mid-run
def test_an_engine_killed_mid_call_is_answered_for_and_replaced(doors, tmp_path):
    """A real door handler (``RunHandler``) and its engine child: the child killed mid-run (as the kernel's OOM
    killer would) is answered for through the channel, and the next call is run by a new child."""
    import numpy as np

    from hub.gateway import wire
    from hub.gateway.engine import RunHandler
    from tests.gateway import models

    handler = RunHandler("cpu")
    door = doors("cpu", [handler])
    (tmp_path / "long.onnx").write_bytes(models.one_long_kernel())
    step = {"local": str(tmp_path / "long.onnx")}

    def run(n: int) -> dict:
        get_presence().announce("cpu", door.address)  # as the worker does every ANNOUNCE_S
        meta = {"steps": [step], "threads": 1, "deadline": time.time() + 60}
        answer = channel.call("cpu", wire.parts(meta, {"n": np.array([n, n], np.int64)}), 60)
        return wire.unpack(answer)[0]

    assert run(2)["ok"]
    first = handler.engine.pid
    threading.Timer(1.0, lambda: os.kill(first, 9)).start()
    lost = run(6000)
    assert lost["code"] == "run_failed" and "was killed (signal 9" in lost["detail"], lost
    assert run(3)["ok"] and handler.engine.pid != first


SLOW_DOOR = """
import os, sys, time
os.environ["DJANGO_SETTINGS_MODULE"] = "hub.settings"
import django
django.setup()
from hub.gateway import channel
from hub.gateway.presence import get_presence

class Slow:
    def __call__(self, call):
        time.sleep(60)
    def idle(self):
        pass
    def close(self):
        pass

door = channel.Door("cpu", [Slow()], "dying:1")
get_presence().announce("cpu", door.address)
print("up", flush=True)
while True:
    time.sleep(1)
    get_presence().announce("cpu", door.address)
"""


@pytest.mark.slow  # starts doors in processes of their own (Django set up there too) and kills them mid-call
def test_a_worker_that_dies_mid_call_is_not_waited_for(doors, tmp_path):
    """A worker process killed while it runs a call: the call goes again to a door that is up and is answered
    there; with no door left, the caller hears ``NoWorker`` once the dead worker's announcement lapses (seconds),
    not after the call's timeout."""
    env = {**os.environ, "HUB_GATEWAY_URL": "filesystem://", "HUB_VAR_DIR": str(tmp_path),
           "HUB_GATEWAY_KEYS_DIR": str(tmp_path / "keys"), "HUB_GATEWAY_TCP": "",
           "PYTHONPATH": f"{ROOT}:{ROOT / 'client'}"}

    def dying() -> subprocess.Popen:
        far = subprocess.Popen([sys.executable, "-c", SLOW_DOOR], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                               text=True)
        assert far.stdout.readline().strip() == "up"
        return far

    far = dying()
    try:
        threading.Timer(1.0, far.kill).start()
        started = time.monotonic()
        with pytest.raises(NoWorker):
            channel.call("cpu", [b"x"], 60)
        took = time.monotonic() - started
        assert took < 1.0 + presence.ALIVE_S + 4, f"waited {took:.1f} s for a worker that had died"

        far = dying()
        channel.doors.clear()  # the look-up that found no door is not kept for its REFRESH_S
        answers: list = []

        def again() -> None:
            try:
                answers.append(channel.call("cpu", [b"again"], 60))
            except Exception as exc:  # noqa: BLE001 - shown by the assertion below
                answers.append(exc)

        caller = threading.Thread(target=again)
        caller.start()
        time.sleep(0.5)  # the call is the dying worker's (the only door up)
        doors("cpu", [Echo()])
        time.sleep(channel.REFRESH_S)  # the caller's look-up of the doors now holds this one too
        started = time.monotonic()
        far.kill()
        caller.join(30)
        took = time.monotonic() - started
        assert answers and bytes(answers[0]).startswith(b"again|door-cpu-"), answers
        assert took < 3, f"the call was sent again only after {took:.1f} s"
    finally:
        far.kill()
        far.wait()
        channel._sockets.clear()
