"""REST: a version's MLCube. GET answers the cube (a version of the project ``<name>-mlcube``); POST asks
for it to be made (and built) and answers 202 with the job."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hub.accounts.permissions import TokenScopePermission
from hub.containers import services
from hub.errors import HubError
from hub.jobs.api.serializers import JobSerializer
from hub.jobs.api.views import accepted
from hub.jobs.quota import check_active_jobs
from hub.registry.api.serializers import VersionSerializer
from hub.registry.api.views import as_seen_by, require_write, versions_queryset
from hub.registry.models import Artifact
from hub.registry.services import get_artifact, get_version
from hub.strict import StrictSerializer


class ContainerRequestSerializer(StrictSerializer):
    build = serializers.ChoiceField(services.BUILD_CHOICES, default="auto", help_text=(
        "yes: build the image and check its infer task against the gateway (fails without podman/docker); "
        "auto: build where the worker can; no: only make the cube."))
    tasks = serializers.ListField(child=serializers.CharField(max_length=100), required=False, max_length=20,
                                  help_text="Projects: the MLCube tasks to run after the build, in order.")


class VersionContainer(APIView):
    """The MLCube of a model version (its ONNX version) or a project version."""

    throttle_scope = "conversions"  # hub.ops.throttles: the rate of its writes
    permission_classes = [TokenScopePermission]

    @extend_schema(responses=VersionSerializer)
    def get(self, request: Request, owner: str, name: str, version: str) -> Response:
        source = services.cube_source(get_version(get_artifact(request.user, owner, name), version))
        if source.artifact.kind == Artifact.Kind.PROJECT:
            raise HubError("invalid", f"{source} is a project: its own files are its MLCube.")
        cube = services.cube_of(source)
        if cube is None or not Artifact.objects.live().visible_to(request.user).filter(pk=cube.artifact_id).exists():
            raise HubError("not_found", f"{source} has no MLCube yet; POST to this URL to make one.")
        return Response(VersionSerializer(versions_queryset().get(pk=cube.pk), context=as_seen_by(request)).data)

    @extend_schema(request=ContainerRequestSerializer, responses={202: JobSerializer})
    def post(self, request: Request, owner: str, name: str, version: str) -> Response:
        artifact = get_artifact(request.user, owner, name)
        require_write(request, artifact)
        target = get_version(artifact, version)
        body = ContainerRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        check_active_jobs(request.user)
        return accepted(services.request_container(target, request.user, **body.validated_data))
