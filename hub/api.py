"""Shared API plumbing: pagination, and views that answer in their own media types."""

from rest_framework.pagination import PageNumberPagination
from rest_framework.renderers import JSONRenderer

from hub.errors import HubError


class Pagination(PageNumberPagination):
    """Pages of 20 (``page_size`` up to 200). A ``page`` that is not a page number is 400 ``invalid``; a number
    past the last page stays DRF's 404 (there is no such page)."""

    page_size = 20
    page_size_query_param = "page_size"
    max_page_size = 200

    def paginate_queryset(self, queryset, request, view=None):
        number = request.query_params.get(self.page_query_param, "1")
        if number not in self.last_page_strings and not (number.isdigit() and int(number) > 0):
            raise HubError("invalid", f"page must be a page number (1, 2, …) or 'last', not {number[:40]!r}.",
                           errors={"page": ["not a page number"]})
        return super().paginate_queryset(queryset, request, view)


class OwnMediaType:
    """For views whose answers carry their own media type (file bytes, a zip, a metadata export) or that
    take ``?format=`` as a parameter of their own (the search facet). DRF's negotiation would refuse them
    before the view runs: 406 for an ``Accept`` other than JSON, 404 for an unknown ``format``. Errors stay
    JSON; a view that cares what ``Accept`` asks checks it itself."""

    def perform_content_negotiation(self, request, force=False):
        return JSONRenderer(), "application/json"
