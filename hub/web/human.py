"""Addresses a person can type and share: ``/<owner>/<name>`` and ``/<owner>/<name>/<version>`` open the
landing page, as ``huggingface.co/owner/name`` does. The PID stays the citable address: the page names it
in ``rel=canonical`` and the ``cite-as`` signpost.

These routes come after every other one (``hub.urls``), so an owner whose name is a top-level path of the
hub would have no address of its own: such names are reserved (``RESERVED_OWNERS``), and a new account
cannot take one (``refuse_reserved``).
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse

from hub.accounts.auth import request_user
from hub.registry.lineage import current_version
from hub.registry.models import Artifact
from hub.registry.resolver import not_found
from hub.web import landing

# Top-level paths of the hub (hub.urls, hub.web.urls, hub.hfhub.urls), those served before Django's
# routing (static files, health), and those of the coming OCI registry (/v2/): none of them is an owner.
RESERVED_OWNERS = frozenset({
    "access", "account", "accounts", "admin", "api", "ark:", "browse", "datasets", "device", "docs", "favicon.ico",
    "finetune", "healthz", "jobs", "landing", "linkset", "login", "logout", "media", "metrics", "models", "oai",
    "oauth", "orgs", "owners", "pid", "publish", "readyz", "robots.txt", "sharing", "spaces", "sparql", "static",
    "terms", "v1", "v2", ".well-known", "well-known",
})


def reserved_owner(name: str) -> bool:
    """Whether ``name`` is a top-level path of the hub, so cannot be an owner's address."""
    return name.strip().lower() in RESERVED_OWNERS


def refuse_reserved(sender, instance, **kwargs) -> None:
    """``pre_save`` of a new user: a reserved name would hide the owner's pages behind a route of the hub."""
    if instance.pk is None and reserved_owner(instance.get_username()):
        raise ValidationError(f"The name {instance.get_username()!r} is a path of the hub; choose another.",
                              code="reserved_name")


def view(request: HttpRequest, owner: str, name: str, version: str | None = None) -> HttpResponse:
    """The landing page of ``owner/name`` (its concept: the version it leads with) or of one version."""
    address = f"{owner}/{name}" + (f"/{version}" if version else "")
    artifact = (Artifact.objects.visible_to(request_user(request)).select_related("owner")
                .filter(owner__username=owner, name=name).first())
    if artifact is None or reserved_owner(owner):
        return not_found(request, address)
    if version is None:
        return landing.view(request, artifact.pid)
    if version in ("latest", "current"):
        found = current_version(artifact)
    else:
        found = artifact.versions.filter(label=version).first()
    if found is None:
        return not_found(request, address)
    return landing.view(request, found.pid)
