"""``HubClient``: the hub's REST API with transfers that survive real networks.

Uploads go through resumable sessions: chunks with ``Content-Range`` through the hub, or, where the hub
offers it (S3 backend), parts straight to the object store by presigned URLs; after a failure the client
asks what is held and continues from there. Downloads land in the sha256-keyed cache through
``<blob>.incomplete`` files resumed with ``Range``, large ones over several connections (``transfer``);
the sha256 is computed as the bytes pass and checked at the end. 429/5xx and dropped connections are
retried with exponential backoff.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import requests
import urllib3

from hpcfair import device, settings, transfer
from hpcfair.cache import Cache
from hpcfair.errors import (
    ConflictError,
    DuplicateVersionError,
    HubError,
    JobError,
    NotAuthenticatedError,
    NotFoundError,
    OfflineError,
    TransferError,
    ValidationError,
    from_response,
)
from hpcfair.progress import JobLog, bar, say

DEFAULT_ENDPOINT = settings.DEFAULT_ENDPOINT
CHUNK_SIZE = 256 * 1024 * 1024  # per PUT through the hub: a cut keeps what arrived, so big chunks lose nothing
RETRY_STATUSES = {429, 500, 502, 503, 504}
# The hub's exports by name; any other name given to ``cite`` is a CSL style (a formatted reference, ?style=).
EXPORT_NAMES = ("jsonld", "turtle", "rdfxml", "ntriples", "datacite-json", "datacite-xml", "croissant", "schemaorg",
                "bibtex", "csl-json", "ris", "citation", "dublin-core", "codemeta", "cff", "dcat", "ro-crate")
DROPPED = (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError,
           urllib3.exceptions.HTTPError)
# A chunk refused because the hub holds other bytes than this client thought: its answer says how many.
MOVED_ON = ("upload_offset_mismatch", "upload_busy")
REFUSED_S = 1.0  # how long a refused connection (nothing listens there) is tried again before giving up
PARALLEL_FILES = 4  # files of a version downloaded at once (each large one over several connections too)
FINISHED = {"succeeded", "failed", "cancelled"}
NPZ = "application/x-npz"


@dataclass(frozen=True)
class Remote:
    """A file of a new version that the hub fills itself: ``reference`` (data by reference: a path under a root the
    hub declares, or s3://) or ``fetch`` (a URL the hub copies from)."""

    kind: str
    source: str

    def wire(self) -> dict[str, str]:
        return {self.kind: self.source}


# A connection that cannot be made at all (nothing listens, no network, no route, no such host): trying again
# for longer does not help, so the client says so in about a second (issue 55: a compute node without network).
NO_CONNECTION_ERRNOS = {errno.ECONNREFUSED, errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ENETDOWN,
                        errno.EHOSTDOWN, errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT}


def refused(exc: BaseException) -> bool:
    """Whether a connection could not be made at all (refused, network unreachable, no route, a name that
    does not resolve), as opposed to a connection that dropped in the middle."""
    seen: BaseException | None = exc
    for _ in range(10):
        if seen is None:
            return False
        if isinstance(seen, ConnectionRefusedError | socket.gaierror | urllib3.exceptions.NameResolutionError):
            return True
        if isinstance(seen, OSError) and seen.errno in NO_CONNECTION_ERRNOS:
            return True
        seen = seen.__cause__ or seen.__context__ or (seen.args[0] if seen.args and isinstance(
            seen.args[0], BaseException) else None) or getattr(seen, "reason", None)
    return False


UNREACHABLE_HINT = ("On a node without network, set HPCFAIR_OFFLINE=1 to run the pinned versions already in "
                    "the cache (owner/name@VERSION, or a bare name used here online before).")


def unreachable(endpoint: str, exc: BaseException) -> TransferError:
    """The error of a hub that cannot be reached, with what to do on a compute node."""
    why = "no connection can be made" if refused(exc) else type(exc).__name__
    return TransferError(f"Cannot reach the hub at {endpoint} ({why}); is it running? "
                         + UNREACHABLE_HINT, code="unreachable")


def offline_reference(info: dict[str, Any], name: str) -> str | None:
    """APA (``citation``, ``apa``) or BibTeX written from a cached version record, for ``cite`` offline; None
    for other styles (those the hub's CSL processor writes)."""
    meta = info.get("metadata") or {}
    people = [c.get("name", "") for c in meta.get("creators") or [] if isinstance(c, dict) and c.get("name")]
    year = str(info.get("created") or "")[:4] or "n.d."
    title = meta.get("title") or info.get("artifact", "")
    url = info.get("pid_url") or info.get("pid", "")
    if name in ("citation", "apa"):
        return f"{', '.join(people) or info.get('artifact', '')} ({year}). {title} (Version {info['version']}). " \
               f"HPCFair Hub. {url}\n"
    if name == "bibtex":
        key = re.sub(r"[^A-Za-z0-9]+", "_", f"{info.get('artifact', '')}_{info['version']}")
        return (f"@misc{{{key},\n  author = {{{' and '.join(people)}}},\n  title = {{{title}}},\n"
                f"  year = {{{year}}},\n  version = {{{info['version']}}},\n  publisher = {{HPCFair Hub}},\n"
                f"  url = {{{url}}}\n}}\n")
    return None


def offline_error(what: str) -> OfflineError:
    return OfflineError(f"HPCFAIR_OFFLINE is set, and {what}. Offline, the versions used once online, with their "
                        "files in the cache, can be used (owner/name@VERSION, a version's PID, or a bare owner/name: "
                        "the version it named when last used online); unset HPCFAIR_OFFLINE to ask the hub.",
                        code="offline")


class _Offline(requests.adapters.BaseAdapter):
    """The transport of an offline client: every request fails at once, before any connection."""

    def send(self, request, **kwargs: Any):  # noqa: ANN201 - requests' adapter interface
        raise offline_error(f"{request.method} {request.url} needs the network")

    def close(self) -> None:
        pass


def content_digest(sha256s) -> str:
    """A version's content identity, as the hub computes it: the sha256 of its files' sha256s, sorted and
    joined by newlines (independent of file names and order)."""
    return hashlib.sha256("\n".join(sorted(sha256s)).encode()).hexdigest()


def file_sha256(path: str | Path, progress: Callable[[int], None] | None = None) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(transfer.READ):
            digest.update(chunk)
            if progress is not None:
                progress(len(chunk))
    return digest.hexdigest()


def split_ref(ref: str) -> tuple[str, str]:
    """``owner/name[@version]`` -> (``owner/name``, version or ``latest``)."""
    name, _, label = ref.partition("@")
    return name, label or "latest"


def as_shown(ref: str) -> str:
    """The version to show or cite for ``ref``: ``owner/name`` without a version names the one its page opens on
    (``@current``: the newest upload, not the hub's conversion of it, which ``latest`` may be); a PID or a named
    version stays as it is."""
    ref = ref.strip()
    return ref if ref.lower().startswith("ark:") or "@" in ref or "/" not in ref else f"{ref}@current"


class HubClient:
    """A session with one hub. ``endpoint`` and ``token`` come from arguments, the environment
    (``HPCFAIR_ENDPOINT``, ``HPCFAIR_TOKEN``) or the login file ``~/.hpcfair``.

    ``offline`` (default: ``HPCFAIR_OFFLINE``): no request leaves this machine; pinned versions resolve from
    the cache's records and their files from its blobs, and anything else raises ``OfflineError`` at once."""

    def __init__(self, endpoint: str | None = None, token: str | None = None, *, retries: int = 5,
                 backoff: float = 0.5, timeout: float = 300.0, cache: Cache | str | Path | None = None,
                 offline: bool | None = None) -> None:
        chosen = settings.resolve(endpoint, token)
        self.offline = settings.offline() if offline is None else offline
        self.endpoint, self.token = chosen.endpoint, chosen.token if self.offline else device.current(chosen)
        self.retries, self.backoff, self.timeout = retries, backoff, timeout
        self.cache = cache if isinstance(cache, Cache) else Cache(cache)
        self.session = requests.Session()
        self.bare = requests.Session()  # presigned object-store URLs: never the hub's token
        if self.offline:
            for session in (self.session, self.bare):
                session.mount("http://", _Offline())
                session.mount("https://", _Offline())
        if self.token:
            self.session.headers["Authorization"] = f"Bearer {self.token}"

    def close(self) -> None:
        """Close the kept-alive connections (to the hub and to its object store)."""
        self.session.close()
        self.bare.close()

    # --- plumbing ---------------------------------------------------------------------------------

    def url(self, path: str) -> str:
        return path if path.startswith("http") else f"{self.endpoint}/api/v1/{path.lstrip('/')}"

    def request(self, method: str, path: str, *, retry: bool = True, patient: bool = False,
                **kwargs: Any) -> requests.Response:
        """One API call; raises the typed ``HubError`` for error answers. ``patient``: in the middle of a
        transfer, a refused connection (the hub restarting) is tried again as long as a dropped one."""
        if self.offline:
            raise offline_error(f"{method} {self.url(path)} needs the hub")
        kwargs.setdefault("timeout", self.timeout)
        try:
            response = self._with_retries(lambda: self.session.request(method, self.url(path), **kwargs), retry,
                                          patient)
        except DROPPED as exc:
            raise unreachable(self.endpoint, exc) from exc
        if response.status_code >= 400:
            raise from_response(response)
        return response

    def _with_retries(self, send: Callable[[], requests.Response], retry: bool = True,
                      patient: bool = False) -> requests.Response:
        """``send()`` again after 429/5xx answers and dropped connections, with exponential backoff; a
        refused connection (no server at the address) only for ``REFUSED_S``, so that a hub that is down
        is reported in about a second."""
        attempt, started = 0, time.monotonic()
        while True:
            try:
                response = send()
                if not retry or response.status_code not in RETRY_STATUSES or attempt >= self.retries:
                    return response
                wait = float(response.headers.get("Retry-After") or 0)
            except DROPPED as exc:
                if not retry or attempt >= self.retries or (not patient and refused(exc) and (
                        time.monotonic() - started + self.backoff * 2**attempt > REFUSED_S)):
                    raise
                wait = 0.0
            time.sleep(max(wait, self.backoff * 2**attempt))
            attempt += 1

    # --- who am I ---------------------------------------------------------------------------------

    def me(self) -> dict[str, Any]:
        return self.request("GET", "me").json()

    def create_token(self, username: str, password: str, *, scope: str = "write", name: str = "hpcfair") -> str:
        """A new API token for ``username`` (their password is sent once, over HTTP Basic)."""
        # not retried: a 429 here means sign-in is paused, and its detail says for how long
        response = self.request("POST", "tokens/", json={"scope": scope, "name": name}, auth=(username, password),
                                headers={"Authorization": None}, retry=False)
        return response.json()["token"]

    def create_limited_token(self, username: str, password: str, *, scope: str = "read", name: str = "hpcfair",
                             org: str | None = None, artifact: str | None = None) -> dict[str, Any]:
        """A new token with ``scope`` (read, infer, publish, admin), limited to one organization or one
        artifact (``owner/name``) when given; the answer holds the raw ``token`` (shown once)."""
        body = {"scope": scope, "name": name, **({"org": org} if org else {}),
                **({"artifact": artifact} if artifact else {})}
        return self.request("POST", "tokens/", json=body, auth=(username, password),
                            headers={"Authorization": None}, retry=False).json()

    # --- organizations ----------------------------------------------------------------------------

    def orgs(self, *, mine: bool = False) -> list[dict[str, Any]]:
        """Organizations (``mine``: those you are a member of, with your ``role``)."""
        return self.request("GET", "orgs/", params={"member": "me"} if mine else None).json()

    def org(self, name: str) -> dict[str, Any]:
        """One organization; ``members`` when you are one of them."""
        return self.request("GET", f"orgs/{quote(name, safe='')}/").json()

    def create_org(self, name: str, *, title: str = "", description: str = "") -> dict[str, Any]:
        """A new organization with you as its admin (its name shares the namespace of usernames)."""
        return self.request("POST", "orgs/", json={"name": name, "title": title, "description": description}).json()

    def org_members(self, name: str) -> list[dict[str, Any]]:
        return self.request("GET", f"orgs/{quote(name, safe='')}/members/").json()

    def set_member(self, org: str, username: str, role: str) -> dict[str, Any]:
        """Add ``username`` to ``org`` with ``role`` (read, write, admin), or change their role (admins)."""
        return self.request("PUT", f"orgs/{quote(org, safe='')}/members/{quote(username, safe='')}",
                            json={"role": role}).json()

    def remove_member(self, org: str, username: str) -> None:
        """Take ``username`` out of ``org`` (admins; anyone may leave, except the last admin)."""
        self.request("DELETE", f"orgs/{quote(org, safe='')}/members/{quote(username, safe='')}")

    def transfer_artifact(self, owner_name: str, to: str) -> dict[str, Any]:
        """Give ``owner/name`` to ``to`` (you, or an organization you write in); PIDs keep resolving."""
        return self.request("POST", f"artifacts/{owner_name}/transfer", json={"to": to}).json()

    # --- files access: grants, access requests ------------------------------------------------------

    def files_access(self, owner_name: str, version: str = "latest") -> dict[str, Any]:
        """A version's files access (open, restricted, embargoed), whether you may read them, and your grant."""
        return self.request("GET", f"artifacts/{owner_name}/versions/{version}/access").json()

    def access_policy(self, owner_name: str) -> dict[str, Any]:
        """What a request for ``owner/name`` must say: ``fields``, ``terms``, ``auto_approve``."""
        return self.request("GET", f"artifacts/{owner_name}/access-policy").json()

    def request_access(self, owner_name: str, purpose: str, answers: dict[str, str] | None = None, *,
                       agree_terms: bool = False) -> dict[str, Any]:
        """Ask for the restricted files of ``owner/name``; the answer's ``state`` is pending or approved."""
        body = {"purpose": purpose, "answers": answers or {}, "agree_terms": agree_terms}
        return self.request("POST", f"artifacts/{owner_name}/access-requests", json=body, retry=False).json()

    def access_requests(self, owner_name: str) -> list[dict[str, Any]]:
        """The requests for ``owner/name`` (its admins: all of them; anyone else: their own)."""
        return self.request("GET", f"artifacts/{owner_name}/access-requests").json()

    def decide_access(self, owner_name: str, request_id: int, approve: bool, message: str = "") -> dict[str, Any]:
        body = {"decision": "approve" if approve else "refuse", "message": message}
        return self.request("POST", f"artifacts/{owner_name}/access-requests/{request_id}", json=body,
                            retry=False).json()

    def grants(self, owner_name: str) -> list[dict[str, Any]]:
        """The grants on ``owner/name`` (its admins: all; anyone else: their own)."""
        return self.request("GET", f"artifacts/{owner_name}/grants/").json()

    def grant(self, owner_name: str, username: str, expires: str | None = None) -> dict[str, Any]:
        return self.request("POST", f"artifacts/{owner_name}/grants/", json={"user": username, "expires": expires},
                            retry=False).json()

    def revoke_grant(self, owner_name: str, grant_id: int) -> None:
        self.request("DELETE", f"artifacts/{owner_name}/grants/{grant_id}", retry=False)

    # --- artifacts --------------------------------------------------------------------------------

    def search(self, q: str = "", **filters: Any) -> list[dict[str, Any]]:
        return self.search_page(q, **filters)["results"]

    def search_page(self, q: str = "", **filters: Any) -> dict[str, Any]:
        """One page of results with ``count`` and ``facets``."""
        return self.request("GET", "artifacts/", params={"q": q, **filters}).json()

    def artifact(self, owner_name: str) -> dict[str, Any]:
        return self.request("GET", f"artifacts/{owner_name}/").json()

    def versions(self, owner_name: str) -> list[dict[str, Any]]:
        data = self.request("GET", f"artifacts/{owner_name}/versions/").json()
        return data["results"] if isinstance(data, dict) else data

    def resolve(self, ref: str) -> dict[str, Any]:
        """The version a PID (``ark:/…``) or ``owner/name[@version]`` names. Its record is kept in the cache
        (refreshed on each call: derivatives appear later), which is where an offline client reads it."""
        ref = ref.strip()
        pinned = ref.lower().startswith("ark:") or "@" in ref and split_ref(ref)[1] not in ("latest", "current")
        if self.offline:
            info = self.cache.version("ark:/" + ref[4:].lstrip("/") if ref.lower().startswith("ark:") else ref)
            if info is None and not pinned:  # a bare name: the version it last named online
                info = self.cache.version(ref.partition("@")[0])
            if info is None:
                raise offline_error(f"{ref} is not in the cache" if pinned else
                                    f"{ref} was not used on this machine online (offline, a bare name is the "
                                    "version it named when last used online)")
            return info
        info = self.request("GET", "resolve", params={"ref": ref}).json()
        self.cache.save_version(info)
        if not pinned:
            self.cache.remember(ref, info)
            self.cache.remember(ref.partition("@")[0], info)
        return info

    def create_artifact(self, kind: str, name: str, **fields: Any) -> dict[str, Any]:
        return self.request("POST", "artifacts/", json={"kind": kind, "name": name, **fields}).json()

    def create_version(self, owner_name: str, files: dict[str, str | Path | Remote], *, version: str = "",
                       metadata: dict[str, Any] | None = None,
                       provenance: list[dict[str, str]] | None = None,
                       new_artifact: dict[str, Any] | None = None) -> dict[str, Any]:
        """Publish a version from local files ({path in version: local path}), via resumable uploads, and
        ``Remote`` ones the hub reads itself (data by reference, fetched URLs);
        ``new_artifact`` ({kind, visibility, title, description}) creates the artifact with it, or neither.

        The files are hashed first and the hub asked whether a version you can see holds exactly them: if so,
        ``DuplicateVersionError`` (as the hub would answer after the upload) and not a byte is sent."""
        remote = {name: self.remote_upload(**source.wire()) for name, source in files.items()
                  if isinstance(source, Remote)}
        files = {name: local for name, local in files.items() if name not in remote}
        total = sum(Path(local).stat().st_size for local in files.values())
        with bar(total=total, desc="hash files", unit="B") as shown:
            sha256s = {name: file_sha256(local, shown.update) for name, local in files.items()}
        answer = None if remote else self._by_content(sha256s.values())  # a referenced folder: files not known
        if answer is not None:
            found = answer.json()
            existing = f"{found['artifact']}@{found['version']}"
            raise DuplicateVersionError(f"These files are identical to {existing} ({found['pid']}); it is already "
                                        "in the hub.", code="duplicate_version", status=409,
                                        request_id=answer.headers.get("X-Request-ID"),
                                        body={"code": "duplicate_version", "existing_pid": found["pid"],
                                              "existing": existing})
        items = [{"path": name, "upload": self.upload_file(local, sha256=sha256s[name])["id"]}
                 for name, local in files.items()] + [{"path": name, "upload": up["id"]} for name, up in remote.items()]
        body = {"version": version, "metadata": metadata or {}, "files": items, "provenance": provenance or []}
        if new_artifact is not None:
            body["artifact"] = new_artifact
        return self.request("POST", f"artifacts/{owner_name}/versions/", json=body).json()

    def duplicate_of(self, sha256s) -> dict[str, Any] | None:
        """The version you can see whose files have exactly these sha256s (``resolve?content=``), or None;
        also None from a hub too old to be asked (it then answers ``duplicate_version`` after the upload)."""
        answer = self._by_content(sha256s)
        return answer.json() if answer is not None else None

    def _by_content(self, sha256s) -> requests.Response | None:
        try:
            return self.request("GET", "resolve", params={"content": content_digest(sha256s)})
        except (NotFoundError, ValidationError):
            return None

    def publish(self, name: str, files: dict[str, str | Path], metadata: dict[str, Any], *, kind: str = "model",
                visibility: str = "public", version: str = "", reuse_duplicate: bool = False,
                provenance: list[dict[str, str]] | None = None, owner: str | None = None) -> dict[str, Any]:
        """Create ``name`` (yours; ``owner`` is your username when already known) if it does not exist and
        publish a version of it. A ``private`` version is never added to a public artifact.

        With ``reuse_duplicate``, files identical to a version you can see return that version instead of
        an error."""
        owner = owner or self.me().get("username")
        if not owner:
            raise NotAuthenticatedError("Publishing needs a token: run 'hpcfair login' or set HPCFAIR_TOKEN.",
                                        code="not_authenticated", status=401)
        full_name = f"{owner}/{name}"
        new = None
        try:
            existing = self.artifact(full_name)
        except NotFoundError:  # created with its first version, or not at all
            new = {"kind": kind, "visibility": visibility, "title": str(metadata.get("title", ""))[:300],
                   "description": str(metadata.get("description", ""))[:20000]}
        else:
            if existing["kind"] != kind:
                raise ConflictError(f"{full_name} is a {existing['kind']}, not a {kind}.", code="conflict",
                                    status=409)
            if visibility == "private" and existing["visibility"] == "public":
                raise ConflictError(f"{full_name} is public, so a new version of it would be public too.",
                                    code="visibility_mismatch", status=409, body={"artifact": full_name})
        try:
            return self.create_version(full_name, files, version=version, metadata=metadata, provenance=provenance,
                                       new_artifact=new)
        except ConflictError as exc:
            if reuse_duplicate and exc.code == "duplicate_version" and exc.body.get("existing_pid"):
                return self.resolve(exc.body["existing_pid"])
            raise

    def export(self, info: dict[str, Any], name: str, **params: str) -> requests.Response:
        """A version's metadata export (``info`` as ``resolve`` returns it): jsonld, croissant, bibtex, …"""
        return self.request("GET", f"artifacts/{info['artifact']}/versions/{info['version']}/metadata/{name}",
                            params=params or None)

    def cite(self, ref: str, style: str = "citation") -> str:
        """A reference to a version in any CSL style by its name (``apa``, ``chicago-author-date`` or
        ``chicago``, ``ieee``, ``harvard``, ``nature``, …; ``citation`` is APA), or any export by name
        (``bibtex``, ``csl-json``, ``ris``, …; ``datacite`` stands for ``datacite-json``). ``owner/name`` alone
        cites the version its page opens on (``as_shown``)."""
        info = self.resolve(as_shown(ref))
        name = {"datacite": "datacite-json"}.get(style, style)
        key = f"cite {info['pid']} {name}"
        if self.offline:  # the reference as the hub wrote it when this version was cited online
            kept = self.cache.text(key) or offline_reference(info, name)
            if kept is None:
                raise offline_error(f"{info['artifact']}@{info['version']} was never cited as {style} on this "
                                    "machine online (offline, APA and BibTeX are written from the cached record)")
            return kept
        text = (self.export(info, name) if name in EXPORT_NAMES else self.export(info, "citation", style=style)).text
        self.cache.save_text(key, text)
        return text

    # --- jobs, conversion, inference ----------------------------------------------------------------

    def jobs(self, **filters: str) -> list[dict[str, Any]]:
        data = self.request("GET", "jobs/", params=filters).json()
        return data["results"] if isinstance(data, dict) else data

    def job(self, job_id: str) -> dict[str, Any]:
        return self.request("GET", f"jobs/{job_id}/").json()

    def cancel(self, job: str | dict[str, Any]) -> dict[str, Any]:
        """Cancel a queued or running job (yours, or one on your artifact); returns the job. A running job
        stops shortly after: ``wait(job, raise_on_failure=False)`` until its state is ``cancelled``."""
        job_id = job["id"] if isinstance(job, dict) else job
        return self.request("POST", f"jobs/{job_id}/cancel").json()

    def wait(self, job: str | dict[str, Any], *, timeout: float = 3600.0, poll: float = 0.5,
             raise_on_failure: bool = True) -> dict[str, Any]:
        """Poll a job until it ends; on a terminal its new log lines (stages, epochs) show as they come, under
        them a bar of its progress. A failed job raises ``JobError``."""
        job_id = job["id"] if isinstance(job, dict) else job
        deadline = time.monotonic() + timeout
        current = self.job(job_id)
        what = f"{current.get('kind') or 'job'} {str(job_id)[:8]}"
        logged = JobLog(what)
        with bar(total=100, desc=what, unit="%") as shown:
            while True:
                logged.show(current)
                shown.update(round(100 * (current.get("progress") or 0)) - shown.n)
                if current["state"] in FINISHED:
                    took = f" in {current['duration']:.1f} s" if current.get("duration") else ""
                    say(what, f"{current['state']}{took}")
                    break
                if time.monotonic() > deadline:
                    raise JobError(f"Job {job_id} did not finish in {timeout:g} s (state {current['state']}).",
                                   code="job_timeout")
                time.sleep(poll)
                current = self.job(job_id)
        if raise_on_failure and current["state"] != "succeeded":
            raise JobError(f"Job {job_id} {current['state']}: {current.get('error_detail') or 'no detail'}",
                           code=current.get("error_code") or "job_failed", body=current)
        return current

    def convert(self, ref: str, *, opset: int | None = None, files: list[str] | None = None, to: str = "onnx",
                gguf_type: str | None = None) -> dict[str, Any]:
        """Ask the hub to convert a version to ONNX, or (``to="gguf"``, ``gguf_type`` q8_0 by default) a language
        model to a GGUF file for llama.cpp; returns the job (``wait`` for it)."""
        info = self.resolve(ref)
        body: dict[str, Any] = {"opset": opset} if opset else {}
        if files:
            body["files"] = files
        if to != "onnx":
            body.update({"to": to, **({"gguf_type": gguf_type} if gguf_type else {})})
        return self.request("POST", f"artifacts/{info['artifact']}/versions/{info['version']}/convert",
                            json=body).json()

    def container(self, ref: str) -> dict[str, Any] | None:
        """The MLCube of a model version (its cube version), or None when the hub has none yet."""
        info = self.resolve(ref)
        try:
            return self.request("GET", f"artifacts/{info['artifact']}/versions/{info['version']}/container").json()
        except NotFoundError:
            return None

    def build_container(self, ref: str, *, build: str = "auto", tasks: list[str] | None = None) -> dict[str, Any]:
        """Ask the hub to make (``build``: yes, auto, no) a version's MLCube; returns the job."""
        info = self.resolve(ref)
        return self.request("POST", f"artifacts/{info['artifact']}/versions/{info['version']}/container",
                            json={"build": build, **({"tasks": tasks} if tasks else {})}).json()

    def optimize(self, ref: str, *, file: str = "", quantize: bool = True, precision: str | None = None
                 ) -> dict[str, Any]:
        """Ask the hub to optimise an ONNX file, or (``precision`` int8, int4) to build a language model's smaller
        generation model; returns the job."""
        info = self.resolve(ref)
        body = {"quantize": quantize, **({"file": file} if file else {}),
                **({"precision": precision} if precision else {})}
        return self.request("POST", f"artifacts/{info['artifact']}/versions/{info['version']}/optimize",
                            json=body).json()

    def infer(self, ref: str, inputs: dict[str, Any], **options: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        """Run one model on the hub: (outputs, info), or ({}, job) when the hub answered with a job.

        ``options``: device, threads, mode, if_no_worker, outputs, file, dataset, dataset_file, batch_size,
        account (the Slurm account a job is billed to)."""
        import numpy as np

        owner_name, label = split_ref(ref) if not ref.startswith("ark:") else self._named(ref)
        buffer = io.BytesIO()
        np.savez(buffer, **inputs)
        params = {key: (",".join(v) if isinstance(v, list) else v) for key, v in options.items() if v not in (None, "")}
        response = self.request("POST", f"artifacts/{owner_name}/versions/{label}/infer", data=buffer.getvalue(),
                                params={**params, "output_format": "npz"}, headers={"Content-Type": NPZ})
        return self._outputs(response)

    def generate(self, ref: str, *, prompt: str | None = None, messages: list[dict[str, str]] | None = None,
                 **options: Any) -> Iterator[dict[str, Any]]:
        """Generate text with a language model on the hub, as it comes: ``{"text": …}`` pieces, then the
        totals (``{"done": True, "finish_reason": …, "prompt_tokens": …, "completion_tokens": …}``).

        ``options``: max_new_tokens, temperature (0: greedy), top_p, top_k, seed, stop, device."""
        owner_name, label = split_ref(ref) if not ref.startswith("ark:") else self._named(ref)
        body = {"prompt": prompt} if messages is None else {"messages": messages}
        body.update({key: value for key, value in options.items() if value is not None})
        response = self.request("POST", f"artifacts/{owner_name}/versions/{label}/generate", json=body, stream=True,
                                timeout=(self.timeout, None))
        with response:
            for name, data in server_events(response.iter_lines(decode_unicode=True)):
                if name == "error":
                    raise HubError(data.get("detail", "The generation failed."), code=data.get("code", ""))
                yield {"done": True, **data} if name == "done" else data

    def collaborate(self, refs: list[str], inputs: dict[str, Any] | None, **options: Any
                    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Run a chain of models on the hub (or merge it: ``merge=True`` gives a job)."""
        body: dict[str, Any] = {"models": refs, "output_format": "npz",
                                **{k: v for k, v in options.items() if v not in (None, "")}}
        if inputs is not None:
            body["inputs"] = {name: value.tolist() for name, value in inputs.items()}
        return self._outputs(self.request("POST", "collaborate", json=body))

    def _named(self, pid: str) -> tuple[str, str]:
        info = self.resolve(pid)
        return info["artifact"], info["version"]

    @staticmethod
    def _outputs(response: requests.Response) -> tuple[dict[str, Any], dict[str, Any]]:
        if response.status_code == 202:
            return {}, response.json()
        import numpy as np

        with np.load(io.BytesIO(response.content), allow_pickle=False) as archive:
            outputs = {name: archive[name] for name in archive.files}
        info = {"device": response.headers.get("X-Hub-Device", ""), "provider": response.headers.get("X-Hub-Provider"),
                "model": response.headers.get("X-Hub-Model", ""), "request_id": response.headers.get("X-Request-ID")}
        return outputs, info

    # --- transfers --------------------------------------------------------------------------------

    def upload_file(self, path: str | Path, *, sha256: str | None = None,
                    chunk_size: int = CHUNK_SIZE) -> dict[str, Any]:
        """Send a file through a resumable upload session (straight to the object store where the hub
        offers it); the sha256 is computed while the bytes go. Returns the completed upload."""
        path = Path(path)
        body: dict[str, Any] = {"size": path.stat().st_size, "filename": path.name, "direct": True}
        if sha256:
            body["expected_sha256"] = sha256
        upload = self.request("POST", "uploads/", json=body).json()
        return self.resume_upload(upload["url"], path, chunk_size=chunk_size)

    def remote_upload(self, *, reference: str = "", fetch: str = "", timeout: float = 24 * 3600.0) -> dict[str, Any]:
        """An upload the hub fills itself: ``reference`` (a path under a root the hub declares, or s3://; the bytes
        stay there and the hub reads them once for size and sha256) or ``fetch`` (a URL of an allowed site the hub
        copies). Waits for its job; returns the completed upload."""
        body = {"reference": reference} if reference else {"fetch": fetch}
        opened = self.request("POST", "uploads/", json=body).json()
        self.wait(opened["job"], timeout=timeout)
        return self.request("GET", opened["url"], patient=True).json()

    def resume_upload(self, upload_url: str, path: str | Path, *, chunk_size: int = CHUNK_SIZE) -> dict[str, Any]:
        """Send what the hub (or its object store) does not hold yet of an open upload, then complete it."""
        path = Path(path)
        size = path.stat().st_size
        state = self.request("GET", upload_url, patient=True).json()
        hashed = transfer.PrefixHash(path)
        try:
            with open(path, "rb") as handle, bar(total=size, desc=f"upload {path.name}", unit="B") as shown:
                if state.get("multipart"):
                    self._send_parts(upload_url, state["multipart"], handle, size, hashed, shown)
                else:
                    self._send_chunks(upload_url, handle, size, hashed, shown, chunk_size)
            digest = hashed.hexdigest(size)
        finally:
            hashed.hasher.close()
        return self.request("POST", f"{upload_url}/complete", json={"sha256": digest}, patient=True).json()

    def _send_chunks(self, upload_url: str, handle, size: int, hashed: transfer.PrefixHash, shown,
                     chunk_size: int) -> None:
        """Through the hub: chunks in order, each streamed from the file with ``Content-Range``. The hub
        answers each with the bytes it holds, so it is asked (``GET``) only at the start and after a
        failure: a cut keeps what arrived, and the next chunk starts there."""
        failures = 0
        offset = None
        while True:
            if offset is None:
                offset = self.request("GET", upload_url, patient=True).json()["offset"]
            shown.update(offset - shown.n)
            if offset >= size:
                return
            end = min(offset + chunk_size, size)
            body = transfer.FileBody(handle, offset, end - offset, hashed.feed)
            try:
                response = self.session.put(self.url(upload_url), data=body, timeout=self.timeout,
                                            headers={"Content-Range": f"bytes {offset}-{end - 1}/{size}",
                                                     "Content-Type": "application/octet-stream"})
                if 400 <= response.status_code < 500 and response.status_code != 429:
                    error = from_response(response)
                    held = error.body.get("offset") if error.code in MOVED_ON else None
                    if not isinstance(held, int) or held < 0:
                        raise error
                    # The hub took other bytes meanwhile (a cut chunk it stored after this client asked, on
                    # another web node perhaps): go on from what it says it holds.
                    offset = held
                    failures += 1
                    if failures > self.retries:
                        raise error
                    continue
                if response.status_code < 400:
                    offset = int(response.headers.get("Upload-Offset", end))
                    continue
            except DROPPED:
                pass
            offset = None
            failures += 1
            if failures > self.retries:
                raise TransferError(f"upload of {getattr(handle, 'name', 'the file')} failed after {failures} tries; "
                                    "run it again to resume", code="transfer_failed")
            time.sleep(self.backoff * 2 ** (failures - 1))

    def _send_parts(self, upload_url: str, multipart: dict[str, Any], handle, size: int,
                    hashed: transfer.PrefixHash, shown) -> None:
        """Straight to the object store: parts over several connections by presigned URLs (asked for in
        batches, asked again when they expire); parts it holds already are only hashed."""
        part_size, count = multipart["part_size"], multipart["part_count"]
        received = set(multipart["parts_received"])
        todo = [n for n in range(1, count + 1) if n not in received]
        urls: dict[int, str] = {}
        lock = threading.Lock()

        def url_for(number: int, stale: str | None = None) -> str:
            with lock:
                if number not in urls or urls[number] == stale:
                    batch = [n for n in todo if n >= number][:100]
                    answer = self.request("POST", f"{upload_url}/parts", json={"numbers": batch},
                                          patient=True).json()
                    urls.update({int(n): url for n, url in answer["urls"].items()})
                return urls[number]

        def produce(index: int) -> bytes:
            number, offset = index + 1, index * part_size
            data = os.pread(handle.fileno(), min(part_size, size - offset), offset)
            if number in received:
                return data
            failures, url = 0, url_for(number)
            while True:
                try:
                    response = self.bare.put(url, data=data, timeout=self.timeout)
                    if response.status_code < 300:
                        return data
                    if response.status_code in (400, 403):  # expired: a fresh URL
                        url = url_for(number, stale=url)
                    elif response.status_code not in RETRY_STATUSES:
                        raise TransferError(f"the object store refused part {number}: {response.status_code} "
                                            f"{response.text[:200]}", code="transfer_failed")
                except DROPPED:
                    pass
                failures += 1
                if failures > self.retries:
                    raise TransferError(f"part {number} failed after {failures} tries; run it again to resume",
                                        code="transfer_failed")
                time.sleep(self.backoff * 2 ** (failures - 1))

        def consume(index: int, data: bytes) -> None:
            hashed.feed(index * part_size, data)
            shown.update(len(data))

        transfer.in_order(count, produce, consume, transfer.CONNECTIONS)

    def file_info(self, owner_name: str, version: str, path: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """(the version, the file's entry: path, size, sha256, download_url)."""
        info = (self.resolve(f"{owner_name}@{version}") if self.offline
                else self.request("GET", f"artifacts/{owner_name}/versions/{version}/").json())
        meta = next((f for f in info["files"] if f["path"] == path), None)
        if meta is None:
            raise NotFoundError(f"{owner_name}@{info['version']} has no file {path!r}; it has "
                                f"{', '.join(f['path'] for f in info['files'])}.", code="not_found", status=404)
        return info, meta

    def download_file(self, owner_name: str, version: str, path: str, dest: str | Path, *,
                      cache: bool = True) -> Path:
        """Download one file to ``dest`` through the cache (a cache hit sends no bytes); with
        ``cache=False`` straight to ``dest`` (resuming ``dest.incomplete``), for files used once."""
        info, meta = self.file_info(owner_name, version, path)
        url = self.url(f"artifacts/{owner_name}/versions/{info['version']}/files/{quote(path)}")
        if not cache:
            return self.transfer(url, meta["sha256"], meta["size"], Path(dest), label=path)
        self.fetch(url, meta["sha256"], meta["size"], label=path)
        return self.cache.copy_out(meta["sha256"], dest)

    def download(self, ref: str, dest_dir: str | Path, files: list[str] | None = None) -> list[Path]:
        """Download a version's files (or some of them) under ``dest_dir``, keeping their paths."""
        info = self.resolve(ref)
        wanted = [f for f in info["files"] if not files or f["path"] in files]
        missing = sorted(set(files or []) - {f["path"] for f in wanted})
        if missing:
            raise NotFoundError(f"{info['artifact']}@{info['version']} has no file {missing[0]!r}.", code="not_found",
                                status=404)
        total = sum(item["size"] for item in wanted)
        with bar(total=total, desc=f"download {info['artifact']}@{info['version']}", unit="B") as shown, \
                ThreadPoolExecutor(max_workers=PARALLEL_FILES, thread_name_prefix="download") as pool:
            def one(item: dict[str, Any]) -> Path:
                self.fetch_item(item, progress=shown.update)
                return self.cache.copy_out(item["sha256"], Path(dest_dir) / item["path"])
            return list(pool.map(one, wanted))

    def cached(self, item: dict[str, Any]) -> Path:
        """The cache path of a file entry of a version (fetched if not cached yet)."""
        return self.fetch_item(item)

    def fetch_item(self, item: dict[str, Any], progress: Callable[[int], None] | None = None) -> Path:
        """A version's file entry in the cache. Data by reference (``location``) is read where it lives when this
        machine mounts it (a login node of the site), else through the hub; where neither can read it, the error
        says where the data lives."""
        location = item.get("location") or ""
        if location.startswith("/") and os.access(location, os.R_OK) and (hit := self._from_location(item)):
            if progress is not None:
                progress(item["size"])
            return hit
        try:
            return self.fetch(item["download_url"], item["sha256"], item["size"], label=item["path"],
                              progress=progress)
        except HubError as exc:
            if not location:
                raise
            here = "" if location.startswith("s3://") else f" This machine cannot read {location} either: run the " \
                                                          "download where that file system is mounted."
            raise type(exc)(f"{item['path']} is data by reference at {location}, and the hub could not serve it: "
                            f"{exc.message}{here}", code=exc.code, status=exc.status, request_id=exc.request_id,
                            body=exc.body) from None

    def _from_location(self, item: dict[str, Any]) -> Path | None:
        """A referenced file read from this machine's own mount into the cache, its size and sha256 checked (None
        when they differ from the record: the hub then says what changed)."""
        target = self.cache.path(item["sha256"])
        if hit := self.cache.get(item["sha256"]):
            return hit
        partial = target.with_name(target.name + ".incomplete")
        partial.parent.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        with open(item["location"], "rb") as source, open(partial, "wb") as out:
            while block := source.read(CHUNK_SIZE):
                digest.update(block)
                out.write(block)
        if digest.hexdigest() != item["sha256"] or partial.stat().st_size != item["size"]:
            partial.unlink()
            return None
        partial.replace(target)
        return target

    def fetch(self, url: str, sha256: str, size: int, *, label: str = "",
              progress: Callable[[int], None] | None = None) -> Path:
        """The cached blob ``sha256``, downloaded from ``url`` when missing."""
        if hit := self.cache.get(sha256):
            if progress is not None:
                progress(size)
            return hit
        if self.offline:
            raise offline_error(f"{label or sha256} (sha256 {sha256[:12]}…) is not in the cache ({self.cache.root})")
        return self.transfer(url, sha256, size, self.cache.path(sha256), label=label, progress=progress)

    def transfer(self, url: str, sha256: str, size: int, target: Path, *, label: str = "",
                 progress: Callable[[int], None] | None = None) -> Path:
        """Download ``url`` to ``target`` through ``target.incomplete`` (resumed with ``Range``; large files
        over several connections); the size and sha256 are checked before ``target`` appears."""
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".incomplete")
        hub_url = self.url(url)
        source = transfer.Source(lambda target_url, headers: self._get_bytes(source, hub_url, target_url, headers),
                                 hub_url, refresh=lambda: hub_url, retries=self.retries, backoff=self.backoff)
        with bar(total=size, desc=f"download {label or sha256[:12]}", unit="B", disable=progress is not None) as shown:
            try:
                transfer.download(source, size, sha256, partial, progress or shown.update)
            except transfer.TransferFailed as exc:
                raise TransferError(f"download of {label or url}: {exc}", code=exc.code)
        partial.replace(target)
        return target

    def _get_bytes(self, source: transfer.Source, hub_url: str, url: str, headers: dict[str, str]
                   ) -> requests.Response:
        """One GET of a download. The hub may redirect to a presigned object-store URL: it is fetched without
        the hub's token, and the next blocks go there directly (``source.url``)."""
        if url != hub_url:
            return self.bare.get(url, headers=headers, stream=True, timeout=self.timeout)
        response = self.session.get(url, headers=headers, stream=True, allow_redirects=False, timeout=self.timeout)
        if response.is_redirect:
            location = response.headers["Location"]
            response.close()
            source.url = location
            return self.bare.get(location, headers=headers, stream=True, timeout=self.timeout)
        if response.status_code >= 400 and response.status_code not in RETRY_STATUSES:
            raise from_response(response)
        return response


def server_events(lines: Iterator[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(event name, JSON data) of each server-sent event in ``lines`` ("message" when it names none)."""
    import json

    name, data = "message", []
    for line in lines:
        if not line:
            if data:
                yield name, json.loads("\n".join(data))
            name, data = "message", []
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())
    if data:
        yield name, json.loads("\n".join(data))
