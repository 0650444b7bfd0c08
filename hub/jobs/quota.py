"""Per-person quota of jobs at once: a person with ``HUB_USER_MAX_ACTIVE_JOBS`` jobs queued or running is told
429 ``too_many_jobs`` (with ``Retry-After``) when asking for another, so that no write token can queue
unbounded conversions, fine-tunes or inference jobs.

Checked by each endpoint that starts a job at a person's request (conversions, optimisations, containers,
fine-tunes, inference jobs, merges, benchmarks, fixity checks), not by ``create_job``: publishing a version
starts its conversion through ``create_job``, and a publish must never fail for the jobs it starts itself.
"""

from __future__ import annotations

from django.conf import settings

from hub.errors import HubError
from hub.jobs.models import Job

RETRY_AFTER_S = 30


class TooManyJobs(HubError):
    """The person has as many jobs queued or running as the hub allows."""

    def __init__(self, active: int, limit: int) -> None:
        super().__init__("too_many_jobs", f"You have {active} jobs queued or running and this hub runs at most "
                                          f"{limit} of one person's at once; wait for some to end (GET "
                                          "/api/v1/jobs/?state=running) or cancel some, then ask again.",
                         active=active, limit=limit)
        self.wait = RETRY_AFTER_S


def check_active_jobs(user) -> None:
    """Raise ``TooManyJobs`` if ``user`` already has ``HUB_USER_MAX_ACTIVE_JOBS`` jobs queued or running
    (0: no limit). Staff are not limited."""
    limit = settings.HUB_USER_MAX_ACTIVE_JOBS
    if not limit or user is None or not user.is_authenticated or user.is_staff:
        return
    active = Job.objects.filter(requester=user, state__in=(Job.State.QUEUED, Job.State.RUNNING)).count()
    if active >= limit:
        raise TooManyJobs(active, limit)
