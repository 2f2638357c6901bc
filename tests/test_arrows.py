"""The one-way arrows of docs/DESIGN.md, enforced on the source:

    isocompute (cli, integrations) -> isocompute.reports -> paper_figs -> studies -> {sandbox, llm_backend}
                                                                                   -> isocompute.contract

`isocompute.contract` imports nothing of ours and every unit may import it; `isocompute.reports` may import
paper_figs and studies, and nothing below it imports a report or the facade. The checker keys on module paths
(`isocompute.contract` and `isocompute.reports` are units of their own, not `isocompute`). Every import
counts, including those inside functions and module names given to importlib as string literals. Also: no
import circle between our modules, and inside studies/ only studies/backends.py imports an engine.

The command line sits on top of the library, across the units. A CLI module is one whose dotted name has a
part `cli` or a part starting with `cli_` (isocompute.cli, studies.cli, studies.cli_kit.*, paper_figs.cli,
isocompute.reports.cli.*, llm_backend.cli), or a `__main__`; every other module is a library module (reports'
generators, figures, fits, the store, the engines). Only CLI modules import click, and no library module
imports a CLI module, so all of the library runs without the command line (the rule is also tested on a
made-up graph). And no module writes another module's globals (`mod.NAME = ...`, `mod.NAME[...] = ...`,
`mod.NAME.append(...)`, `setattr(mod, ...)`): state that several modules read is owned by one module and
changed through its functions (studies.cli_kit.output: the JSON stream, -v)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("isocompute", "paper_figs", "studies", "sandbox", "llm_backend")
UNITS = ("isocompute.contract", "isocompute.reports", "isocompute", "paper_figs", "studies", "sandbox",
         "llm_backend")
"""Most specific first: a module belongs to the first unit that is it or a package above it."""
CONTRACT = "isocompute.contract"
ENGINES = {"sandbox", "llm_backend"}
ALLOWED = {
    "isocompute": {"isocompute", "isocompute.reports", "paper_figs", "studies", CONTRACT},
    "isocompute.reports": {"isocompute.reports", "paper_figs", "studies", CONTRACT},
    "paper_figs": {"paper_figs", "studies", CONTRACT},
    "studies": {"studies", *ENGINES, CONTRACT},
    "sandbox": {"sandbox", CONTRACT},
    "llm_backend": {"llm_backend", CONTRACT},
    CONTRACT: {CONTRACT},
}
EXCEPTIONS = {("isocompute/cli.py", "llm_backend"), ("isocompute/integrations/trl_grpo.py", "llm_backend")}
"""(file, unit) imports beyond ALLOWED: the facade assembles the packages' click groups, so isocompute/cli.py
mounts `llm_backend.cli` (lazily, by name) as `isocompute llm`; the TRL trainer runs the llm backend's
allocators and group advantages (llm_backend.allocators, llm_backend.loss) rather than a second copy."""
ENGINE_GATE = "studies/backends.py"
"""The one module of studies/ that imports an engine (lazily, inside the adapters)."""


def is_module(name: str) -> bool:
    """Whether `name` is a module or package of ours on disk."""
    path = ROOT.joinpath(*name.split("."))
    return name.split(".")[0] in PACKAGES and (path.with_suffix(".py").is_file() or
                                               (path / "__init__.py").is_file())


def module_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> set[str]:
    """Modules of ours that `path` imports (statements anywhere in it, and importlib string literals), each
    the deepest module named: `from studies import config` is studies.config, `from studies.config import
    RunConfig` is studies.config."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            subs = [f"{node.module}.{a.name}" for a in node.names if is_module(f"{node.module}.{a.name}")]
            names = subs if len(subs) == len(node.names) else [node.module, *subs]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            # "studies.fit.plots" passed to importlib / a lazy registry; "isocompute.json" is a file name, and
            # only an existing module of ours counts
            if "." in node.value and " " not in node.value and is_module(node.value):
                names = [node.value]
        found |= {n for n in names if n.split(".")[0] in PACKAGES}
    return found


def unit_of(module: str) -> str:
    return next(u for u in UNITS if module == u or module.startswith(u + "."))


def sources() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


@pytest.mark.parametrize("unit", sorted(ALLOWED))
def test_arrows_point_one_way(unit):
    files = [f for f in sources() if unit_of(module_of(f)) == unit]
    assert files, f"no sources found for {unit}"
    bad = {}
    for f in files:
        rel = str(f.relative_to(ROOT))
        wrong = {unit_of(m) for m in imported_modules(f)} - ALLOWED[unit]
        wrong = sorted(u for u in wrong if (rel, u) not in EXCEPTIONS)
        if wrong:
            bad[rel] = wrong
    assert not bad


def engine_importers() -> list[str]:
    """Files of studies/ other than ENGINE_GATE that import sandbox or llm_backend."""
    return sorted(str(f.relative_to(ROOT)) for f in sources()
                  if unit_of(module_of(f)) == "studies" and str(f.relative_to(ROOT)) != ENGINE_GATE
                  and {unit_of(m) for m in imported_modules(f)} & ENGINES)


def test_only_the_backends_module_of_studies_imports_an_engine():
    assert engine_importers() == []


