"""Declarative description of what each figure needs: studies (kind, preset, dataset, grid, budget, seeds).

A figure module declares `STUDIES` as `StudySpec`s; `paper_figs.build` turns them into `studies` sweeps, runs
or reuses them, and hands the figure a dict of tables keyed by study name (`name` -> learning-curve table,
`name + ".pass1"` -> tidy pass@1 snapshots). Policy presets are named by role here, in one place, so stronger
interference presets (science issue) swap in by editing `PRESETS` only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from studies.declared import CPU_LLM, POW2, Overrides, StudySpec

__all__ = ["CPU_LLM", "LLM_GRID", "LLM_PRESETS", "POW2", "PRESETS", "TINY_GRID", "TINY_PRESETS", "FigureSpec",
           "Overrides", "StudySpec"]

PRESETS: dict[str, dict[str, Any]] = {
    "tabular": {"model": "tabular"},
    "interference": {"model": "interference"},
    "linear": {"model": "linear"},
    "mlp": {"model": "mlp"},
}
"""Role -> RunConfig fields (model name; other keys are backend options). The figures refer to roles only."""

LLM_PRESETS: dict[str, dict[str, Any]] = {"interference": dict(CPU_LLM)}
"""Role -> RunConfig fields for `--backend llm`: a real LM interferes across problems by construction, so
it plays the interference role; the tabular / linear / mlp roles have no LLM counterpart."""

LLM_GRID: dict[str, Any] = {"n": (2, 4, 8), "bp": (4,), "budget": 256, "seeds": 1}
"""Every study's grid on `--backend llm` (CPU-sized: minutes on 2 cores, not hours)."""

TINY_PRESETS: dict[str, dict[str, Any]] = {"interference": {"lm": "tiny"}}
"""`--backend llm --lm tiny`: the shipped tiny LM (its own defaults, llm_backend.config.TINY_DEFAULTS) in the
interference role."""

TINY_GRID: dict[str, Any] = {"n": (2, 8, 32), "bp": (16,), "budget": 2**14, "seeds": 2}
"""Every study's grid on the tiny LM: ~1,000x cheaper per rollout than SmolLM2, so 64x the budget."""


@dataclass(frozen=True)
class FigureSpec:
    """One figure: what it mirrors, what it needs, how it is drawn and summarised for the gallery."""

    id: str
    paper: str
    """Paper figure(s) it mirrors, e.g. '6' or '16-17' ('' for our own)."""
    title: str
    studies: tuple[StudySpec, ...]
    make: Callable[[dict[str, pd.DataFrame]], Figure]
    summary: Callable[[dict[str, pd.DataFrame]], dict]
    paper_finding: str
    """One line: what the paper found (from docs/PAPER.md / the captions)."""
    ours: Callable[[dict], str]
    """One line from the summary numbers: what our run shows (no hand-typed numbers)."""
    backends: tuple[str, ...] = field(default=("sim",))
    text: Callable[[dict[str, pd.DataFrame]], str] | None = None
    """Optional text the build prints after drawing (the headline prints the n*(C) tables)."""
