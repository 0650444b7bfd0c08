"""Rate limits outside the REST API (hub.ops.pagethrottle): the pages, ``/oai`` and the other views count against
the API's per-address and per-person rates; a refusal is 429 with ``Retry-After`` in the asker's terms (a page, a
short text for OAI-PMH harvesters, the coded JSON error); probes and static files never count."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client

from tests.conftest import client_for

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]
OAI = "/oai?verb=Identify"


def rates(settings, **scoped: str) -> None:
    settings.HUB_THROTTLE_RATES = {**dict.fromkeys(settings.HUB_THROTTLE_RATES, "off"), **scoped}


def assert_429(response) -> int:
    assert response.status_code == 429, response.content
    assert response["X-Error-Code"] == "throttled"
    wait = int(response["Retry-After"])
    assert 1 <= wait <= 120
    return wait


def test_a_browser_past_its_addresss_rate_gets_a_page_that_says_when_to_try_again(settings):
    rates(settings, anon="2/min")
    browser = Client(REMOTE_ADDR="192.0.2.7", HTTP_ACCEPT="text/html,application/xhtml+xml,*/*;q=0.8")
    assert browser.get("/").status_code == 200
    assert browser.get("/browse/").status_code == 200
    refused = browser.get("/")
    wait = assert_429(refused)
    assert refused["Content-Type"].startswith("text/html")
    page = refused.content.decode()
    assert "Too many requests" in page and "2/minute" in page and f"Try again in {wait} second" in page
    assert Client(REMOTE_ADDR="192.0.2.8").get("/").status_code == 200  # another address counts on its own


def test_oai_past_the_rate_is_a_429_with_retry_after_and_a_short_text(settings):
    rates(settings, anon="2/min")
    harvester = Client(REMOTE_ADDR="192.0.2.9", HTTP_ACCEPT="text/xml, */*")
    for _ in range(2):
        answer = harvester.get(OAI)
        assert answer.status_code == 200 and b"<Identify>" in answer.content
    refused = harvester.get(OAI)
    wait = assert_429(refused)
    assert refused["Content-Type"].startswith("text/plain")
    assert refused.content.decode() == (f"Too many requests: this hub takes 2 requests per minute from one client. "
                                        f"Try again in {wait} s (Retry-After), or spread the requests out.\n")
    assert harvester.post("/oai", {"verb": "Identify"}).status_code == 429  # POST, the other OAI-PMH binding


def test_a_client_that_asks_json_gets_the_coded_error(settings):
    rates(settings, anon="1/min")
    assert Client(REMOTE_ADDR="192.0.2.10").get("/linkset/ark:/99999/fk4nothing").status_code in (200, 404)
    refused = Client(REMOTE_ADDR="192.0.2.10", HTTP_ACCEPT="application/json").get("/browse/")
    wait = assert_429(refused)
    body = refused.json()
    assert body["code"] == "throttled" and body["scope"] == "anon" and body["limit"] == "1/minute"
    assert body["retry_after"] == wait and f"Try again in {wait} s" in body["detail"] and body["request_id"]
    # /sparql counts like the rest (its query slots bound slow queries besides); a SPARQL client asks JSON
    sparql = Client(REMOTE_ADDR="192.0.2.10", HTTP_ACCEPT="application/sparql-results+json")
    assert sparql.get("/sparql", {"query": "ASK { ?s ?p ?o }"}).json()["code"] == "throttled"


def test_a_signed_in_persons_pages_and_api_calls_draw_on_one_rate(settings, owner, other):
    rates(settings, user="3/min", anon="1/min")
    browser = Client()
    browser.force_login(owner)
    assert client_for(owner).get("/api/v1/me").status_code == 200  # an API call: counted once, by the API
    assert browser.get("/").status_code == 200  # the person, not the address (anon's 1/min is spent here)
    assert browser.get("/account/").status_code == 200
    assert_429(browser.get("/jobs/"))
    assert client_for(owner).get("/api/v1/me").status_code == 429
    mallory = Client()
    mallory.force_login(other)
    assert mallory.get("/").status_code == 200


def test_probes_and_static_files_are_never_throttled(settings):
    rates(settings, anon="1/min")
    client = Client(REMOTE_ADDR="127.0.0.1")
    assert client.get(OAI).status_code == 200
    assert_429(client.get(OAI))
    for _ in range(3):
        assert client.get("/healthz").status_code == 200
        assert client.get("/readyz").status_code != 429  # ready or not, never throttled
        assert client.get("/metrics").status_code == 200
        assert client.get("/static/hub.css").status_code != 429


@pytest.mark.slow
@pytest.mark.cpu
def test_hub_throttles_off_turns_the_pages_rate_off_too(settings):
    env = {**os.environ, "HUB_THROTTLES_OFF": "1", "DJANGO_SETTINGS_MODULE": "hub.settings",
           "PYTHONPATH": f"{ROOT}:{ROOT / 'client'}"}
    code = ("import django; django.setup()\nfrom django.conf import settings\n"
            "print(sorted(set(settings.HUB_THROTTLE_RATES.values())))")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['off']"
    rates(settings)  # what HUB_THROTTLES_OFF=1 gives: every rate off
    client = Client(REMOTE_ADDR="192.0.2.11")
    assert all(client.get(OAI).status_code == 200 for _ in range(30))
