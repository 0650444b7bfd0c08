"""An embargo lifting by the periodic task on a real Celery worker (``workers.housekeeping.EmbargoStep``): the
version's row becomes open and one ``hub.audit`` line says so; a version whose date is still ahead stays
embargoed. Before the worker's round, the download check treats a past date as open already."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from hub.registry import services
from hub.registry.files_access import files_state
from hub.registry.models import Version
from tests.conftest import client_for, staged, start_worker, stop_process, valid_metadata, worker_env

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_the_worker_lifts_an_embargo_on_its_own(tmp_path, owner):
    artifact = services.create_artifact(owner, kind="dataset", name="embargoed-data", title="Embargoed")
    due = services.create_version(artifact, owner, files=[staged(tmp_path, "d.csv", b"x,y\n1,2\n")],
                                  metadata=valid_metadata("dataset"), label="1")
    ahead = services.create_version(artifact, owner, files=[staged(tmp_path, "d.csv", b"x,y\n3,4\n")],
                                    metadata=valid_metadata("dataset"), label="2")
    soon, later = timezone.now() + timedelta(seconds=2), timezone.now() + timedelta(days=9)
    Version.objects.filter(pk=due.pk).update(files_access="embargoed", embargo_until=soon)
    Version.objects.filter(pk=ahead.pk).update(files_access="embargoed", embargo_until=later)
    url = "/api/v1/artifacts/alice/embargoed-data/versions/1/files/d.csv"
    assert client_for(None).get(url).status_code == 403  # not yet

    proc = start_worker(tmp_path, worker_env(tmp_path, HUB_EMBARGO_INTERVAL_S="0.5"), "embargo")
    try:
        deadline = time.monotonic() + 40
        while Version.objects.get(pk=due.pk).files_access != "open" and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        stop_process(proc)
    assert Version.objects.get(pk=due.pk).files_access == "open"
    assert Version.objects.get(pk=ahead.pk).files_access == "embargoed"
    assert files_state(Version.objects.get(pk=ahead.pk)) == "embargoed"
    log = (tmp_path / "embargo.log").read_text()
    assert log.count("embargo lifted: alice/embargoed-data@1") == 1 and "embargoed-data@2" not in log
    assert client_for(None).get(url).status_code == 200
