"""The fine-tune form of a model's landing page: the API's request as a form (same checks, same job)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from hub.errors import HubError
from hub.finetune.api.views import FinetuneRequestSerializer
from hub.finetune.services import request_finetune
from hub.registry import services


@login_required
@require_POST
def start(request: HttpRequest, owner: str, name: str, version: str) -> HttpResponse:
    """Start the fine-tune and show its job; a refused request goes back to the page with the reason."""
    try:
        base = services.get_version(services.get_artifact(request.user, owner, name), version)
    except HubError:
        raise Http404("no such model version")
    fields = {key: value for key, value in request.POST.items() if key != "csrfmiddlewaretoken" and value.strip()}
    if "features" in fields:
        fields["features"] = [f.strip() for f in fields["features"].split(",") if f.strip()]
    body = FinetuneRequestSerializer(data=fields)
    if not body.is_valid():
        problems = "; ".join(f"{key}: {' '.join(map(str, errors))}" for key, errors in body.errors.items())
        messages.error(request, f"The fine-tune was not started: {problems}")
        return redirect("/" + base.pid + "#finetune")
    try:
        job = request_finetune(base, request.user, body.validated_data)
    except HubError as exc:
        messages.error(request, f"The fine-tune was not started ({exc.error_code}): {exc.message}")
        return redirect("/" + base.pid + "#finetune")
    messages.success(request, f"Fine-tuning {base}: the job is queued; its log shows each epoch.")
    return redirect("job", pk=job.pk)
