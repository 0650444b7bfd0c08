"""OAI-PMH 2.0 at ``/oai``: institutional harvesters collect the public versions of the hub.

Verbs: Identify, ListMetadataFormats, ListSets, ListIdentifiers, ListRecords, GetRecord. Formats:
``oai_dc``, ``oai_datacite`` and ``dcat`` (DCAT-AP, RDF/XML). Sets: ``kind:model``, ``kind:dataset``,
``kind:project``, and ``owner:{username}`` for each owner with public records. Deleted
versions stay as deleted records (``deletedRecord`` is persistent); private artifacts never appear.
Lists page with resumption tokens that carry their own state (no server-side session).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlparse
from xml.etree import ElementTree as ET

from django.conf import settings
from django.core import signing
from django.db.models import Min, Q
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from hub.metadata.services import version_record
from hub.registry.access import Viewer
from hub.registry.models import Artifact, Version
from ontology import exports
from ontology.exports import DATACITE_NS

OAI = "http://www.openarchives.org/OAI/2.0/"
OAI_DC = "http://www.openarchives.org/OAI/2.0/oai_dc/"
DC = "http://purl.org/dc/elements/1.1/"
XSI = "http://www.w3.org/2001/XMLSchema-instance"
OAI_DATACITE = "http://schema.datacite.org/oai/oai-1.1/"
OAI_IDENTIFIER = "http://www.openarchives.org/OAI/2.0/oai-identifier"
RDF_NS = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"


def offered() -> dict[str, tuple[str, exports.OaiFormat]]:
    """metadataPrefix -> (export name, how OAI-PMH offers it): the exports that say OAI-PMH offers them
    (``ontology.exports``), oai_dc (the one every repository must offer) first."""
    found = {f.oai.prefix: (name, f.oai) for name, f in exports.FORMATS.items() if f.oai}
    return dict(sorted(found.items(), key=lambda item: item[0] != "oai_dc"))


SETS = {f"kind:{kind}": f"{kind.capitalize()}s" for kind in ("model", "dataset", "project")}
OWNER_SET = "owner:"
# What a setSpec part may hold (OAI-PMH's setSpecType); a username with other characters (@, +) has no set.
SET_PART_RE = re.compile(r"^[A-Za-z0-9\-_.!~*'()]+$")
VERB_ARGUMENTS = {
    "Identify": (set(), set()),
    "ListMetadataFormats": (set(), {"identifier"}),
    "ListSets": (set(), {"resumptionToken"}),
    "ListIdentifiers": ({"metadataPrefix"}, {"from", "until", "set", "resumptionToken"}),
    "ListRecords": ({"metadataPrefix"}, {"from", "until", "set", "resumptionToken"}),
    "GetRecord": ({"identifier", "metadataPrefix"}, set()),
}
PREFIXES = {"oai_dc": OAI_DC, "dc": DC, "xsi": XSI, "oai_datacite": OAI_DATACITE, "datacite": DATACITE_NS,
            "rdf": RDF_NS, "dcat": "http://www.w3.org/ns/dcat#", "dct": "http://purl.org/dc/terms/",
            "foaf": "http://xmlns.com/foaf/0.1/", "spdx": "http://spdx.org/rdf/terms#",
            "oai-identifier": OAI_IDENTIFIER}


class OaiError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def _q(namespace: str, tag: str) -> str:
    """OAI's own elements stay unqualified under the root's default ``xmlns``; others get prefixes."""
    return tag if namespace == OAI else f"{{{namespace}}}{tag}"


def _sub(parent: ET.Element, tag: str, text: str | None = None, namespace: str = OAI, **attrs: str) -> ET.Element:
    element = ET.SubElement(parent, _q(namespace, tag), attrs)
    if text is not None:
        element.text = text
    return element


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_date(value: str, name: str, end: bool) -> datetime:
    for fmt in ("%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%d"):
        try:
            parsed = datetime.strptime(value, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
        if fmt == "%Y-%m-%d" and end:
            parsed = parsed.replace(hour=23, minute=59, second=59)
        return parsed
    raise OaiError("badArgument", f"{name} must be YYYY-MM-DD or YYYY-MM-DDThh:mm:ssZ, not {value!r}.")


# The oai-identifier scheme's repositoryIdentifier: a domain name, each label starting with a letter.
REPOSITORY_ID_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9-]*(\.[a-zA-Z][a-zA-Z0-9-]*)+$")


def repository_id(host: str | None = None) -> str:
    """``HUB_OAI_REPOSITORY_ID``, else the public host, when it is a valid domain name; else a valid name made
    from it (``127.0.0.1`` -> ``h-127-0-0-1.local``): an IP address or ``localhost`` is not one."""
    if host is None:
        host = settings.HUB_OAI_REPOSITORY_ID or urlparse(settings.HUB_PUBLIC_URL).hostname or "localhost"
    if REPOSITORY_ID_RE.match(host):
        return host.lower()
    label = re.sub(r"[^a-zA-Z0-9]+", "-", host).strip("-").lower() or "hub"
    return f"{label if label[0].isalpha() else 'h-' + label}.local"


def oai_identifier(version: Version) -> str:
    return f"oai:{repository_id()}:{version.pid}"


def _harvestable():
    """Versions of artifacts that are public (deleted ones included, as deleted records)."""
    return (Version.objects.filter(artifact__visibility=Artifact.Visibility.PUBLIC)
            .select_related("artifact__owner").prefetch_related("files", "provenance__target__artifact__owner")
            .order_by("pk"))


def _is_deleted(version: Version) -> bool:
    return version.is_deleted or version.artifact.deleted_at is not None


def _datestamp(version: Version) -> datetime:
    return version.deleted_at or version.artifact.deleted_at or version.created


# --- tokens -------------------------------------------------------------------------------------------


_SIGNING_SALT = "hub.metadata.oai.resumptionToken"
_TOKEN_FIELDS = {"prefix": str, "from": str, "until": str, "set": str, "after": int, "cursor": int}


def _encode_token(state: dict[str, Any]) -> str:
    """The state of a list, signed with the hub's secret key: a harvester hands it back unchanged."""
    return signing.dumps(state, salt=_SIGNING_SALT, compress=True)


