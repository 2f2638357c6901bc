"""Paper Fig 5: record-breaking points of pooled runs and the monotone sigmoid fit through them."""

from __future__ import annotations

import numpy as np
from matplotlib.lines import Line2D

from paper_figs import analysis as an
from paper_figs import style
from paper_figs.catalog import JOINT_EASY, subset
from paper_figs.specs import FigureSpec
from studies.fit.records import record_breaking
from studies.fit.sigmoid import SigmoidFit

STUDIES = (JOINT_EASY,)
BP, BIN = 32, 0.01


def _points(tables):
    t = subset(tables[JOINT_EASY.name], bp=BP)
    t = t[t["compute"] > 0].assign(pool="all")
    rec = record_breaking(t, "val_mean", bin_width=BIN, run_col="pool")
    fit = SigmoidFit().fit(rec["compute"], rec["val_mean"])
    return t, rec, fit


@style.styled
def make(tables):
    t, rec, fit = _points(tables)
    fig, axes = style.subplots(1, 1, panel=(6.4, 3.8))
    ax = axes[0, 0]
    ax.scatter(t["compute"], t["val_mean"], s=9, color=style.RAW_COLOR, alpha=0.6)
    ax.scatter(
        rec["compute"], rec["val_mean"], s=30, color=style.RECORD_COLOR, edgecolor="k", lw=0.4, zorder=3
    )
    cs = np.geomspace(t["compute"].min(), t["compute"].max(), 200)
    ax.plot(cs, fit.predict(cs), color="k", ls="--", lw=2)
    style.compute_axis(ax)
    ax.set_ylabel(style.metric_label("val_mean", an.k_of(t)))
    handles = [
        Line2D([], [], ls="", marker="o", color=style.RAW_COLOR),
        Line2D([], [], ls="", marker="o", color=style.RECORD_COLOR, mec="k"),
        Line2D([], [], color="k", ls="--", lw=2),
    ]
    labels = [
        f"all evaluation points ({t['run_id'].nunique()} runs)",
        f"record-breaking (bin {BIN})",
        "monotone sigmoid fit",
    ]
    style.outside_legend(fig, handles, labels, where="bottom")
    ax.set_title(f"easy, bp = {BP}, all n pooled")
    style.title(fig, "5", "record-breaking points")
    return fig


def summary(tables):
    t, rec, fit = _points(tables)
    return {"points": int(len(t)), "records": int(len(rec)), "r2": float(fit.r2_)}


def ours(s):
    return (
        f"{s['records']} of {s['points']} evaluation points are record-breaking; the sigmoid through them "
        f"has r2 = {s['r2']:.3f}."
    )


SPEC = FigureSpec(
    id="fig05",
    paper="5",
    title="Record-breaking points and the monotone fit",
    studies=STUDIES,
    make=make,
    summary=summary,
    ours=ours,
    paper_finding="Only the earliest point entering a higher reward bin is kept; a monotone fit through "
    "these "
    "record-breaking points traces the frontier.",
)
