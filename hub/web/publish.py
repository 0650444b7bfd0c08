"""Publishing from the browser: a form for the artifact and its metadata; files go first to the API's
resumable uploads (in chunks, from the page's script), then one request creates the artifact and the
version together, so that a refused version never leaves an empty artifact behind."""

from __future__ import annotations

import re
from typing import Any

from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from hub.bounded import load_json, load_json_or_yaml
from hub.errors import HubError, json_error
from hub.jobs.models import Job
from hub.metadata.derive import CARD_MAX_BYTES
from hub.metadata.services import card_fields, invalid
from hub.registry import quota, services
from hub.registry.models import NAME_RE, Artifact
from hub.registry.rule import SPELLED
from hub.registry.uploads import completed_files
from hub.strict import unknown_field
from hub.web.account import users_named
from ontology.fields import FIELDS, FRAMEWORKS, LEARNING_TYPES, MODEL_FAMILIES, MetadataError

# The form's metadata fields, in order; the rest can be given as YAML ("more fields").
FORM_FIELDS = ("title", "description", "creators", "license", "keywords", "framework", "task", "format",
               "learning_type", "model_family", "subject", "discipline", "url")
LICENSES = ("Apache-2.0", "MIT", "BSD-3-Clause", "GPL-3.0-only", "CC-BY-4.0", "CC-BY-SA-4.0", "CC0-1.0")
MAX_BODY = 2 * 1024 * 1024
CARD_REQUEST_FIELDS = {"text", "kind", "name"}
MAX_FILES = 200


def _field(name: str) -> dict[str, Any]:
    spec = FIELDS[name]
    return {"name": name, "help": spec.help, "required": sorted(spec.required), "applies": sorted(spec.kinds)}


