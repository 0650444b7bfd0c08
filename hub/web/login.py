"""The login page: Django's, answering 429 with ``Retry-After`` while sign-in is paused
(``hub.accounts.throttle``) instead of checking the password; with the site's sign-in (OpenID Connect, LDAP)
offered beside local passwords or instead of them."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.http import HttpResponse

from hub.accounts.throttle import LockedOut


class LoginView(auth_views.LoginView):
    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context.update(oidc=settings.HUB_OIDC_ENABLED, oidc_label=settings.HUB_OIDC_LABEL,
                       passwords=settings.HUB_LOCAL_PASSWORDS or bool(settings.HUB_LDAP_URI),
                       ldap=bool(settings.HUB_LDAP_URI))
        return context

    def post(self, request, *args, **kwargs) -> HttpResponse:
        try:
            return super().post(request, *args, **kwargs)
        except LockedOut as exc:
            form = self.form_class(request, initial={"username": request.POST.get("username", "")})
            response = self.render_to_response(self.get_context_data(form=form, paused=exc.message), status=429)
            response["Retry-After"] = str(exc.wait)
            response["X-Error-Code"] = exc.error_code
            return response
