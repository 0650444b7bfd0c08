"""The protocol's URLs, at the root paths huggingface_hub builds from ``HF_ENDPOINT`` (``hf_api.py``,
``file_download.py::hf_hub_url``). Mounted after every other route of the hub (``hub.urls``), with literal
``api/models|datasets|spaces`` prefixes, so none of the hub's own paths is shadowed."""

from django.urls import path

from hub.hfhub import views, writes

REPO = "<str:owner>/<str:name>"

urlpatterns = [
    path("api/whoami-v2", views.WhoAmI.as_view(), name="hf-whoami"),
    path("api/repos/create", writes.CreateRepo.as_view(), name="hf-create-repo"),
    path("api/validate-yaml", writes.ValidateYaml.as_view(), name="hf-validate-yaml"),
    path("api/hfhub-lfs/<str:oid>", writes.LfsUpload.as_view(), name="hf-lfs-upload"),
    path("api/repos/delete", writes.Unoffered.as_view(), {"operation": "delete"}, name="hf-delete-repo"),
    path("api/repos/move", writes.Unoffered.as_view(), {"operation": "move"}, name="hf-move-repo"),
]
for repo_type in ("models", "datasets", "spaces"):
    kind = {"repo_type": repo_type}
    api = f"api/{repo_type}/{REPO}"
    urlpatterns += [
        path(f"api/{repo_type}", views.RepoList.as_view(), kind, name=f"hf-{repo_type}-list"),
        path(api, views.RepoInfo.as_view(), kind, name=f"hf-{repo_type}-info"),
        path(f"{api}/revision/<path:revision>", views.RepoInfo.as_view(), kind, name=f"hf-{repo_type}-revision"),
        path(f"{api}/tree/<path:rest>", views.Tree.as_view(), kind, name=f"hf-{repo_type}-tree"),
        path(f"{api}/paths-info/<path:revision>", views.PathsInfo.as_view(), kind, name=f"hf-{repo_type}-paths-info"),
        path(f"{api}/refs", views.Refs.as_view(), kind, name=f"hf-{repo_type}-refs"),
        path(f"{api}/commits/<path:revision>", views.Commits.as_view(), kind, name=f"hf-{repo_type}-commits"),
        path(f"{api}/preupload/<path:revision>", writes.Preupload.as_view(), kind, name=f"hf-{repo_type}-preupload"),
        path(f"{api}/commit/<path:revision>", writes.Commit.as_view(), kind, name=f"hf-{repo_type}-commit"),
        path(f"{api}/settings", writes.Unoffered.as_view(), {**kind, "operation": "settings"},
             name=f"hf-{repo_type}-settings"),
        path(f"{api}/tag/<path:revision>", writes.Unoffered.as_view(), {**kind, "operation": "tag"},
             name=f"hf-{repo_type}-tag"),
        path(f"{api}/branch/<path:revision>", writes.Unoffered.as_view(), {**kind, "operation": "branch"},
             name=f"hf-{repo_type}-branch"),
    ]
urlpatterns += [
    path(f"datasets/{REPO}.git/info/lfs/objects/batch", writes.LfsBatch.as_view(), {"repo_type": "datasets"},
         name="hf-datasets-lfs"),
    path(f"spaces/{REPO}.git/info/lfs/objects/batch", writes.LfsBatch.as_view(), {"repo_type": "spaces"},
         name="hf-spaces-lfs"),
    path(f"{REPO}.git/info/lfs/objects/batch", writes.LfsBatch.as_view(), {"repo_type": "models"},
         name="hf-models-lfs"),
    path(f"datasets/{REPO}/resolve/<path:rest>", views.Resolve.as_view(), {"repo_type": "datasets"},
         name="hf-datasets-resolve"),
    path(f"spaces/{REPO}/resolve/<path:rest>", views.Resolve.as_view(), {"repo_type": "spaces"},
         name="hf-spaces-resolve"),
    path(f"{REPO}/resolve/<path:rest>", views.Resolve.as_view(), {"repo_type": "models"}, name="hf-models-resolve"),
]
