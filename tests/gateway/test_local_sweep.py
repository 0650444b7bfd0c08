"""A worker starting its local sockets removes the folders that killed workers left behind
(``hub.gateway.local.sweep``), and nothing another worker still listens on."""

from __future__ import annotations

import os
import socket
import time

from hub.gateway import local


def _bound(folder, name: str, listening: bool) -> socket.socket:
    folder.mkdir()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(folder / name))
    if listening:
        sock.listen(4)
    return sock


def test_only_folders_whose_sockets_nobody_listens_on_go(tmp_path):
    live = _bound(tmp_path / "hub-lane-live", "cpu", listening=True)  # another worker, running
    dead = _bound(tmp_path / "hub-lane-dead", "cpu", listening=True)
    dead.close()  # its worker was killed: the socket file stays, nobody listens
    (tmp_path / "hub-lane-new").mkdir()  # a worker between making its folder and binding
    old = tmp_path / "hub-lane-old"
    old.mkdir()  # killed in that moment, long ago
    os.utime(old, (time.time() - 600, time.time() - 600))
    (tmp_path / "other").mkdir()
    try:
        assert local.sweep(str(tmp_path)) == 2
        assert sorted(p.name for p in tmp_path.iterdir()) == ["hub-lane-live", "hub-lane-new", "other"]
        live.settimeout(5)
        connection, _ = live.accept()  # the check's connection reached the live worker, and was closed at once
        assert connection.recv(1) == b""
        connection.close()
    finally:
        live.close()
