"""SPARQL under a concurrent burst, against a freshly started web server (granian) on the test database."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading

import pytest
import requests

from hub.web.server import web_command
from tests.conftest import ROOT, wait_for_port, worker_env
from tests.ports import free_port

pytestmark = pytest.mark.django_db(transaction=True)

PREFIX = "PREFIX schema: <https://schema.org/>\n"
QUERIES = [PREFIX + q for q in (
    "SELECT ?t WHERE { ?s schema:name ?t } ORDER BY ?t",
    "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }",
    "ASK { ?s a hpc:AIModel }",
    "SELECT DISTINCT ?type WHERE { ?s a ?type } LIMIT 20",
    "SELECT ?s WHERE { ?s schema:name ?t FILTER(CONTAINS(LCASE(STR(?t)), \"model\")) }",
    "SELECT ?s ?t WHERE { ?s schema:name ?t OPTIONAL { ?s schema:description ?d } } LIMIT 5 OFFSET 1",
    "SELECT ?p (COUNT(?o) AS ?n) WHERE { ?s ?p ?o } GROUP BY ?p HAVING (COUNT(?o) > 1) ORDER BY DESC(?n)",
    "CONSTRUCT { ?s schema:name ?t } WHERE { ?s schema:name ?t }",
    "SELECT ?s WHERE { { ?s a hpc:AIModel } UNION { ?s a hpc:Dataset } } LIMIT 10",
    "SELECT ?s ?t WHERE { VALUES ?t { \"Title of burst-0\" \"Title of burst-1\" } ?s schema:name ?t }",
    "SELECT (STRLEN(?t) AS ?len) WHERE { ?s schema:name ?t } ORDER BY ?len",
    "DESCRIBE ?s WHERE { ?s a hpc:AIModel } LIMIT 1",
    "SELECT ?s WHERE { ?s ?p ?o MINUS { ?s a hpc:AIModel } } LIMIT 3",
    "SELECT (MAX(?t) AS ?last) WHERE { ?s schema:name ?t }",
)]


def ask(base: str, query: str) -> tuple[int, str]:
    graph = query.removeprefix(PREFIX).startswith(("CONSTRUCT", "DESCRIBE"))
    response = requests.post(f"{base}/sparql", data={"query": query}, timeout=60,
                             headers={"Accept": "text/turtle" if graph else "application/sparql-results+json"})
    return response.status_code, response.text[:300]


def test_a_burst_of_different_queries_on_a_fresh_server_all_parse(owner, publish, tmp_path):
    for index in range(3):
        publish(owner, f"burst-{index}", {"w.bin": bytes([index])})
    port = free_port()
    env = worker_env(tmp_path, HUB_SPARQL_CONCURRENCY="16", HUB_SPARQL_SLOT_DIR=str(tmp_path / "slots"))
    proc = subprocess.Popen(web_command(sys.executable, f"127.0.0.1:{port}", workers=1, threads=len(QUERIES)),
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_port(port, timeout=60, proc=proc)
        answers: dict[int, tuple[int, str]] = {}
        start = threading.Barrier(len(QUERIES))

        def one(index: int) -> None:
            start.wait()
            answers[index] = ask(base, QUERIES[index])

        threads = [threading.Thread(target=one, args=(index,)) for index in range(len(QUERIES))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        failed = {QUERIES[i]: answer for i, answer in answers.items() if answer[0] != 200}
        assert not failed and len(answers) == len(QUERIES)
        # And afterwards, one at a time, in the same process: nothing was left broken.
        for query in QUERIES:
            assert ask(base, query)[0] == 200, query
        assert ask(base, "SELEKT * WHERE {}")[0] == 400
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
