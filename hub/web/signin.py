"""The sign-in pages of the site identity: ``/accounts/oidc/login`` sends the browser to the OpenID provider,
``/accounts/oidc/callback`` signs the person in (or answers a coded refusal page), and logout signs out at the
provider too."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.utils.http import url_has_allowed_host_and_scheme

from hub.accounts import audit, groups, oidc, people
from hub.errors import HubError, json_error

NEXT = "hub.oidc_next"


def refused(request: HttpRequest, exc: HubError) -> HttpResponse:
    """A coded refusal: JSON for a client that asks for it, else a page that says what to do."""
    if "json" in request.META.get("HTTP_ACCEPT", ""):
        return json_error(request, exc.code, exc.message)
    response = render(request, "web/signin_refused.html", {"code": exc.code, "detail": exc.message},
                      status=exc.status_code)
    response["X-Error-Code"] = exc.code
    return response


def oidc_login(request: HttpRequest) -> HttpResponse:
    wanted = request.GET.get("next", "")
    request.session[NEXT] = wanted if url_has_allowed_host_and_scheme(wanted, {request.get_host()}) else "/"
    try:
        return oidc.start(request)
    except HubError as exc:
        audit.refused(request, "oidc", exc.code)
        return refused(request, exc)


def oidc_callback(request: HttpRequest) -> HttpResponse:
    try:
        claims, id_token = oidc.finish(request)
        user = people.from_claims(settings.HUB_OIDC_ISSUER, claims)
    except HubError as exc:
        audit.refused(request, "oidc", exc.code)
        return refused(request, exc)
    nxt = request.session.pop(NEXT, "/")
    login(request, user, backend=oidc.BACKEND)  # a new session; hub.accounts.audit logs the sign-in
    request.session[oidc.SESSION_ID_TOKEN] = id_token
    groups.apply_memberships(user, groups.site_pairs(people.groups_of(claims)), source="oidc")
    return HttpResponseRedirect(nxt)


class LogoutView(auth_views.LogoutView):
    """Django's logout, then (after an OpenID Connect sign-in) the provider's end_session_endpoint."""

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        id_token = request.session.get(oidc.SESSION_ID_TOKEN)
        response = super().post(request, *args, **kwargs)
        if id_token and (elsewhere := oidc.logout_url(id_token)):
            return HttpResponseRedirect(elsewhere)
        return response
