"""SPARQL 1.1 protocol at ``/sparql`` over the metadata graphs of public, live versions.

Queries only (no updates, no ``SERVICE`` federation: the hub never fetches other endpoints). They run on an
Oxigraph store that is kept current per change (``hub.metadata.rdfstore``): the union of one named graph per
public, live version. On the embedded store each query runs in a forked child process with a wall-clock limit,
a memory cap and a cap on the size of its answer, so a runaway query is killed, not left holding a web worker;
on a shared Oxigraph server the same limits bound what is read from it. At most ``HUB_SPARQL_CONCURRENCY``
queries run at once on a host (slots are file locks, so all web workers share them and a dead process frees
its slot).

Queries are parsed first by rdflib (what the query asks for, and refusing ``SERVICE`` before Oxigraph, which
would follow it, sees the query), under one lock per process: pyparsing (rdflib's SPARQL grammar) is not thread-safe.
Its parse actions learn their arity on first call by catching ``TypeError`` in unsynchronised state
(``pyparsing.core._trim_arity``), and ``streamline`` rewrites the grammar in place; two threads that first
parse at once leave wrong arities behind, and from then on every query that uses those actions fails to
parse ("missing 1 required positional argument") for the life of the process.
"""

from __future__ import annotations

import fcntl
import logging
import os
import resource
import select
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import islice
from pathlib import Path
from typing import Any

import requests
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from rdflib import BNode, Graph, Literal, Namespace, URIRef, Variable
from rdflib.namespace import DCTERMS, RDF
from rdflib.plugins.sparql import prepareQuery
from rdflib.plugins.sparql.sparql import Query
from rdflib.query import Result

from hub.errors import json_error
from hub.metadata import rdfstore
from hub.metadata.negotiation import choose
from ontology.vocab import PREFIXES, bind

RESULT_TYPES = {  # SELECT / ASK
    "application/sparql-results+json": "json", "application/json": "json", "text/csv": "csv",
    "text/tab-separated-values": "tsv", "application/sparql-results+xml": "xml",
}
GRAPH_TYPES = {  # CONSTRUCT / DESCRIBE
    "text/turtle": "turtle", "application/ld+json": "json-ld", "application/n-triples": "nt",
    "application/rdf+xml": "xml",
}
MAX_QUERY_CHARS = 10_000

_parse_lock = threading.Lock()
log = logging.getLogger(__name__)


def _synced(store: rdfstore.RdfStore) -> None:
    """Apply the registry's changes since the store's last sync (one indexed read when there are none). A store
    that cannot be written now (busy with long queries, a server away) answers from what it holds."""
    try:
        if rdfstore.pending(store):
            rdfstore.sync(store)
    except rdfstore.StoreError as exc:
        log.warning("SPARQL store not synced: %s", exc)


def _has_service(node: Any) -> bool:
    if isinstance(node, dict):
        if getattr(node, "name", "") == "ServiceGraphPattern":
            return True
        return any(_has_service(value) for value in node.values())
    if isinstance(node, (list, tuple)):
        return any(_has_service(item) for item in node)
    return False


def _bad(request: HttpRequest, detail: str) -> HttpResponse:
    return json_error(request, "malformed_query", detail)


def parse(query: str) -> Query:
    """The prepared query (raises on a syntax error); one thread at a time (see the module's docstring)."""
    with _parse_lock:
        return prepareQuery(query, initNs=PREFIXES)


