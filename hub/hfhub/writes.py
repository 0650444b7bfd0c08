"""The write side's endpoints (``HfApi.create_repo``, ``create_commit`` and so ``upload_file``, ``upload_folder``,
``push_to_hub``): create, pre-upload, the LFS batch and its signed uploads, and the commit that publishes a
version. Writing needs a ``write`` token of the artifact's owner or a collaborator (``TokenScopePermission``)."""

from __future__ import annotations

from django.http import HttpResponse, JsonResponse
from rest_framework.request import Request
from rest_framework.response import Response

from hub.accounts.permissions import TokenScopePermission, require_within
from hub.bounded import load_json
from hub.errors import HubError
from hub.hfhub import commits, lfs
from hub.hfhub.repos import REPO_TYPE_OF, get_repo
from hub.hfhub.revisions import commit_sha
from hub.hfhub.views import HfView
from hub.metadata.derive import split_card
from hub.registry.models import Artifact
from ontology.fields import MetadataError


def _writable(request: Request, repo_type: str, owner: str, name: str) -> Artifact:
    artifact = get_repo(request.user, repo_type, owner, name)
    if not artifact.can_write(request.user):
        raise HubError("permission_denied", f"Only the owner and collaborators of {artifact} may commit to it.")
    return artifact


def _json_body(request: Request) -> dict:
    """A JSON object body whatever its media type says (the LFS API sends application/vnd.git-lfs+json)."""
    body = load_json(request._request.body or b"{}")  # bounded: a deep nesting is a 400, not a RecursionError
    if not isinstance(body, dict):
        raise HubError("malformed_request", "The body is a JSON object.")
    return body


class HfWrite(HfView):
    permission_classes = [TokenScopePermission]
    throttle_scope = "versions"


class CreateRepo(HfWrite):
    """``POST /api/repos/create`` {name, organization, type, visibility|private}: 200 {url}, or 409 with it."""

    limited_ok = True  # a limited token creates inside its limit only (require_within)

    def post(self, request: Request) -> Response:
        payload = _json_body(request)
        require_within(request, payload.get("organization") or request.user.username)
        artifact, made = commits.create_repo(request.user, payload)
        url = commits.repo_url(request.build_absolute_uri("/").rstrip("/"), artifact)
        if not made:
            raise HubError("already_exists", f"You already have {artifact.full_name} ({artifact.kind}).", url=url)
        return Response({"url": url, "name": artifact.full_name, "id": artifact.pid,
                         "type": REPO_TYPE_OF[artifact.kind]})


class Preupload(HfWrite):
    """``POST /api/{type}/{owner}/{name}/preupload/{revision}``: every file goes by LFS (its bytes straight to
    the blob store, once), but an empty one, which the client sends in the commit itself."""

    def post(self, request: Request, repo_type: str, owner: str, name: str, revision: str) -> Response:
        _writable(request, repo_type, owner, name)
        files = _json_body(request).get("files")
        if not isinstance(files, list) or not all(isinstance(f, dict) and isinstance(f.get("path"), str)
                                                   for f in files):
            raise HubError("invalid", "files is a list of {path, size, sample}.",
                           errors={"files": ["Expected a list."]})
        return Response({"files": [{"path": f["path"], "uploadMode": "lfs" if f.get("size") else "regular",
                                    "shouldIgnore": False} for f in files]})


class ValidateYaml(HfView):
    """``POST /api/validate-yaml`` {content, repoType}: whether a README's front matter can be read (the client
    asks before it hashes a folder); the card's fields are checked when the commit publishes it."""

    def post(self, request: Request) -> Response:
        content = _json_body(request).get("content")
        if not isinstance(content, str):
            raise HubError("invalid", "content is the README's text.", errors={"content": ["Expected a string."]})
        try:
            split_card(content)
        except MetadataError as exc:
            response = Response({"code": "invalid_metadata", "detail": str(exc), "error": str(exc),
                                 "errors": [{"message": str(exc)}], "warnings": []}, status=400)
            response["X-Error-Code"] = "invalid_metadata"
            return response
        return Response({"errors": [], "warnings": []})


class LfsBatch(HfWrite):
    """``POST /[datasets/|spaces/]{owner}/{name}.git/info/lfs/objects/batch`` (Git LFS batch API, upload)."""

    throttle_scope = "uploads"

    def post(self, request: Request, repo_type: str, owner: str, name: str) -> HttpResponse:
        artifact = _writable(request, repo_type, owner, name)
        answer = lfs.batch(request._request, request.user, _json_body(request), owner=artifact.owner)
        return JsonResponse(answer, content_type="application/vnd.git-lfs+json")


class LfsUpload(HfView):
    """``PUT /api/hfhub-lfs/{oid}?sig=…``: the bytes of one LFS object, to the URL the batch signed (no token)."""

    authentication_classes = ()
    throttle_scope = "uploads"

    def put(self, request: Request, oid: str) -> HttpResponse:
        lfs.receive(request._request, oid)
        return HttpResponse(status=200)


class Commit(HfWrite):
    """``POST /api/{type}/{owner}/{name}/commit/{revision}`` (NDJSON): a new version of the artifact."""

    def post(self, request: Request, repo_type: str, owner: str, name: str, revision: str) -> Response:
        if request.query_params.get("create_pr") in ("1", "true", "True"):
            raise HubError("invalid", "This hub has no pull requests: commit to a revision; it becomes a version.")
        artifact = _writable(request, repo_type, owner, name)
        parent = commits.parent_of(artifact, revision)
        commit = commits.parse_commit(request._request.body, request.user)
        try:
            version = commits.apply(artifact, request.user, parent, commit)
        finally:
            commits.discard(commit)
        self.commit = commit_sha(version)
        url = commits.repo_url(request.build_absolute_uri("/").rstrip("/"), artifact)
        return Response({"success": True, "commitOid": self.commit, "commitUrl": f"{url}/commit/{self.commit}",
                         "commitMessage": commit.summary, "hookOutput": "", "pullRequestUrl": None,
                         "version": version.label, "pid": version.pid})



# What the Hub's repository operations that this hub does not offer over the protocol are here instead.
UNOFFERED = {
    "delete": "Repositories are not deleted through the Hugging Face protocol: delete the artifact on its page or "
              "with DELETE /api/v1/artifacts/{owner}/{name}/ (its PIDs keep a tombstone).",
    "move": "Repositories are not moved through the Hugging Face protocol: transfer the artifact on its page or with "
            "POST /api/v1/artifacts/{owner}/{name}/transfer (its PIDs stay).",
    "settings": "A repository's settings are its artifact's: change its visibility on its page or with PATCH "
                "/api/v1/artifacts/{owner}/{name}/ {\"visibility\": ...}.",
    "tag": "Tags are the versions' labels here: each commit publishes a version, and its label is its tag "
           "(list_repo_refs); tags are not made or removed by hand.",
    "branch": "This hub has no branches: main is the version the artifact's page opens on; commit to main or to a "
              "version's label.",
}


class Unoffered(HfView):
    """The Hub's repository operations this hub does not offer (``delete_repo``, ``move_repo``,
    ``update_repo_settings``, ``create_tag``, ``create_branch`` and their deletions): a coded 400 that says what
    to do instead, whoever asks (it tells nothing of the repository)."""

    def refuse(self, request: Request, operation: str, **kwargs) -> Response:
        raise HubError("invalid", UNOFFERED[operation])

    get = post = put = delete = refuse
