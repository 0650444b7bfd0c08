"""The gateway's presence on the real Redis (``hub.gateway.presence.RedisPresence``): a door announced is found
until it stops announcing or withdraws; a process hears the registry's generation bumped elsewhere without
asking (``generation_heard``), and a lost subscription is not trusted until it is made again."""

from __future__ import annotations

import os
import time
import uuid

import pytest

from hub.gateway.presence import RedisPresence, alive
from tests.system_packages import installed_profile

pytestmark = pytest.mark.worker


@pytest.fixture
def presence() -> RedisPresence:
    url = os.environ.get("HUB_BROKER_URL", "")
    if not url.startswith("redis://"):
        (pytest.fail if installed_profile() else pytest.skip)("needs Redis: run through `make test`")
    return RedisPresence(url)


def test_a_door_is_found_while_announced_and_not_after_it_withdraws(presence):
    queue = f"test-{uuid.uuid4().hex}"
    door = {"worker": "w1", "host": "h", "ipc": "ipc:///tmp/x"}
    assert not alive(presence, queue)
    presence.announce(queue, door)
    assert presence.addresses(queue) == [door] and alive(presence, queue)
    presence.withdraw(queue, door)
    assert presence.addresses(queue) == []


def test_a_bump_is_heard_by_another_process_at_once(presence):
    """The bump's notice is waiting before its caller has its answer, so a request after a revocation's
    answer is checked against the new generation, with no round trip to Redis."""
    other = RedisPresence(os.environ["HUB_BROKER_URL"])
    assert presence.generation_heard() == presence.generation()  # subscribed, then read the counter
    for _ in range(3):
        other.bump()
        assert presence.generation_heard() == other.generation()
    presence.bump()  # its own bump too
    assert presence.generation_heard() == other.generation()


def test_a_lost_subscription_is_not_trusted_and_is_made_again(presence, monkeypatch):
    monkeypatch.setattr(type(presence.heard), "RETRY_S", 0.2)
    assert presence.generation_heard() == presence.generation()
    host, port = presence.heard.connection._sock.getsockname()[:2]
    presence.redis.execute_command("CLIENT", "KILL", "ADDR", f"{host}:{port}")
    RedisPresence(os.environ["HUB_BROKER_URL"]).bump()  # a bump that the lost connection will never tell
    deadline = time.monotonic() + 5
    while (heard := presence.generation_heard()) is not None:  # the closed connection is noticed
        assert time.monotonic() < deadline, heard
        time.sleep(0.01)
    time.sleep(0.3)
    assert presence.generation_heard() == presence.generation()  # subscribed again, and the counter read afresh
