"""Move modules (and single names) of bucketopt and rewrite every import of them.

    python .ci/relayout.py            # move the files (git mv) and rewrite the imports
    python .ci/relayout.py --imports  # only rewrite imports (a branch written against the
                                      # old layout, after merging the new one)

Rewrites ``from X import a, b`` (absolute or relative, at any depth, inside functions too),
``import X``, and dotted names / file paths in text (docstrings, docs/*.md, notebooks). Relative
imports stay relative, computed from the importing module's package. A name listed in
NAME_MOVES is split out of its statement into an import from its new module. Code of the names
in NAME_MOVES is moved by hand; this script only follows the imports.

Renamed in the same change (by hand, not by this script): ``training.simulate.batch_plan`` ->
``plan_arrays``; ``training.diversity.comparison_diversity`` -> ``row_diversity``; the seam's
``Objective.finish(solution) -> Solution`` -> ``Objective.refine(solution) -> boundaries | None``.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

MODULE_MOVES = {
    "bucketopt._kernels": "bucketopt.objectives._edge_kernels",
    "bucketopt._edge_numpy": "bucketopt.objectives._edge_numpy",
    "bucketopt.batchpad": "bucketopt.objectives.batchpad",
    "bucketopt._batch_kernels": "bucketopt.objectives._batch_kernels",
    "bucketopt._batch_sweep": "bucketopt.objectives._batch_sweep",
    "bucketopt.synced": "bucketopt.objectives.synced",
    "bucketopt._time_kernels": "bucketopt.objectives._time_kernels",
    "bucketopt.data._pchip": "bucketopt.data.pchip",
    "bucketopt.show.comparison": "bucketopt.training.compare",
    "bucketopt.show.packed_rows": "bucketopt.training.packed_rows",
    "bucketopt.show.rows": "bucketopt.training.rows",
}

# (module, name) -> the module that holds the name now (after MODULE_MOVES)
NAME_MOVES = {
    ("bucketopt.objectives._edge_kernels", "best_fit_decreasing"):
    "bucketopt.training._sim_kernels",
    ("bucketopt.objectives._edge_kernels", "log_factorial_table"):
        "bucketopt.objectives._batch_kernels",
    ("bucketopt.training._packing_kernels", "level_seconds_kernel"):
        "bucketopt.objectives._packed_kernels",
    ("bucketopt.training._packing_kernels", "level_layers_kernel"):
        "bucketopt.objectives._packed_kernels",
    ("bucketopt.cost.costmodel", "_max_distribution"): "bucketopt.objectives.random_order",
    ("bucketopt.cost.costmodel", "batch_time_atoms"): "bucketopt.objectives.random_order",
    ("bucketopt.cost.costmodel", "bucket_time_atoms"): "bucketopt.objectives.random_order",
    ("bucketopt.cost.costmodel", "expected_step_max"): "bucketopt.objectives.random_order",
    ("bucketopt.cost.costmodel", "analytic_epoch_seconds"): "bucketopt.objectives.random_order",
    ("bucketopt.cost.costmodel", "_seconds_from_atoms"): "bucketopt.objectives.random_order",
    ("bucketopt.cost.intervals", "parse_uncertainty"): "bucketopt.cost.costmodel",
    ("bucketopt.cost.intervals", "MAX_SETS"): "bucketopt.cost.costmodel",
    ("bucketopt.cost.costmodel", "annotate"): "bucketopt.cost.intervals",
    ("bucketopt.training.compare", "strategy_row"): "bucketopt.training.rows",
}

TEXT_SUFFIXES = {".py", ".md", ".ipynb", ".toml"}


def module_of(path: Path) -> tuple[str, list[str]]:
    """(dotted name, package parts) of a file under ROOT."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
        return ".".join(parts), parts
    return ".".join(parts), parts[:-1]


def relative(target: str, package: list[str]) -> str:
    """``target`` written relative to ``package`` (leading dots)."""
    tparts = target.split(".")
    common = 0
    while common < min(len(tparts), len(package)) and tparts[common] == package[common]:
        common += 1
    dots = "." * (len(package) - common + 1)
    return dots + ".".join(tparts[common:])


def new_home(module: str, name: str | None) -> str:
    module = MODULE_MOVES.get(module, module)
    if name is not None:
        return NAME_MOVES.get((module, name), module)
    return module


