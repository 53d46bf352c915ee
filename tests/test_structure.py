"""The shape of the code, read with ``ast`` from the sources of ``bucketopt/``.

- No private name crosses a package: a name ``_x`` (a function, a class, a constant or a module)
  is imported, or read as ``module._x``, only from inside the package that defines it. The
  packages are the first component under ``bucketopt/`` (``bucketopt.cost``,
  ``bucketopt.training``, ...); each top-level module (``bucketopt.solver``, ...) is a package
  of its own. A check shared by two packages gets a public name (integer and number checks live
  in :mod:`bucketopt.validate`).
- No function takes more than :data:`MAX_PARAMS` parameters (``self`` and ``cls`` not
  counted), outside :data:`PUBLIC_OPTIONS`: the public entry points whose keyword options are
  the documented API users call.

Private modules imported from outside their package are also refused by tests/test_layers.py,
which builds the import graph; this file looks at the names.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "bucketopt"
MAX_PARAMS = 12
# Public entry points whose keyword-only options are the API users call (DESIGN.md).
PUBLIC_OPTIONS = {
    "bucketopt.solver.solve",
    "bucketopt.solver.evaluate",
    "bucketopt.solver.sweep",
    "bucketopt.training.compare.compare",
    "bucketopt.training.sampler.BucketBatchSampler.__init__",
    "bucketopt.cost.probe.probe",
    "bucketopt.training.verify.verify",
}


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def module_files(package: Path) -> dict[str, tuple[Path, list[str]]]:
    """Dotted module name -> (file, the package its relative imports start from)."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            out[".".join(parts[:-1])] = (path, parts[:-1])
        else:
            out[".".join(parts)] = (path, parts[:-1])
    return out


def package_of(dotted: str) -> str:
    """``bucketopt.cost.costmodel._x`` -> ``bucketopt.cost``; ``bucketopt.solver`` -> itself."""
    return ".".join(dotted.split(".")[:2])


def _absolute(node: ast.ImportFrom, base: list[str]) -> str:
    if not node.level:
        return node.module or ""
    start = base[: len(base) - node.level + 1]
    return ".".join(start + ([node.module] if node.module else []))


def _private_owner(dotted: str) -> str | None:
    """The package that owns the first private component of ``dotted`` (None: all public)."""
    parts = dotted.split(".")
    for depth, part in enumerate(parts):
        if is_private(part):
            return package_of(".".join(parts[: depth + 1]))
    return None


def private_crossings(package: Path = PACKAGE) -> list[str]:
    """Every private name imported, or read as ``module._x``, from another package."""
    root = package.name
    known = module_files(package)
    out = []
    for module, (path, base) in known.items():
        mine = package_of(module)
        tree = ast.parse(path.read_text(), filename=str(path))
        bound = {}  # local name -> the module of the package it names
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = _absolute(node, base)
                if source.split(".")[0] != root:
                    continue
                for alias in node.names:
                    full = f"{source}.{alias.name}"
                    owner = _private_owner(full)
                    if owner is not None and owner != mine:
                        out.append(f"{module}:{node.lineno} imports {full}")
                    if full in known:
                        bound[alias.asname or alias.name] = full
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] != root:
                        continue
                    owner = _private_owner(alias.name)
                    if owner is not None and owner != mine:
                        out.append(f"{module}:{node.lineno} imports {alias.name}")
                    if alias.asname:
                        bound[alias.asname] = alias.name
                    else:
                        bound[root] = root
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and is_private(node.attr)):
                continue
            chain, value = [], node.value
            while isinstance(value, ast.Attribute):
                chain.append(value.attr)
                value = value.value
            if not (isinstance(value, ast.Name) and value.id in bound):
                continue
            target = ".".join([bound[value.id], *reversed(chain)])
            if target not in known:  # an attribute of a class or an object: not a module
                continue
            full = f"{target}.{node.attr}"
            if _private_owner(full) != mine:
                out.append(f"{module}:{node.lineno} reads {full}")
    return sorted(out)


def parameter_counts(package: Path = PACKAGE) -> list[tuple[int, str]]:
    """(parameters, qualified name) of every function and method, ``self``/``cls`` not
    counted; ``*args`` and ``**kwargs`` count one each."""
    out = []

    def visit(node, prefix, in_class):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}.{child.name}", True)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = child.args
                names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
                count = len(names) + (a.vararg is not None) + (a.kwarg is not None)
                if in_class and names and names[0] in ("self", "cls"):
                    count -= 1
                out.append((count, f"{prefix}.{child.name}"))
                visit(child, f"{prefix}.{child.name}", False)
            else:
                visit(child, prefix, in_class)

    for module, (path, _) in module_files(package).items():
        visit(ast.parse(path.read_text(), filename=str(path)), module, False)
    return out


