"""The tree's structure: layers that import only downwards, no module importing a script, no import cycle (at any
depth, deferred imports included), and no code that manipulates sys.path to find the repository's packages.

Layers, bottom up: `customembedding.py` (imports no project module) < `ragstudy/` (the core) < strategy folders
`RAG*/` (leaves: only the core's building blocks in LEAF_CORE) < scripts (`evaluation_chain.py`, `Postprocessing/`,
`benchmarks/`, `tools/`) < the command line `ragstudy_cli/` (the `ragstudy` command). A script is a file with an
`if __name__ == "__main__"` block; no module imports one, the command line included (a subcommand runs a library
job), and nothing imports the command line but a shim: an old script path whose only code is its `__main__` block
handing its arguments to the command line (`python evaluation_chain.py` is `ragstudy answer`).

Inside the core: the members of a plug-in family (every module of a core package whose `__init__` loads its
members with `plugins.members_of(__name__)`: retrievers, embedding backends, LLM engines) never reach, at any
depth, a run stage (the configuration of every family, `ragstudy.config`, and every core module that imports it:
pipeline, ranking, sweep, ...) nor the results layer (`ragstudy.results`); and the results layer reaches neither
the configuration nor a family package, so reading a CSV loads no plug-in.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from ragstudy_cli import app

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
LEAF_CORE = frozenset({"ragstudy", "ragstudy.params", "ragstudy.registry", "ragstudy.plugins", "ragstudy.errors",
                       "ragstudy.io", "ragstudy.text", "ragstudy.text.chunks", "ragstudy.text.textnorm",
                       "ragstudy.text.textlayer", "ragstudy.text.sentences", "ragstudy.text.cleaning",
                       "ragstudy.text.cleaning.lines", "ragstudy.text.cleaning.furniture",
                       "ragstudy.text.cleaning.layer", "ragstudy.stores", "ragstudy.stores.cachefile"})


CONFIG = "ragstudy.config"  # the configuration of every family: importing it loads every family's registry
RESULTS_LAYER = frozenset({"ragstudy.results"})  # the owner of every file a run writes and the scripts read
# Run stages named for the check that they are found; any other core module that imports the config is one too.
NAMED_RUN_STAGES = frozenset({CONFIG, "ragstudy.pipeline", "ragstudy.ranking", "ragstudy.scoring.budget_eval",
                              "ragstudy.grid.sweep", "ragstudy.answering.paper_api"})


@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    layer: str

    @property
    def is_script(self) -> bool:
        return _is_script(ast.parse(self.path.read_text(encoding="utf-8")))

    @property
    def is_shim(self) -> bool:
        return _is_shim(ast.parse(self.path.read_text(encoding="utf-8")))


def _is_script(tree: ast.Module) -> bool:
    """True for a file with an `if __name__ == "__main__":` block at module level."""
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            names = [node.test.left, *node.test.comparators]
            if any(isinstance(n, ast.Name) and n.id == "__name__" for n in names) and any(
                    isinstance(n, ast.Constant) and n.value == "__main__" for n in names):
                return True
    return False


def _is_shim(tree: ast.Module) -> bool:
    """True for a script that is only a shim onto the command line: a docstring and the `__main__` block."""
    body = [node for node in tree.body if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))]
    return _is_script(tree) and len(body) == 1


def _loads_members(init: Path) -> bool:
    """True for a family package: its `__init__` loads its modules as members (`members_of(__name__)`)."""
    for node in ast.walk(ast.parse(init.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "members_of" \
                and any(isinstance(arg, ast.Name) and arg.id == "__name__" for arg in node.args):
            return True
    return False


def _family_packages(modules: dict[str, "Module"]) -> set[str]:
    return {name for name, module in modules.items()
            if module.layer == CORE and module.path.name == "__init__.py" and _loads_members(module.path)}


def _reach(graph: dict[str, set[str]], start: str) -> dict[str, list[str]]:
    """Every module `start` imports at any depth -> the shortest chain of imports to it."""
    chains, todo = {start: [start]}, [start]
    while todo:
        here = todo.pop(0)
        for target in sorted(graph.get(here, ())):
            if target not in chains:
                chains[target] = [*chains[here], target]
                todo.append(target)
    del chains[start]
    return chains


def _core_violations(modules: dict[str, "Module"]) -> list[str]:
    """Imports inside the core that reach up: a family member reaching a run stage or the results layer, the
    results layer reaching the configuration or a family package (each with its chain of imports)."""
    graph = {name: _imports(name, module.path, modules) for name, module in modules.items()}
    core = [name for name, module in modules.items() if module.layer == CORE]
    families = _family_packages(modules)
    members = sorted(name for name in core if any(name == f or name.startswith(f + ".") for f in families))
    stages = {name for name in core if name not in members and (name == CONFIG or CONFIG in _reach(graph, name))
              } | (NAMED_RUN_STAGES & set(modules))
    out = []
    for name in members:
        for target, chain in sorted(_reach(graph, name).items()):
            if target in stages or target in RESULTS_LAYER:
                what = "the results layer" if target in RESULTS_LAYER else "a run stage"
                out.append(f"{' -> '.join(chain)}: a plug-in member reaches {what}; pass what it needs in "
                           f"(RetrievalInputs, the spec) or move the building block down")
    for name in sorted(RESULTS_LAYER & set(modules)):
        for target, chain in sorted(_reach(graph, name).items()):
            if target == CONFIG or any(target == f or target.startswith(f + ".") for f in families):
                out.append(f"{' -> '.join(chain)}: the results layer loads every plug-in family; take what it "
                           f"needs as an argument")
    return out


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


def _layer_violation(importer: Module, imported: Module, imported_is_script: bool, importer_is_shim: bool = False
                     ) -> str | None:
    """Why `importer` may not import `imported`, or None when the import goes downwards as the layers allow."""
    reasons = []
    if importer.layer == GROUND:
        reasons.append("customembedding.py imports no project module: pass what it needs in")
    if importer.layer == CORE and imported.layer not in (GROUND, CORE):
        reasons.append(f"the core imports only ragstudy and customembedding, not the {imported.layer} layer")
    if imported.layer == COMMANDS and importer.layer != COMMANDS and not importer_is_shim:
        reasons.append("imports the command line (ragstudy_cli), the top layer: move what both need below it")
    if importer.layer == STRATEGY and imported.name.split(".")[0] != importer.name.split(".")[0] \
            and imported.name not in LEAF_CORE:
        reasons.append(f"a strategy folder imports only its own modules and the core's building blocks "
                       f"({', '.join(sorted(LEAF_CORE))})")
    if imported_is_script:
        reasons.append("imports a script (a file with a __main__ block): move what both need into a library module")
    return "; ".join(reasons) or None


def _layer_violations(modules: dict[str, Module]) -> list[str]:
    scripts = {name for name, module in modules.items() if module.is_script}
    out = []
    for name, module in sorted(modules.items()):
        for target, line in sorted(_import_lines(name, module.path, modules).items()):
            why = _layer_violation(module, modules[target], target in scripts, module.is_shim)
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
             "cmd.py": "import tool\nimport lib\n", "lib2.py": "import cmd\n",
             "shim.py": "'doc'\nif __name__ == '__main__':\n    import cmd\n    cmd.main()\n",
             "fat.py": "import cmd\nif __name__ == '__main__':\n    cmd.main()\n"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    layers = {"customembedding": GROUND, "ragstudy": CORE, "ragstudy.io": CORE, "ragstudy.pipeline": CORE,
              "RAGA": STRATEGY, "RAGA.strategy": STRATEGY, "RAGB": STRATEGY, "tool": SCRIPTS, "lib": SCRIPTS,
              "cmd": COMMANDS, "lib2": SCRIPTS, "shim": SCRIPTS, "fat": SCRIPTS}
    modules = {name: Module(name, tmp_path / (name.replace(".", "/") + ("/__init__.py" if name in (
        "ragstudy", "RAGA", "RAGB") else ".py")), layer) for name, layer in layers.items()}
    scripts = {name for name, module in modules.items() if module.is_script}
    assert scripts == {"tool", "shim", "fat"} and {n for n, m in modules.items() if m.is_shim} == {"shim"}
    flagged = {(name, target, line) for name, module in modules.items()
               for target, line in _import_lines(name, module.path, modules).items()
               if _layer_violation(module, modules[target], target in scripts, module.is_shim)}
    assert flagged == {("customembedding", "ragstudy.io", 2), ("customembedding", "ragstudy", 2),
                       ("ragstudy.pipeline", "RAGA.strategy", 1), ("RAGA.strategy", "ragstudy.pipeline", 4),
                       ("RAGB", "RAGA.strategy", 1), ("lib", "tool", 1), ("lib2", "cmd", 1),
                       ("cmd", "tool", 1),  # the command line imports no script either
                       ("fat", "cmd", 1)}  # a script with code of its own is no shim: it may not import it


def test_every_module_imports_only_from_the_layers_below() -> None:
    modules = _modules()
    assert {"customembedding", "ragstudy.registry", "RAGParagraph.segmenter", "Postprocessing.report",
            "sample_corpus.engine", "make_sample_corpus", "ragstudy.retrievers.dense", "ragstudy.embedders.onnx_embedder",
            "ragstudy.llms.server_engine", "ragstudy_cli.app", "ragstudy_cli.study", "ragstudy.answering.chain",
            "Postprocessing.score_retrieval", "ragstudy_cli.jobs"} <= set(modules)
    violations = _layer_violations(modules)
    assert violations == [], "imports against the layers (importer -> imported (file:line): rule):\n" + "\n".join(
        violations)


def test_the_papers_script_paths_are_shims_onto_the_command_line() -> None:
    """Each old script path runs its subcommand (its code is a library job): only a docstring and the `__main__`
    block that hands the arguments to `ragstudy_cli.app`."""

    paths = {c.script for c in app.COMMANDS if c.script != "(none)"}
    assert paths == {"evaluation_chain.py", "tools/make_qa.py", *(f"Postprocessing/{name}.py" for name in (
        "retrieval_eval", "evaluation_metrics", "chunk_quality", "report", "preprocessing_files",
        "interview_analysis"))}
    assert [p for p in sorted(paths) if not _is_shim(ast.parse((REPO / p).read_text(encoding="utf-8")))] == []


def test_the_core_rules_flag_a_member_reaching_up_and_results_loading_the_config(tmp_path: Path) -> None:
    files = {"ragstudy/__init__.py": "", "ragstudy/plugins.py": "def members_of(name): pass\n",
             "ragstudy/config.py": "from . import fam\n", "ragstudy/pipeline.py": "from .config import X\n",
             "ragstudy/kb.py": "", "ragstudy/fam/__init__.py": "from ..plugins import members_of\n"
                                                              "LOAD = members_of(__name__)\n",
             "ragstudy/fam/good.py": "from ..kb import KB\n",
             "ragstudy/fam/bad.py": "def f():\n    from ..pipeline import make\n",
             "ragstudy/fam/worse.py": "from . import bad\nimport ragstudy.results\n",
             "ragstudy/notfam/__init__.py": "from ..pipeline import run\n",
             "ragstudy/results.py": "from .kb import KB\n\ndef g():\n    from .config import StudyConfig\n"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    modules = {}
    for path in sorted((tmp_path / "ragstudy").rglob("*.py")):
        parts = list(path.relative_to(tmp_path).with_suffix("").parts)
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = Module(name, path, CORE)
    assert _family_packages(modules) == {"ragstudy.fam"}
    flagged = {line.split(":")[0] for line in _core_violations(modules)}
    assert flagged == {"ragstudy.fam.bad -> ragstudy.pipeline",  # a deferred import counts
                       "ragstudy.fam.bad -> ragstudy.pipeline -> ragstudy.config",
                       "ragstudy.fam.worse -> ragstudy.fam.bad -> ragstudy.pipeline",  # at any depth
                       "ragstudy.fam.worse -> ragstudy.results",
                       "ragstudy.fam.worse -> ragstudy.results -> ragstudy.config",
                       "ragstudy.results -> ragstudy.config",
                       "ragstudy.results -> ragstudy.config -> ragstudy.fam"}  # good.py and notfam/ pass


def test_no_plug_in_member_reaches_a_run_stage_and_results_load_no_family() -> None:
    """Inside the core: a retriever, embedding backend or LLM engine imports no run stage (pipeline, ranking, the
    config, ...) nor the results layer, at any depth; results.py imports neither the config nor a family."""
    modules = _modules()
    assert {"ragstudy.retrievers", "ragstudy.embedders", "ragstudy.llms"} <= _family_packages(modules)
    assert NAMED_RUN_STAGES <= set(modules) and RESULTS_LAYER <= set(modules)
    violations = _core_violations(modules)
    assert violations == [], "imports that reach up inside the core:\n" + "\n".join(violations)


def test_ranking_imports_no_scoring_and_budgets_sit_below_the_run_stages() -> None:
    """Ranking counts its budgets with ragstudy.scoring.budgets, which reaches neither the configuration nor the results
    layer; the scoring (budget_eval) and the verdict are never loaded to rank."""
    modules = _modules()
    graph = {name: _imports(name, module.path, modules) for name, module in modules.items()}
    assert not {"ragstudy.scoring.budget_eval", "ragstudy.scoring.verdict"} & set(_reach(graph, "ragstudy.ranking"))
    assert not {CONFIG, *RESULTS_LAYER} & set(_reach(graph, "ragstudy.scoring.budgets"))


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


def test_the_bundled_evidence_is_named_in_one_module() -> None:
    """One evidence-default rule: only ragstudy/scoring/evidence.py names the bundled sample/evidence.json as a path
    (`default_evidence` says when it applies); every other module calls it (the generator of the sample corpus,
    which writes the file, excepted)."""
    def names_the_file(node: ast.AST) -> bool:
        return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.replace(
            "\\", "/").split("/")[-1] == "evidence.json" and " " not in node.value

    offenders = sorted(f"{module.path.relative_to(REPO)}:{node.lineno}" for name, module in _modules().items()
                       if name != "ragstudy.scoring.evidence" and not module.path.is_relative_to(REPO / "tools")
                       for node in ast.walk(ast.parse(module.path.read_text(encoding="utf-8")))
                       if names_the_file(node))
    assert offenders == [], "modules that name sample/evidence.json instead of calling evidence.default_evidence"


def _top_level_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """(names a module defines, names it imports) at module level (inside top-level if/try blocks too)."""
    defined: set[str] = set()
    imported: set[str] = set()
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            imported |= {alias.asname or alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, (ast.If, ast.Try)):
            todo += [*node.body, *node.orelse, *getattr(node, "finalbody", []),
                     *(s for h in getattr(node, "handlers", []) for s in h.body)]
    return defined, imported


def _reexport_imports(modules: dict[str, Module]) -> list[str]:
    """`from X import name` where X is a module of the core (not a package) that only imports `name` itself."""
    names = {name: _top_level_names(ast.parse(m.path.read_text(encoding="utf-8")))
             for name, m in modules.items() if m.layer == CORE and m.path.name != "__init__.py"}
    out = []
    for importer, module in sorted(modules.items()):
        package = importer if module.path.name == "__init__.py" else importer.rpartition(".")[0]
        for node in ast.walk(ast.parse(module.path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            if base not in names:
                continue
            defined, imported = names[base]
            out += [f"{importer} (line {node.lineno}): {alias.name} from {base}"
                    for alias in node.names if alias.name in imported and alias.name not in defined]
    return out


def test_names_are_imported_from_the_core_module_that_defines_them(tmp_path: Path) -> None:
    """No re-exports in the core: a record type, a check or a constant is imported from where it lives (results.py
    used to pass on ten record names of ragstudy.grid.records, budget_eval the config's validate_budgets)."""
    (tmp_path / "ragstudy").mkdir()
    files = {"ragstudy/rows.py": "class Row: pass\n", "ragstudy/results.py": "from .rows import Row\nX = 1\n",
             "ragstudy/user.py": "from .results import Row, X\nfrom ragstudy.rows import Row\n"}
    for rel, text in files.items():
        (tmp_path / rel).write_text(text, encoding="utf-8")
    made = {name: Module(name, tmp_path / f"ragstudy/{name.split('.')[1]}.py", CORE)
            for name in ("ragstudy.rows", "ragstudy.results", "ragstudy.user")}
    assert _reexport_imports(made) == ["ragstudy.user (line 1): Row from ragstudy.results"]
    offenders = _reexport_imports(_modules())
    assert offenders == [], "import these names from the module that defines them:\n" + "\n".join(offenders)


# ------------------------------------------------------------------ messages name `ragstudy SUB`, not the scripts
def _shim_scripts() -> tuple[str, ...]:
    """The paper's script paths that still run as shims of a subcommand (`ragstudy_cli.app.COMMANDS`)."""
    from ragstudy_cli.app import COMMANDS

    return tuple(sorted({c.script for c in COMMANDS if c.script.endswith(".py")}))


def _script_advice(path: Path, shims: tuple[str, ...]) -> list[str]:
    """Every string literal of `path` a user reads that names a shim script (its path, or its file name alone):
    messages, help texts, writer notes, and the module docstring when the module shows it (`__doc__` as a parser's
    description). Function and class docstrings (developers' notes) and a literal that is exactly a shim's path (the
    shim table naming its file, a file list) are not advice."""
    names = "|".join(sorted({re.escape(s) for s in shims} | {r"(?<![\w/.])" + re.escape(s.rsplit("/", 1)[-1])
                                                               for s in shims}))
    pattern = re.compile(names)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    shows_doc = any(isinstance(n, ast.Name) and n.id == "__doc__" for n in ast.walk(tree))
    quiet: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)) and node.body \
                and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant) \
                and not (isinstance(node, ast.Module) and shows_doc):
            quiet.add(id(node.body[0].value))
    hits = sorted((node.lineno, found.group(0)) for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in quiet
                  and node.value not in shims for found in [pattern.search(node.value)] if found)
    where = path.relative_to(REPO) if path.is_relative_to(REPO) else path.name
    return [f"{where}:{line}: {name}" for line, name in hits]