def _decode_token(token: str) -> dict[str, Any]:
    """A token this hub issued, its fields of the types the hub wrote; badResumptionToken for anything else
    (forged, altered, or from a hub with another secret key)."""
    try:
        state = signing.loads(token, salt=_SIGNING_SALT)
    except (signing.BadSignature, ValueError, TypeError):
        state = None
    if (not isinstance(state, dict) or set(state) != set(_TOKEN_FIELDS)
            or not all(type(state[k]) is kind for k, kind in _TOKEN_FIELDS.items())
            or state["prefix"] not in offered() or state["after"] < 0 or state["cursor"] < 0):
        raise OaiError("badResumptionToken", "The resumption token is not one this hub issued.")
    return state


# --- verbs --------------------------------------------------------------------------------------------


def _identify(root: ET.Element, args: dict[str, str]) -> None:
    node = _sub(root, "Identify")
    _sub(node, "repositoryName", "HPCFair Hub")
    _sub(node, "baseURL", settings.HUB_PUBLIC_URL + "/oai")
    _sub(node, "protocolVersion", "2.0")
    _sub(node, "adminEmail", settings.HUB_ADMIN_EMAIL)
    earliest = _harvestable().aggregate(first=Min("created"))["first"] or timezone.now()
    _sub(node, "earliestDatestamp", _stamp(earliest))
    _sub(node, "deletedRecord", "persistent")
    _sub(node, "granularity", "YYYY-MM-DDThh:mm:ssZ")
    described = _sub(_sub(node, "description"), "oai-identifier", namespace=OAI_IDENTIFIER, **{
        _q(XSI, "schemaLocation"): f"{OAI_IDENTIFIER} http://www.openarchives.org/OAI/2.0/oai-identifier.xsd"})
    sample = _harvestable().order_by("created").first()
    for tag, text in (("scheme", "oai"), ("repositoryIdentifier", repository_id()), ("delimiter", ":"),
                      ("sampleIdentifier", oai_identifier(sample) if sample else
                       f"oai:{repository_id()}:ark:/{settings.HUB_PID['NAAN']}/{settings.HUB_PID['SHOULDER']}x")):
        _sub(described, tag, text, namespace=OAI_IDENTIFIER)


