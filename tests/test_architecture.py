"""The package's structure: no import cycle, and no library module imports the CLI.

Imports are read from the source (every ``import``, at module level or inside a function, since a
lazy import closes a loop just the same), except those under ``if TYPE_CHECKING:``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import sparc_es

PACKAGE = Path(sparc_es.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The sparc_es modules that ``path`` imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for child in node.body for n in ast.walk(child))
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
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
        found.update(t for t in targets if t in modules and t != name)
    return found


def _graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: _imports(path, set(files)) for name, path in files.items()}


def test_the_import_graph_is_read():
    graph = _graph()
    assert "sparc_es.engines.lucene" in graph["sparc_es.engines"]  # a lazy import counts
    assert "sparc_es.model" in graph["sparc_es.encode"]


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
