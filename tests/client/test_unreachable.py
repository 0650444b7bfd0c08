"""A hub that is down is reported at once: a refused connection (nothing listens at the address) is tried
again for about a second, not for the whole backoff (16 s before); a connection that drops is still tried
the configured number of times (issue 41, point 9)."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from hpcfair.client import REFUSED_S, HubClient
from hpcfair.errors import TransferError


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_refused_connection_fails_in_about_a_second():
    client = HubClient(f"http://127.0.0.1:{free_port()}", token="x", retries=5, backoff=0.5)
    started = time.perf_counter()
    with pytest.raises(TransferError) as down:
        client.request("GET", "/api/v1/")
    assert down.value.code == "unreachable" and "is it running?" in str(down.value)
    assert time.perf_counter() - started <= REFUSED_S + 0.5


def test_a_dropped_connection_is_still_tried_again():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    accepted = []

    def drop_each() -> None:
        while len(accepted) < 3:
            connection, _ = server.accept()
            accepted.append(connection)
            connection.close()  # before any answer: the client sees the connection drop

    thread = threading.Thread(target=drop_each, daemon=True)
    thread.start()
    client = HubClient(f"http://127.0.0.1:{server.getsockname()[1]}", token="x", retries=2, backoff=0.05)
    with pytest.raises(TransferError):
        client.request("GET", "/api/v1/")
    thread.join(timeout=5)
    server.close()
    assert len(accepted) == 3, "the first try and two more"


def test_in_the_middle_of_a_transfer_a_refused_connection_is_waited_for():
    client = HubClient(f"http://127.0.0.1:{free_port()}", token="x", retries=3, backoff=0.2)
    started = time.perf_counter()
    with pytest.raises(TransferError):
        client.request("GET", "/api/v1/uploads/x", patient=True)  # the hub restarting mid-upload
    assert time.perf_counter() - started >= 0.2 + 0.4 + 0.8, "tried again for the whole backoff"
