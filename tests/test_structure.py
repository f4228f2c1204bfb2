"""The tree's structure: layers that import only downwards, no module importing a script, no import cycle (at any
depth, deferred imports included), and no code that manipulates sys.path to find the repository's packages.

Layers, bottom up: `customembedding.py` (imports no project module) < `ragstudy/` (the core) < strategy folders
`RAG*/` (leaves: only the core's building blocks in LEAF_CORE) < scripts (`evaluation_chain.py`, `Postprocessing/`,
`benchmarks/`, `tools/`) < the command line `ragstudy_cli/` (the `ragstudy` command). A script is a file with an
`if __name__ == "__main__"` block; only the command line imports one (for its parser and run: a subcommand is its
script), and nothing imports the command line.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GROUND, CORE, STRATEGY, SCRIPTS, COMMANDS = "customembedding", "core", "strategy folder", "scripts", "command line"
# (folder whose files are named relative to it, top-level packages or modules in it, layer)
ROOTS = (
    (REPO, ("customembedding",), GROUND),
    (REPO, ("ragstudy",), CORE),
    (REPO, ("evaluation_chain", "Postprocessing", "benchmarks"), SCRIPTS),
    (REPO / "tools", ("make_sample_corpus", "sample_corpus", "make_qa"), SCRIPTS),  # run as `python tools/x.py`
    (REPO, ("ragstudy_cli",), COMMANDS),
)
# The core's building blocks a strategy folder may import (chunk records, parameters, the registry and the plug-in
# discovery it shares with the other families, text rules, the text layer, sentence splitting, errors, file
# helpers, verified cache files): never the pipeline, retrieval, config, results, models or the plug-in families.
LEAF_CORE = frozenset({"ragstudy", "ragstudy.chunks", "ragstudy.params", "ragstudy.registry", "ragstudy.plugins",
                       "ragstudy.textnorm", "ragstudy.textlayer", "ragstudy.errors", "ragstudy.io",
                       "ragstudy.sentences", "ragstudy.cachefile", "ragstudy.cleaning",
                       "ragstudy.cleaning.lines", "ragstudy.cleaning.furniture", "ragstudy.cleaning.layer"})


@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    layer: str

    @property
    def is_script(self) -> bool:
        return _is_script(ast.parse(self.path.read_text(encoding="utf-8")))


def _is_script(tree: ast.Module) -> bool:
    """True for a file with an `if __name__ == "__main__":` block at module level."""
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            names = [node.test.left, *node.test.comparators]
            if any(isinstance(n, ast.Name) and n.id == "__name__" for n in names) and any(
                    isinstance(n, ast.Constant) and n.value == "__main__" for n in names):
                return True
    return False


def _strategy_folders() -> list[str]:
    return sorted(p.name for p in REPO.iterdir()
                  if p.is_dir() and p.name.startswith("RAG") and (p / "__init__.py").is_file())


def _modules() -> dict[str, Module]:
    """Module name -> Module, for every module of the repository (tests excepted)."""
    roots = [*ROOTS, (REPO, tuple(_strategy_folders()), STRATEGY)]
    modules: dict[str, Module] = {}
    for base, tops, layer in roots:
        for top in tops:
            files = [base / f"{top}.py"] if (base / f"{top}.py").is_file() else sorted((base / top).rglob("*.py"))
            for path in files:
                parts = list(path.relative_to(base).with_suffix("").parts)
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                modules[".".join(parts)] = Module(".".join(parts), path, layer)
    return modules


def _sources() -> dict[str, Path]:
    return {name: module.path for name, module in _modules().items()}


def _import_lines(name: str, path: Path, modules: dict) -> dict[str, int]:
    """Repository modules that `name` imports anywhere in its file (module level or inside functions), with the
    first line that imports each."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: dict[str, int] = {}
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
                found[target] = min(found.get(target, node.lineno), node.lineno)
    return found


def _imports(name: str, path: Path, modules: dict) -> set[str]:
    return set(_import_lines(name, path, modules))


def _layer_violation(importer: Module, imported: Module, imported_is_script: bool) -> str | None:
    """Why `importer` may not import `imported`, or None when the import goes downwards as the layers allow."""
    reasons = []
    if importer.layer == GROUND:
        reasons.append("customembedding.py imports no project module: pass what it needs in")
    if importer.layer == CORE and imported.layer not in (GROUND, CORE):
        reasons.append(f"the core imports only ragstudy and customembedding, not the {imported.layer} layer")
    if imported.layer == COMMANDS and importer.layer != COMMANDS:
        reasons.append("imports the command line (ragstudy_cli), the top layer: move what both need below it")
    if importer.layer == STRATEGY and imported.name.split(".")[0] != importer.name.split(".")[0] \
            and imported.name not in LEAF_CORE:
        reasons.append(f"a strategy folder imports only its own modules and the core's building blocks "
                       f"({', '.join(sorted(LEAF_CORE))})")
    if imported_is_script and importer.layer != COMMANDS:
        reasons.append("imports a script (a file with a __main__ block): move what both need into a library module")
    return "; ".join(reasons) or None


