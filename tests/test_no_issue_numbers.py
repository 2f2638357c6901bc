"""Docstrings and comments say what the code does and why; which issue asked for it, and what the code did
before, is git history. So no .py file of the repository cites "issue N" (docs/*.md may: they are the
project's record)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CITATION = re.compile(r"\bissue \d+", re.IGNORECASE)

REMAINING: set[str] = set()
"""Files that still cite issues, left while they are being changed on other branches; emptied as they are
rewritten (a file that no longer cites one must leave this set too)."""


def citing_files() -> dict[str, int]:
    """{path: number of citations} of the .py files git tracks or would track."""
    args = ["git", "-C", str(ROOT), "ls-files", "--cached", "--others", "--exclude-standard", "*.py"]
    listed = subprocess.run(args, capture_output=True, text=True, check=True).stdout.split()
    found = {}
    for rel in listed:
        path = ROOT / rel
        if path.is_file():
            n = len(CITATION.findall(path.read_text(encoding="utf-8", errors="replace")))
            if n:
                found[rel] = n
    return found


def test_no_py_file_cites_an_issue():
    assert set(citing_files()) == REMAINING


def test_the_pattern_finds_citations_and_nothing_else():
    word = "issue"  # spelled apart, so that this file cites nothing itself
    text = f"see {word} 12 and {word.title()} 3; {word}-16, {word}s 4, t{word} 5"
    assert CITATION.findall(text) == [f"{word} 12", f"{word.title()} 3"]
