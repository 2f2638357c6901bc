"""Paper Fig 2: difficulty distribution of the problem sets (initial pass@1 under the base policy)."""

from __future__ import annotations

import numpy as np
from matplotlib.patches import Patch

from paper_figs import style
from paper_figs.specs import FigureSpec, StudySpec

RANGES = {
    "easy": [(0.3, 0.6)],
    "hard": [(0.0, 0.0625)],
    "xhard": [(0.0, 1 / 128)],
    "veasy": [(0.6, 0.9)],
    "dual": [(0.0, 0.0625), (0.3, 0.6)],
    "tri": [(0.0, 0.0625), (0.3, 0.6), (0.6, 0.9)],
}
"""Nominal avg@16 ranges of the dataset presets (docs/PAPER.md recipe; xhard: pass@128 = 0)."""
DATASETS = tuple(RANGES)
STUDIES = (
    StudySpec(
        "datasets",
        kind="n-vs-m",
        preset="interference",
        n=(8,),
        budget=256,
        seeds=1,
        base=(("n_evals", 2),),
        variants=tuple((d, (("dataset", d),)) for d in DATASETS),
    ),
)


def _initial(tables):
    """Initial (compute = 0) training pass@1 per dataset."""
    t, p1 = tables["datasets"], tables["datasets.pass1"]
    run_ds = dict(zip(t["run_id"], t["variant"], strict=False))
    p = p1[(p1["compute"] == 0) & (p1["split"] == "train")].copy()
    p["dataset"] = p["run_id"].map(run_ds)
    return p


@style.styled
def make(tables):
    p = _initial(tables)
    fig, axes = style.subplots(2, 3, panel=(3.6, 2.6), sharex=True)
    bins = np.linspace(0, 1, 41)
    for ax, ds in zip(axes.ravel(), DATASETS, strict=True):
        vals = p.loc[p["dataset"] == ds, "pass1"].to_numpy(dtype=float)
        for lo, hi in RANGES[ds]:
            ax.axvspan(lo, max(hi, lo + 0.008), color="0.85", zorder=0)
        if vals.size:
            ax.hist(vals, bins=bins, color=style.VARIANT_COLORS[0], weights=np.full(vals.size, 1 / vals.size))
        else:
            style.empty_panel(ax, "no problems")
        ax.set_title(f"{ds} ({vals.size} problems)")
        ax.set_xlim(0, 1)
    for ax in axes[-1]:
        ax.set_xlabel("initial pass@1 of a problem")
    for ax in axes[:, 0]:
        ax.set_ylabel("share of problems")
    style.outside_legend(
        fig,
        [Patch(color="0.85")],
        [
            "nominal avg@16 range of the preset (problems are selected "
            "by a measured avg@16, so true pass@1 spills over its edges)"
        ],
        where="bottom",
    )
    style.title(fig, "2", "difficulty of the problem sets under the initial policy")
    return fig


def summary(tables):
    p = _initial(tables)
    out = {}
    for ds in DATASETS:
        v = p.loc[p["dataset"] == ds, "pass1"].to_numpy(dtype=float)
        inside = np.zeros(v.size, dtype=bool)
        for lo, hi in RANGES[ds]:
            inside |= (v >= lo - 1e-9) & (v <= hi + 1e-9)
        out[ds] = {
            "median": float(np.median(v)) if v.size else float("nan"),
            "inside": float(inside.mean()) if v.size else float("nan"),
        }
    return out


def ours(s):
    return (
        "median initial pass@1 (share inside the nominal range): "
        + ", ".join(f"{d} {v['median']:.3f} ({100 * v['inside']:.0f}%)" for d, v in s.items())
        + "."
    )


SPEC = FigureSpec(
    id="fig02",
    paper="2",
    title="Difficulty distribution of the problem sets",
    studies=STUDIES,
    make=make,
    summary=summary,
    ours=ours,
    paper_finding="Problems are split by the base model's avg@16: Easy in [0.3, 0.6], Hard in [0, 0.0625].",
)
