"""The shape of the code: no import circle anywhere in hub/, workers/ and the client (counting imports inside
functions, which only hide a circle), and the workers never reach into the hub's API layer. Read from the
source with ``ast``: nothing is imported, so it takes milliseconds."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"hub": ROOT / "hub", "workers": ROOT / "workers", "hpcfair": ROOT / "client" / "hpcfair"}


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
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
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
    assert "hub.gateway.wire" in edges["workers.engine"]  # imported inside Engine.watch
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
