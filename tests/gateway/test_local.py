"""The lanes' shortcut on one host (``hub.gateway.local``), with real Celery workers on Redis: a web process
sends a run to a worker's local engine over its Unix socket and Redis carries none of it; a web process
on another host, a stale generation, an engine killed mid-run and a worker killed mid-run each get the
answer the lane would give (the last one from another worker, over the lane).

Two workers on the same database, Redis and blobs: ``near`` announces its local socket, ``far`` serves the
Redis lane only (``HUB_GATEWAY_LOCAL=0``), as a worker on another host would."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from hub.gateway import local, pipeline, protocol, wire
from hub.gateway.lane import Stale, get_lane
from tests.conftest import client_for, start_worker, stop_process, worker_env
from tests.gateway import models

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

MLP = models.mlp()
X = np.random.default_rng(3).standard_normal((2, 784)).astype(np.float32)
URL = "/api/v1/artifacts/alice/{name}/versions/latest/infer"


@pytest.fixture(scope="module")
def workers(django_db_setup, django_db_blocker, tmp_path_factory):
    """(root, near, far): the two workers' processes; ``near`` may be killed by a test."""
    from workers.celery import app

    root = tmp_path_factory.mktemp("local")
    app.control.purge()
    near = start_worker(root, worker_env(root, HUB_GENERATE_ENGINES="0"), name="near")
    far = start_worker(root, worker_env(root, HUB_GATEWAY_LOCAL="0", HUB_GENERATE_ENGINES="0"), name="far")
    yield root, near, far
    for proc in (far, near):
        for pid in engines_of(proc.pid):
            _kill(pid)
        stop_process(proc)


@pytest.fixture
def hub(workers, settings, owner, publish):
    """This test process as a web process on the workers' blobs, the MLP published; the local sockets
    looked up afresh."""
    root = workers[0]
    settings.HUB_STORAGE = {**settings.HUB_STORAGE, "BACKEND": "filesystem", "DIR": str(root / "blobs")}
    settings.HUB_UPLOAD_DIR = root / "uploads"
    publish(owner, "mlp", {"mlp.onnx": MLP})
    local.nearby.clear()
    yield workers
    local.nearby.clear()


@pytest.fixture
def lane_calls(monkeypatch):
    """The runs that went over the Redis lane (``RedisLane.call``), counted."""
    lane = get_lane()
    sent: list[str] = []
    real = lane.call

    def counted(queue, message, timeout, generation=None):
        sent.append(queue)
        return real(queue, message, timeout, generation)

    monkeypatch.setattr(lane, "call", counted)
    return sent


