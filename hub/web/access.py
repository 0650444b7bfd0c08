"""Access requests in the web UI: on a landing page of restricted files a signed-in person asks (the form posts
here); ``/access/requests/`` lists one's own requests and, for the artifacts one decides on, the pending ones
with approve and refuse buttons (the API's calls, as forms, through ``hub.registry.grants``)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from hub.errors import HubError
from hub.orgs.models import Membership, Role
from hub.registry import services
from hub.registry.grants import ask, decide, policy_of
from hub.registry.models import AccessRequest


@login_required
def requests_page(request: HttpRequest) -> HttpResponse:
    """Your requests, and those waiting for your decision."""
    admin_of = Membership.objects.filter(user=request.user, role=Role.ADMIN).values("org_id")
    mine = AccessRequest.objects.filter(requester=request.user).select_related("artifact__owner")
    waiting = (AccessRequest.objects.filter(state=AccessRequest.State.PENDING)
               .filter(Q(artifact__owner=request.user) | Q(artifact__owner_id__in=admin_of))
               .select_related("artifact__owner", "requester"))
    return render(request, "web/access_requests.html", {"mine": mine[:100], "waiting": waiting[:100]})


@login_required
@require_POST
def ask_page(request: HttpRequest, owner: str, name: str) -> HttpResponse:
    """The landing page's request form."""
    try:
        artifact = services.get_artifact(request.user, owner, name)
    except HubError:
        raise Http404("no such artifact")
    answers = {field: request.POST.get(f"answer_{field}", "") for field in policy_of(artifact).fields}
    try:
        made = ask(artifact, request.user, request.POST.get("purpose", ""), answers,
                   request.POST.get("agree_terms") == "on")
    except HubError as exc:
        messages.error(request, exc.message)
        return redirect("/" + artifact.pid)
    messages.success(request, f"Your request for {artifact} is {made.state}"
                              + ("; download its files now." if made.state == "approved" else
                                 "; its owner is told by e-mail, and you will be too."))
    return redirect("access-requests")


@login_required
@require_POST
def decide_page(request: HttpRequest, pk: int) -> HttpResponse:
    """Approve or refuse (the artifact's owner or admins)."""
    found = AccessRequest.objects.filter(pk=pk).select_related("artifact__owner", "requester").first()
    if found is None or not found.artifact.can_admin(request.user):
        raise Http404("no such request")
    try:
        decide(found, request.user, approve=request.POST.get("decision") == "approve",
               message=request.POST.get("message", ""))
        messages.success(request, f"Request {pk} by {found.requester.username} {found.state}.")
    except HubError as exc:
        messages.error(request, exc.message)
    return redirect("access-requests")
