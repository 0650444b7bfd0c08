"""Per-person quota of jobs at once: a person with ``HUB_USER_MAX_ACTIVE_JOBS`` jobs queued or running is told
429 ``too_many_jobs`` (with ``Retry-After``) when asking for another, so that no write token can queue
unbounded conversions, fine-tunes or inference jobs.

Checked for each job started at a person's request (conversions, optimisations, containers, fine-tunes,
inference jobs, merges, benchmarks, fixity checks), twice: ``check_active_jobs`` first, a fast refusal before
any work (no lock), then ``take_slot`` in the transaction that writes the job's row (``create_job(...,
limited=True)``), under the person's lock (``hub.registry.quota.lock``, held to that commit): of two requests
at once with one slot left, the second count waits for the first's row, so together they cannot pass the quota.
The lock covers the count and the row's INSERT only, never a worker contacted or a file staged.

Not checked by ``create_job`` unless asked: publishing a version starts its conversion through ``create_job``,
and a publish must never fail for the jobs it starts itself.
"""

from __future__ import annotations

from django.conf import settings

from hub.errors import HubError
from hub.jobs.models import Job
from hub.registry.quota import lock

RETRY_AFTER_S = 30


class TooManyJobs(HubError):
    """The person has as many jobs queued or running as the hub allows."""

    def __init__(self, active: int, limit: int) -> None:
        super().__init__("too_many_jobs", f"You have {active} jobs queued or running and this hub runs at most "
                                          f"{limit} of one person's at once; wait for some to end (GET "
                                          "/api/v1/jobs/?state=running) or cancel some, then ask again.",
                         active=active, limit=limit)
        self.wait = RETRY_AFTER_S


def limit_for(user) -> int:
    """How many jobs ``user`` may have queued or running; 0 when unlimited (no limit set, staff, or no person)."""
    limit = settings.HUB_USER_MAX_ACTIVE_JOBS
    if not limit or user is None or not user.is_authenticated or user.is_staff:
        return 0
    return limit


def check_active_jobs(user) -> None:
    """Raise ``TooManyJobs`` if ``user`` already has ``HUB_USER_MAX_ACTIVE_JOBS`` jobs queued or running
    (0: no limit), counting the jobs they asked for, not those the hub started itself (``Job.counted``). Staff are
    not limited. No lock: a refusal before any work, which ``take_slot`` confirms."""
    limit = limit_for(user)
    if not limit:
        return
    active = Job.objects.filter(requester=user, counted=True, state__in=(Job.State.QUEUED, Job.State.RUNNING)).count()
    if active >= limit:
        raise TooManyJobs(active, limit)


def take_slot(user) -> None:
    """``check_active_jobs`` under ``user``'s lock: call it inside the transaction that writes the job's row
    (``create_job(..., limited=True)`` does), so that a second request of the same person counts this job."""
    if not limit_for(user):
        return
    lock(user)
    check_active_jobs(user)


def owner_limit(owner) -> int:
    """Jobs at once on an organization's artifacts (``Organization.jobs_at_once``); 0: no limit (people are
    limited as requesters, above)."""
    from hub.orgs.models import Organization

    return Organization.objects.filter(account_id=owner.pk).values_list("jobs_at_once", flat=True).first() or 0


def take_owner_slot(owner) -> None:
    """Refuse (429 ``too_many_jobs``) a job on an organization's artifact while its members' jobs on its artifacts
    fill its ``jobs_at_once``; counted under the organization's lock, as ``take_slot`` counts a person's."""
    limit = owner_limit(owner)
    if not limit:
        return
    lock(owner)
    active = Job.objects.filter(version__artifact__owner=owner,
                                state__in=(Job.State.QUEUED, Job.State.RUNNING)).count()
    if active >= limit:
        error = TooManyJobs(active, limit)
        error.detail = (f"{owner.username} has {active} jobs queued or running on its artifacts and runs at most "
                        f"{limit} at once; wait for some to end or ask its admins to cancel some, then ask again.")
        raise error