@login_required
@require_http_methods(["GET", "POST"])
def publish(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        return _submit(request)
    target = None
    ref = request.GET.get("to", "")
    if ref and "/" in ref:
        owner, _, name = ref.partition("/")
        try:
            target = services.get_artifact(request.user, owner, name)
        except HubError:
            target = None
        if target is not None and not target.can_write(request.user):
            target = None
    latest = target.latest_version() if target else None
    context = {
        "target": target,
        "prefill": _prefill(latest.metadata if latest else {}),
        "fields": {name: _field(name) for name in FORM_FIELDS},
        "frameworks": FRAMEWORKS, "learning_types": LEARNING_TYPES, "families": list(MODEL_FAMILIES),
        "licenses": LICENSES, "kinds": Artifact.Kind.values,
    }
    return render(request, "web/publish.html", context)


@login_required
@require_http_methods(["POST"])
def card(request: HttpRequest) -> HttpResponse:
    """The form's fields as a card file gives them (``{"text", "kind", "name"}`` in; ``{"fields"}`` out), so
    that the page shows what publishing will take from a README.md (a Hugging Face card's keys read as the
    hub's) before it is sent. Nothing is stored."""
    if int(request.META.get("CONTENT_LENGTH") or 0) > CARD_MAX_BYTES + 4096:
        return json_error(request, "request_too_large", "The card is larger than 1 MiB; the hub reads no larger card.")
    try:
        body = load_json(request.body or b"{}", what="The card")
        if not isinstance(body, dict) or not isinstance(body.get("text"), str):
            raise HubError("malformed_request", "Send {\"text\": the card's text, \"kind\": model|dataset|project}.")
        unknown = sorted(set(body) - CARD_REQUEST_FIELDS)
        if unknown:
            raise HubError("invalid", unknown_field(unknown[0], CARD_REQUEST_FIELDS),
                           errors={key: [unknown_field(key, CARD_REQUEST_FIELDS)] for key in unknown})
        fields = card_fields(body["text"], str(body.get("kind") or "model"), str(body.get("name") or "README.md"))
    except MetadataError as exc:
        exc = invalid(exc)
        return json_error(request, exc.error_code, exc.message, **exc.extra)
    except HubError as exc:
        return json_error(request, exc.error_code, exc.message, **exc.extra)
    shown = {key: value for key, value in fields.items() if key in FORM_FIELDS}
    if isinstance(fields.get("creators"), list):
        shown["creators"] = [c if isinstance(c, dict) else {"name": str(c)} for c in fields["creators"]]
    return JsonResponse({"fields": shown})


def _prefill(metadata: dict[str, Any]) -> dict[str, Any]:
    """A new version starts from the latest version's metadata the user wrote (not what the hub derived)."""
    derived = set(metadata.get("derived") or [])
    return {k: v for k, v in metadata.items() if k in FORM_FIELDS and k not in derived}


def _submit(request: HttpRequest) -> HttpResponse:
    if int(request.META.get("CONTENT_LENGTH") or 0) > MAX_BODY:
        return json_error(request, "request_too_large", "The form is larger than 2 MiB; send large metadata as a "
                                                        "README.md model card file instead.")
    try:
        body = load_json(request.body or b"{}", what="The form")
    except HubError as exc:
        return json_error(request, exc.error_code, exc.message)
    if not isinstance(body, dict):
        return json_error(request, "malformed_request", "The form did not arrive as a JSON object.")
    try:
        artifact, version = _create(request.user, body)
    except HubError as exc:
        return json_error(request, exc.error_code, exc.message, **_in_form_words(exc.extra))
    jobs = Job.objects.filter(version=version).values_list("pk", "kind")
    return JsonResponse({"url": "/" + version.pid, "pid": version.pid, "artifact": artifact.full_name,
                         "version": version.label, "jobs": [{"id": str(pk), "kind": kind} for pk, kind in jobs]},
                        status=201)


# What a missing field's message says on the form, in the words of its box (the API's message gives an example in
# the API's notation, which the form's "Name, ORCID" lines do not take; issue 41, point 12).
FORM_WORDS = {"creators": "Required: who made it, one per line: a name, then optionally a comma and the ORCID iD "
                          "(Ada Lovelace, 0000-0002-1825-0097). A Hugging Face card names no creators: add them "
                          "here."}


def _in_form_words(extra: dict[str, Any]) -> dict[str, Any]:
    errors = extra.get("errors")
    if not isinstance(errors, dict):
        return extra
    worded = {key: [FORM_WORDS[key]] if key in FORM_WORDS and any(str(m).startswith("Required for a") for m in msgs)
              else msgs for key, msgs in errors.items()}
    return {**extra, "errors": worded}


def _create(user, body: dict[str, Any]):
    metadata = body.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise HubError("invalid", "metadata must be an object.", errors={"metadata": ["Expected an object."]})
    metadata = {**_more_fields(body.get("more", "")), **{k: v for k, v in metadata.items() if v not in ("", [], None)}}
    files = body.get("files") or []
    if not isinstance(files, list) or len(files) > MAX_FILES or not all(
            isinstance(f, dict) and isinstance(f.get("path"), str) and isinstance(f.get("upload"), str)
            for f in files):
        raise HubError("invalid", f"files is a list of up to {MAX_FILES} {{path, upload}} entries.",
                       errors={"files": ["Add files and wait until each is uploaded."]})
    with transaction.atomic():  # the artifact exists only if its first version does
        existing = body.get("to") or ""
        if existing:
            owner, _, name = existing.partition("/")
            artifact = services.get_artifact(user, owner, name)
            if not artifact.can_write(user):
                raise HubError("permission_denied", f"You cannot add versions to {artifact.full_name}.")
        else:
            artifact = _new_artifact(user, body.get("artifact") or {}, metadata)
        staged = [each for item in files for each in completed_files(user, item["path"], item["upload"])]
        quota.check_files(artifact.owner, staged, user)  # the owner's quota lock, held to the commit
        version = services.create_version(artifact, user, files=staged, label=str(body.get("version") or ""),
                                          metadata=metadata)
    return artifact, version


def _new_artifact(user, fields: dict[str, Any], metadata: dict[str, Any]) -> Artifact:
    kind, name = fields.get("kind", ""), str(fields.get("name", "")).strip()
    errors = {}
    if kind not in Artifact.Kind.values:
        errors["kind"] = ["Choose model, dataset or project."]
    if not name:
        errors["name"] = ["Give the artifact a short name, e.g. cloud-mask-unet."]
    elif not re.match(NAME_RE, name):
        errors["name"] = ["Use letters, digits, '.', '_' and '-' (up to 100), starting with a letter or digit."]
    visibility = fields.get("visibility", "public")
    if visibility not in Artifact.Visibility.values:
        errors["visibility"] = [f"{SPELLED.capitalize()}."]
    collaborators, unknown = users_named(fields.get("collaborators", ""))
    if unknown:
        errors["collaborators"] = [f"No user named {', '.join(unknown)}."]
    if errors:
        raise HubError("invalid", "Some fields need fixing: " + ", ".join(errors) + ".", errors=errors)
    return services.create_artifact(user, kind=kind, name=name, title=str(metadata.get("title", ""))[:300],
                                    description=str(metadata.get("description", ""))[:20000],
                                    visibility=visibility, collaborators=collaborators)


def _more_fields(text: str) -> dict[str, Any]:
    if not text or not text.strip():
        return {}
    more = load_json_or_yaml(text, what="more")
    if not isinstance(more, dict):
        raise HubError("invalid", "More fields: write name: value lines.", errors={"more": ["Expected name: value."]})
    return more
