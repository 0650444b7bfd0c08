"""Where the hub is and who you are: arguments, then ``HPCFAIR_*`` environment variables, then the
login file ``~/.hpcfair`` (written by ``hpcfair login``), then the defaults.

Environment variables:
- ``HPCFAIR_ENDPOINT``, ``HPCFAIR_TOKEN``: the hub and an API token.
- ``HPCFAIR_CONFIG``: the login file (default ``~/.hpcfair``).
- ``HPCFAIR_CACHE``: the download cache (default ``$XDG_CACHE_HOME/hpcfair`` or ``~/.cache/hpcfair``).
- ``HPCFAIR_OFFLINE=1``: never ask the hub; pinned versions already in the cache are used from it, and
  anything else fails at once with ``OfflineError`` (as ``HF_HUB_OFFLINE``).
- ``HPCFAIR_NO_PROGRESS=1``: no progress bars.
- ``HPCFAIR_DEBUG=1``: the CLI prints tracebacks.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import yaml

DEFAULT_ENDPOINT = "http://127.0.0.1:8000"


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def login_file() -> Path:
    return Path(os.environ.get("HPCFAIR_CONFIG") or Path.home() / ".hpcfair")


def cache_dir() -> Path:
    if os.environ.get("HPCFAIR_CACHE"):
        return Path(os.environ["HPCFAIR_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hpcfair"


def offline() -> bool:
    return _flag("HPCFAIR_OFFLINE")


def progress_enabled() -> bool:
    return not _flag("HPCFAIR_NO_PROGRESS")


def debug() -> bool:
    return _flag("HPCFAIR_DEBUG")


LOGIN_KEYS = ("endpoint", "token", "refresh_token", "expires_at")


def read_login(path: Path | None = None) -> dict[str, str]:
    """The login file's ``endpoint`` and ``token`` (and, after a device login, ``refresh_token`` and
    ``expires_at``, the access token's expiry in seconds since the epoch); empty when there is no file."""
    path = path or login_file()
    if not path.exists():
        return {}
    data = yaml.safe_load(path.read_text()) or {}
    return {key: str(data[key]) for key in LOGIN_KEYS if data.get(key)} if isinstance(data, dict) else {}


def save_login(endpoint: str, token: str, path: Path | None = None, *, refresh_token: str | None = None,
               expires_at: float | None = None) -> Path:
    """Write the login file, readable by its owner only."""
    path = path or login_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    data: dict[str, object] = {"endpoint": endpoint, "token": token}
    if refresh_token:
        data.update(refresh_token=refresh_token, expires_at=int(expires_at or 0))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        yaml.safe_dump(data, handle)
    os.chmod(path, 0o600)
    return path


@dataclass(frozen=True)
class Settings:
    endpoint: str
    token: str | None
    refresh_token: str | None = None  # the login file's, when its token is the one chosen
    expires_at: float = 0.0


def resolve(endpoint: str | None = None, token: str | None = None) -> Settings:
    """Arguments first, then the environment, then the login file (its token only for its endpoint)."""
    saved = read_login()
    chosen = (endpoint or os.environ.get("HPCFAIR_ENDPOINT") or saved.get("endpoint") or DEFAULT_ENDPOINT).rstrip("/")
    saved_token = saved.get("token") if saved.get("endpoint", "").rstrip("/") == chosen else None
    given = token or os.environ.get("HPCFAIR_TOKEN")
    if given or not saved_token:
        return Settings(endpoint=chosen, token=given or saved_token)
    try:
        expires_at = float(saved.get("expires_at") or 0)
    except ValueError:
        expires_at = 0.0
    return Settings(endpoint=chosen, token=saved_token, refresh_token=saved.get("refresh_token"),
                    expires_at=expires_at)
