"""The one-way arrows of docs/DESIGN.md, enforced on the source:

    isocompute (cli, integrations) -> isocompute.reports -> paper_figs -> studies -> {sandbox, llm_backend}
                                                                                   -> isocompute.contract

`isocompute.contract` imports nothing of ours and every unit may import it; `isocompute.reports` may import
paper_figs and studies, and nothing below it imports a report or the facade. The checker keys on module paths
(`isocompute.contract` and `isocompute.reports` are units of their own, not `isocompute`). Every import
counts, including those inside functions and module names given to importlib as string literals. Also: no
import circle between our modules, and inside studies/ only studies/backends.py imports an engine."""

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
EXCEPTIONS = {("isocompute/cli.py", "llm_backend")}
"""(file, unit) imports beyond ALLOWED: the facade assembles the packages' click groups, so isocompute/cli.py
mounts `llm_backend.cli` (lazily, by name) as `isocompute llm`."""
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
