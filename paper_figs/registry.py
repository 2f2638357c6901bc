"""Registry: figure id -> FigureSpec. `isocompute figs --only ID` and the gallery read this."""

from __future__ import annotations

import importlib

from paper_figs.specs import FigureSpec

MODULES = (
    "headline",
    "fig02",
    "fig03",
    "fig04",
    "fig05",
    "fig06",
    "fig07",
    "fig08",
    "fig09",
    "fig10",
    "fig11",
    "fig27",
    "fig12",
    "fig13",
    "fig14",
    "fig15",
    "fig16_17",
    "fig18_19",
    "fig20",
    "fig21_22",
    "fig24",
    "fig25",
    "fig26",
)
"""Figure modules in gallery order."""


def figures() -> dict[str, FigureSpec]:
    out: dict[str, FigureSpec] = {}
    for mod in MODULES:
        spec = importlib.import_module(f"paper_figs.{mod}").SPEC
        if spec.id in out:
            raise RuntimeError(f"figure id {spec.id!r} registered twice")
        out[spec.id] = spec
    return out
