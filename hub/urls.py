"""URLs: the REST API under /api/v1/, its schema and docs, the PID resolver, and the pages."""

from django.contrib import admin
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from hub import errors
from hub.accounts.api import oauth
from hub.accounts.api import views as accounts
from hub.containers.api import views as containers
from hub.conversions.api import views as conversions
from hub.finetune.api import views as finetune
from hub.gateway.api import views as gateway
from hub.generation.api import views as generation
from hub.jobs.api import views as jobs
from hub.manual import views as manual
from hub.metadata import oai
from hub.metadata.api import views as metadata
from hub.orgs.api import views as orgs
from hub.registry import resolver
from hub.registry.api import access, transfers
from hub.registry.api import views as registry
from hub.web import device, human, landing, login, signin, sparql_page

OWNER_NAME = "artifacts/<str:owner>/<str:name>/"
VERSION = OWNER_NAME + "versions/<str:version>/"

api_patterns = [
    path("artifacts/", registry.ArtifactListCreate.as_view(), name="artifact-list"),
    path(OWNER_NAME, registry.ArtifactDetail.as_view(), name="artifact-detail"),
    path(OWNER_NAME + "versions/", registry.VersionListCreate.as_view(), name="version-list"),
    path(OWNER_NAME + "transfer", registry.ArtifactTransfer.as_view(), name="artifact-transfer"),
    path(VERSION, registry.VersionDetail.as_view(), name="version-detail"),
    path(VERSION + "access", access.VersionAccess.as_view(), name="version-access"),
    path(VERSION + "share-links/", access.ShareLinkList.as_view(), name="share-link-list"),
    path(VERSION + "share-links/<int:pk>", access.ShareLinkDetail.as_view(), name="share-link-detail"),
    path(OWNER_NAME + "grants/", access.GrantList.as_view(), name="grant-list"),
    path(OWNER_NAME + "grants/<int:pk>", access.GrantDetail.as_view(), name="grant-detail"),
    path(OWNER_NAME + "access-policy", access.AccessPolicyView.as_view(), name="access-policy"),
    path(OWNER_NAME + "access-requests", access.AccessRequestList.as_view(), name="access-request-list"),
    path(OWNER_NAME + "access-requests/<int:pk>", access.AccessRequestDetail.as_view(), name="access-request"),
    path(VERSION + "fixity", registry.VersionFixity.as_view(), name="version-fixity"),
    path(VERSION + "convert", conversions.VersionConvert.as_view(), name="version-convert"),
    path(VERSION + "optimize", conversions.VersionOptimize.as_view(), name="version-optimize"),
    path(VERSION + "finetune", finetune.VersionFinetune.as_view(), name="version-finetune"),
    path(VERSION + "infer", gateway.Infer.as_view(), name="version-infer"),
    path(VERSION + "generate", generation.Generate.as_view(), name="version-generate"),
    path(VERSION + "serve", generation.Serve.as_view(), name="version-serve"),
    path(VERSION + "container", containers.VersionContainer.as_view(), name="version-container"),
    path(VERSION + "benchmark", gateway.VersionBenchmark.as_view(), name="version-benchmark"),
    path(VERSION + "metadata/<str:export>", metadata.VersionMetadata.as_view(), name="version-metadata"),
    path("records/<str:export>/<path:pid>", metadata.PidMetadata.as_view(), name="pid-metadata"),
    path("collaborate", gateway.Collaborate.as_view(), name="collaborate"),
    path("metadata/fields/", metadata.MetadataFields.as_view(), name="metadata-fields"),
    path(VERSION + "files/<path:path>", metadata.with_collection(transfers.FileDownload.as_view()),
         name="file-download"),
    path(VERSION + "archive", transfers.VersionArchive.as_view(), name="version-archive"),
    path("uploads/", transfers.UploadCreate.as_view(), name="upload-list"),
    path("uploads/<uuid:upload_id>", transfers.UploadDetail.as_view(), name="upload-detail"),
    path("uploads/<uuid:upload_id>/complete", transfers.UploadComplete.as_view(), name="upload-complete"),
    path("uploads/<uuid:upload_id>/parts", transfers.UploadParts.as_view(), name="upload-parts"),
    path("resolve", registry.Resolve.as_view(), name="resolve"),
    path("me", accounts.Me.as_view(), name="me"),
    path("tokens/", accounts.TokenListCreate.as_view(), name="token-list"),
    path("tokens/<int:pk>", accounts.TokenRevoke.as_view(), name="token-detail"),
    path("orgs/", orgs.OrganizationListCreate.as_view(), name="org-list"),
    path("orgs/<str:org>/", orgs.OrganizationDetail.as_view(), name="org-detail"),
    path("orgs/<str:org>/members/", orgs.MemberList.as_view(), name="org-members"),
    path("orgs/<str:org>/members/<str:username>", orgs.MemberDetail.as_view(), name="org-member"),
    path("orgs/<str:org>/tokens/", orgs.ServiceTokens.as_view(), name="org-tokens"),
    path("orgs/<str:org>/tokens/<int:pk>", orgs.ServiceTokenRevoke.as_view(), name="org-token"),
    path("jobs/", jobs.JobList.as_view(), name="job-list"),
    path("jobs/<uuid:pk>/", jobs.JobDetail.as_view(), name="job-detail"),
    path("jobs/<uuid:pk>/cancel", jobs.JobCancel.as_view(), name="job-cancel"),
]

