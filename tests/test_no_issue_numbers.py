"""What users read says what and why; which issue asked for a change, and what the code did before, is git
history. So no file a user reads cites the tracker: README.md, docs/ (and every other Markdown file), the
notebook, the Makefile, pyproject.toml and every .py file (docstrings, comments, `--help` texts, defaults,
test names), nor the `--help` text of any command as click renders it.

A citation (`CITATION`) is the word or its plural followed by a number, whatever stands between them
(spaces, a line break, a comment's `#`, a dash or an underscore, a path without a separator), or the word
after "the" (the tracker's text, which a reader of the repository cannot see); `PLANTED` lists one case of
each kind, and `test_the_guard_fails_on_a_planted_file` shows the guard failing on them.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parents[1]
WORD = "issue"  # spelled once, so that the patterns below do not cite anything themselves
CITATION = re.compile(rf"(?<![a-z]){WORD}s?(?:[\s#_/\",-]|\\n)*\d|(?<![a-z])the {WORD}\b", re.IGNORECASE)
"""A citation of the tracker (module text). Not after a letter (a word that ends in the word is another
word), but after an underscore (a test's name); `\\n`, quotes and commas are a line break between the JSON
strings of a notebook's cell."""
SUFFIXES = (".py", ".md", ".ipynb", ".toml", ".cfg", ".txt")
NAMES = ("Makefile",)
SKIP = ("/runs/",)
"""Result stores' run files: data, not text a user reads."""

REMAINING: set[str] = set()
"""Files allowed to cite the tracker: none (a file added here must leave once it no longer cites it)."""


def read_files(root: Path) -> list[str]:
    """The text files git tracks or would track under `root` that a user reads (module text)."""
    args = ["git", "-C", str(root), "ls-files", "--cached", "--others", "--exclude-standard"]
    listed = subprocess.run(args, capture_output=True, text=True, check=True).stdout.splitlines()
    return [rel for rel in listed if (rel.endswith(SUFFIXES) or Path(rel).name in NAMES)
            and not any(s in f"/{rel}" for s in SKIP) and (root / rel).is_file()]


def citations(text: str) -> list[str]:
    """Every citation of the tracker in `text` (module text), as found."""
    return [m.group(0) for m in CITATION.finditer(text)]


def citing_files(root: Path = ROOT) -> dict[str, int]:
    """{path: number of citations} of the files `read_files` lists."""
    found = {}
    for rel in read_files(root):
        n = len(citations((root / rel).read_text(encoding="utf-8", errors="replace")))
        if n:
            found[rel] = n
    return found


def test_no_file_a_user_reads_cites_an_issue():
    assert set(citing_files()) == REMAINING


PLANTED = [
    f"{WORD.title()} 24 asked whether",
    f"see {WORD}\n24 for the rule",
    f"# the {WORD}\n    # 12 preset",
    f"the {WORD}-4 preset",
    f"results/{WORD}12/eval",
    f"before {WORD}s 10 and 15",
    f'"source": ["{WORD}\\n", "16"]',
    f"Verdict (n vs m, the {WORD}'s rule)",
    f"The {WORD} asks for n in 2..32",
    f"--no-such-option-{WORD}-16",
    f"def test_reproduces_the_pre_{WORD}_15_simulator():",
]
NOT_CITATIONS = [f"t{WORD} 5", f"{WORD}d 5 orders", f"an {WORD} with no number", f"{WORD}_rate 0.5"]


@pytest.mark.parametrize("text", PLANTED)
def test_the_pattern_finds_each_kind_of_citation(text):
    assert citations(text), text


@pytest.mark.parametrize("text", NOT_CITATIONS)
def test_the_pattern_leaves_other_words_alone(text):
    assert citations(text) == [], text


def test_the_guard_fails_on_a_planted_file(tmp_path):
    """A repository with one clean file and one planted citation in each kind of file the guard reads: the
    guard names exactly the planted ones (so `test_no_file_a_user_reads_cites_an_issue` would fail)."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "clean.md").write_text("No tracker here: n* rises with C.\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "PAGE.md").write_text(f"# A page\n\nThe group-std rule ({WORD}\n24) says so.\n")
    (tmp_path / "cli.py").write_text(f'HELP = "results directory (default results/{WORD}12/eval)"\n')
    notebook = f'{{"cells": [{{"source": ["the {WORD}\'s rule"]}}]}}\n'
    (tmp_path / "docs" / "tutorial.ipynb").write_text(notebook)
    (tmp_path / "Makefile").write_text(f"# {WORD}-22: a hung test\n")
    (tmp_path / "data.csv").write_text(f"{WORD} 5\n")  # not a file users read as text
    assert set(citing_files(tmp_path)) == {"docs/PAGE.md", "cli.py", "docs/tutorial.ipynb", "Makefile"}


def _helps() -> list[tuple[str, str]]:
    """(command path, rendered --help) of every command of `isocompute`, groups included."""
    from isocompute.cli import main

    out = []

    def walk(cmd: click.Command, path: str, ctx: click.Context) -> None:
        out.append((path, cmd.get_help(ctx)))
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                walk(sub, f"{path} {name}", sub.make_context(name, [], parent=ctx, resilient_parsing=True))

    # make_context, not Context(...): it applies each command's context settings (the -h alias), which
    # click caches with the help option on first use
    walk(main, "isocompute", main.make_context("isocompute", [], resilient_parsing=True))
    return out


def test_no_help_text_cites_an_issue():
    """The rendered --help of every command, defaults included (a help string split over two literals, or a
    default path, would escape the source scan)."""
    bad = {path: citations(text) for path, text in _helps() if citations(text)}
    assert bad == {}