def engines_of(parent: int) -> list[int]:
    """The lane engines (``python -m hub.gateway.engine ... --lane``) whose parent is ``parent``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and b"hub.gateway.engine" in command and b"--lane" in command:
            found.append(int(entry.name))
    return found


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def announced(worker_pid: int) -> list[dict]:
    return [address for address in map(json.loads, get_lane().nearby("cpu"))
            if address["path"] in local_paths(worker_pid)]


def local_paths(worker_pid: int) -> set[str]:
    """The Unix sockets a worker process holds open (its listeners)."""
    paths = set()
    inodes = set()
    for fd in Path(f"/proc/{worker_pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 8 and parts[6] in inodes:
            paths.add(parts[7])
    return paths


def run_in_thread(api, name: str, body: dict) -> tuple[threading.Thread, dict]:
    answer: dict = {}

    def post() -> None:
        started = time.monotonic()
        response = api.post(URL.format(name=name), body, format="json")
        answer.update(status=response.status_code, body=response.json(), seconds=time.monotonic() - started)

    thread = threading.Thread(target=post, daemon=True)
    thread.start()
    return thread, answer


def test_a_run_goes_to_the_local_engine_and_not_through_redis(hub, owner, lane_calls):
    _, near, far = hub
    (address,) = announced(near.pid)  # one socket, for the cpu lane, with this host's identity
    assert address["host"] == local.host() and stat.S_ISSOCK(os.stat(address["path"]).st_mode)
    assert stat.S_IMODE(os.stat(Path(address["path"]).parent).st_mode) == 0o700  # only its user may connect
    assert announced(far.pid) == []  # HUB_GATEWAY_LOCAL=0: lane only

    api = client_for(owner)
    for _ in range(3):
        response = api.post(URL.format(name="mlp"), {"inputs": {"x": X.tolist()}}, format="json")
        assert response.status_code == 200, response.content
        np.testing.assert_allclose(np.array(response.json()["outputs"]["logits"], np.float32),
                                   models.reference(MLP, {"x": X})["logits"], rtol=1e-5, atol=1e-6)
    assert lane_calls == []  # none of them went through Redis


def test_a_web_process_on_another_host_uses_the_lane(hub, owner, lane_calls, monkeypatch):
    """An address announced by a worker on another host (another identity) is never tried."""
    api = client_for(owner)
    assert api.post(URL.format(name="mlp"), {"inputs": {"x": X.tolist()}}, format="json").status_code == 200
    assert lane_calls == []
    monkeypatch.setattr(local, "host", lambda: "another-host/boot/mnt:[1]")
    local.nearby.clear()
    response = api.post(URL.format(name="mlp"), {"inputs": {"x": X.tolist()}}, format="json")
    assert response.status_code == 200, response.content
    assert lane_calls == ["cpu"]


def test_with_the_shortcut_off_every_run_uses_the_lane(hub, owner, lane_calls, settings):
    api = client_for(owner)
    assert api.post(URL.format(name="mlp"), {"inputs": {"x": X.tolist()}}, format="json").status_code == 200
    settings.HUB_GATEWAY_LOCAL = False
    response = api.post(URL.format(name="mlp"), {"inputs": {"x": X.tolist()}}, format="json")
    assert response.status_code == 200 and lane_calls == ["cpu"]


def test_a_stale_generation_is_refused_on_the_local_path_too(hub, owner, lane_calls):
    """The registry changed since the caller's remembered answers: refused, as the lane refuses it (this
    process heard the bump: ``RedisLane.generation_heard``)."""
    from hub.gateway import services

    model = services.model_for(owner, "alice/mlp")
    options = protocol.Options(device="cpu")
    lane = get_lane()
    meta, outputs = pipeline.call(protocol.steps_of([model]), {"x": X}, options, generation=lane.generation())
    assert meta["ok"] and outputs["logits"].shape == (2, 10)
    lane.bump()
    with pytest.raises(Stale) as stale:
        pipeline.call(protocol.steps_of([model]), {"x": X}, options, generation=b"0")
    assert stale.value.generation == lane.generation() and lane_calls == []


@pytest.fixture
def connections(monkeypatch):
    """The connections made to local engines' listening sockets (``local._connect``), counted."""
    made: list[str] = []
    real = local._connect

    def counted(path):
        made.append(path)
        return real(path)

    monkeypatch.setattr(local, "_connect", counted)
    return made


def _run(owner, name: str, arrays: dict[str, np.ndarray]):
    from hub.gateway import services

    return pipeline.call(protocol.steps_of([services.model_for(owner, f"alice/{name}")]), arrays,
                         protocol.Options(device="cpu"), generation=get_lane().generation())


def test_a_small_run_is_one_datagram_each_way_with_no_connection(hub, owner, lane_calls, connections):
    _, near, _ = hub
    (address,) = announced(near.pid)
    assert stat.S_ISSOCK(os.stat(address["datagram"]).st_mode)
    assert Path(address["datagram"]).parent == Path(address["path"]).parent  # the same private folder
    for _ in range(3):
        meta, outputs = _run(owner, "mlp", {"x": X})
        assert meta["ok"], meta
        np.testing.assert_allclose(outputs["logits"], models.reference(MLP, {"x": X})["logits"], rtol=1e-5, atol=1e-6)
    assert connections == [] and lane_calls == []


def test_a_request_too_large_for_a_datagram_takes_a_connection(hub, owner, lane_calls, connections):
    rows = wire.DATAGRAM_BYTES // (784 * 4) + 1
    x = np.random.default_rng(4).standard_normal((rows, 784)).astype(np.float32)
    meta, outputs = _run(owner, "mlp", {"x": x})
    assert meta["ok"], meta
    np.testing.assert_allclose(outputs["logits"], models.reference(MLP, {"x": x})["logits"], rtol=1e-4, atol=1e-5)
    assert len(connections) == 1 and lane_calls == []


