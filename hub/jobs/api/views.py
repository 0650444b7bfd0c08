"""Jobs over REST: a user sees the jobs they requested."""

from __future__ import annotations

from django.db.models import Q
from drf_spectacular.utils import extend_schema
from rest_framework import generics, status
from rest_framework.response import Response
from rest_framework.views import APIView

from hub.accounts.permissions import IsAuthenticatedReader
from hub.errors import HubError
from hub.jobs.api.serializers import JobSerializer
from hub.jobs.models import Job
from hub.jobs.services import cancel_job, reap_stale
from hub.registry.models import Artifact
from hub.registry.rule import token_limit


def accepted(job: Job) -> Response:
    """The answer to any request that starts a job: 202, the job, and its URL in ``Location``."""
    data = JobSerializer(job).data
    return Response(data, status=status.HTTP_202_ACCEPTED, headers={"Location": data["url"]})


class _OwnJobs:
    serializer_class = JobSerializer
    permission_classes = [IsAuthenticatedReader]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Job.objects.none()
        own = Job.objects.filter(requester=self.request.user)
        limit = token_limit(self.request.user)
        if limit is not None:  # a limited token sees the jobs on what it may reach, as it reads artifacts
            own = own.filter(version__artifact__in=Artifact.objects.filter(limit))
        reap_stale(own)  # a job whose worker died is never left "running" for its requester to watch
        return own.select_related("requester", "version__artifact__owner")


class JobList(_OwnJobs, generics.ListAPIView):
    filterset_fields = ["state", "kind"]


class JobDetail(_OwnJobs, generics.RetrieveAPIView):
    def get_object(self) -> Job:
        job = self.get_queryset().filter(pk=self.kwargs["pk"]).first()
        if job is None:
            raise HubError("not_found", f"You have no job {self.kwargs['pk']}.")
        return job


def cancellable_by(user):
    """Jobs ``user`` may cancel: those they requested, and those on versions of artifacts they own."""
    return Job.objects.filter(Q(requester=user) | Q(version__artifact__owner=user))


class JobCancel(APIView):
    """Cancel a job: a queued one ends at once (200), a running one is stopped by its worker, which removes
    what it had made (202; poll the job until it is ``cancelled``). A finished job answers 409."""
    needs_scope = "infer"
    limited_ok = True  # only your own jobs

    permission_classes = [IsAuthenticatedReader]

    @extend_schema(request=None, responses={200: JobSerializer, 202: JobSerializer})
    def post(self, request, pk) -> Response:
        job = cancellable_by(request.user).filter(pk=pk).first()
        if job is None:
            raise HubError("not_found", f"You have no job {pk}.")
        job = cancel_job(job, request.user)
        data = JobSerializer(job).data
        if job.requester_id != request.user.pk:  # the artifact's owner; another user's job stays theirs to read
            data = {key: data[key] for key in ("id", "kind", "state", "error_code", "error_detail", "cancel_requested")}
        return Response(data, status=status.HTTP_200_OK if job.is_final else status.HTTP_202_ACCEPTED)
