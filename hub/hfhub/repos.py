"""Repositories: which artifact a Hugging Face repository id names, for whom."""

from __future__ import annotations

from hub.errors import HubError
from hub.registry import services
from hub.registry.models import Artifact

# The URL's repository type (``/api/{type}/…``) -> the artifact kind it serves. Projects are the Hub's spaces.
REPO_KINDS = {"models": "model", "datasets": "dataset", "spaces": "project"}
# huggingface_hub's repo_type for each kind (what a client passes as ``repo_type=``).
REPO_TYPE_OF = {"model": "model", "dataset": "dataset", "project": "space"}


def get_repo(user, repo_type: str, owner: str, name: str) -> Artifact:
    """The live artifact ``owner/name`` of the kind ``repo_type`` serves, if ``user`` may read it. A private
    artifact, a missing one and one of another kind answer alike, ``RepoNotFound``: the Hub's answer to a
    repository the reader may not see (the client's own ``RepositoryNotFoundError``)."""
    kind = REPO_KINDS.get(repo_type)
    try:
        artifact = services.get_artifact(user, owner, name) if kind else None
    except HubError as refused:
        if refused.code != "not_found":
            raise
        artifact = None
    if artifact is None or artifact.kind != kind:
        where = f"{repo_type} " if kind else ""
        raise HubError("RepoNotFound", f"Repository Not Found: no {where}{owner}/{name} here, or you may not see it "
                                       "(send a hub token of someone who may read it as HF_TOKEN).")
    return artifact
