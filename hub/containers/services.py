"""MLCube containers: which version a cube is made from, where the cube of a version is, and the job
that makes (and builds) it. The work runs in workers (``hub.containers.jobs``); nothing here opens a model
or starts a container."""

from __future__ import annotations

from django.conf import settings

from hub.conversions.services import conversions_of, onnx_files
from hub.errors import HubError
from hub.jobs.models import Job
from hub.jobs.services import create_job
from hub.registry.models import Artifact, ProvenanceLink, Version

CUBE_SUFFIX = "-mlcube"
BUILD_CHOICES = ("auto", "yes", "no")


def cube_source(version: Version) -> Version:
    """The version a cube is made from: a project version itself, an ONNX model version, or the newest
    ONNX version converted from this one. 409 ``not_converted`` when there is none yet."""
    if version.artifact.kind == Artifact.Kind.PROJECT:
        return version
    if version.artifact.kind != Artifact.Kind.MODEL:
        raise HubError("unsupported_format", f"{version} is a dataset; containers are made of models and projects.")
    if len(onnx_files(version)) == 1:
        return version
    for converted in conversions_of(version):
        if len(onnx_files(converted)) == 1:
            return converted
    if len(onnx_files(version)) > 1:
        raise HubError("unsupported_format", f"{version} holds several ONNX files; a cube runs one model.")
    raise HubError("not_converted", f"{version} has no ONNX version yet; a cube runs the ONNX model. Wait for its "
                                    "conversion (or ask for one at .../convert) and try again.")


def cube_of(source: Version) -> Version | None:
    """The newest live cube version made from ``source`` (a model's ONNX version)."""
    link = (ProvenanceLink.objects.filter(target=source, relation=ProvenanceLink.Relation.DERIVED_FROM,
                                          version__deleted_at__isnull=True,
                                          version__artifact__kind=Artifact.Kind.PROJECT,
                                          version__artifact__name__endswith=CUBE_SUFFIX)
            .select_related("version__artifact__owner").order_by("-version__created").first())
    return link.version if link else None


def is_built(cube: Version | None) -> bool:
    return bool(cube and (cube.metadata.get("container") or {}).get("built"))


def request_container(version: Version, user, *, build: str = "auto", tasks: list[str] | None = None,
                      auto: bool = False) -> Job:
    """Queue the job that makes ``version``'s MLCube (a model) or checks and builds it (a project).

    ``build``: ``yes`` builds the image and runs the cube's ``infer`` on sample inputs (the job fails
    without podman/docker), ``auto`` does so where the worker can, ``no`` only makes the cube. An open
    job for the same version and ``build`` is returned instead of a second one."""
    if build not in BUILD_CHOICES:
        raise HubError("invalid", f"build must be one of {', '.join(BUILD_CHOICES)}.", errors={"build": ["Invalid."]})
    source = cube_source(version)
    if tasks and source.artifact.kind != Artifact.Kind.PROJECT:
        raise HubError("invalid", "tasks name a project's MLCube tasks; a model's cube runs infer.",
                       errors={"tasks": ["Only for projects."]})
    open_job = Job.objects.filter(kind="container", version=source, params__build=build,
                                  state__in=(Job.State.QUEUED, Job.State.RUNNING)).first()
    if open_job is not None and not tasks:
        return open_job
    params = {"build": build, "auto": auto, "tasks": list(tasks or [])}
    return create_job("container", user, version=source, params=params, limited=not auto)


def on_onnx_verified(version: Version, user, verified: bool) -> Job | None:
    """After a conversion published (or a verification checked) an ONNX version: make its cube, as
    ``HUB_CUBE_ON_CONVERT`` says. Unverified models get none."""
    mode = settings.HUB_CUBE_ON_CONVERT
    if mode == "off" or not verified or len(onnx_files(version)) != 1:
        return None
    return request_container(version, user, build="auto" if mode == "build" else "no", auto=True)