def test_the_script_advice_detector_flags_messages_and_spares_notes_and_names(tmp_path: Path) -> None:
    shims = ("evaluation_chain.py", "Postprocessing/retrieval_eval.py")
    source = tmp_path / "m.py"
    source.write_text('"""Usage: python3 evaluation_chain.py (not shown to users)."""\n'
                      'def f(d):\n    """Called by Postprocessing/retrieval_eval.py."""\n'
                      '    files = ("evaluation_chain.py",)\n'
                      '    raise ValueError(f"{d}: missing; run `python3 Postprocessing/retrieval_eval.py` first")\n'
                      'NOTE = "scored by retrieval_eval.py"\n', encoding="utf-8")
    assert _script_advice(source, shims) == ["m.py:5: Postprocessing/retrieval_eval.py",
                                             "m.py:6: retrieval_eval.py"]
    source.write_text('"""Usage: python3 evaluation_chain.py --limit 5"""\nimport argparse\n'
                      'P = argparse.ArgumentParser(description=__doc__)\n', encoding="utf-8")
    assert _script_advice(source, shims) == ["m.py:1: evaluation_chain.py"]  # a docstring shown as --help


def test_messages_name_the_subcommand_not_the_papers_script() -> None:
    """Every message, help text and writer note says `ragstudy SUB ...` (README's table): the paper's script paths
    still run, as shims, but are no longer advertised (`python3 Postprocessing/x.py`, `evaluation_chain.py --y`)."""
    shims = _shim_scripts()
    assert "evaluation_chain.py" in shims and "Postprocessing/retrieval_eval.py" in shims
    offenders = [hit for module in _modules().values() for hit in _script_advice(module.path, shims)]
    assert offenders == [], ("name the subcommand (`ragstudy score-retrieval --results-dir D`, see README's table) "
                             "instead of the script:\n" + "\n".join(offenders))