def test_an_answer_too_large_for_a_datagram_comes_over_the_lane(hub, owner, publish, lane_calls, connections,
                                                                 monkeypatch):
    publish(owner, "grid", {"grid.onnx": models.grid(2.5)})
    lane = get_lane()
    waited: list[str] = []
    real = lane.wait_reply
    monkeypatch.setattr(lane, "wait_reply", lambda request_id, timeout: waited.append(request_id) or
                        real(request_id, timeout))
    side = int((wire.DATAGRAM_BYTES // 4) ** 0.5) + 1  # a side*side float32 answer is past a datagram
    meta, outputs = _run(owner, "grid", {"n": np.array([side, side], np.int64)})
    assert meta["ok"], meta
    assert outputs["grid"].shape == (side, side) and np.all(outputs["grid"] == 2.5)
    assert len(waited) == 1 and connections == [] and lane_calls == []  # sent as a datagram, answered on the lane
    small, outputs = _run(owner, "grid", {"n": np.array([2, 3], np.int64)})
    assert small["ok"] and outputs["grid"].shape == (2, 3) and len(waited) == 1


def test_only_the_answer_to_this_request_from_the_lanes_socket_is_taken(tmp_path):
    """A late answer to an earlier request, and a datagram from any other socket, are skipped."""
    folder = tmp_path / "lane"
    folder.mkdir(mode=0o700)
    engines = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    engines.bind(str(folder / "cpu.d"))
    stranger = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    stranger.bind("")
    sock = local._door.open()
    try:
        address = sock.getsockname()
        stranger.sendto(b"".join(wire.frame({"id": "mine"}, b"forged")), address)
        engines.sendto(b"".join(wire.frame({"id": "earlier"}, b"late")), address)
        engines.sendto(b"".join(wire.frame({"id": "mine"}, b"answer")), address)
        found = local._await_datagram(sock, "mine", str(folder / "cpu"), str(folder / "cpu.d"),
                                      time.monotonic() + 5)
        assert found == b"answer"
        assert local._await_datagram(sock, "mine", str(folder / "cpu"), str(folder / "cpu.d"),
                                     time.monotonic() + 0.2) in (None, local.LOST)  # nothing else was waiting
    finally:
        engines.close()
        stranger.close()


@pytest.mark.timeout(120)
def test_an_engine_killed_mid_run_is_answered_for_by_its_worker(hub, owner, publish, lane_calls, settings):
    _, near, _ = hub
    publish(owner, "long", {"long.onnx": models.one_long_kernel()})
    settings.HUB_INFER_SYNC_S = 60
    api = client_for(owner)
    warm = api.post(URL.format(name="long"), {"inputs": {"n": [2, 2]}, "mode": "sync"}, format="json")
    assert warm.status_code == 200, warm.content  # the model is loaded: the next run starts at once
    thread, answer = run_in_thread(api, "long", {"inputs": {"n": [6000, 6000]}, "mode": "sync"})
    time.sleep(1.5)  # taken by an engine and running (a single kernel of tens of seconds)
    killed = engines_of(near.pid)
    assert killed
    for pid in killed:
        _kill(pid)
    thread.join(timeout=30)
    assert not thread.is_alive(), "no answer after the engine was killed"
    assert answer["status"] == 422 and answer["body"]["code"] == "run_failed", answer
    assert "killed (signal 9" in answer["body"]["detail"] and answer["seconds"] < 15
    assert lane_calls == []  # the worker's own answer for its engine, not a second run elsewhere

    deadline = time.monotonic() + 60  # the worker starts new engines; the next run is answered
    while time.monotonic() < deadline and len(engines_of(near.pid)) < len(killed):
        time.sleep(0.2)
    again = api.post(URL.format(name="mlp"), {"inputs": {"x": X.tolist()}}, format="json")
    assert again.status_code == 200, again.content


@pytest.mark.timeout(180)
def test_a_worker_killed_mid_run_leaves_the_run_to_another_over_the_lane(hub, owner, publish, lane_calls,
                                                                          settings):
    """The whole worker is gone, so nobody answers for its engine: the web process sends the run over the
    lane, and the other worker answers it. (Last in the module: ``near`` stays dead.)"""
    _, near, far = hub
    publish(owner, "long", {"long.onnx": models.one_long_kernel()})
    settings.HUB_INFER_SYNC_S = 60
    api = client_for(owner)
    warm = api.post(URL.format(name="long"), {"inputs": {"n": [2, 2]}, "mode": "sync"}, format="json")
    assert warm.status_code == 200 and lane_calls == []
    n = 5000  # a MatMul of several seconds here, on either worker (4000 could end within the second on a quiet one)
    thread, answer = run_in_thread(api, "long", {"inputs": {"n": [n, n]}, "mode": "sync"})
    time.sleep(1.0)
    assert thread.is_alive(), "the run ended before its worker could be killed: make n larger"
    folders = {Path(path).parent for path in local_paths(near.pid)}
    for pid in [near.pid, *engines_of(near.pid)]:
        _kill(pid)
    near.wait(timeout=10)
    for folder in folders:  # what a killed worker leaves behind (its socket, in its own folder)
        shutil.rmtree(folder, ignore_errors=True)
    thread.join(timeout=150)
    assert not thread.is_alive(), "no answer after the worker was killed"
    assert answer["status"] == 200, answer
    assert answer["body"]["outputs"]["total"] == pytest.approx(0.25 * n**3, rel=0.05)  # float32 sums
    assert lane_calls == ["cpu"]  # sent once more, over the lane
    assert far.poll() is None
