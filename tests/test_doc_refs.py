"""Every Markdown file that the code, README.md, the Makefile or the tutorial notebook names ships with the
project, so no reference points at a design note the repository lacks.

A name counts when it looks like a path ending in `.md`; it resolves against the repository root or the
directory of the file that names it. Not citations: web addresses, files a program writes (a name joined
to a folder in code, `tmp / "CLAIMS.md"`, and defaults under results/, which is where runs write), and this
test's own examples. Tests are read for what they cite (docstrings and comments), not for the file names
their string literals build or compare. Nothing may point outside the repository.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("isocompute", "studies", "sandbox", "llm_backend", "paper_figs", "benchmarks", "tests")
MD_PATH = re.compile(r"(?<![\w./-])((?:\.\.?/)?[\w.-]+(?:/[\w.-]+)*\.md)(?![\w/])")
URL = re.compile(r"[a-z]+://\S+")
JOINED = re.compile(r"/ [\"'][\w.-]+\.md[\"']")
"""A file name joined to a folder in code (an output, not a citation)."""


def cited_files() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "Makefile", ROOT / "docs" / "tutorial.ipynb", ROOT / "pyproject.toml"]
    for pkg in SOURCES:
        files += sorted((ROOT / pkg).rglob("*.py"))
    return [f for f in files if f.exists() and ".venv" not in f.parts and f.name != "test_doc_refs.py"]


def md_refs(text: str) -> list[str]:
    """The `.md` paths named in `text` (web addresses and joined output names removed first)."""
    refs = MD_PATH.findall(JOINED.sub(" ", URL.sub(" ", text)))
    return [r for r in refs if not r.startswith("results/")]


def cited_text(f: Path) -> str:
    """What a file cites: all of it, or for a test its docstrings and comments."""
    text = f.read_text(errors="replace")
    if "tests" not in f.relative_to(ROOT).parts or f.suffix != ".py":
        return text
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    parts = [t.string for t in tokens if t.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            parts.append(ast.get_docstring(node) or "")
    return "\n".join(parts)


def resolves(ref: str, where: Path) -> bool:
    for base in (ROOT, where.parent):
        p = (base / ref).resolve()
        if p.is_file() and ROOT in p.parents:
            return True
    return False


def test_the_pattern_finds_bare_names_and_paths():
    text = "see PAPER.md Section 4, docs/DESIGN.md and [x](docs/llm_study/nvm/README.md); https://a.b/C.md no"
    assert md_refs(text) == ["PAPER.md", "docs/DESIGN.md", "docs/llm_study/nvm/README.md"]
    assert md_refs("../shared/DESIGN.md") == ["../shared/DESIGN.md"]
    assert md_refs('out = tmp / "CLAIMS.md"; default results/CLAIMS-quick.md') == []
    assert not resolves("../shared/DESIGN.md", ROOT / "docs" / "CONTRACTS.md")
    assert not resolves("NO-SUCH-FILE.md", ROOT / "README.md")


def test_every_md_file_named_exists():
    missing = {}
    for f in cited_files():
        bad = sorted({r for r in md_refs(cited_text(f)) if not resolves(r, f)})
        if bad:
            missing[str(f.relative_to(ROOT))] = bad
    assert not missing, f"Markdown files named but not in the repository: {missing}"


def test_the_project_docs_ship():
    for name in ("DESIGN.md", "PAPER.md", "LLM_NOTES.md", "CONTRACTS.md"):
        text = (ROOT / "docs" / name).read_text()
        assert len(text) > 1000, name
        assert "../shared" not in text and "/work/" not in text, name
