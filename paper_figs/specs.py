"""Declarative description of what each figure needs: studies (kind, preset, dataset, grid, budget, seeds).

A figure module declares `STUDIES` as `StudySpec`s; `paper_figs.build` turns them into `studies` sweeps, runs
or reuses them, and hands the figure a dict of tables keyed by study name (`name` -> learning-curve table,
`name + ".pass1"` -> tidy pass@1 snapshots). Figures name policy roles only; the roles' RunConfig fields
are the table every consumer shares (studies.presets), so a figure and a report declaring one configuration
share its runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from studies.declared import POW2, Overrides, StudySpec

__all__ = ["LLM_GRID", "POW2", "TINY_GRID", "FigureSpec", "Overrides", "StudySpec"]

LLM_GRID: dict[str, Any] = {"n": (2, 4, 8), "bp": (4,), "budget": 256, "seeds": 1}
"""Every study's grid on `--backend llm` (CPU-sized: minutes on 2 cores, not hours)."""

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
    gallery: bool = True
    """Whether `isocompute figs` builds it among all figures and the gallery lists it (docs/figs/<id>.png).
    False for `make demo`'s figure (`--only headline`): docs/figs/headline.png is README's headline, drawn by
    the claims report from its own runs (isocompute/reports/claims/headline.py)."""
