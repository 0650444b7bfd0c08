"""Shared API plumbing: pagination, and views that answer in their own media types."""

from rest_framework.pagination import PageNumberPagination
from rest_framework.renderers import JSONRenderer


class Pagination(PageNumberPagination):
    page_size = 20
    page_size_query_param = "page_size"
    max_page_size = 200


class OwnMediaType:
    """For views whose answers carry their own media type (file bytes, a zip, a metadata export) or that
    take ``?format=`` as a parameter of their own (the search facet). DRF's negotiation would refuse them
    before the view runs: 406 for an ``Accept`` other than JSON, 404 for an unknown ``format``. Errors stay
    JSON; a view that cares what ``Accept`` asks checks it itself."""

    def perform_content_negotiation(self, request, force=False):
        return JSONRenderer(), "application/json"
