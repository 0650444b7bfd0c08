"""Pushing a built MLCube image to the hub's own OCI registry (``hub.oci``), so that ``podman pull``, ``skopeo
copy`` and ``apptainer pull docker://…`` fetch it from any node: ``<HUB_CUBE_REGISTRY>/<owner>/<name>-mlcube:<tag>``.
The worker pushes as the cube's owner with a write token made for the push and revoked after it."""

from __future__ import annotations

import subprocess
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone
from hpcfair.cube.generate import slug

from hub.accounts.models import ApiToken
from hub.containers.services import CUBE_SUFFIX
from hub.registry.models import Version

PUSH_TIMEOUT_S = 1800


def registry_reference(source: Version) -> str | None:
    """Where the cube image of ``source`` goes in the hub's registry, or None when no registry is set."""
    host = settings.HUB_CUBE_REGISTRY.strip().rstrip("/")
    if not host:
        return None
    artifact = source.artifact
    return f"{host}/{artifact.owner.username.lower()}/{slug(artifact.name + CUBE_SUFFIX)}:{slug(source.label)}"


def push_image(engine: str, image: str, reference: str, username: str, token: str) -> dict[str, Any]:
    """Push the local ``image`` to ``reference`` with a hub token: ``{"reference", "pushed", "digest"}``, or
    ``pushed`` false with ``error`` (the push is an offer to other nodes: a failed one does not fail the job)."""
    try:
        with tempfile.TemporaryDirectory() as folder:
            digest_file = Path(folder) / "digest"
            command = [engine, "push", "--creds", f"{username}:{token}", "--digestfile", str(digest_file)]
            if not settings.HUB_CUBE_REGISTRY_TLS_VERIFY:
                command.append("--tls-verify=false")
            done = subprocess.run([*command, image, f"docker://{reference}"], capture_output=True, text=True,
                                  timeout=PUSH_TIMEOUT_S)
            if done.returncode != 0:
                lines = [line for line in done.stderr.splitlines() if line.strip()]
                return {"reference": reference, "pushed": False,
                        "error": (lines[-1] if lines else f"{engine} push failed").replace(token, "***")[:500]}
            return {"reference": reference, "pushed": True, "digest": digest_file.read_text().strip()}
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"reference": reference, "pushed": False,
                "error": f"{engine} push did not finish: {exc}".replace(token, "***")[:500]}


def push_as(engine: str, image: str, reference: str, user) -> dict[str, Any]:
    """``push_image`` as ``user`` (the cube's owner), with a write token made for the push and revoked after it."""
    token, raw = ApiToken.issue(user, scope=ApiToken.Scope.WRITE, name="MLCube image push",
                                expires_at=timezone.now() + timedelta(seconds=PUSH_TIMEOUT_S + 60))
    try:
        return push_image(engine, image, reference, user.username, raw)
    finally:
        token.revoked = timezone.now()
        token.save(update_fields=["revoked"])
