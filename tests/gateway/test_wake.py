"""The embedded file lane wakes on inotify (``hub.gateway.wake``) instead of looking every 2 ms: a
request renamed into the queue folder wakes the engine that waits for it, and the reply wakes the
caller; without inotify (``HUB_FILE_LANE_WAKE=0``) it still works by looking."""

from __future__ import annotations

import os
import threading
import time

import pytest

from hub.gateway.lane import FileLane
from hub.gateway.wake import Watch


def test_a_watch_wakes_on_a_rename_into_its_folder_and_keeps_events_until_waited(tmp_path):
    watch = Watch([tmp_path])
    assert watch.works
    try:
        assert not watch.wait(0.05)  # nothing yet
        (tmp_path / ".tmp").write_bytes(b"x")
        os.replace(tmp_path / ".tmp", tmp_path / "request")  # before the wait: kept
        started = time.perf_counter()
        assert watch.wait(5.0) and time.perf_counter() - started < 0.5
        assert not watch.wait(0.05), "drained"
    finally:
        watch.close()


@pytest.mark.parametrize("wake", [True, False])
def test_a_request_and_its_reply_cross_the_file_lane(tmp_path, monkeypatch, wake):
    monkeypatch.setattr(FileLane, "LOOK_S", 5.0)  # so that only a wake can answer quickly
    worker, web = FileLane(tmp_path, wake=wake), FileLane(tmp_path, wake=wake)
    worker.announce("cpu", "test-worker")
    served = []

    def serve() -> None:
        found = worker.pop(["cpu"], timeout=10)
        assert found is not None
        served.append(found[1])
        time.sleep(0.05)  # the caller is asleep by now
        worker.reply(found[0], b"answer to " + found[1])

    thread = threading.Thread(target=serve)
    thread.start()
    time.sleep(0.1)  # the worker is asleep in pop
    started = time.perf_counter()
    assert web.call("cpu", b"question", timeout=10) == b"answer to question"
    took = time.perf_counter() - started
    thread.join()
    assert served == [b"question"] and took < 1.0, f"{took:.3f} s"
    assert not any((tmp_path / "replies").iterdir()), "the reply was taken"
