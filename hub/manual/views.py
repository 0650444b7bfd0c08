"""``/docs/``: the manual as built by ``make docs-build`` (MkDocs, into ``HUB_DOCS_DIR``), served by the hub itself,
so a hub on a site without a way out to the Internet carries its own manual."""

from __future__ import annotations

import mimetypes
from pathlib import Path

from django.conf import settings
from django.http import FileResponse, HttpRequest, HttpResponse, HttpResponseRedirect
from django.views.decorators.http import require_safe

from hub.web.refusals import refused

NOT_BUILT = ("This hub's manual has not been built. On the hub's host, run `make docs-build` (`make run` builds it "
             "too) and reload this page.")
NOT_FOUND = "The manual has no page at this address."


def _missing(request: HttpRequest, detail: str, advice: list[str]) -> HttpResponse:
    response = refused(request, "not_found", detail, "Not in the manual", advice)
    response["Cache-Control"] = "no-store"
    return response


def _inside(root: Path, path: str) -> Path | None:
    """``path`` under ``root``, or None when it is not a plain path inside it."""
    try:
        target = (root / path).resolve()
    except (OSError, ValueError):  # a NUL byte, a name too long
        return None
    return target if target == root or target.is_relative_to(root) else None


@require_safe
def page(request: HttpRequest, path: str = "") -> HttpResponse:
    """A file of the built manual: a folder's ``index.html``, an asset, the search index."""
    root = Path(settings.HUB_DOCS_DIR).resolve()
    if not (root / "index.html").is_file():
        return _missing(request, NOT_BUILT, ["Run `make docs-build` in the hub's checkout, then reload.",
                                             "The same pages are in the repository's docs/ folder."])
    target = _inside(root, path)
    if target is not None and target.is_dir():
        if path and not path.endswith("/"):
            return HttpResponseRedirect(request.path + "/")
        target = target / "index.html"
    if target is None or not target.is_file():
        return _missing(request, NOT_FOUND, ["Start from the manual's home page: /docs/",
                                             "The search box at the top of each page finds words in every page."])
    media_type = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
    if media_type.startswith("text/") or media_type in {"application/javascript", "application/json"}:
        media_type += "; charset=utf-8"
    response = FileResponse(target.open("rb"), content_type=media_type)
    response["Cache-Control"] = "public, max-age=300"
    return response
