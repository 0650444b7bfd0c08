"""The per-person job quota: past HUB_USER_MAX_ACTIVE_JOBS queued or running, each endpoint that starts a job
answers 429 too_many_jobs; publishing (which starts its own verification job) is never refused; two requests at
once with one slot left cannot both pass it (PostgreSQL and an SQLite file)."""

from __future__ import annotations

import time

import pytest
from django.db.models.signals import pre_save

from hub.jobs.models import Job
from hub.storage import get_blob_store
from tests.conftest import at_once, client_for, run_on_sqlite_file
from tests.gateway import models

pytestmark = pytest.mark.django_db

MLP = models.mlp()
BASE = "/api/v1/artifacts/alice/mlp/versions/1"


@pytest.fixture
def at_quota(owner, publish, settings):
    """alice's model, published (its verification job queued: the hub's own, not counted), and alice at her
    quota of 2 active jobs she asked for."""
    settings.HUB_USER_MAX_ACTIVE_JOBS = 2
    publish(owner, "mlp", {"mlp.onnx": MLP}, label="1")
    for _ in range(2):
        Job.objects.create(kind="fixity", requester=owner, state=Job.State.RUNNING, counted=True)
    return owner


def test_the_hubs_own_jobs_do_not_count(owner, publish, api, settings):
    """Verifications the hub queues on publishing are not the person's: with one slot, a request still runs."""
    settings.HUB_USER_MAX_ACTIVE_JOBS = 1
    publish(owner, "mlp", {"mlp.onnx": MLP}, label="1")
    own = Job.objects.filter(requester=owner, state=Job.State.QUEUED)
    assert own.exists() and not own.filter(counted=True).exists()
    accepted = api.post(BASE + "/fixity", None, format="json")
    assert accepted.status_code == 202, accepted.content
    assert Job.objects.get(pk=accepted.json()["id"]).counted
    refused(api.post(BASE + "/fixity", None, format="json"))  # the one it asked for does count


def refused(response) -> dict:
    assert response.status_code == 429, response.content
    assert response["X-Error-Code"] == "too_many_jobs" and int(response["Retry-After"]) > 0
    return response.json()


@pytest.mark.parametrize("path, body", [
    ("/convert", {}),
    ("/finetune", {"dataset": "alice/nothing", "target": "y"}),
    ("/optimize", {}),
    ("/fixity", None),
    ("/container", {}),
    ("/benchmark", {"if_no_worker": "queue"}),
    ("/infer", {"inputs": {"x": [[0.0] * 784]}, "mode": "async"}),
])
def test_every_job_endpoint_refuses_past_the_quota(at_quota, api, path, body):
    before = Job.objects.count()
    answer = refused(api.post(BASE + path, body, format="json"))
    assert answer["active"] == 2 and answer["limit"] == 2 and "at most 2" in answer["detail"]
    assert Job.objects.count() == before  # nothing queued, nothing staged


def test_publishing_is_never_refused_and_others_are_not_limited(at_quota, owner, publish, make_user, settings):
    _, version = publish(owner, "mlp", {"mlp.onnx": MLP, "README.md": b"# two"}, label="2")
    assert Job.objects.filter(requester=owner, version=version).exists(), "its verification was queued anyway"
    bob = make_user("bob")
    response = client_for(bob).post(BASE + "/fixity", {}, format="json")
    assert response.status_code in (403, 404) and response["X-Error-Code"] != "too_many_jobs"  # not bob's
    Job.objects.filter(requester=owner).update(state=Job.State.SUCCEEDED)
    assert client_for(owner).post(BASE + "/fixity", {}, format="json").status_code == 202
    settings.HUB_USER_MAX_ACTIVE_JOBS = 0  # no limit
    assert client_for(owner).post(BASE + "/fixity", {}, format="json").status_code == 202


def slow_inserts(sender, instance, **kwargs) -> None:
    """Each new job's INSERT half a second late: without the person's lock, the other request of a race counts
    the jobs meanwhile, before this row exists."""
    if instance._state.adding:
        time.sleep(0.5)


