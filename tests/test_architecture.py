"""The package's structure is its architecture: the stages are packages, and a stage imports only the
stages before it (``corpus < layout < model < {encode, engines} < {answers, evaluation} < training <
cli``), so the import graph has no cycle and no module imports upward or sideways.

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
    assert "sparc_es.model" in graph["sparc_es.encode.run"]
    assert "sparc_es.model.stored" in graph["sparc_es.model.neural"]  # from inside a package
    assert "sparc_es.model" in graph["sparc_es.encode.requantize"]  # a submodule's package counts


def test_a_type_only_import_counts(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                      "    from sparc_es.corpus.sources import Sentence\n")
    assert _imports(module, {"sparc_es.corpus.sources"}, "sparc_es.m") == {"sparc_es.corpus.sources"}


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


# Each stage's rank; stages of one rank are independent of each other. ``errors``, ``options`` and
# ``notices`` are the floor every stage may stand on.
STAGES = {"errors": 0, "options": 0, "notices": 0, "corpus": 1, "layout": 2, "model": 3, "encode": 4, "engines": 4,
          "answers": 5, "evaluation": 5, "training": 6, "cli": 7, "__main__": 8}
COMPAT = {"sparc_es.trec": "evaluation"}  # a re-export kept for older code, ranked with what it re-exports


def _stage(module: str) -> str:
    if module in COMPAT:
        return COMPAT[module]
    return module.split(".")[1]


def test_every_module_belongs_to_a_stage():
    graph = _graph()
    assert sorted(m for m in graph if m != "sparc_es" and _stage(m) not in STAGES) == []


def test_a_stage_imports_only_the_stages_before_it():
    graph = _graph()
    offenders = []
    for module, deps in sorted(graph.items()):
        if module == "sparc_es":
            continue
        mine = _stage(module)
        for dep in sorted(deps):
            theirs = _stage(dep) if dep != "sparc_es" else None
            if theirs is None or theirs == mine:
                continue
            if STAGES[theirs] >= STAGES[mine]:
                offenders.append(f"{module} ({mine}) imports {dep} ({theirs})")
    assert offenders == []


def test_the_stage_rule_catches_an_upward_import(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("from sparc_es.answers.show import answer\n")
    deps = _imports(module, {"sparc_es.answers.show", "sparc_es.answers"}, "sparc_es.engines.m")
    assert any(STAGES[_stage(d)] >= STAGES[_stage("sparc_es.engines.m")] for d in deps)


def test_the_public_paths_the_readme_names_keep_working():
    """The README's library calls import from where they always did, whatever moved beneath them."""
    import importlib

    for path in ("sparc_es.encode.encode_corpus", "sparc_es.engines.open_engine", "sparc_es.model.SparcModel",
                 "sparc_es.cli.main", "sparc_es.engines.lucene.build_index", "sparc_es.trec.read_qrels",
                 "sparc_es.trec.TrecRunWriter", "sparc_es.corpus.read_corpus"):
        module, _, name = path.rpartition(".")
        assert callable(getattr(importlib.import_module(module), name)), path
    from sparc_es import trec
    from sparc_es.evaluation import trec as owner

    assert trec.read_run is owner.read_run  # a re-export, not a copy
