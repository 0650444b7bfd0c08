"""The protocol's endpoints: thin views over ``repos``, ``revisions`` and ``answers``; bytes through the registry's
own ``file_response`` (Range, ETag, presigned redirects). Errors are the hub's coded bodies, with the codes and
headers ``huggingface_hub.utils.hf_raise_for_status`` turns into its own exceptions (``errors``)."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hub.accounts.models import ApiToken
from hub.api import OwnMediaType
from hub.errors import HubError
from hub.hfhub import answers
from hub.hfhub.errors import hf_exception_handler
from hub.hfhub.repos import get_repo
from hub.hfhub.revisions import commit_sha, resolve, split_revision
from hub.orgs.models import Membership
from hub.registry.downloads import file_response
from hub.registry.models import Artifact, File, Version

REDIRECTS = (301, 302, 303, 307, 308)


def _flag(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "on")


class HfView(OwnMediaType, APIView):
    """A read of the protocol: anyone may ask (what they see is ``get_repo``'s), answers in JSON or bytes."""

    schema = None  # the Hub's protocol, not the REST API: it is left out of /api/schema/
    permission_classes = ()
    commit: str | None = None  # the version's commit sha once known: errors after that carry it (X-Repo-Commit)

    def get_exception_handler(self):
        return hf_exception_handler

    def version_of(self, request: Request, repo_type: str, owner: str, name: str,
                   revision: str | None) -> tuple[Artifact, Version, list[File]]:
        artifact = get_repo(request.user, repo_type, owner, name)
        version = resolve(artifact, revision)
        self.commit = commit_sha(version)
        return artifact, version, list(version.files.select_related("blob").order_by("path"))

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        if self.commit:
            response["X-Repo-Commit"] = self.commit
        return response


class RepoInfo(HfView):
    """``GET /api/{models,datasets,spaces}/{owner}/{name}[/revision/{revision}]`` (``?blobs=1``: sizes and LFS)."""

    def get(self, request: Request, repo_type: str, owner: str, name: str, revision: str | None = None) -> Response:
        artifact, version, files = self.version_of(request, repo_type, owner, name, revision)
        return Response(answers.repo_info(artifact, version, files, blobs=_flag(request.query_params.get("blobs"))))


class Tree(HfView):
    """``GET /api/{type}/{owner}/{name}/tree/{revision}[/{path}]?recursive=&expand=``: one page holds all."""

    def get(self, request: Request, repo_type: str, owner: str, name: str, rest: str) -> Response:
        revision, folder = split_revision(rest)
        _, version, files = self.version_of(request, repo_type, owner, name, revision)
        params = request.query_params
        entries = answers.tree(version, files, folder.strip("/"), recursive=_flag(params.get("recursive")),
                               expand=_flag(params.get("expand")))
        if entries is None:
            raise HubError("EntryNotFound", f"{version} has no folder {folder!r}.")
        return Response(entries)


class PathsInfo(HfView):
    """``POST /api/{type}/{owner}/{name}/paths-info/{revision}`` with ``paths`` (form fields or JSON) and
    ``expand``: the entries of the paths that exist."""

    def post(self, request: Request, repo_type: str, owner: str, name: str, revision: str) -> Response:
        data = request.data
        paths = data.getlist("paths") if hasattr(data, "getlist") else data.get("paths", [])
        if isinstance(paths, str):
            paths = [paths]
        if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths) or len(paths) > 10000:
            raise HubError("invalid", "paths is a list of at most 10,000 paths in the repository.",
                           errors={"paths": ["Expected a list of strings."]})
        _, version, files = self.version_of(request, repo_type, owner, name, revision)
        return Response(answers.paths_info(version, files, paths, expand=_flag(data.get("expand"))))


class Refs(HfView):
    """``GET /api/{type}/{owner}/{name}/refs``: ``main`` and a tag per version."""

    def get(self, request: Request, repo_type: str, owner: str, name: str) -> Response:
        artifact = get_repo(request.user, repo_type, owner, name)
        return Response(answers.refs(artifact, pull_requests=_flag(request.query_params.get("include_prs"))))


class Commits(HfView):
    """``GET /api/{type}/{owner}/{name}/commits/{revision}``: a commit per version, newest first."""

    def get(self, request: Request, repo_type: str, owner: str, name: str, revision: str) -> Response:
        artifact, version, _ = self.version_of(request, repo_type, owner, name, revision)
        return Response(answers.commits(artifact, version))


class Resolve(HfView):
    """``GET|HEAD /[{datasets,spaces}/]{owner}/{name}/resolve/{revision}/{path}``: the file's bytes (Range, ETag =
    sha256) or, on S3, a redirect to a presigned URL that carries ``X-Linked-Etag`` and ``X-Linked-Size``, as the
    Hub's redirects to its CDN do; ``X-Repo-Commit`` always."""

    def get(self, request: Request, repo_type: str, owner: str, name: str, rest: str) -> HttpResponse:
        return self.answer(request, repo_type, owner, name, rest, head=False)

    def head(self, request: Request, repo_type: str, owner: str, name: str, rest: str) -> HttpResponse:
        return self.answer(request, repo_type, owner, name, rest, head=True)

    def answer(self, request: Request, repo_type: str, owner: str, name: str, rest: str, *,
               head: bool) -> HttpResponse:
        revision, path = split_revision(rest)
        artifact = get_repo(request.user, repo_type, owner, name)
        version = resolve(artifact, revision)
        self.commit = commit_sha(version)
        file = File.objects.filter(version=version, path=path).select_related("blob").first()
        if file is None:
            raise HubError("EntryNotFound", f"{version} has no file {path!r}.")
        response = file_response(request, artifact, file, head=head, refused="GatedRepo")
        if response.status_code in REDIRECTS:
            response["X-Linked-Etag"] = f'"{file.blob_id}"'
            response["X-Linked-Size"] = str(file.size)
        return response


class WhoAmI(HfView):
    """``GET /api/whoami-v2``: the token's user (``HfApi.whoami``)."""

    def get(self, request: Request) -> Response:
        if not request.user.is_authenticated:
            raise HubError("not_authenticated", "Send a hub token: Authorization: Bearer <token> (HF_TOKEN).")
        token = request.auth if isinstance(request.auth, ApiToken) else None
        role = "write" if token is None or token.can_write else "read"
        orgs = [{"type": "org", "name": m.org.slug, "fullname": m.org.title or m.org.slug, "roleInOrg": m.role}
                for m in Membership.objects.filter(user=request.user).select_related("org__account")]
        return Response({"type": "user", "id": str(request.user.pk), "name": request.user.username,
                         "fullname": request.user.get_full_name() or request.user.username, "orgs": orgs,
                         "auth": {"type": "access_token",
                                  "accessToken": {"displayName": token.name if token else "session", "role": role}}})