urlpatterns = [
    path("", include("hub.web.urls")),
    path("api/v1/", include((api_patterns, "api"))),
    path("v1/chat/completions", generation.ChatCompletions.as_view(), name="openai-chat"),
    path("v1/completions", generation.Completions.as_view(), name="openai-completions"),
    path("v1/embeddings", generation.Embeddings.as_view(), name="openai-embeddings"),
    path("v1/models", generation.Models.as_view(), name="openai-models"),
    path("v1/models/<path:model>", generation.Models.as_view(), name="openai-model"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema", template_name="web/api_docs.html"),
         name="api-docs"),
    re_path(r"^ark:/?(?P<naan>[0-9a-z]+)/(?P<name>[^?#]+)$", resolver.resolve_ark, name="ark"),
    path("pid/<path:pid>", resolver.resolve, name="pid"),
    path("landing/<path:pid>", landing.view, name="landing"),
    path("linkset/<path:pid>", metadata.linkset, name="linkset"),
    path("docs/", manual.page, name="manual"),
    path("docs/<path:path>", manual.page, name="manual-page"),
    path("oai", oai.endpoint, name="oai"),
    path("sparql", sparql_page.dispatch, name="sparql"),
    path("accounts/login/", login.LoginView.as_view(), name="login"),
    path("accounts/logout/", signin.LogoutView.as_view(), name="logout"),
    path("accounts/oidc/login", signin.oidc_login, name="oidc-login"),
    path("accounts/oidc/callback", signin.oidc_callback, name="oidc-callback"),
    path("oauth/device_authorization", oauth.device_authorization, name="oauth-device-authorization"),
    path("oauth/token", oauth.token, name="oauth-token"),
    path("device", device.verify, name="device"),
    path("admin/", admin.site.urls),
    path("", include("hub.oci.urls")),  # the OCI Distribution registry at /v2/
    path("", include("hub.hfhub.urls")),  # the Hugging Face Hub protocol; after the hub's own routes
    # addresses people type (issue 55): after every route above, whose first segments are reserved owner names
    path("<str:owner>/<str:name>", human.view, name="human"),
    path("<str:owner>/<str:name>/<str:version>", human.view, name="human-version"),
]


handler403 = "hub.web.refusals.forbidden"


def handler404(request, exception=None):
    """The API's JSON error under /api/; a short 404 for a client that asks for data; else the page."""
    if request.path.startswith("/api/"):
        return errors.json_error(request, "not_found", f"No API endpoint at {request.path}.")
    if (answer := errors.data_not_found(request, f"nothing is found at {request.path}.")) is not None:
        return answer
    from django.views.defaults import page_not_found

    return page_not_found(request, exception)


def handler500(request):
    if request.path.startswith("/api/"):
        return errors.json_error(request, "internal_error",
                                 "Internal error; the administrators can trace it by its request id.")
    from django.views.defaults import server_error

    return server_error(request)
