"""Transfer of an artifact between owners (a person and an organization, either way). The artifact row keeps its
primary key, so its concept PID, its versions' PIDs and every provenance link stay exactly as they were; the old
``owner/name`` is kept as a ``FormerName`` and requests naming it are redirected (``FormerNameRedirect``)."""

from __future__ import annotations

import logging
import re

from django.db import transaction
from django.http import HttpResponseRedirect

from hub.errors import HubError
from hub.registry.models import Artifact, FormerName
from hub.registry.signals import artifact_changed

audit = logging.getLogger("hub.audit")


def transfer(artifact: Artifact, to_owner, *, by: str) -> Artifact:
    """Give ``artifact`` (and the artifacts that follow it, e.g. its MLCube project) to ``to_owner``. An
    organization-visible artifact given to a person becomes private (a person has no members)."""
    from hub.registry.services import is_organization

    if to_owner.pk == artifact.owner_id:
        raise HubError("invalid", f"{artifact} already belongs to {to_owner.username}.")
    if Artifact.objects.live().filter(owner=to_owner, name=artifact.name).exists():
        raise HubError("already_exists", f"{to_owner.username} already has an artifact named {artifact.name}; "
                                         "rename or delete one of them first.")
    moved = [artifact, *artifact.followers.filter(deleted_at__isnull=True, owner_id=artifact.owner_id)]
    with transaction.atomic():
        for item in moved:
            before = item.full_name
            FormerName.objects.create(owner=item.owner.username, name=item.name, artifact=item)
            item.owner = to_owner
            if item.visibility == Artifact.Visibility.ORGANIZATION and not is_organization(to_owner):
                item.visibility = Artifact.Visibility.PRIVATE
                audit.info("visibility %s: organization -> private by the transfer to %s", item.full_name,
                           to_owner.username)
            item.save(update_fields=["owner", "visibility", "updated"])
            audit.info("transfer %s -> %s by %s (%s)", before, item.full_name, by, item.pid)
            artifact_changed.send(sender=Artifact, artifact=item)
    return artifact


def current_name(owner: str, name: str) -> Artifact | None:
    """The live artifact that was called ``owner/name`` before a transfer (None: none was)."""
    former = FormerName.objects.filter(owner=owner, name=name).select_related("artifact__owner").first()
    if former is None or former.artifact.deleted_at is not None:
        return None
    return former.artifact


# Paths that name an artifact, as (prefix, owner, name, rest): the API and pages, and the Hugging Face protocol's
# (``/api/{models,datasets,spaces}/…``, ``[/datasets|/spaces]/{owner}/{name}/resolve/…``), whose client follows a
# redirect on the same host (huggingface_hub: the session, and ``resolve``'s HEAD).
NAMED = (re.compile(r"^/(api/v1/artifacts|sharing|finetune|api/models|api/datasets|api/spaces)/([^/]+)/([^/]+)(/.*)?$"),
         re.compile(r"^/(datasets|spaces)/([^/]+)/([^/]+)(/resolve/.*)$"),
         re.compile(r"^/()([^/]+)/([^/]+)(/resolve/.*)$"))
# What a protocol answers for a name it does not know, besides 404: the Hugging Face protocol's 401 to anonymous.
NOT_FOUND_CODES = ("RepoNotFound",)


class FormerNameRedirect:
    """A 404 for a path that names a former ``owner/name`` (API, pages, the Hugging Face protocol) becomes a
    permanent redirect (308: the method and body are kept) to the artifact's current name, for those who may read
    it."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if response.status_code != 404 and response.get("X-Error-Code") not in NOT_FOUND_CODES:
            return response
        match = next((m for m in (pattern.match(request.path) for pattern in NAMED) if m), None)
        if match is None:
            return response
        prefix, owner, name, rest = match.groups()
        artifact = current_name(owner, name)
        if artifact is None or artifact.full_name == f"{owner}/{name}":
            return response
        from hub.accounts.auth import request_user

        if not Artifact.objects.visible_to(request_user(request)).filter(pk=artifact.pk).exists():
            return response
        target = f"{'/' + prefix if prefix else ''}/{artifact.owner.username}/{artifact.name}{rest or ''}"
        if request.META.get("QUERY_STRING"):
            target += "?" + request.META["QUERY_STRING"]
        return HttpResponseRedirect(target, status=308)
