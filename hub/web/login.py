"""The login page: Django's, answering 429 with ``Retry-After`` while sign-in is paused
(``hub.accounts.throttle``) instead of checking the password."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.http import HttpResponse

from hub.accounts.throttle import LockedOut


class LoginView(auth_views.LoginView):
    def post(self, request, *args, **kwargs) -> HttpResponse:
        try:
            return super().post(request, *args, **kwargs)
        except LockedOut as exc:
            form = self.form_class(request, initial={"username": request.POST.get("username", "")})
            response = self.render_to_response(self.get_context_data(form=form, paused=exc.message), status=429)
            response["Retry-After"] = str(exc.wait)
            response["X-Error-Code"] = exc.error_code
            return response
