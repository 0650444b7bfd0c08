"""A refused form is answered in the hub's style with what to do, and its code in X-Error-Code: a CSRF failure
(csrf_failed) and other 403s of the pages (permission_denied); an API client keeps its coded JSON."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied
from django.test import Client, RequestFactory
from django.urls import get_resolver

pytestmark = pytest.mark.django_db


def assert_hub_page(response, code: str) -> str:
    page = response.content.decode()
    assert response.status_code == 403 and response["X-Error-Code"] == code
    assert 'class="brand"' in page and f"<code>{code}</code>" in page  # the hub's layout, and the code
    assert "DEBUG=True" not in page and "CSRF verification failed" not in page
    return page


@pytest.mark.parametrize("path", ["/browse/", "/publish/card"])
def test_a_form_sent_without_its_csrf_cookie_gets_the_hub_s_page(owner, path):
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    page = assert_hub_page(client.post(path, {"q": "x"}), "csrf_failed")
    assert "Reload the page" in page and "allow cookies" in page


def test_a_client_that_asks_for_json_gets_the_coded_error():
    response = Client(enforce_csrf_checks=True).post("/browse/", {"q": "x"}, HTTP_ACCEPT="application/json")
    assert response.status_code == 403 and response["X-Error-Code"] == "csrf_failed"
    assert response.json()["code"] == "csrf_failed" and "Reload the page" in response.json()["detail"]


def test_the_api_keeps_its_coded_json_for_a_session_without_csrf(owner):
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    response = client.post("/api/v1/artifacts/", {"kind": "model", "name": "m"}, content_type="application/json")
    assert response.status_code == 403 and response.json()["code"] == "permission_denied"
    assert response["X-Error-Code"] == "permission_denied"


def test_other_403s_of_the_pages_get_the_hub_s_page():
    handler = get_resolver().resolve_error_handler(403)  # the handler403 Django calls
    request = RequestFactory().get("/somewhere/")
    request.user = AnonymousUser()
    page = assert_hub_page(handler(request, PermissionDenied()), "permission_denied")
    assert "log in first" in page
