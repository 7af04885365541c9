"""The house of netsim/: three rooms, no import circle, one import surface for protocols (issue 28).

The import graph is built from the sources with :mod:`ast`, so it sees every import wherever it
stands: at module level, inside functions, under ``if TYPE_CHECKING:``, and
``importlib.import_module("literal")``. Rules (docs/engine.md, "The house"):

- no circle among the modules of ``netsim/`` and ``protocols/`` (typing-only imports included);
- the engine (``netsim.engine``, with ``netsim.bandits`` beside it) imports neither the protocol
  toolkit (``netsim.comm``) nor the experiment layer (``netsim.experiment``); the toolkit does not
  import the experiment layer;
- ``protocols/`` imports netsim only through ``netsim.comm`` (and ``netsim.experiment.testing``,
  for the audits that run whole trials);
- every module of ``netsim/`` stands in a room (the package face ``netsim/__init__.py`` and
  ``netsim/__main__.py`` aside).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ROOMS = ("engine", "comm", "experiment", "bandits", "assets")
PROTOCOL_SURFACE = {"netsim.comm", "netsim.experiment.testing"}


def modules(root: Path = ROOT, packages: tuple[str, ...] = ("netsim", "protocols")) -> dict[str, Path]:
    """Dotted module name -> source file, for every ``.py`` file below ``packages``."""
    out = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def imported(module: str, path: Path) -> list[tuple[str, int]]:
    """Every ``(dotted name, line)`` that ``module`` imports, absolute (``from a import b`` gives ``a.b``)."""
    found = []
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            found += [(base, node.lineno)] + [(f"{base}.{alias.name}", node.lineno) for alias in node.names]
        elif (isinstance(node, ast.Call) and ast.unparse(node.func).endswith("import_module") and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            found.append((node.args[0].value, node.lineno))
    return found


def graph(known: dict[str, Path]) -> dict[str, dict[str, int]]:
    """``module -> {module it imports: first line}`` among ``known`` (a name resolves to its longest known prefix)."""
    edges: dict[str, dict[str, int]] = {name: {} for name in known}
    for name, path in known.items():
        for target, line in imported(name, path):
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                edges[name].setdefault(target, line)
    return edges


def circles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return out


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if parts[0] == "netsim" and len(parts) > 1 else parts[0]


@pytest.fixture(scope="module")
def edges() -> dict[str, dict[str, int]]:
    return graph(modules())


def test_the_graph_sees_every_kind_of_import(tmp_path):
    """The checker itself: a circle closed by a function-level import, a typing-only import and an
    ``import_module`` call is found; a relative import resolves; a tree without a circle passes."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("def f():\n    from . import c\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.d\n")
    (pkg / "d.py").write_text("import importlib\nimportlib.import_module('pkg.a')\n")
    found = graph(modules(tmp_path, ("pkg",)))
    assert found["pkg.b"] == {"pkg": 2, "pkg.c": 2}  # importing pkg.c runs pkg/__init__.py first
    assert circles(found) == [["pkg.a", "pkg.b", "pkg.c", "pkg.d"]]
    (pkg / "d.py").write_text("")
    assert circles(graph(modules(tmp_path, ("pkg",)))) == []


def test_no_import_circle(edges):
    assert circles(edges) == []


def test_every_module_stands_in_a_room():
    loose = sorted(p.name for p in (ROOT / "netsim").iterdir()
                   if p.name not in ROOMS and p.name not in ("__init__.py", "__main__.py", "__pycache__"))
    assert loose == []


@pytest.mark.parametrize(("lower", "forbidden"), [
    ("engine", {"comm", "experiment"}),
    ("bandits", {"comm", "experiment"}),
    ("comm", {"experiment"}),
])
def test_data_flows_down(edges, lower, forbidden):
    """experiment -> engine <- comm <- protocols: a lower room never imports a higher one."""
    wrong = [f"{a} -> {b} (line {line})" for a, targets in edges.items() if a.startswith("netsim.") and room(a) == lower
             for b, line in targets.items() if b.startswith("netsim.") and room(b) in forbidden]
    assert wrong == []


def test_protocols_import_netsim_only_through_the_protocol_surface():
    wrong = []
    for name, path in modules(packages=("protocols",)).items():
        for target, line in imported(name, path):
            if target.split(".")[0] != "netsim":
                continue
            if not any(target == s or target.startswith(s + ".") for s in PROTOCOL_SURFACE):
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {target}")
    # ``from netsim.comm import X`` yields both netsim.comm and netsim.comm.X: X must be a name of the surface
    import netsim.comm

    for path in modules(packages=("protocols",)).values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "netsim.comm":
                wrong += [f"{path.relative_to(ROOT)}:{node.lineno}: {a.name} is not in netsim.comm.__all__"
                          for a in node.names if a.name not in netsim.comm.__all__]
    assert wrong == []
