"""The package's structure: no import cycle, no library module imports the CLI, and the product
never imports research code (``sparc_es.experiments``).

Imports are read from the source: every ``import``, at module level, inside a function (a lazy
import closes a loop just the same) or under ``if TYPE_CHECKING:`` (a type-only import is a
dependency a reader follows, and one step from a real import). Importing ``a.b.c`` runs the
package ``a.b``'s ``__init__`` first, so it counts as importing ``a.b`` too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import sparc_es

PACKAGE = Path(sparc_es.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str], name: str | None = None) -> set[str]:
    """The sparc_es modules that ``path`` (module ``name``: by default from its place) imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    name = name or _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            # "from . import x" may name a module x or a name defined in the package
            targets = [f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in modules else prefix for a in node.names]
        else:
            continue
        for t in targets:
            while t.count(".") >= 1:  # the module and the packages above it, up to (not including) sparc_es
                if t in modules and t != name and not name.startswith(t + "."):
                    found.add(t)
                t = t.rpartition(".")[0]
    return found


def _graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: _imports(path, set(files)) for name, path in files.items()}


def test_the_import_graph_is_read():
    graph = _graph()
    assert "sparc_es.engines.lucene" in graph["sparc_es.engines"]  # a lazy import counts
    assert "sparc_es.model" in graph["sparc_es.encode"]
    assert "sparc_es.model.stored" in graph["sparc_es.model.neural"]  # from inside a package
    assert "sparc_es.model" in graph["sparc_es.requantize"]  # a submodule's package counts


def test_a_type_only_import_counts(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from sparc_es.corpus import Sentence\n")
    assert _imports(module, {"sparc_es.corpus"}, "sparc_es.m") == {"sparc_es.corpus"}


def test_no_import_cycle():
    graph = _graph()
    state: dict[str, str] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(graph[node]):
            assert state.get(nxt) != "open", "import cycle: " + " -> ".join(path[path.index(nxt):] + [nxt])
            if nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


def test_no_library_module_imports_the_cli():
    graph = _graph()
    offenders = sorted(m for m, deps in graph.items() if "sparc_es.cli" in deps and m not in ("sparc_es.__main__",))
    assert offenders == []


def test_the_product_never_imports_research_code():
    graph = _graph()
    research = "sparc_es.experiments"
    offenders = sorted(m for m, deps in graph.items()
                       if m != "sparc_es.cli" and not m.startswith(research)
                       and any(d == research or d.startswith(research + ".") for d in deps))
    assert offenders == []
