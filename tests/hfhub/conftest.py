"""The Hugging Face Hub protocol through the real clients: each runs in a process of its own with ``HF_ENDPOINT``
set to a live hub (pytest-django's live server) and ``HF_TOKEN`` a hub token, exactly as a scientist's shell sets
them; nothing is patched. A client script prints one JSON line of what it read; the test checks it byte for byte
against what it published."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def hf_client(live_server, tmp_path):
    """``run(script, token=None, env=None, endpoint=None, **args)``: the script's last printed line as JSON
    (``endpoint``: another hub than the live server). ``ARGS`` (a dict) and
    ``ENDPOINT`` are defined for it; each call runs in a fresh folder with a fresh Hugging Face cache unless
    ``home`` is given."""
    calls = iter(range(1000))

    def run(script: str, token: str | None = None, home: str | None = None, timeout: int = 600,
            env: dict[str, str] | None = None, endpoint: str | None = None, **args) -> Any:
        environ = {key: value for key, value in os.environ.items()
                   if not key.startswith(("HF_", "HUGGINGFACE_", "TRANSFORMERS_", "SENTENCE_TRANSFORMERS_"))}
        call = next(calls)
        cwd = tmp_path / f"client-{call}"  # a fresh folder and cache: nothing read before is found locally
        cwd.mkdir()
        environ.update(HF_ENDPOINT=endpoint or live_server.url, HF_HOME=home or str(cwd / "hf-home"),
                       HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_PROGRESS_BARS="1", TRANSFORMERS_VERBOSITY="error",
                       HF_DATASETS_DISABLE_PROGRESS_BARS="1", HFHUB_TEST_ARGS=json.dumps(args))
        environ.update(env or {})
        if token:
            environ["HF_TOKEN"] = token
        prelude = ("import json, os\nARGS = json.loads(os.environ['HFHUB_TEST_ARGS'])\n"
                   "ENDPOINT = os.environ['HF_ENDPOINT']\n")
        out = subprocess.run([sys.executable, "-c", prelude + script], env=environ, cwd=cwd,
                             capture_output=True, text=True, timeout=timeout)
        assert out.returncode == 0, out.stderr[-6000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    return run


def token_for(user, scope: str = "read") -> str:
    from hub.accounts.models import ApiToken

    return ApiToken.issue(user, scope=scope)[1]
