"""``/device``: where a signed-in person types the code ``hpcfair login`` printed and approves (or denies) it."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from hub.accounts import device
from hub.errors import HubError


@login_required
def verify(request: HttpRequest) -> HttpResponse:
    code = request.POST.get("user_code") or request.GET.get("user_code", "")
    if request.method == "POST":
        try:
            row = device.decide(code, request.user, approve=request.POST.get("action") == "approve",
                                request=request)
        except HubError as exc:
            response = render(request, "web/device.html", {"user_code": code, "error": exc.message}, status=404)
            response["X-Error-Code"] = exc.code
            return response
        if row.state == row.State.APPROVED:
            messages.success(request, f"Approved: {row.client_id} is signed in as you ({row.scope}). "
                                      "Go back to your terminal.")
        else:
            messages.info(request, "Denied: the device was not signed in.")
        return redirect("device")
    asking = None
    if code:
        try:
            asking = device.pending(code)
        except HubError as exc:
            return render(request, "web/device.html", {"user_code": code, "error": exc.message}, status=404)
    return render(request, "web/device.html", {"user_code": code, "asking": asking})
