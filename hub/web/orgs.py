"""An organization's page: who it is, its artifacts the viewer may see, its members (to members), and for its
admins the forms that give roles and take them away (the API's member calls, as forms)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from hub.errors import HubError
from hub.orgs import services
from hub.orgs.models import Role
from hub.search.services import search

PAGE_SIZE = 24


def page(request: HttpRequest, slug: str) -> HttpResponse:
    """GET: the page. POST (admins; a member may leave): ``action`` set (``username``, ``role``) or remove."""
    try:
        org = services.organization_named(slug)
    except HubError:
        raise Http404("no such organization")
    if request.method == "POST":
        _change(request, org)
        return redirect("org", slug=slug)
    role = services.role_in(org, request.user)
    result = search(request.user, filters={"owner": [slug]}, sort="new")
    listed = Paginator(result.entries, PAGE_SIZE).get_page(request.GET.get("page"))
    members = org.memberships.select_related("user") if role else []
    return render(request, "web/org.html", {"org": org, "role": role, "members": members, "page": listed,
                                            "total": result.total, "roles": Role.values,
                                            "is_admin": role == Role.ADMIN})


def _change(request: HttpRequest, org) -> None:
    if not request.user.is_authenticated:
        messages.error(request, "Sign in to change the members.")
        return
    username = request.POST.get("username", "").strip()
    person = get_user_model().objects.filter(username=username, organization__isnull=True).first()
    try:
        if person is None:
            raise HubError("not_found", f"No person named {username or '(empty)'}.")
        if request.POST.get("action") == "remove":
            if person.pk != request.user.pk:
                services.require_role(org, request.user, Role.ADMIN, "remove members")
            services.remove_member(org, person, by=request.user.username)
            messages.success(request, f"{username} is no longer a member of {org.slug}.")
        else:
            services.require_role(org, request.user, Role.ADMIN, "give roles")
            membership = services.set_member(org, person, request.POST.get("role", ""), by=request.user.username)
            messages.success(request, f"{username} is a member of {org.slug} with the {membership.role} role.")
    except HubError as exc:
        messages.error(request, exc.message)
