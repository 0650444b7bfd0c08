"""The Redis lane's own connections (``RedisLane._round_trip``, issue 39): a request and its reply cross
between threads of the real Redis; a connection Redis dropped is opened again without the caller seeing it;
an error reply closes the connection so that no reply is left unread for the next call; a process hears
the registry's generation bumped elsewhere without asking (``generation_heard``)."""

from __future__ import annotations

import os
import threading
import time
import uuid

import pytest
import redis

from hub.gateway.lane import NoWorker, RedisLane
from tests.system_packages import installed_profile

pytestmark = pytest.mark.worker


@pytest.fixture
def lane() -> RedisLane:
    url = os.environ.get("HUB_BROKER_URL", "")
    if not url.startswith("redis://"):
        (pytest.fail if installed_profile() else pytest.skip)("needs Redis: run through `make test`")
    return RedisLane(url)


def serve_one(lane: RedisLane, queue: str, answers: list[bytes]) -> None:
    """A worker's side: take one request and answer it with its message reversed."""
    found = lane.pop([queue], timeout=5)
    assert found is not None
    request_id, message = found
    answers.append(message)
    lane.reply(request_id, message[::-1])


def test_a_request_and_its_reply_cross_between_threads(lane):
    queue = f"test-{uuid.uuid4().hex}"
    lane.announce(queue, "w1")
    try:
        for message in (b"first", b"x" * 300_000):  # a small one, and one larger than a socket buffer
            taken: list[bytes] = []
            worker = threading.Thread(target=serve_one, args=(lane, queue, taken))
            worker.start()
            assert lane.call(queue, message, timeout=5) == message[::-1]
            worker.join()
            assert taken == [message]
    finally:
        lane.withdraw(queue, "w1")


def test_nobody_serving_the_queue_is_refused_at_once(lane):
    with pytest.raises(NoWorker):
        lane.call(f"test-{uuid.uuid4().hex}", b"m", timeout=5)


def test_a_connection_redis_dropped_is_opened_again(lane):
    queue = f"test-{uuid.uuid4().hex}"
    lane.announce(queue, "w1")
    try:
        with pytest.raises(NoWorker):  # opens this thread's connection
            lane.call(f"{queue}-nobody", b"m", timeout=5)
        admin = redis.Redis.from_url(os.environ["HUB_BROKER_URL"])
        ours = lane.local.connection
        (client_id,) = lane._round_trip(("CLIENT", "ID"))
        assert admin.client_kill_filter(_id=client_id) == 1  # as a Redis restart or an idle timeout would
        taken: list[bytes] = []
        worker = threading.Thread(target=serve_one, args=(lane, queue, taken))
        worker.start()
        assert lane.call(queue, b"again", timeout=5) == b"niaga"
        worker.join()
        assert lane.local.connection is ours and ours.is_connected
    finally:
        lane.withdraw(queue, "w1")


def test_an_error_reply_leaves_no_reply_unread(lane):
    """A command refused part-way closes the connection: the next call reads its own replies, not the
    refused one's."""
    queue = f"test-{uuid.uuid4().hex}"
    key = lane._queue(queue)
    lane.redis.set(key, "not a list")
    lane.announce(queue, "w1")
    try:
        with pytest.raises(redis.exceptions.ResponseError):
            lane._round_trip(("LPUSH", key, b"m"), ("PING",))
        assert not lane.local.connection.is_connected
        assert lane._round_trip(("PING",), ("ECHO", b"mine")) == [b"PONG", b"mine"]
    finally:
        lane.redis.delete(key)
        lane.withdraw(queue, "w1")


def test_an_answer_and_the_wait_for_the_next_request_go_together(lane):
    """``reply_and_pop``, a lane engine's step: the caller gets its answer, and the engine the next request."""
    queue = f"test-{uuid.uuid4().hex}"
    lane.announce(queue, "w1")
    answers: list[bytes | None] = []
    try:
        caller = threading.Thread(target=lambda: answers.append(lane.call(queue, b"one", timeout=5)))
        caller.start()
        request_id, message = lane.pop([queue], timeout=5)
        second = threading.Thread(target=lambda: answers.append(lane.call(queue, b"two", timeout=5)))
        second.start()
        request_id, message = lane.reply_and_pop(request_id, message.upper(), [queue], timeout=5)
        caller.join()
        assert message == b"two" and answers == [b"ONE"]
        assert lane.reply_and_pop(request_id, b"TWO", [queue], timeout=0.1) is None  # nothing more queued
        second.join()
        assert answers == [b"ONE", b"TWO"]
    finally:
        lane.withdraw(queue, "w1")


def test_a_bump_is_heard_by_another_process_at_once(lane):
    """``generation_heard``: the bump's notice is waiting before its caller has its answer, so a request
    after a revocation's answer is checked against the new generation, with no round trip to Redis."""
    other = RedisLane(os.environ["HUB_BROKER_URL"])
    assert lane.generation_heard() == lane.generation()  # subscribed, then read the counter
    for _ in range(3):
        other.bump()
        assert lane.generation_heard() == other.generation()
    lane.bump()  # its own bump too
    assert lane.generation_heard() == other.generation()


def test_a_lost_subscription_is_not_trusted_and_is_made_again(lane, monkeypatch):
    monkeypatch.setattr(type(lane.heard), "RETRY_S", 0.2)
    assert lane.generation_heard() == lane.generation()
    host, port = lane.heard.connection._sock.getsockname()[:2]
    lane.redis.execute_command("CLIENT", "KILL", "ADDR", f"{host}:{port}")
    RedisLane(os.environ["HUB_BROKER_URL"]).bump()  # a bump that the lost connection will never tell
    deadline = time.monotonic() + 5
    while (heard := lane.generation_heard()) is not None:  # the closed connection is noticed
        assert time.monotonic() < deadline, heard
        time.sleep(0.01)
    time.sleep(0.3)
    assert lane.generation_heard() == lane.generation()  # subscribed again, and the counter read afresh
