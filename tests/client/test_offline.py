"""``HPCFAIR_OFFLINE=1`` (issue 41, point 9): a compute node with no network uses a pinned version that was
used once online, from the cache (its record and its files), as ``HF_HUB_OFFLINE`` does; everything else fails
at once with ``OfflineError`` (code ``offline``), before any connection is tried."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
from hpcfair import HubClient, OfflineError, TransferError, modelAPI
from hpcfair.cache import Cache

from tests.conftest import valid_metadata
from tests.gateway.models import mlp, reference


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpcfair.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=300)


@pytest.fixture
def listener():
    """A socket that listens and never answers; the test checks that nobody connected."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.setblocking(False)
    yield server
    server.close()


def connections(server: socket.socket) -> int:
    count = 0
    while True:
        try:
            server.accept()[0].close()
            count += 1
        except BlockingIOError:
            return count


def test_every_network_call_fails_at_once_without_connecting(listener, tmp_path, monkeypatch):
    monkeypatch.setenv("HPCFAIR_OFFLINE", "1")
    client = HubClient(f"http://127.0.0.1:{listener.getsockname()[1]}", token="x", cache=tmp_path / "cache",
                       timeout=2, retries=0)
    (tmp_path / "w.bin").write_bytes(b"abc")
    calls = [lambda: client.search("iris"), client.me, lambda: client.upload_file(tmp_path / "w.bin"),
             lambda: client.resolve("alice/mlp"), lambda: client.resolve("alice/mlp@1"),
             lambda: client.fetch("/api/v1/x", "ab" * 32, 3), lambda: client.job("1234"),
             lambda: client.session.get(client.url("artifacts/")),
             lambda: client.bare.get("http://127.0.0.1:9/presigned")]
    for call in calls:
        started = time.perf_counter()
        with pytest.raises(OfflineError) as offline:
            call()
        assert time.perf_counter() - started < 0.2
        assert offline.value.code == "offline" and isinstance(offline.value, TransferError)
        assert "HPCFAIR_OFFLINE" in str(offline.value)
    assert connections(listener) == 0
    assert "was not used on this machine online" in _message(lambda: client.resolve("alice/mlp"))
    assert "alice/mlp@1 is not in the cache" in _message(lambda: client.resolve("alice/mlp@1"))
    assert not HubClient(f"http://127.0.0.1:{listener.getsockname()[1]}", offline=False).offline


def _message(call) -> str:
    try:
        call()
    except OfflineError as exc:
        return str(exc)
    raise AssertionError("no OfflineError")


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
@pytest.mark.cpu  # five CLI runs in child processes: about 7 s
def test_a_pinned_cached_version_runs_offline_from_the_terminal(live_server, owner, tmp_path, settings, listener):
    from hub.accounts.models import ApiToken

    settings.HUB_PUBLIC_URL = live_server.url
    _, token = ApiToken.issue(owner, scope="write")
    (tmp_path / "mlp.onnx").write_bytes(mlp(seed=3))
    x = np.random.default_rng(0).standard_normal((2, 784)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    expected = reference(mlp(seed=3), {"x": x})["logits"]

    online = modelAPI(live_server.url, token)  # once online: the version is used, so its record and file cached
    published = online.upload(name="offline-mlp", files=[tmp_path / "mlp.onnx"],
                              metadata=valid_metadata(framework="onnx", task="classification"))
    online.load_model(f"alice/offline-mlp@{published['version']}")

    # no hub at all now: the endpoint is a socket that never answers, and nothing may connect to it
    env = {"HPCFAIR_OFFLINE": "1", "HPCFAIR_ENDPOINT": f"http://127.0.0.1:{listener.getsockname()[1]}"}
    assert published["pid"].startswith("ark:/")
    for ref in (f"alice/offline-mlp@{published['version']}", published["pid"], "ark:" + published["pid"][5:]):
        ran = cli("infer", ref, str(tmp_path / "x.npy"), "--device", "local", "--output",
                  str(tmp_path / "y.npz"), env=env)
        assert ran.returncode == 0, ran.stderr
        np.testing.assert_allclose(np.load(tmp_path / "y.npz")["logits"], expected, rtol=1e-5, atol=1e-5)
        (tmp_path / "y.npz").unlink()
    # the file used online comes from the cache; the README.md the hub wrote was never fetched, so it is not there
    got = cli("download", published["pid"], "--dest", str(tmp_path / "back"), "--file", "mlp.onnx", env=env)
    assert got.returncode == 0 and (tmp_path / "back" / "mlp.onnx").read_bytes() == mlp(seed=3), got.stderr
    whole = cli("download", published["pid"], "--dest", str(tmp_path / "whole"), env=env)
    assert whole.returncode != 0 and "README.md" in whole.stderr and "not in the cache" in whole.stderr

    unpinned = cli("infer", "alice/offline-mlp", str(tmp_path / "x.npy"), "--device", "local", env=env)
    on_hub = cli("infer", f"alice/offline-mlp@{published['version']}", str(tmp_path / "x.npy"), env=env)
    searched = cli("search", "mlp", env=env)
    for refused in (unpinned, on_hub, searched):
        assert refused.returncode == 1 and refused.stderr.startswith("error [offline]: HPCFAIR_OFFLINE is set")
        assert len(refused.stderr.strip().splitlines()) == 1
    assert "alice/offline-mlp was not used on this machine online" in unpinned.stderr
    assert connections(listener) == 0
    # issue 55: once a bare name is used online, offline it names the version it named then
    online.client.resolve("alice/offline-mlp")
    bare = cli("infer", "alice/offline-mlp", str(tmp_path / "x.npy"), "--device", "local", "--output",
               str(tmp_path / "y.npz"), env=env)
    assert bare.returncode == 0, bare.stderr
    np.testing.assert_allclose(np.load(tmp_path / "y.npz")["logits"], expected, rtol=1e-5, atol=1e-5)
    assert connections(listener) == 0


def test_a_cache_that_cannot_be_written_keeps_no_record_and_fails_nothing(tmp_path):
    (tmp_path / "a-file").write_text("")
    info = {"pid": "ark:/99999/fk4x", "artifact": "alice/m", "version": "1", "files": []}
    unwritable = Cache(tmp_path / "a-file" / "cache")  # under a file: nothing can be made there
    unwritable.save_version(info)
    assert unwritable.version("alice/m@1") is None
    kept = Cache(tmp_path / "cache")
    kept.save_version(info)
    assert kept.version("alice/m@1") == info == kept.version("ark:/99999/fk4x")
    assert kept.version("alice/m") is None