def rewrite_imports(path: Path, source: str, moved=frozenset()) -> str:
    """``source`` with its imports of moved modules rewritten; ``moved``: the modules this run
    moved, whose relative imports were written from their old package."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    in_package = path.relative_to(ROOT).parts[0] == "bucketopt"
    name, package = module_of(path)
    old_package = package  # where the file's relative imports were written
    for old, new in MODULE_MOVES.items():
        if new == name and name in moved:
            old_package = old.split(".")[:-1]
    lines = source.splitlines(keepends=True)
    edits = []  # (first line, last line, replacement text)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = old_package[: len(old_package) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if not module.startswith("bucketopt"):
                continue
            groups: dict[str, list[ast.alias]] = {}
            for alias in node.names:
                full = f"{module}.{alias.name}"
                if full in MODULE_MOVES:  # from bucketopt import _kernels
                    target_mod, target_name = MODULE_MOVES[full].rsplit(".", 1)
                    groups.setdefault(target_mod, []).append(
                        ast.alias(target_name, alias.asname or (alias.name if target_name
                                                                 != alias.name else None)))
                    continue
                groups.setdefault(new_home(module, alias.name), []).append(alias)
            if list(groups) == [module] and (old_package == package or not node.level):
                continue
            indent = re.match(r"\s*", lines[node.lineno - 1]).group(0)
            tail = lines[node.end_lineno - 1].rstrip("\n")
            comment = ""
            if "#" in tail[node.end_col_offset:]:
                comment = "  #" + tail[node.end_col_offset:].split("#", 1)[1]
            out = []
            for target, aliases in groups.items():
                where = relative(target, package) if node.level and in_package else target
                names = ", ".join(a.name if not a.asname else f"{a.name} as {a.asname}"
                                  for a in aliases)
                line = f"{indent}from {where} import {names}"
                if len(line) > 99:
                    inner = "".join(f"{indent}    {n.strip()},\n" for n in names.split(","))
                    line = f"{indent}from {where} import (\n{inner}{indent})"
                out.append(line)
            out[0] += comment
            edits.append((node.lineno, node.end_lineno, "\n".join(out) + "\n"))
        elif isinstance(node, ast.Import) and any(a.name in MODULE_MOVES for a in node.names):
            indent = re.match(r"\s*", lines[node.lineno - 1]).group(0)
            names = ", ".join(MODULE_MOVES.get(a.name, a.name)
                              + (f" as {a.asname}" if a.asname else "") for a in node.names)
            edits.append((node.lineno, node.end_lineno, f"{indent}import {names}\n"))
    for first, last, text in sorted(edits, reverse=True):
        lines[first - 1:last] = [text]
    return "".join(lines)


def rewrite_text(source: str) -> str:
    """Dotted names and file paths of moved modules in prose and docstrings."""
    for old, new in sorted(MODULE_MOVES.items(), key=lambda kv: -len(kv[0])):
        source = re.sub(rf"(?<![\w.]){re.escape(old)}(?![\w])", new, source)
        old_path, new_path = old.replace(".", "/") + ".py", new.replace(".", "/") + ".py"
        source = re.sub(rf"(?<![\w/]){re.escape(old_path)}", new_path, source)
    for (module, name), new in NAME_MOVES.items():
        source = re.sub(rf"(?<![\w.]){re.escape(module)}\.{re.escape(name)}(?![\w])",
                        f"{new}.{name}", source)
    return source


def files():
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split()
    this = Path(__file__).resolve()  # its own table of moves is never rewritten
    return [ROOT / f for f in out if Path(f).suffix in TEXT_SUFFIXES and (ROOT / f).exists()
            and (ROOT / f).resolve() != this]


def main(argv):
    unknown = [a for a in argv if a != "--imports"]
    if unknown:
        sys.exit(f"relayout.py: unknown argument(s) {' '.join(unknown)}; usage: "
                 "python .ci/relayout.py [--imports]")
    moved = set()  # modules moved now: their relative imports still name their old package
    if "--imports" not in argv:
        for old, new in MODULE_MOVES.items():
            src = ROOT / (old.replace(".", "/") + ".py")
            dst = ROOT / (new.replace(".", "/") + ".py")
            if src.exists():
                subprocess.run(["git", "mv", str(src), str(dst)], cwd=ROOT, check=True)
                moved.add(new)
    changed = 0
    for path in files():
        source = path.read_text()
        new = rewrite_text(rewrite_imports(path, source, moved) if path.suffix == ".py"
                           else source)
        if new != source:
            path.write_text(new)
            changed += 1
    print(f"rewrote {changed} files")


if __name__ == "__main__":
    main(sys.argv[1:])
