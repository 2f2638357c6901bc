"""`isocompute report ...`: one click group over the report generators, each imported only when it is invoked
or listed (they pull pandas, matplotlib or an engine, which `isocompute run` never needs).

This package holds every report's click command, one module per report (claims also holds mechanisms), over
the report's library module in isocompute/reports/, which imports no click and no command. Every generated
document quotes the `isocompute report ...` command that regenerates it. `isocompute claims` and
`isocompute groupstd` remain as aliases of `isocompute report claims` / `groupstd` (isocompute/cli.py).
"""

from __future__ import annotations

import importlib
import importlib.util

import click

from studies.config import StudiesError

COMMANDS = {
    "claims": ("isocompute.reports.cli.claims", "claims"),
    "groupstd": ("isocompute.reports.cli.groupstd", "groupstd"),
    "mechanisms": ("isocompute.reports.cli.claims", "mechanisms"),
    "allocators": ("isocompute.reports.cli.allocators", "allocators"),
    "llm-study": ("isocompute.reports.cli.llm_study", "llm_study"),
    "readme": ("isocompute.reports.cli.readme", "readme"),
    "predict": ("isocompute.reports.cli.predict_eval", "predict_eval"),
    "tiny-study": ("isocompute.reports.cli.tiny_study", "tiny_study"),
    "tiny-stage2": ("isocompute.reports.cli.tiny_stage2", "tiny_stage2"),
}
"""Sub-command -> (module, attribute). A module not in this checkout (yet) leaves its command out."""


def _present(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


class _Reports(click.Group):
    """The report group: sub-commands imported from COMMANDS on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name, (module, _) in COMMANDS.items() if _present(module))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS or not _present(COMMANDS[name][0]):
            return None
        module, attr = COMMANDS[name]
        try:
            return getattr(importlib.import_module(module), attr)
        except ImportError as e:
            raise StudiesError(f"the report {name} cannot load: {e}") from None


@click.group("report", cls=_Reports)
def report() -> None:
    """Regenerate the project's reports from runs: the claims report (docs/CLAIMS.md), the group-std and
    mechanism studies, the allocators report, the real-LLM study, the README's generated paragraphs, the
    predict evaluation and the preregistered tiny-LM study (tiny-study: also runs its stages)."""
