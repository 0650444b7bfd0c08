"""Pages of a signed-in user: their jobs, their API tokens, and the sharing of their artifacts."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from hub.accounts import expiry
from hub.accounts.api.views import audit, token_limits
from hub.accounts.models import ApiToken
from hub.errors import HubError
from hub.jobs.api.views import cancellable_by
from hub.jobs.models import Job
from hub.jobs.services import cancel_job, reap_stale
from hub.registry import services
from hub.registry.models import Artifact
from hub.registry.rule import SPELLED


def users_named(text: str) -> tuple[list, list[str]]:
    """Active users named in a comma- or line-separated list, and the names no user has."""
    names = [n.strip() for n in str(text).replace("\n", ",").split(",") if n.strip()]
    users = list(get_user_model().objects.filter(username__in=names, is_active=True))
    return users, sorted(set(names) - {u.username for u in users})


@login_required
def jobs(request: HttpRequest) -> HttpResponse:
    own = Job.objects.filter(requester=request.user)
    reap_stale(own)
    state = request.GET.get("state", "")
    listed = own.filter(state=state) if state in Job.State.values else own
    page = Paginator(listed.select_related("version__artifact__owner").order_by("-created"), 25) \
        .get_page(request.GET.get("page"))
    return render(request, "web/jobs.html", {"page": page, "state": state, "states": Job.State.values})


@login_required
def job(request: HttpRequest, pk) -> HttpResponse:
    found = Job.objects.filter(requester=request.user, pk=pk).select_related("version__artifact__owner").first()
    if found is None:
        raise Http404("no such job of yours")
    reap_stale(Job.objects.filter(pk=found.pk))
    found.refresh_from_db()
    return render(request, "web/job.html", {"job": found})


@login_required
@require_POST
def cancel(request: HttpRequest, pk) -> HttpResponse:
    """The job page's Cancel button (see ``hub.jobs.services.cancel_job``)."""
    found = cancellable_by(request.user).filter(pk=pk).first()
    if found is None:
        raise Http404("no such job of yours")
    try:
        found = cancel_job(found, request.user)
    except HubError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, "Job cancelled." if found.is_final else
                         "Stopping the job; what it had made is being removed.")
    return redirect("job", pk=found.pk) if found.requester_id == request.user.pk else redirect("jobs")


SHOWN_ONCE = "hub.shown_once"  # the session keeps a new token for the one page that shows it


@login_required
def account(request: HttpRequest) -> HttpResponse:
    """API tokens: create one with a scope (shown once), see when each was used, revoke (after a confirmation
    page). Every POST answers with a redirect, so that reloading the page never repeats it."""
    if request.method == "POST":
        action = request.POST.get("action")
        if action == "create":
            scope = request.POST.get("scope", "read")
            if scope not in ApiToken.Scope.values:
                scope = ApiToken.Scope.READ
            days = request.POST.get("expires_days", "")
            try:
                ends = expiry.expires_at(int(days) if days.isdigit() else None)
                limits = token_limits(request.user, request.POST.get("org", "").strip() or None,
                                      request.POST.get("artifact", "").strip() or None)
            except HubError as exc:
                messages.error(request, f"No token was made: {exc.message}")
                return redirect("account")
            token, request.session[SHOWN_ONCE] = ApiToken.issue(request.user, scope=scope, expires_at=ends,
                                                                name=request.POST.get("name", "")[:100], **limits)
            audit.info("token %s: %s (%s%s) created", request.user.username, token.prefix, token.scope,
                       f", {token.limit}" if token.limited else "")
        elif action == "revoke":
            pk = request.POST.get("token", "")
            token = request.user.api_tokens.filter(pk=int(pk), revoked__isnull=True).first() if pk.isdigit() else None
            if token is None:
                messages.error(request, "You have no active token with that number.")
            elif request.POST.get("confirm") != "yes":
                return render(request, "web/revoke.html", {"token": token})
            elif ApiToken.revoke(request.user, token.pk):
                audit.info("token %s: %d revoked", request.user.username, token.pk)
                messages.success(request, f"The token {token.prefix}… was revoked; it no longer works.")
        return redirect("account")
    new_token = request.session.pop(SHOWN_ONCE, "")
    tokens = request.user.api_tokens.select_related("org__account", "artifact__owner")
    memberships = request.user.memberships.select_related("org__account")
    owned = Artifact.objects.live().filter(owner=request.user).order_by("-updated")
    shared = request.user.collaborations.filter(deleted_at__isnull=True).select_related("owner")
    response = render(request, "web/account.html", {"tokens": tokens, "new_token": new_token, "owned": owned,
                                                    "shared": shared, "memberships": memberships,
                                                    "scopes": [s for s in ApiToken.Scope.values if s != "write"],
                                                    "endpoint": settings.HUB_PUBLIC_URL,
                                                    "lifetimes": expiry.choices(), "max_days": expiry.max_days(),
                                                    "default_days": expiry.default_days()})
    if new_token:  # a page holding a secret is neither cached nor kept in the browser's history cache
        response["Cache-Control"] = "no-store"
    return response


@login_required
@require_POST
def sharing(request: HttpRequest, owner: str, name: str) -> HttpResponse:
    """The owner sets visibility and collaborators (the API's PATCH, as a form)."""
    try:
        artifact = services.get_artifact(request.user, owner, name)
    except HubError:
        raise Http404("no such artifact")
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        back = "/" + artifact.pid
    if not artifact.can_admin(request.user):
        messages.error(request, "Only the owner (for an organization's artifact: its admins) changes who can see "
                                "this artifact.")
        return redirect(back)
    visibility = request.POST.get("visibility", artifact.visibility)
    users, unknown = users_named(request.POST.get("collaborators", ""))
    if visibility not in Artifact.Visibility.values or unknown:
        messages.error(request, f"No user named {', '.join(unknown)}; nothing was changed." if unknown
                       else f"Visibility is {SPELLED}; nothing was changed.")
        return redirect(back)
    try:
        services.update_artifact(artifact, {"visibility": visibility}, [u for u in users if u.pk != artifact.owner_id],
                                 by=request.user.username)
    except HubError as exc:
        messages.error(request, f"{exc.message} Nothing was changed.")
        return redirect(back)
    messages.success(request, f"Saved: {artifact.full_name} is {visibility}"
                              + (f", shared with {', '.join(u.username for u in users)}." if users else "."))
    return redirect(back)
