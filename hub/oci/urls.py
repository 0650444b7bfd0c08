"""``/v2/``: the OCI Distribution API's paths. A repository name has slashes, so the routes are matched by their
endings (``/manifests/<ref>``, ``/blobs/uploads/…``, ``/blobs/<digest>``, ``/tags/list``, ``/referrers/<digest>``).
Other paths under ``/v2/`` are left to the routes after these (a Hugging Face repository of a user named ``v2``)."""

from django.urls import path, re_path

from hub.oci import views

NAME = r"(?P<name>[^?#]+?)"

urlpatterns = [
    path("v2/", views.base, name="oci-base"),
    path("v2/token", views.token, name="oci-token"),
    path("v2/_catalog", views.catalog, name="oci-catalog"),
    re_path(rf"^v2/{NAME}/manifests/(?P<reference>[^/]+)$", views.manifest, name="oci-manifest"),
    re_path(rf"^v2/{NAME}/blobs/uploads/?$", views.upload_start, name="oci-upload-start"),
    re_path(rf"^v2/{NAME}/blobs/uploads/(?P<upload_id>[0-9a-f-]{{36}})$", views.upload_session,
            name="oci-upload"),
    re_path(rf"^v2/{NAME}/blobs/(?P<digest>[^/]+)$", views.blob, name="oci-blob"),
    re_path(rf"^v2/{NAME}/tags/list$", views.tags_list, name="oci-tags"),
    re_path(rf"^v2/{NAME}/referrers/(?P<digest>[^/]+)$", views.referrers, name="oci-referrers"),
]
