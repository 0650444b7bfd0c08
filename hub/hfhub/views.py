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
from hub.hfhub.repos import REPO_KINDS, get_repo
from hub.hfhub.revisions import commit_sha, resolve, split_revision
from hub.orgs.models import Membership
from hub.registry.downloads import file_response
from hub.registry.models import Artifact, File, Version
from hub.search.services import search

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


LIST_PAGE = 1000  # entries per page of a listing (the client follows the Link header to the next)
LIST_SORTS = {"lastModified": "new", "createdAt": "new", "last_modified": "new", "created_at": "new", "id": "name"}
# What list_models/list_datasets/list_spaces send that a listing here reads, or takes without it changing the answer
LIST_PARAMS = {"search", "author", "filter", "pipeline_tag", "sort", "direction", "limit", "cursor", "full", "config",
               "cardData", "expand"}


class RepoList(HfView):
    """``GET /api/{models,datasets,spaces}?search=&author=&filter=&pipeline_tag=&sort=&limit=``: the artifacts
    of the kind that the asker may read, through the search backend (the one read rule); ``filter`` values are
    keywords (``license:…`` a license), ``pipeline_tag`` the task; pages of 1,000 linked by ``Link: rel=next``."""

    def get(self, request: Request, repo_type: str) -> Response:
        params = request.query_params
        unknown = sorted(set(params) - LIST_PARAMS)
        if unknown:
            raise HubError("invalid", f"This hub does not filter by {unknown[0]!r}; a listing takes search, author, "
                                      "filter (keywords, license:<id>), pipeline_tag, sort and limit.")
        filters: dict[str, list[str]] = {"kind": [REPO_KINDS[repo_type]]}
        for value in params.getlist("filter"):
            name, _, license_id = value.partition(":")
            filters.setdefault("license" if name == "license" and license_id else "keyword", []).append(
                license_id if name == "license" and license_id else value)
        for param, facet in (("author", "owner"), ("pipeline_tag", "task")):
            if params.get(param):
                filters[facet] = [params[param]]
        limit, cursor = (_count(params, name) for name in ("limit", "cursor"))
        size = min(limit or LIST_PAGE, LIST_PAGE)
        result = search(request.user, q=params.get("search", ""), filters=filters, with_facets=False,
                        sort=LIST_SORTS.get(params.get("sort", ""), ""), derived="include")
        entries = result.entries[cursor or 0:(cursor or 0) + size]
        response = Response([answers.summary(e.artifact, e.current or e.version) for e in entries
                             if (e.current or e.version) is not None])
        if (cursor or 0) + size < result.total:  # the client stops reading at its limit
            query = params.copy()
            query["cursor"] = str((cursor or 0) + size)
            response["Link"] = f'<{request.build_absolute_uri(request.path)}?{query.urlencode()}>; rel="next"'
        return response


def _count(params, name: str) -> int | None:
    value = params.get(name)
    if value is None:
        return None
    if not value.isdigit() or int(value) > 10**9:
        raise HubError("invalid", f"{name} is a whole number (0 or more), not {value[:20]!r}.")
    return int(value)


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
