"""The tree's structure: no module imports a module that imports it back (at any depth, deferred imports
included), and no code manipulates sys.path to find the repository's packages."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("ragstudy", "Postprocessing", "benchmarks")
TOP_MODULES = ("customembedding", "evaluation_chain")


def _sources() -> dict[str, Path]:
    """Module name -> file, for every module of the repository's packages and strategy folders."""
    roots = [*PACKAGES, *(p.name for p in REPO.iterdir() if p.is_dir() and p.name.startswith("RAG")
                          and (p / "__init__.py").is_file())]
    modules = {name: REPO / f"{name}.py" for name in TOP_MODULES}
    for root in roots:
        for path in (REPO / root).rglob("*.py"):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Repository modules that `name` imports anywhere in its file (module level or inside functions)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    result: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                item = stack.pop()
                on_stack.discard(item)
                component.append(item)
                if item == node:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return result


def _graph() -> dict[str, set[str]]:
    modules = _sources()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    # a package's __init__ re-exporting its own submodules is not a cycle with them
    return {name: {t for t in targets if not (t.startswith(name + ".") and modules[name].name == "__init__.py")
                   and not (name.startswith(t + ".") and modules[t].name == "__init__.py")}
            for name, targets in graph.items()}


def test_the_detector_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_imports_a_module_that_imports_it_back() -> None:
    graph = _graph()
    assert "ragstudy.registry" in graph and "RAGParagraph.segmenter" in graph
    assert _cycles(graph) == []


def test_no_code_edits_sys_path() -> None:
    offenders = [str(path.relative_to(REPO)) for path in _sources().values()
                 if "sys.path.insert" in path.read_text(encoding="utf-8")]
    assert offenders == []
