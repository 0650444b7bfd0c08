"""The demo content (``manage.py hub_demo``) is cited as what it is: its creator is an organization whose name
stays whole (not "demo, H."), and its dataset's measurements are plausible (none negative)."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from hub.registry.management.commands.hub_demo import DEMOS, _iris_like_csv

pytestmark = pytest.mark.django_db


def test_the_demo_dataset_has_no_negative_or_zero_measurements():
    rows = list(csv.DictReader(io.StringIO(_iris_like_csv().decode())))
    assert len(rows) == 150
    for column in ("sepal_length", "sepal_width", "petal_length", "petal_width"):
        assert min(float(row[column]) for row in rows) >= 0.1, column


@pytest.mark.slow
@pytest.mark.cpu  # seeds the whole demo: over 1 s on a quiet machine
def test_every_demo_creator_is_an_organization_cited_whole():
    pytest.importorskip("torch")
    pytest.importorskip("sklearn")
    call_command("hub_demo", stdout=io.StringIO())
    client = APIClient()
    for demo in DEMOS:
        base = f"/api/v1/artifacts/demo/{demo['name']}/versions/1.0/metadata/"
        bibtex = client.get(base + "bibtex").content.decode()
        assert "author = {{HPCFair demo}}" in bibtex and "demo, HPCFair" not in bibtex, bibtex
        apa = client.get(base + "citation?style=apa").content.decode()
        assert apa.startswith("HPCFair demo. (") and "demo, H." not in apa, apa
        creators = json.loads(client.get(base + "datacite-json").content)["creators"]
        assert creators == [{"name": "HPCFair demo", "nameType": "Organizational"}], creators
