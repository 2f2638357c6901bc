"""Every command a document names exists: README.md and every Markdown file under docs/ (the generated reports
among them) are read for `isocompute ...` and `python -m ...` invocations in code (fenced blocks and inline
code), and each is checked against the click groups of the CLI (a sub-command of a group must be one of its
commands) or, for `python -m`, against the modules that can run as a program.

Also here: stale text stays gone (the claims header's budgets, the envelope's fold label,
the llm study's index, the paired-evaluation statements, docs/GROUP_STD.md's trailing "Not run" block)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.S)
INLINE = re.compile(r"`([^`\n]+)`")
ISO = re.compile(r"(?:^|[\s;&|(]|\$ )isocompute((?:\s+[A-Za-z][\w-]*){0,2})([^;&|)`]*)")
LONG = re.compile(r"(?:^|\s)(--[A-Za-z][\w-]*)")
"""A long option of an invocation (its value, after a space or '=', is not checked)."""
PYM = re.compile(r"(?:^|[\s;&|(]|\$ )python3?\s+-m\s+([\w.]+)((?:\s+[A-Za-z][\w-]*){0,2})")


def docs() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def code_of(text: str) -> list[str]:
    """The code of a Markdown text: fenced blocks (joined across line continuations) and inline spans."""
    blocks = [b.replace("\\\n", " ") for b in FENCE.findall(text)]
    rest = FENCE.sub(" ", text)
    return blocks + INLINE.findall(rest)


def invocations(code: str) -> list[tuple[str, list[str]]]:
    """(program, words) of each invocation: ("isocompute", ["report", "claims", "--quick"]), ("python -m X",
    [...]); an isocompute invocation's words end with the long options it passes."""
    out = []
    for line in code.splitlines():
        for m in ISO.finditer(line):
            args = re.split(r"\s#", m.group(2))[0]  # a shell comment after the command is prose
            out.append(("isocompute", m.group(1).split() + LONG.findall(args)))
        for m in PYM.finditer(line):
            out.append((f"python -m {m.group(1)}", m.group(2).split()))
    return out


def missing(words: list[str]) -> str | None:
    """Why `isocompute <words>` names no command or option (None when it does): each word after a group must
    be one of its sub-commands; after a plain command the words are its arguments; a long option must be one
    of the command's (or group's) options where it stands."""
    from isocompute.cli import main

    cmd: click.Command = main
    ctx = click.Context(main)
    path = ["isocompute"]
    for w in words:
        if w.startswith("--"):
            known = {o for prm in cmd.params for o in (*prm.opts, *prm.secondary_opts)} | {"--help"}
            if w not in known:
                return f"`{' '.join(path)}` has no option {w}"
            continue
        if not isinstance(cmd, click.Group):
            continue
        sub = cmd.get_command(ctx, w)
        if sub is None:
            return f"`{' '.join(path)}` has no command {w!r}"
        cmd, path = sub, [*path, w]
    return None


def module_missing(module: str, words: list[str]) -> str | None:
    """Why `python -m module words` cannot run (None when it can)."""
    if module == "isocompute":
        return missing(words)
    try:
        spec = importlib.util.find_spec(module)
    except ModuleNotFoundError:
        spec = None
    if spec is None:
        return f"no module {module}"
    if spec.submodule_search_locations is not None:
        return None if importlib.util.find_spec(f"{module}.__main__") else f"package {module} has no __main__"
    src = Path(spec.origin).read_text()
    return None if re.search(r"__name__\s*==\s*['\"]__main__['\"]", src) else f"{module} is not a program"


def problems(text: str) -> list[str]:
    out = []
    for code in code_of(text):
        for prog, words in invocations(code):
            why = missing(words) if prog == "isocompute" else module_missing(prog.split()[-1], words)
            if why:
                out.append(f"{prog} {' '.join(words)}: {why}")
    return out


def test_the_parser_finds_commands_in_code_only_and_fails_on_unknown_ones():
    text = "\n".join([
        "isocompute is a sandbox (prose, not a command).",
        "Run `isocompute report claims --quick` or `isocompute report nonsense`.",
        "`isocompute report allocators --seeds 8` names a removed option; `isocompute fit r --by n` is fine.",
        "```bash", "isocompute llm options    # every --option key (a comment)", "```",
        "```bash", "isocompute sweep n-vs-m --n 2,4 \\", "    --out r && isocompute fit r", "```",
        "`python -m llm_backend.study --n 2`, `python -m isocompute run --json`",
    ])
    got = problems(text)
    assert any("no command 'nonsense'" in p for p in got)
    assert any("no module llm_backend.study" in p for p in got)
    assert any("`isocompute report allocators` has no option --seeds" in p for p in got)
    assert len(got) == 3, got


@pytest.mark.parametrize("doc", docs(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_documented_command_exists(doc):
    assert not problems(doc.read_text()), problems(doc.read_text())


# ------------------------------------------------------------------------------------------- stale text
def test_claims_header_gives_each_section_its_own_top_budget():
    from isocompute.reports.claims import FULL, SECTIONS
    from isocompute.reports.claims.report import section_tops

    tops = section_tops(FULL, SECTIONS)
    assert {"theory", "f1", "f5", "mechanism"} <= set(tops["2^22"]) and "f2" in tops["2^20"]
    assert "mechanisms" in tops["2^16"]


def test_the_envelope_fold_label_names_seeds_not_metrics():
    import pandas as pd

    from isocompute.reports.claims.nstar import _chosen

    tab = pd.DataFrame({"seed": [0, 1, 2, 3], "chosen_lr": [0, 1, 0, 1]})
    assert _chosen(tab, {0: 0.001, 1: 0.003}) == "0.001 (even seeds) / 0.003 (odd seeds)"
    assert _chosen(tab.assign(chosen_lr=0), {0: 0.001}) == "0.001"


def test_llm_study_docs_agree_with_readme_and_each_other():
    index = (ROOT / "docs/llm_study/README.md").read_text()
    assert "nvm/" in index and "main result is `cpu_vllm/`" not in index
    cpu = (ROOT / "docs/llm_study/cpu/README.md").read_text()
    assert "takes only an engine-wide seed, so evaluations are not paired" not in cpu
    assert "(paired)" in (ROOT / "docs/llm_study/cpu_vllm/README.md").read_text()


def test_group_std_has_no_not_run_block():
    assert not re.search(r"^#+\s*Not run", (ROOT / "docs/GROUP_STD.md").read_text(), re.M | re.I)
