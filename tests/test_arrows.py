"""The one-way arrows of docs/DESIGN.md, enforced on the source: isocompute -> paper_figs -> studies ->
{sandbox, llm_backend}. Every import counts, including those inside functions and module names given to
importlib as string literals."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = ("isocompute", "paper_figs", "studies", "sandbox", "llm_backend")
ALLOWED = {
    "isocompute": set(OURS),
    "paper_figs": {"paper_figs", "studies"},
    "studies": {"studies", "sandbox", "llm_backend"},
    "sandbox": {"sandbox"},
    "llm_backend": {"llm_backend"},
}


def imported_packages(path: Path) -> set[str]:
    """Top-level names of our packages that `path` imports (statements and importlib string literals)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            # "studies.fit.plots" passed to importlib / a lazy registry; bare words are not module paths
            # that name a module of ours ("isocompute.json" is a file name: isocompute/json.py does not exist)
            if "." in node.value and node.value.split(".", 1)[0] in OURS and " " not in node.value:
                top, sub = node.value.split(".")[:2]
                if (ROOT / top / f"{sub}.py").is_file() or (ROOT / top / sub).is_dir():
                    names = [node.value]
        found |= {n.split(".", 1)[0] for n in names if n.split(".", 1)[0] in OURS}
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_arrows_point_one_way(package):
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"no sources found for {package}"
    bad = {str(f.relative_to(ROOT)): sorted(imported_packages(f) - ALLOWED[package]) for f in files}
    assert not {k: v for k, v in bad.items() if v}, bad


def test_the_checker_sees_lazy_and_nested_imports(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("def f():\n    import paper_figs.cli\n"
                   "    return importlib.import_module('llm_backend.cli')\n")
    assert imported_packages(src) == {"paper_figs", "llm_backend"}
    src.write_text("NAME = 'isocompute.json'\nMOD = 'studies.claims.report'\n")  # a file name is no import
    assert imported_packages(src) == {"studies"}