def too_many_parameters(package: Path = PACKAGE) -> list[str]:
    return [f"{name} ({count})" for count, name in sorted(parameter_counts(package), reverse=True)
            if count > MAX_PARAMS and name not in PUBLIC_OPTIONS]


def test_no_private_name_crosses_a_package():
    assert private_crossings() == []


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "bucketopt"


def test_the_check_sees_every_way_a_private_name_crosses(tmp_path):
    """A tiny package breaking the rule each way it can (and keeping it each way it may)."""
    pkg = _write(tmp_path, {
        "bucketopt/__init__.py": "from .low.a import public\n",
        "bucketopt/solver.py": "def _helper():\n    pass\n",
        "bucketopt/low/__init__.py": "",
        "bucketopt/low/_kernels.py": "",
        "bucketopt/low/a.py": ("from ._kernels import x\n"            # same package: fine
                               "from .b import _same\n"               # same package: fine
                               "def public():\n    from ..solver import _helper\n"),
        "bucketopt/low/b.py": "_same = 1\n",
        "bucketopt/high/__init__.py": "",
        "bucketopt/high/c.py": ("import bucketopt.low.a\n"
                                "import bucketopt.low.b as lb\n"
                                "from ..low import a, _kernels\n"
                                "from bucketopt.low.b import _same\n"
                                "from bucketopt.low import __doc__\n"  # dunder: public
                                "y = a._private + lb._same + bucketopt.low.a._deep\n"
                                "z = a.Thing._method\n"),             # a class's: not a module
    })
    assert private_crossings(pkg) == sorted([
        "bucketopt.low.a:4 imports bucketopt.solver._helper",
        "bucketopt.high.c:3 imports bucketopt.low._kernels",
        "bucketopt.high.c:4 imports bucketopt.low.b._same",
        "bucketopt.high.c:6 reads bucketopt.low.a._private",
        "bucketopt.high.c:6 reads bucketopt.low.b._same",
        "bucketopt.high.c:6 reads bucketopt.low.a._deep",
    ])


def test_the_parameter_count(tmp_path):
    pkg = _write(tmp_path, {
        "bucketopt/__init__.py": "",
        "bucketopt/m.py": (
            "def wide(a, b, c, d, e, f, g, h, i, j, k, l, m):\n    pass\n"
            "def twelve(a, b, c, d, e, f, g, h, i, j, *args, **kw):\n    pass\n"
            "def keywords(a, /, b, *, c, d, e, f, g, h, i, j, k, l, m):\n    pass\n"
            "class C:\n"
            "    def method(self, a, b, c, d, e, f, g, h, i, j, k, l):\n"
            "        def inner(a, b, c, d, e, f, g, h, i, j, k, l, m, n):\n            pass\n"),
    })
    counts = dict((name, n) for n, name in parameter_counts(pkg))
    assert counts == {"bucketopt.m.wide": 13, "bucketopt.m.twelve": 12,
                      "bucketopt.m.keywords": 13, "bucketopt.m.C.method": 12,
                      "bucketopt.m.C.method.inner": 14}
    assert too_many_parameters(pkg) == ["bucketopt.m.C.method.inner (14)",
                                        "bucketopt.m.wide (13)", "bucketopt.m.keywords (13)"]


def test_public_options_are_real_functions():
    """The allow-list names functions that exist (a renamed entry point leaves no stale pass)."""
    names = {name for _, name in parameter_counts()}
    assert PUBLIC_OPTIONS - names == set()


# Kernels outside the certified DP still over MAX_PARAMS, each with its count: the cell rows of
# the time objective's relaxation (one output array per bound) and the dynamic-padding grid
# DP's two kernels (its tables passed one by one). A count that grows, or a new name, fails.
KERNELS_OVER = {
    "bucketopt.objectives._time_kernels.cell_rows": 20,
    "bucketopt.objectives._batch_kernels.batch_layers_kernel": 16,
    "bucketopt.objectives._batch_kernels.batch_chain_kernel": 13,
}


def test_no_function_takes_more_than_a_dozen_parameters():
    over = {name: n for n, name in parameter_counts()
            if n > MAX_PARAMS and name not in PUBLIC_OPTIONS}
    assert {name: n for name, n in over.items() if KERNELS_OVER.get(name) != n} == {}


def test_the_kernel_allow_list_holds_only_functions_still_over():
    """A kernel regrouped below the limit leaves the allow-list (no stale pass)."""
    counts = {name: n for n, name in parameter_counts()}
    assert {name for name, n in KERNELS_OVER.items() if counts.get(name) != n} == set()