def _layer_violations(modules: dict[str, Module]) -> list[str]:
    scripts = {name for name, module in modules.items() if module.is_script}
    out = []
    for name, module in sorted(modules.items()):
        for target, line in sorted(_import_lines(name, module.path, modules).items()):
            why = _layer_violation(module, modules[target], target in scripts)
            if why:
                out.append(f"{name} -> {target} ({module.path.relative_to(REPO)}:{line}): {why}")
    return out


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


def test_the_layer_rules_flag_upward_sideways_and_script_imports(tmp_path: Path) -> None:
    files = {"customembedding.py": "def f():\n    from ragstudy import io\n",
             "ragstudy/__init__.py": "", "ragstudy/io.py": "", "ragstudy/pipeline.py": "import RAGA.strategy\n",
             "RAGA/__init__.py": "from .strategy import X\n",
             "RAGA/strategy.py": "from ragstudy.io import x\n\ndef g():\n    from ragstudy import pipeline\n",
             "RAGB/__init__.py": "from RAGA.strategy import X\n",
             "tool.py": "import lib\nif __name__ == '__main__':\n    pass\n", "lib.py": "import tool\n",
             "cmd.py": "import tool\nimport lib\n", "lib2.py": "import cmd\n"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    layers = {"customembedding": GROUND, "ragstudy": CORE, "ragstudy.io": CORE, "ragstudy.pipeline": CORE,
              "RAGA": STRATEGY, "RAGA.strategy": STRATEGY, "RAGB": STRATEGY, "tool": SCRIPTS, "lib": SCRIPTS,
              "cmd": COMMANDS, "lib2": SCRIPTS}
    modules = {name: Module(name, tmp_path / (name.replace(".", "/") + ("/__init__.py" if name in (
        "ragstudy", "RAGA", "RAGB") else ".py")), layer) for name, layer in layers.items()}
    scripts = {name for name, module in modules.items() if module.is_script}
    assert scripts == {"tool"}
    flagged = {(name, target, line) for name, module in modules.items()
               for target, line in _import_lines(name, module.path, modules).items()
               if _layer_violation(module, modules[target], target in scripts)}
    assert flagged == {("customembedding", "ragstudy.io", 2), ("customembedding", "ragstudy", 2),
                       ("ragstudy.pipeline", "RAGA.strategy", 1), ("RAGA.strategy", "ragstudy.pipeline", 4),
                       ("RAGB", "RAGA.strategy", 1), ("lib", "tool", 1), ("lib2", "cmd", 1)}


def test_every_module_imports_only_from_the_layers_below() -> None:
    modules = _modules()
    assert {"customembedding", "ragstudy.registry", "RAGParagraph.segmenter", "Postprocessing.report",
            "sample_corpus.engine", "make_sample_corpus", "ragstudy.retrievers.dense", "ragstudy.embedders.onnx_embedder",
            "ragstudy.llms.server_engine", "ragstudy_cli.app", "ragstudy_cli.study"} <= set(modules)
    violations = _layer_violations(modules)
    assert violations == [], "imports against the layers (importer -> imported (file:line): rule):\n" + "\n".join(
        violations)


def test_loading_a_strategy_folder_loads_only_the_cores_building_blocks() -> None:
    """Transitively: importing any RAG* package reaches no core module outside LEAF_CORE (no pipeline, config)."""
    modules = _modules()
    graph = {name: _imports(name, module.path, modules) for name, module in modules.items()}
    reached, todo = set(), [name for name, module in modules.items() if module.layer == STRATEGY]
    while todo:
        for target in graph[todo.pop()] - reached:
            reached.add(target)
            todo.append(target)
    assert sorted(name for name in reached if modules[name].layer != STRATEGY and name not in LEAF_CORE) == []


def test_no_two_modules_share_a_name():
    """A module's file name says what it is, once: no two modules of the library and scripts share one (each
    strategy folder's `strategy.py` is the plug-in convention; a benchmark script is named after what it
    measures)."""
    names: dict[str, list[str]] = {}
    for module in _modules().values():
        stem = module.path.stem
        if stem == "__init__" or (module.layer == STRATEGY and stem == "strategy") or module.name.startswith(
                "benchmarks."):
            continue
        names.setdefault(stem, []).append(module.name)
    shared = {stem: found for stem, found in names.items() if len(found) > 1}
    assert not shared, f"modules that share a name: {shared}"