def _list_formats(root: ET.Element, args: dict[str, str]) -> None:
    if "identifier" in args:
        _find(args["identifier"])
    node = _sub(root, "ListMetadataFormats")
    for prefix, (_, found) in offered().items():
        item = _sub(node, "metadataFormat")
        _sub(item, "metadataPrefix", prefix)
        _sub(item, "schema", found.schema_location.split()[1])
        _sub(item, "metadataNamespace", found.namespace)


def _list_sets(root: ET.Element, args: dict[str, str]) -> None:
    if "resumptionToken" in args:
        raise OaiError("badResumptionToken", "ListSets is never paged.")
    node = _sub(root, "ListSets")
    owners = (_harvestable().order_by().values_list("artifact__owner__username", flat=True).distinct())
    named = [*SETS.items(), *((f"{OWNER_SET}{owner}", f"Records of {owner}") for owner in sorted(owners)
                              if SET_PART_RE.match(owner))]
    for spec, name in named:
        item = _sub(node, "set")
        _sub(item, "setSpec", spec)
        _sub(item, "setName", name)


def _find(identifier: str) -> Version:
    prefix = f"oai:{repository_id()}:"
    pid = identifier[len(prefix):] if identifier.startswith(prefix) else ""
    version = _harvestable().filter(pid=pid).first() if pid else None
    if version is None:
        raise OaiError("idDoesNotExist", f"No public record {identifier!r}.")
    return version


def _prefix(value: str) -> str:
    prefixes = offered()
    if value not in prefixes:
        raise OaiError("cannotDisseminateFormat", f"Formats are {', '.join(prefixes)}; not {value!r}.")
    return value


def _header(parent: ET.Element, version: Version) -> None:
    header = _sub(parent, "header", **({"status": "deleted"} if _is_deleted(version) else {}))
    _sub(header, "identifier", oai_identifier(version))
    _sub(header, "datestamp", _stamp(_datestamp(version)))
    _sub(header, "setSpec", f"kind:{version.artifact.kind}")
    if SET_PART_RE.match(version.artifact.owner.username):
        _sub(header, "setSpec", f"{OWNER_SET}{version.artifact.owner.username}")


def _metadata(parent: ET.Element, version: Version, prefix: str) -> None:
    record = version_record(version, Viewer.public())  # harvesters are the public
    holder = _sub(parent, "metadata")
    name, found = offered()[prefix]
    document = ET.fromstring(exports.export(record, name).encode())  # noqa: S314 - our own XML
    if prefix == "oai_datacite":  # OAI-PMH's DataCite format wraps the kernel record
        wrapper = ET.SubElement(holder, _q(OAI_DATACITE, "oai_datacite"),
                                {_q(XSI, "schemaLocation"): found.schema_location})
        ET.SubElement(wrapper, _q(OAI_DATACITE, "schemaVersion")).text = "4"
        ET.SubElement(wrapper, _q(OAI_DATACITE, "datacentreSymbol")).text = "HPCFAIR.HUB"
        payload = ET.SubElement(wrapper, _q(OAI_DATACITE, "payload"))
        payload.append(document)
        return
    holder.append(document)


def _get_record(root: ET.Element, args: dict[str, str]) -> None:
    prefix = _prefix(args["metadataPrefix"])
    version = _find(args["identifier"])
    record = _sub(_sub(root, "GetRecord"), "record")
    _header(record, version)
    if not _is_deleted(version):
        _metadata(record, version, prefix)


