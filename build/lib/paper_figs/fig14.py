"""Paper Fig 14: training mixes (hard only, dual, tri) evaluated on easy, hard and very easy validation
problems.

Validation problems are classed by their initial pass@1 (the paper's difficulty is relative to the base
model), so each training set is scored on the classes its validation set contains.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from paper_figs import style
from paper_figs.catalog import BUDGET, SEEDS
from paper_figs.specs import FigureSpec, StudySpec

MIXES = ("hard", "dual", "tri")
NS = (8, 64)
CLASSES = (("hard", 0.0, 0.18), ("easy", 0.18, 0.6), ("veasy", 0.6, 1.01))
"""Eval classes by initial pass@1, split midway between the presets' nominal ranges (hard [0, 0.0625],
easy [0.3, 0.6], very easy [0.6, 0.9])."""
MIN_PROBLEMS = 30
"""Classes with fewer validation problems per run are not plotted (their mean pass@1 is mostly noise)."""
STUDIES = (
    StudySpec(
        "mixes",
        kind="n-vs-m",
        n=NS,
        budget=BUDGET,
        seeds=SEEDS,
        variants=tuple((m, (("dataset", m),)) for m in MIXES),
    ),
)


def class_curves(tables) -> pd.DataFrame:
    """Mean validation pass@1 per (mix, n, eval class, compute), averaged over problems then seeds."""
    t, p1 = tables["mixes"], tables["mixes.pass1"]
    p = p1[p1["split"] == "val"]
    p0 = p[p["compute"] == 0].set_index(["run_id", "problem"])["pass1"]
    cls = pd.Series(
        pd.cut(p0, [c[1] for c in CLASSES] + [CLASSES[-1][2]], right=False, labels=[c[0] for c in CLASSES]),
        index=p0.index,
        name="cls",
    )
    p = p.join(cls, on=["run_id", "problem"])
    meta = t.drop_duplicates("run_id").set_index("run_id")[["variant", "n", "seed"]]
    g = p.groupby(["run_id", "compute", "cls"], observed=True)["pass1"].agg(["mean", "size"]).reset_index()
    g = g.rename(columns={"mean": "pass1", "size": "problems"}).join(meta, on="run_id")
    return (
        g.groupby(["variant", "n", "cls", "compute"], observed=True)
        .agg(pass1=("pass1", "mean"), problems=("problems", "mean"))
        .reset_index()
    )


@style.styled
def make(tables):
    cc = class_curves(tables)
    fig, axes = style.subplots(len(MIXES), len(CLASSES), panel=(3.4, 2.3), sharex=True)
    ns = set()
    for r, mix in enumerate(MIXES):
        for c, (cls, *_) in enumerate(CLASSES):
            ax = axes[r, c]
            sub = cc[(cc["variant"] == mix) & (cc["cls"] == cls) & (cc["compute"] > 0)]
            count = int(round(sub["problems"].mean())) if not sub.empty else 0
            if count < MIN_PROBLEMS:
                style.empty_panel(ax, f"{count} {cls} problems in the\n{mix} validation set: too few")
                sub = sub.iloc[:0]
            else:
                ax.text(
                    0.98,
                    0.03,
                    f"{count} problems",
                    transform=ax.transAxes,
                    ha="right",
                    va="bottom",
                    fontsize=9,
                    color="0.35",
                )
            for n, g in sub.groupby("n"):
                ns.add(n)
                ax.plot(g["compute"], g["pass1"], color=style.n_color(n), lw=2)
            if not sub.empty:
                style.compute_axis(ax)
            if r < len(MIXES) - 1:
                ax.set_xlabel("")
            if r == 0:
                ax.set_title(f"eval: {cls}")
            if c == 0:
                ax.set_ylabel(f"train: {mix}\nval. pass@1")
    style.n_legend(fig, ns)
    style.title(fig, "14", "training mixes vs evaluation difficulty")
    return fig


def summary(tables):
    cc = class_curves(tables)
    cc = cc[cc["problems"] >= MIN_PROBLEMS]
    last = cc.sort_values("compute").groupby(["variant", "n", "cls"], observed=True).tail(1)
    out = {}
    for (mix, cls), g in last.groupby(["variant", "cls"], observed=True):
        v = g.set_index("n")["pass1"]
        out[f"{mix}/{cls}"] = {"small": float(v.get(min(NS), np.nan)), "large": float(v.get(max(NS), np.nan))}
    return out


def ours(s):
    return (
        f"final val. pass@1, n = {min(NS)} vs n = {max(NS)} (train/eval): "
        + "; ".join(f"{k} {v['small']:.3f} vs {v['large']:.3f}" for k, v in s.items())
        + "."
    )


SPEC = FigureSpec(
    id="fig14",
    paper="14",
    title="Training mixes vs evaluation difficulty",
    studies=STUDIES,
    make=make,
    summary=summary,
    ours=ours,
    paper_finding="Larger n wins at high compute on every in-domain eval except Very Easy; training on "
    "Hard only "
    "forgets Easy; mixing Easy in mitigates it.",
)