def _slot_paths() -> list[Path]:
    folder = Path(settings.HUB_SPARQL_SLOT_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    return [folder / f"slot-{index}" for index in range(max(1, settings.HUB_SPARQL_CONCURRENCY))]


@contextmanager
def query_slot() -> Iterator[bool]:
    """Hold one of the host's ``HUB_SPARQL_CONCURRENCY`` query slots (an exclusive ``flock``), waiting up to
    ``HUB_SPARQL_WAIT_S``; yields False when none came free."""
    deadline = time.monotonic() + settings.HUB_SPARQL_WAIT_S
    paths = _slot_paths()
    while True:
        for path in paths:
            handle = open(path, "a")  # noqa: SIM115 - closed below, after the lock is released
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                continue
            try:
                yield True
            finally:
                # Unlock explicitly: a query child forked meanwhile by another thread shares this open file.
                fcntl.flock(handle, fcntl.LOCK_UN)
                handle.close()
            return
        if time.monotonic() >= deadline:
            yield False
            return
        time.sleep(0.05)


def _cap_memory() -> None:
    """In the child: it may grow by HUB_SPARQL_MEMORY_MB beyond what it inherited from the web worker."""
    with open("/proc/self/statm") as statm:
        inherited = int(statm.read().split()[0]) * resource.getpagesize()
    limit = inherited + settings.HUB_SPARQL_MEMORY_MB * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    sys.unraisablehook = lambda unraisable: None  # generators closed while out of memory: not for the server log


OXIGRAPH_PREFIXES = {name: str(namespace) for name, namespace in PREFIXES.items()}
# The hub's prefixes, declared for the server as pyoxigraph is given them (the query's own come after and win).
PROLOGUE = "".join(f"PREFIX {name}: <{iri}>\n" for name, iri in OXIGRAPH_PREFIXES.items())
XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"
LANG_STRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"


def _term(term: Any) -> Any:
    """An Oxigraph term as rdflib's (whose serialisers write the answers)."""
    import pyoxigraph

    if isinstance(term, pyoxigraph.NamedNode):
        return URIRef(term.value)
    if isinstance(term, pyoxigraph.BlankNode):
        return BNode(term.value)
    if isinstance(term, pyoxigraph.Literal):
        if term.language:
            return Literal(term.value, lang=term.language)
        datatype = term.datatype.value
        return Literal(term.value, datatype=None if datatype in (XSD_STRING, LANG_STRING) else URIRef(datatype))
    return Literal(str(term))  # a quoted triple (RDF-star): shown as its text


def serialize(result: Any, result_format: str) -> bytes:
    """Oxigraph's answer (solutions, a boolean, or triples) in ``result_format``, with at most
    HUB_SPARQL_MAX_ROWS rows or triples."""
    import pyoxigraph

    limit = settings.HUB_SPARQL_MAX_ROWS
    if isinstance(result, pyoxigraph.QueryBoolean):
        answer = Result("ASK")
        answer.askAnswer = bool(result)
    elif isinstance(result, pyoxigraph.QuerySolutions):
        names = [variable.value for variable in result.variables]
        answer = Result("SELECT")
        answer.vars = [Variable(name) for name in names]
        answer.bindings = [{Variable(name): _term(row[name]) for name in names if row[name] is not None}
                           for row in islice(result, limit)]
    else:
        limited = Graph()
        for triple in islice(result, limit):
            limited.add((_term(triple.subject), _term(triple.predicate), _term(triple.object)))
        return limited.serialize(format=result_format).encode()
    if result_format == "tsv":  # rdflib has no TSV serializer
        return _tsv(answer)
    return answer.serialize(format=result_format)


def _run(store: rdfstore.Embedded, query: str, result_format: str) -> bytes:
    """In the child: open the store read-only (the parent holds its shared lock), then cap the memory the query
    may add (RocksDB's own reservations on opening are not the query's), evaluate and serialise."""
    import pyoxigraph

    opened = pyoxigraph.Store.read_only(str(store.folder))
    _cap_memory()
    result = opened.query(query, use_default_graph_as_union=True, prefixes=OXIGRAPH_PREFIXES)
    return serialize(result, result_format)


def _tsv(result) -> bytes:
    """SPARQL 1.1 TSV results: a header of ?variables, then each term in its Turtle/N-Triples form
    (an ASK answers true or false, as for CSV)."""
    if result.type == "ASK":
        return b"true\n" if result.askAnswer else b"false\n"
    names = [str(v) for v in result.vars]
    lines = ["\t".join(f"?{name}" for name in names)]
    for row in result.bindings:
        terms = [row.get(Variable(name)) for name in names]
        lines.append("\t".join("" if term is None else _tsv_term(term) for term in terms))
    return ("\n".join(lines) + "\n").encode("utf-8")


TSV_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"})


def _tsv_term(term) -> str:
    """One term on one line: <iri>, _:blank, or "literal" with its language or datatype, escaped."""
    if isinstance(term, Literal):
        text = f'"{str(term).translate(TSV_ESCAPES)}"'
        if term.language:
            return f"{text}@{term.language}"
        return f"{text}^^<{term.datatype}>" if term.datatype else text
    return term.n3()


def run_limited(store: rdfstore.RdfStore, query: str, result_format: str) -> tuple[str, bytes]:
    """("ok", body) or ("error" | "timeout" | "too_large" | "memory" | "unavailable", message): on a server, by
    HTTP; on the embedded store, from a forked child."""
    if isinstance(store, rdfstore.Server):
        return run_on_server(store, query, result_format)
    if not (store.folder / "CURRENT").exists():  # RocksDB's own file: never written yet, so make it empty
        with store.writing():
            pass
    with store.locked(fcntl.LOCK_SH, settings.HUB_SPARQL_WAIT_S) as taken:
        if not taken:
            return "unavailable", b""
        return _fork(store, query, result_format)


def run_on_server(store: rdfstore.Server, query: str, result_format: str) -> tuple[str, bytes]:
    """Ask the shared Oxigraph server (union of the public graphs), reading at most HUB_SPARQL_MAX_BYTES within
    HUB_SPARQL_TIMEOUT_S, then write the answer as the embedded store would."""
    import pyoxigraph

    graph = result_format in GRAPH_TYPES.values()
    accept = "application/n-triples" if graph else "application/sparql-results+json"
    deadline = time.monotonic() + settings.HUB_SPARQL_TIMEOUT_S
    chunks, size = [], 0
    try:
        with requests.post(f"{store.url}/query", data={"query": PROLOGUE + query, "union-default-graph": ""},
                           headers={"Accept": accept}, stream=True,
                           timeout=(5, settings.HUB_SPARQL_TIMEOUT_S)) as response:
            for chunk in response.iter_content(1 << 16):
                chunks.append(chunk)
                size += len(chunk)
                if size > settings.HUB_SPARQL_MAX_BYTES * 4:  # N-Triples and JSON run larger than what we send
                    return "too_large", b""
                if time.monotonic() > deadline:
                    return "timeout", b""
            status = response.status_code
    except requests.Timeout:
        return "timeout", b""
    except requests.RequestException:
        return "unavailable", b""
    data = b"".join(chunks)
    if status == 400:
        return "error", data[:2000]
    if status >= 300:
        return ("timeout" if b"timeout" in data.lower() else "unavailable"), b""
    try:
        if graph:
            result = (quad.triple for quad in pyoxigraph.parse(data, format=pyoxigraph.RdfFormat.N_TRIPLES))
        else:
            result = pyoxigraph.parse_query_results(data, format=pyoxigraph.QueryResultsFormat.JSON)
        body = serialize(result, result_format)
    except (SyntaxError, ValueError) as exc:
        return "error", str(exc).encode()[:2000]
    return ("too_large", b"") if len(body) > settings.HUB_SPARQL_MAX_BYTES else ("ok", body)


def _fork(store: rdfstore.Embedded, query: str, result_format: str) -> tuple[str, bytes]:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no database, no Django teardown, just the query
        os.close(read_end)
        try:
            body, status = _run(store, query, result_format), b"O"
        except MemoryError:
            body, status = b"", b"M"
        except Exception as exc:  # the message of a query error is for the user (it is about their query)
            body, status = str(exc).encode()[:2000], b"E"
        try:
            with os.fdopen(write_end, "wb") as out:
                out.write(status + body)
        finally:
            os._exit(0)
    os.close(write_end)
    chunks, size, deadline = [], 0, time.monotonic() + settings.HUB_SPARQL_TIMEOUT_S
    outcome = "ok"
    with os.fdopen(read_end, "rb") as handle:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                outcome = "timeout"
                break
            ready, _, _ = select.select([handle], [], [], left)
            if not ready:
                continue
            chunk = os.read(handle.fileno(), 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > settings.HUB_SPARQL_MAX_BYTES:
                outcome = "too_large"
                break
    if outcome != "ok":
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    if outcome != "ok":
        return outcome, b""
    data = b"".join(chunks)
    if not data or data[:1] == b"M":  # out of memory (a child that dies without a word ran out while unwinding)
        return "memory", b""
    return ("ok" if data[:1] == b"O" else "error"), data[1:]


SD = Namespace("http://www.w3.org/ns/sparql-service-description#")
FORMATS = Namespace("http://www.w3.org/ns/formats/")
# What the endpoint answers, as W3C format IRIs: SELECT/ASK results, then CONSTRUCT/DESCRIBE graphs.
RESULT_FORMATS = ["SPARQL_Results_JSON", "SPARQL_Results_CSV", "SPARQL_Results_TSV", "SPARQL_Results_XML",
                  "Turtle", "JSON-LD", "N-Triples", "RDF_XML"]


def service_description(request: HttpRequest, accept: str | None = None) -> HttpResponse:
    """The endpoint described for machine clients (SPARQL 1.1 Service Description): an ``sd:Service`` with
    its language, result formats and default dataset; Turtle unless another RDF type is asked for."""
    url = settings.HUB_PUBLIC_URL + "/sparql"
    g = bind(Graph())
    g.bind("sd", SD)
    g.bind("formats", FORMATS)
    service, dataset, default = URIRef(url), BNode(), BNode()
    g.add((service, RDF.type, SD.Service))
    g.add((service, SD.endpoint, service))
    g.add((service, SD.supportedLanguage, SD.SPARQL11Query))
    g.add((service, DCTERMS.title, Literal("HPCFair Hub SPARQL endpoint")))
    g.add((service, DCTERMS.description, Literal(
        "The metadata of every public artifact version (HPC Ontology, schema.org, PROV-O, DCTERMS); read-only.")))
    for name in RESULT_FORMATS:
        g.add((service, SD.resultFormat, FORMATS[name]))
    g.add((service, SD.defaultDataset, dataset))
    g.add((dataset, RDF.type, SD.Dataset))
    g.add((dataset, SD.defaultGraph, default))
    g.add((default, RDF.type, SD.Graph))
    media_type = choose(request.headers.get("Accept", "") if accept is None else accept, list(GRAPH_TYPES))
    media_type = media_type or "text/turtle"
    charset = "" if media_type.endswith("json") else "; charset=utf-8"
    response = HttpResponse(g.serialize(format=GRAPH_TYPES[media_type]), content_type=media_type + charset)
    response["Vary"] = "Accept"
    return response


@csrf_exempt
def endpoint(request: HttpRequest, accept: str | None = None) -> HttpResponse:
    """The SPARQL 1.1 protocol. ``accept`` stands for the request's Accept header (the browser page asks for
    JSON results on a browser's behalf)."""
    if request.method == "POST":
        content_type = (request.content_type or "").lower()
        if content_type == "application/sparql-query":
            query = request.body.decode("utf-8", errors="replace")
        elif content_type == "application/x-www-form-urlencoded":
            if "update" in request.POST:
                return json_error(request, "permission_denied", "This endpoint answers queries; updates are refused.")
            query = request.POST.get("query", "")
        else:
            return json_error(request, "unsupported_media_type",
                              "POST application/sparql-query or a form with query=…")
    elif request.method == "GET":
        if "query" not in request.GET:  # the endpoint dereferenced: what it is (SPARQL 1.1 Service Description)
            return service_description(request, accept)
        query = request.GET.get("query", "")
    else:
        return json_error(request, "method_not_allowed", "Use GET or POST.")
    if not query.strip():
        return _bad(request, "Send a SPARQL query in the query parameter, e.g. "
                             "?query=SELECT * WHERE {?s ?p ?o} LIMIT 10")
    if len(query) > MAX_QUERY_CHARS:
        return _bad(request, f"Queries are at most {MAX_QUERY_CHARS} characters.")
    try:
        prepared = parse(query)
    except Exception as exc:  # a parse error: tell the user where
        return _bad(request, f"The query does not parse: {str(exc)[:500]}")
    if _has_service(prepared.algebra):
        return _bad(request, "SERVICE (federated queries) is not allowed: the hub does not fetch other endpoints.")
    is_graph = prepared.algebra.name in ("ConstructQuery", "DescribeQuery")
    offered = GRAPH_TYPES if is_graph else RESULT_TYPES
    media_type = choose(request.headers.get("Accept", "") if accept is None else accept, list(offered))
    if media_type is None:
        return json_error(request, "not_acceptable", f"This query's results come as: {', '.join(offered)}.")
    store = rdfstore.current()
    _synced(store)
    with query_slot() as free:
        if not free:
            response = json_error(request, "sparql_busy", f"{settings.HUB_SPARQL_CONCURRENCY} queries are running "
                                                          "already; try again in a few seconds.")
            response["Retry-After"] = "5"
            return response
        status, body = run_limited(store, query, offered[media_type])
    if status == "memory":
        return json_error(request, "query_memory", f"The query needed more than {settings.HUB_SPARQL_MEMORY_MB} MB "
                                                   "and was stopped; add a LIMIT or narrow its patterns.")
    if status == "timeout":
        return json_error(request, "query_timeout", f"The query ran longer than {settings.HUB_SPARQL_TIMEOUT_S} s "
                                                    "and was stopped; add a LIMIT or narrow its patterns.")
    if status == "too_large":
        return json_error(request, "query_too_large", f"The answer is larger than {settings.HUB_SPARQL_MAX_BYTES} "
                                                      "bytes; add a LIMIT.")
    if status == "unavailable":
        response = json_error(request, "sparql_busy", "The SPARQL store cannot answer just now; try again in a few "
                                                      "seconds.")
        response["Retry-After"] = "5"
        return response
    if status == "error":
        return _bad(request, f"The query failed: {body.decode('utf-8', errors='replace')}")
    charset = "" if media_type.endswith("json") else "; charset=utf-8"
    return HttpResponse(body, content_type=media_type + charset)

