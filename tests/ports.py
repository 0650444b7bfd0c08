"""Ports for servers that tests and benches start on 127.0.0.1.

A port the kernel hands out for `bind(0)` lies in its ephemeral range, where any outgoing connection may take
it (or the port next to it) before the server binds it: SeaweedFS, which needs eight consecutive ports, once
found its last one taken that way. These ports come from below that range instead, each checked free by
binding it, and none is handed out twice in one process."""

from __future__ import annotations

import random
import socket
from pathlib import Path

LOWEST = 10000
_handed_out: set[int] = set()


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(count: int) -> int:
    """The first of `count` consecutive free ports below the ephemeral range, none handed out before."""
    top = _ephemeral_start() - count
    for _ in range(1000):
        first = random.randrange(LOWEST, top)
        block = range(first, first + count)
        if _handed_out.isdisjoint(block) and all(_bindable(port) for port in block):
            _handed_out.update(block)
            return first
    raise RuntimeError(f"no {count} consecutive free ports between {LOWEST} and {top + count}")


def free_port() -> int:
    """One free port below the ephemeral range, not handed out before in this process."""
    return free_ports(1)
