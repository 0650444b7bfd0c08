"""The hub's public URLs of PIDs and files (``HUB_PUBLIC_URL`` + path), for services, exports and the API."""

from __future__ import annotations

from urllib.parse import quote

from django.conf import settings
from django.urls import reverse

from hub.registry.models import Version


def absolute(path: str) -> str:
    return settings.HUB_PUBLIC_URL + path


def pid_url(pid: str) -> str:
    return absolute("/" + pid)


def file_url(version: Version, path: str, label: str = "") -> str:
    """The download URL of ``path`` in ``version`` (under ``label`` instead of its own, e.g. ``latest``)."""
    artifact = version.artifact
    base = reverse("api:file-download", args=[artifact.owner.username, artifact.name, label or version.label, "x"])
    return absolute(base[:-1] + quote(path))
