"""The shape of the code: no import circle anywhere in hub/, workers/ and the client (counting imports inside
functions, which only hide a circle), and the workers never reach into the hub's API layer. Read from the
source with ``ast``: nothing is imported, and each file is parsed once for all the tests of this module."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.cpu]  # parses the whole tree first: over 1 s on a quiet machine

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"hub": ROOT / "hub", "workers": ROOT / "workers", "hpcfair": ROOT / "client" / "hpcfair"}


@pytest.fixture(scope="module", autouse=True)
def parsed_once():
    """Every file parsed and the graph built once, before the first test: all of them share it."""
    graph()


@functools.cache
def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


@functools.cache
def modules() -> dict[str, Path]:
    found = {}
    for folder in PACKAGES.values():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder.parent).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports, at the top or anywhere in a function. ``from package import x``
    is an import of the submodule ``package.x`` when there is one, else of the package."""

    def module_of(dotted: str) -> str | None:
        while dotted and dotted not in known:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Import):
            found |= {module_of(alias.name) for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            found |= {f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else module_of(base)
                      for alias in node.names}
    return found - {None, name}


@functools.cache
def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(name, path, known) for name, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative), each as a path."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_graph_sees_imports_inside_functions_and_relative_ones():
    edges = graph()
    assert "hub.jobs.services" in edges["hub.jobs.api.views"]
    assert "hub.gateway.wire" in edges["hub.gateway.engine"]  # imported inside Engine.watch
    assert "hpcfair.convert.sandbox" in edges["hpcfair.convert"]  # imported inside convert_file
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_anywhere():
    edges = graph()
    found = cycles(edges)
    described = ["; ".join(f"{m} -> {', '.join(sorted(edges[m] & set(circle)))}" for m in circle) for circle in found]
    assert not found, "import circles:\n" + "\n".join(described)


def test_the_workers_do_not_import_the_hub_s_api_layer():
    edges = graph()
    wrong = {name: sorted(target for target in targets if target.startswith("hub.") and "api" in target.split("."))
             for name, targets in edges.items() if name.startswith("workers")}
    assert not {name: targets for name, targets in wrong.items() if targets}


def test_the_client_s_model_api_stays_a_facade():
    lines = (ROOT / "client" / "hpcfair" / "api.py").read_text().count("\n")
    assert lines < 250, f"client/hpcfair/api.py has {lines} lines: put the work in a module of its task family"


def test_nothing_in_the_hub_imports_the_worker_package():
    """The arrow runs one way: workers (the Celery process) use the hub's apps, never the reverse."""
    wrong = {name: sorted(t for t in targets if t.split(".")[0] == "workers")
             for name, targets in graph().items() if name.startswith("hub")}
    assert not {name: targets for name, targets in wrong.items() if targets}


def external_imports(path: Path) -> set[str]:
    """The top-level names of every module ``path`` imports, anywhere in it."""
    found = set()
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_the_compute_library_needs_neither_django_nor_an_http_client():
    """What the compute library (and the Slurm node's runner) reaches, counting imports inside functions:
    no hub module, no client module that talks HTTP, and neither Django nor an HTTP library."""
    edges, known = graph(), modules()
    starts = [name for name in known if name.startswith("hpcfair.compute")] + ["hpcfair.slurm_runner"]
    reached, todo = set(starts), list(starts)
    while todo:
        for target in edges[todo.pop()] - reached:
            reached.add(target)
            todo.append(target)
    assert "hpcfair.compute.runs" in reached and "hpcfair.chain" in reached  # the walk sees what it should
    assert not {name for name in reached if name.startswith("hub") or name.startswith("workers")}
    assert not reached & {"hpcfair.client", "hpcfair.api", "hpcfair.transfer", "hpcfair._registry"}
    libraries = set().union(*(external_imports(known[name]) for name in reached))
    assert not libraries & {"django", "rest_framework", "requests", "urllib3", "httpx", "celery"}, libraries


@pytest.mark.slow
@pytest.mark.cpu  # a Python process of its own, importing numpy and the compute library
def test_the_compute_library_imports_without_django_or_requests_loaded():
    import subprocess
    import sys

    code = ("import sys; import hpcfair.compute.runs, hpcfair.compute.sandboxed, hpcfair.slurm_runner; "
            "print(sorted(m for m in ('django', 'requests', 'urllib3', 'rest_framework') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_no_function_reaches_for_another_module_s_private_name():
    known = modules()
    wrong = []
    for name, path in known.items():
        for node in ast.walk(parsed(path)):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for inner in ast.walk(node):
                if isinstance(inner, ast.ImportFrom) and inner.module in known and inner.module != name:
                    wrong += [f"{name}: from {inner.module} import {a.name}" for a in inner.names
                              if a.name.startswith("_")]
    assert not wrong, wrong


CODED = {"CodedError", "ConversionError", "FinetuneError", "EngineError", "HubError"}


def test_every_error_code_raised_is_in_a_table():
    """A literal code given to a coded error anywhere in the hub, the workers or the client is a job code
    (``hpcfair.compute.JOB_CODES``) or an HTTP one (``hub.errors.STATUS``)."""
    from hpcfair.compute import JOB_CODES

    from hub.errors import STATUS

    unknown = set()
    for name, path in modules().items():
        for node in ast.walk(parsed(path)):
            if name.startswith("hpcfair") and "HubError" in getattr(getattr(node, "func", None), "id", ""):
                continue  # the client's HubError is an HTTP answer, not a coded error
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in CODED
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                if node.args[0].value not in JOB_CODES and node.args[0].value not in STATUS:
                    unknown.add(f"{name}: {node.args[0].value}")
    assert not unknown, sorted(unknown)


def test_services_do_not_import_the_api_layer():
    """Services are what the API, the pages and the jobs call; they never reach up into an API module."""
    wrong = {name: sorted(t for t in targets if "api" in t.split("."))
             for name, targets in graph().items() if name.split(".")[-1] == "services"}
    assert not {name: targets for name, targets in wrong.items() if targets}


def test_the_registry_does_not_import_the_pages():
    wrong = {name: sorted(t for t in targets if t.startswith("hub.web"))
             for name, targets in graph().items() if name.startswith("hub.registry")}
    assert not {name: targets for name, targets in wrong.items() if targets}