def test_one_function_ends_a_process_without_its_teardown() -> None:
    """The Ctrl-C ending (flush, then `os._exit(130)`) is written once, in ragstudy.io.exit_process, and every entry
    point calls it (it used to be copied into the command, the chain and tools/make_qa.py; the old script paths are
    shims onto the command's run_as)."""
    callers = []
    for name, module in sorted(_modules().items()):
        for node in ast.walk(ast.parse(module.path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "_exit":
                callers.append(f"{name}:{node.lineno}")
    assert [c.split(":")[0] for c in callers] == ["ragstudy.io"], callers
    assert (REPO / "ragstudy_cli/app.py").read_text(encoding="utf-8").count("exit_process(main(") == 3  # console,
    # run_as and run_chain_script
    for shim in ("evaluation_chain.py", "tools/make_qa.py"):
        assert "run_" in (REPO / shim).read_text(encoding="utf-8"), shim


# a worker process whose stdout is its channel to the process that started it (one JSON line per answer)
PRINTS_ITS_PROTOCOL = frozenset({"ragstudy.llms._onnx_worker"})


def _prints(path: Path) -> list[int]:
    """The lines of `path` that call print()."""
    return [node.lineno for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"]


def test_the_print_detector_finds_a_call_and_spares_a_name(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text('"""print(x) in a docstring."""\nshow = print\n\n\ndef f(x):\n    print(x)\n', encoding="utf-8")
    assert _prints(source) == [6]


def test_library_code_logs_and_never_prints() -> None:
    """The core, the strategy folders, the embedding wrapper and the Postprocessing jobs never print: a job says what
    it did through ragstudy.io.tell (a log record the command line shows on stdout, `ragstudy study` keeps in its
    log); only the command line, benchmarks and tools print."""
    library = [module for name, module in sorted(_modules().items())
               if (module.layer in (GROUND, CORE, STRATEGY) or name.startswith("Postprocessing"))
               and not module.is_shim and name not in PRINTS_ITS_PROTOCOL]
    assert len(library) > 100
    offenders = [f"{module.path.relative_to(REPO)}:{line}" for module in library for line in _prints(module.path)]
    assert offenders == [], "log (logging.getLogger(__name__)) or tell (ragstudy.io) instead:\n" + "\n".join(offenders)