def circles() -> list[list[str]]:
    """Import circles: strongly connected components of more than one module in our modules' import graph."""
    return strongly_connected({module_of(f): {m for m in imported_modules(f) if m != module_of(f)}
                               for f in sources()})


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Components of more than one node of a directed graph {node: successors} (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_no_import_circles():
    assert circles() == []


def test_the_circle_finder_finds_a_circle():
    """circles() on a made-up graph: a -> b -> c -> a is one circle, d -> a none."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert strongly_connected(graph) == [["a", "b", "c"]]


def test_the_checker_sees_lazy_and_nested_imports(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("def f():\n    import paper_figs.cli\n"
                   "    return importlib.import_module('llm_backend.cli')\n")
    assert imported_modules(src) == {"paper_figs.cli", "llm_backend.cli"}
    src.write_text("NAME = 'isocompute.json'\nMOD = 'studies.declared'\n")  # a file name is no import
    assert imported_modules(src) == {"studies.declared"}
    src.write_text("from isocompute import contract\nfrom studies.config import RunConfig\n")
    assert {unit_of(m) for m in imported_modules(src)} == {CONTRACT, "studies"}


# ------------------------------------------------------------------------------- the command line on top
def is_cli(module: str) -> bool:
    """Whether `module` is a CLI module (module docstring): a name part `cli` or `cli_*`, or a `__main__`."""
    parts = module.split(".")
    return parts[-1] == "__main__" or any(p == "cli" or p.startswith("cli_") for p in parts)


def imports_click(path: Path) -> bool:
    """Whether `path` imports click (or a part of it), anywhere in it."""
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "click" for a in node.names):
            return True
        if (isinstance(node, ast.ImportFrom) and node.level == 0
                and (node.module or "").split(".")[0] == "click"):
            return True
    return False


def library_to_cli(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """The edges (importer, imported) of an import graph {module: modules it imports} from a library module
    to a CLI module, sorted."""
    return sorted((a, b) for a, bs in graph.items() if not is_cli(a) for b in bs if is_cli(b))


def import_graph() -> dict[str, set[str]]:
    return {module_of(f): imported_modules(f) for f in sources()}


def test_only_cli_modules_import_click():
    assert sorted(str(f.relative_to(ROOT)) for f in sources() if imports_click(f)
                  and not is_cli(module_of(f))) == []


def test_no_library_module_imports_a_cli_module():
    assert library_to_cli(import_graph()) == []


def test_the_cli_rule_on_a_made_up_graph():
    """A fit importing the output policy and a figure importing its package's commands are caught; commands
    importing commands, the shared kit or the library, and the library importing the library, are not."""
    graph = {
        "studies.fit.report": {"studies.cli_kit.output", "studies.fit.frontier"},
        "paper_figs.fig02": {"paper_figs.cli"},
        "studies.cli": {"studies.cli_kit.params", "studies.fit.report"},
        "isocompute.reports.cli.claims": {"isocompute.reports.claims.report", "isocompute.reports.cli"},
        "isocompute.cli": {"studies.cli", "studies.cli_kit.output"},
        "isocompute.__main__": {"isocompute.cli"},
        "isocompute.reports.allocators": {"studies.files", "studies.sweeps"},
    }
    assert library_to_cli(graph) == [("paper_figs.fig02", "paper_figs.cli"),
                                     ("studies.fit.report", "studies.cli_kit.output")]
    assert [m for m in ("studies.cli_kit", "llm_backend.cli", "studies.client", "isocompute.reports.claims")
            if is_cli(m)] == ["studies.cli_kit", "llm_backend.cli"]


MUTATORS = {"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "popitem", "add",
            "discard", "sort", "reverse"}
"""Methods that change a list, dict or set in place."""


def module_names(tree: ast.AST) -> set[str]:
    """Names a file binds to a module of ours: `import a.b` binds a, `import a.b as c` c, `from a import b`
    b when a.b is a module."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.asname or a.name.split(".")[0] for a in node.names if a.name.split(".")[0] in PACKAGES}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out |= {a.asname or a.name for a in node.names if is_module(f"{node.module}.{a.name}")}
    return out


def _rooted_at(node: ast.AST, names: set[str]) -> bool:
    """Whether `node` is `m.X`, `m.X.Y`, `m.X[...]`... for a name m in `names` (at least one attribute)."""
    seen_attr = False
    while isinstance(node, ast.Attribute | ast.Subscript):
        seen_attr |= isinstance(node, ast.Attribute)
        node = node.value
    return seen_attr and isinstance(node, ast.Name) and node.id in names


def foreign_writes(path: Path) -> list[str]:
    """The lines of `path` that write a global of another module of ours (module docstring)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    mods = module_names(tree)
    found: list[int] = []
    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in MUTATORS and _rooted_at(node.func.value, mods):
                found.append(node.lineno)
            continue
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr",
                                                                                                  "delattr"):
            if node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in mods:
                found.append(node.lineno)
            continue
        found += [node.lineno for t in targets if _rooted_at(t, mods)]
    return [f"{path.name}:{line}" for line in sorted(found)]


def test_no_module_writes_another_modules_globals():
    assert [w for f in sources() for w in foreign_writes(f)] == []


def test_the_global_write_checker_sees_the_ways_to_write(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("from studies import cli as c\nimport studies.config\n"
                   "from studies.config import RunConfig\n"
                   "c.VERBOSE[:] = [True]\nc.JSON_STREAM.append(1)\nstudies.config.X = 1\n"
                   "setattr(c, 'Y', 2)\nc.emit_json({})\nRunConfig.field_help()\nx = c.HELP['n']\n"
                   "local = []\nlocal.append(1)\n")
    assert foreign_writes(src) == ["m.py:4", "m.py:5", "m.py:6", "m.py:7"]
