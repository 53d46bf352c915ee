"""The package's layout matches docs/layers.md: imports run down the layers, no import circle,
and no package's private module imported from outside it.

The import graph is built with ``ast`` from the sources, so imports inside functions count as
much as those at the top of a module.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "bucketopt"
LAYERS_DOC = ROOT / "docs" / "layers.md"


def documented_layers(text: str) -> list[list[str]]:
    """The layers of the ```layers block, bottom first."""
    block = re.search(r"```layers\n(.*?)```", text, re.S)
    if block is None:
        raise AssertionError("docs/layers.md has no ```layers block")
    return [line.split() for line in block.group(1).splitlines() if line.strip()]


def modules(package: Path) -> dict[str, tuple[Path, list[str]]]:
    """Dotted module name -> (file, the package its relative imports start from)."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
            out[".".join(parts)] = (path, parts)
        else:
            out[".".join(parts)] = (path, parts[:-1])
    return out


def imports_of(source: str, package: list[str], known) -> set[str]:
    """The modules of ``known`` that ``source`` imports, wherever the import statement is."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                full = f"{module}.{alias.name}"
                found.add(full if full in known else module)
    return {name for name in found if name in known}


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    known = modules(package)
    return {name: imports_of(path.read_text(), pkg, known) - {name}
            for name, (path, pkg) in known.items()}


def layer_of(module: str, layers) -> int | None:
    """Index of the layer whose longest name covers ``module`` (None: on no layer)."""
    best, index = "", None
    for i, names in enumerate(layers):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > len(best):
                best, index = name, i
    return index


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def against_layers(graph, layers) -> list[str]:
    out = []
    for module, targets in sorted(graph.items()):
        mine = layer_of(module, layers)
        for target in sorted(targets):
            if layer_of(target, layers) > mine:
                out.append(f"{module} (layer {mine}) imports {target} "
                           f"(layer {layer_of(target, layers)})")
    return out


def private_from_outside(graph) -> list[str]:
    """Imports of ``pkg._name`` (or anything inside it) from a module outside ``pkg``."""
    out = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            parts = target.split(".")
            for depth, part in enumerate(parts):
                if part.startswith("_") and not part.startswith("__"):
                    owner = ".".join(parts[:depth])
                    if not module.startswith(owner + "."):
                        out.append(f"{module} imports {target}, private to {owner}")
                    break
    return out


LAYERS = documented_layers(LAYERS_DOC.read_text())
GRAPH = import_graph()


def test_every_module_is_on_a_layer():
    assert [m for m in GRAPH if layer_of(m, LAYERS) is None] == []


def test_no_import_against_the_layer_order():
    assert against_layers(GRAPH, LAYERS) == []


def test_no_import_circle():
    assert circles(GRAPH) == []


def test_no_private_module_imported_from_outside_its_package():
    assert private_from_outside(GRAPH) == []


def test_the_graph_sees_every_kind_of_import(tmp_path):
    """Imports inside functions, relative at any depth, absolute, and ``from . import x``."""
    pkg = tmp_path / "bucketopt"
    (pkg / "low").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "low" / "__init__.py").write_text("")
    (pkg / "low" / "_kernels.py").write_text("")
    (pkg / "low" / "a.py").write_text("def f():\n    from ..high import b\n")
    (pkg / "high.py").write_text("import bucketopt.low.a\nfrom .low import _kernels\n")
    (pkg / "mid.py").write_text("from . import high\n")
    graph = import_graph(pkg)
    assert graph["bucketopt.low.a"] == {"bucketopt.high"}
    assert graph["bucketopt.high"] == {"bucketopt.low.a", "bucketopt.low._kernels"}
    assert graph["bucketopt.mid"] == {"bucketopt.high"}
    assert circles(graph) == [["bucketopt.high", "bucketopt.low.a"]]
    layers = [["bucketopt.low"], ["bucketopt.high", "bucketopt.mid"]]
    assert against_layers(graph, layers) == [
        "bucketopt.low.a (layer 0) imports bucketopt.high (layer 1)"]
    assert private_from_outside(graph) == [
        "bucketopt.high imports bucketopt.low._kernels, private to bucketopt.low"]


@pytest.mark.parametrize("name", ["bucketopt.objectives._edge_kernels",
                                  "bucketopt.objectives._batch_kernels",
                                  "bucketopt.objectives._time_kernels",
                                  "bucketopt.objectives._packed_kernels"])
def test_objective_kernels_stay_in_objectives(name):
    importers = {m for m, targets in GRAPH.items() if name in targets}
    assert importers, f"nothing imports {name}"
    assert all(m.startswith("bucketopt.objectives.") for m in importers), importers


# Each objective's modules in bucketopt/objectives (docs/layers.md, "One objective, one place"),
# and the certified DP that the time and dynamic-padding objectives share.
OBJECTIVE_MODULES = {
    "edge": {"edge", "_edge_kernels", "_edge_numpy", "_edge_rows"},
    "batch": {"batch", "batchpad", "_batch_kernels", "_batch_sweep"},
    "time": {"time", "synced", "random_order", "_time_kernels"},
    "packed": {"packed", "_packed_kernels"},
    "certified": {"certified"},  # a package: bucketopt/objectives/certified/
}
# the certified DP prices buckets with the time model's walks and the dynamic-padding sweeps
SHARED = {"_time_kernels": {"certified"}, "_batch_sweep": {"certified"}}


def _objective_module(module):
    """The module or package directly under bucketopt/objectives that ``module`` is part of."""
    return module.split(".")[2]


def test_every_objective_module_belongs_to_one_objective():
    names = {_objective_module(m) for m in GRAPH if m.startswith("bucketopt.objectives.")}
    owned = [n for group in OBJECTIVE_MODULES.values() for n in group]
    assert sorted(owned) == sorted(set(owned))  # one owner each
    assert names - {"base", "sizes"} == set(owned)  # the seam and the batch-size rule


def test_no_objective_imports_another_objectives_private_module():
    owner = {n: name for name, group in OBJECTIVE_MODULES.items() for n in group}
    wrong = []
    for module, targets in sorted(GRAPH.items()):
        for target in sorted(targets):
            if not target.startswith("bucketopt.objectives._"):
                continue
            private = _objective_module(target)
            allowed = {owner[private], *SHARED.get(private, ())}
            mine = _objective_module(module) if module.startswith("bucketopt.objectives.") \
                else None
            if owner.get(mine) not in allowed:
                wrong.append(f"{module} imports {target}")
    assert wrong == []