@pytest.mark.postgres  # SQLite's in-memory test database cannot take two writers: the next test races on a file
@pytest.mark.services  # a PostgreSQL server; one test at a time, as it races two threads on time
@pytest.mark.django_db(transaction=True)  # each thread commits on its own connection, as two web workers would
@pytest.mark.parametrize("path, body", [
    ("/fixity", None),
    ("/infer", {"inputs": {"x": [[0.0] * 784]}, "mode": "async"}),  # its inputs are staged before the row
])
def test_two_requests_at_once_with_one_slot_left_start_one_job(owner, publish, settings, path, body):
    """PostgreSQL: two job requests of one person at the same moment, one slot left: the second count waits for
    the first's row (the person's lock), so exactly one job is queued and the other request is refused."""
    settings.HUB_USER_MAX_ACTIVE_JOBS = 2
    publish(owner, "mlp", {"mlp.onnx": MLP}, label="1")  # its verification job: the hub's, not counted
    Job.objects.create(kind="fixity", requester=owner, state=Job.State.RUNNING, counted=True)  # one slot left
    before = set(Job.objects.values_list("pk", flat=True))
    one, two = client_for(owner), client_for(owner)
    pre_save.connect(slow_inserts, sender=Job)
    try:
        answers = at_once(*(lambda c=c: c.post(BASE + path, body, format="json") for c in (one, two)))
    finally:
        pre_save.disconnect(slow_inserts, sender=Job)
    assert sorted(a.status_code for a in answers) == [202, 429], [a.content for a in answers]
    answer = refused(next(a for a in answers if a.status_code == 429))
    assert answer["active"] == 2 and answer["limit"] == 2  # the refused count saw the other's job
    made = Job.objects.exclude(pk__in=before)
    assert made.count() == 1 and str(made.get().pk) == next(a for a in answers if a.status_code == 202).json()["id"]
    staged = {key.split("/")[1] for key, _ in get_blob_store().iter_staged() if key.startswith("jobs/")}
    assert staged == ({str(made.get().pk)} if path == "/infer" else set())  # the refused one's inputs are gone


SQLITE_RACE = """
import tempfile, time
from pathlib import Path
import django
django.setup()
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db.models.signals import pre_save
from hub.jobs.models import Job
from hub.registry import services
from tests.conftest import at_once, client_for, staged, valid_metadata

call_command("migrate", verbosity=0)
alice = get_user_model().objects.create_user("alice")
artifact = services.create_artifact(alice, kind="dataset", name="d")
services.create_version(artifact, alice, label="1", metadata=valid_metadata("dataset"),
                        files=[staged(Path(tempfile.mkdtemp()), "data.bin", b"x" * 64)])
Job.objects.create(kind="fixity", requester=alice, state=Job.State.RUNNING, counted=True)  # one slot left of 2
def slowly(sender, instance, **kwargs):
    if instance._state.adding:
        time.sleep(0.5)  # the other thread counts meanwhile
pre_save.connect(slowly, sender=Job)
def ask(client=client_for(alice)):
    answer = client.post("/api/v1/artifacts/alice/d/versions/1/fixity", format="json")
    return f"{answer.status_code} {answer.get('X-Error-Code', '')}".strip()
print(sorted(at_once(ask, ask)), Job.objects.filter(state=Job.State.QUEUED).count())
"""


@pytest.mark.slow
@pytest.mark.cpu
def test_two_requests_at_once_with_one_slot_left_start_one_job_on_sqlite(tmp_path):
    """The embedded default: two connections to one SQLite file (WAL, as deployed), two fixity checks of one
    person asked at once with one slot left: one is queued, the other refused having counted it."""
    out = run_on_sqlite_file(tmp_path, SQLITE_RACE, HUB_USER_MAX_ACTIVE_JOBS="2")
    assert out.strip().splitlines()[-1] == "['202', '429 too_many_jobs'] 1"