def _list(root: ET.Element, args: dict[str, str], verb: str) -> None:
    if "resumptionToken" in args:
        if set(args) - {"resumptionToken"}:
            raise OaiError("badArgument", "resumptionToken is an exclusive argument.")
        state = _decode_token(args["resumptionToken"])
    else:
        state = {"prefix": _prefix(args["metadataPrefix"]), "from": args.get("from", ""),
                 "until": args.get("until", ""), "set": args.get("set", ""), "after": 0, "cursor": 0}
    versions = _harvestable()
    if state["set"].startswith(OWNER_SET):  # an owner without public records: no records match
        versions = versions.filter(artifact__owner__username=state["set"][len(OWNER_SET):])
    elif state["set"]:
        if state["set"] not in SETS:  # a set the repository does not have holds no records (OAI-PMH 4.6)
            raise OaiError("noRecordsMatch", f"No set {state['set']!r}; the sets are {', '.join(SETS)} and "
                                             f"{OWNER_SET}{{username}}.")
        versions = versions.filter(artifact__kind=state["set"].split(":", 1)[1])
    if state["from"]:
        start = _parse_date(state["from"], "from", end=False)
        versions = versions.filter(Q(created__gte=start) | Q(deleted_at__gte=start))
    if state["until"]:
        versions = versions.filter(created__lte=_parse_date(state["until"], "until", end=True))
    if state["from"] and state["until"] and len(state["from"]) != len(state["until"]):
        raise OaiError("badArgument", "from and until must have the same granularity.")
    total = versions.count()
    page = list(versions.filter(pk__gt=state["after"])[: settings.HUB_OAI_PAGE_SIZE])
    if not page:
        raise OaiError("noRecordsMatch", "No records match these arguments.")
    node = _sub(root, verb)
    for version in page:
        if verb == "ListIdentifiers":
            _header(node, version)
        else:
            record = _sub(node, "record")
            _header(record, version)
            if not _is_deleted(version):
                _metadata(record, version, state["prefix"])
    cursor = state["cursor"] + len(page)
    if cursor < total:
        token = _encode_token({**state, "after": page[-1].pk, "cursor": cursor})
        _sub(node, "resumptionToken", token, completeListSize=str(total), cursor=str(state["cursor"]))
    elif "resumptionToken" in args:
        _sub(node, "resumptionToken", "", completeListSize=str(total), cursor=str(state["cursor"]))


VERBS = {"Identify": _identify, "ListMetadataFormats": _list_formats, "ListSets": _list_sets,
         "GetRecord": _get_record, "ListIdentifiers": lambda r, a: _list(r, a, "ListIdentifiers"),
         "ListRecords": lambda r, a: _list(r, a, "ListRecords")}


@csrf_exempt
def endpoint(request: HttpRequest) -> HttpResponse:
    source = request.POST if request.method == "POST" else request.GET
    root = ET.Element("OAI-PMH", {"xmlns": OAI,
                                  _q(XSI, "schemaLocation"): f"{OAI} http://www.openarchives.org/OAI/2.0/OAI-PMH.xsd"})
    _sub(root, "responseDate", _stamp(timezone.now()))
    request_node = _sub(root, "request", settings.HUB_PUBLIC_URL + "/oai")
    verb = source.get("verb", "")
    try:
        if any(len(source.getlist(key)) > 1 for key in source):
            raise OaiError("badArgument", "An argument is repeated.")
        args = {key: source[key] for key in source if key != "verb"}
        if verb not in VERBS:
            raise OaiError("badVerb", f"Unknown verb {verb!r}; verbs are {', '.join(VERBS)}.")
        required, optional = VERB_ARGUMENTS[verb]
        if "resumptionToken" in args and "resumptionToken" in optional:
            required = set()
        unknown = set(args) - required - optional
        missing = required - set(args)
        if unknown or missing:
            raise OaiError("badArgument", f"{verb}: " + (f"unknown arguments {sorted(unknown)}; " if unknown else "")
                           + (f"missing {sorted(missing)}" if missing else "").rstrip("; "))
        request_node.set("verb", verb)
        for key, value in args.items():
            request_node.set(key, value)
        VERBS[verb](root, args)
    except OaiError as exc:
        for child in list(root)[2:]:
            root.remove(child)
        _sub(root, "error", exc.message, code=exc.code)
    for prefix, namespace in PREFIXES.items():
        ET.register_namespace(prefix, namespace)
    body = ET.tostring(root, encoding="unicode", xml_declaration=True)
    return HttpResponse(body, content_type="text/xml; charset=utf-8")
