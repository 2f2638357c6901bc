"""Paper Fig 15: frontier point detection per n: record-breaking points on two curves, and in (C, n) space."""

from __future__ import annotations

import numpy as np
from matplotlib.lines import Line2D

from paper_figs import analysis as an
from paper_figs import plots, style
from paper_figs.catalog import JOINT_EASY, subset
from paper_figs.specs import FigureSpec
from studies.fit.records import record_breaking

STUDIES = (JOINT_EASY,)
BP, BIN = 32, 0.01


def _records(t):
    """Record-breaking points per n, seeds pooled (one curve per n, as in the per-configuration fits)."""
    t = t[t["compute"] > 0].assign(pool=t["n"])
    return record_breaking(t, "val_mean", bin_width=BIN, run_col="pool")


@style.styled
def make(tables):
    t = subset(tables[JOINT_EASY.name], bp=BP)
    ns = sorted(t["n"].unique())
    pair = (ns[len(ns) // 3], ns[-2]) if len(ns) >= 3 else tuple(ns)
    rec = _records(t)
    fig, axes = style.subplots(1, 2, panel=(4.8, 3.5))
    ax = axes[0, 0]
    for n in pair:
        g = t[(t["n"] == n) & (t["compute"] > 0)]
        ax.scatter(g["compute"], g["val_mean"], s=8, color=style.n_color(n), alpha=0.35)
        sm = an.seed_mean(g, "val_mean")
        ax.plot(sm["compute"], sm["val_mean"], color=style.n_color(n), ls="--", lw=1.2)
        r = rec[rec["n"] == n]
        ax.scatter(r["compute"], r["val_mean"], s=34, color=style.n_color(n), edgecolor="k", lw=0.6, zorder=3)
    style.compute_axis(ax)
    ax.set_ylabel(style.metric_label("val_mean", an.k_of(t)))
    ax.set_title(f"records of two n (bin {BIN})")
    ax = axes[0, 1]
    sc = ax.scatter(rec["compute"], rec["n"], c=rec["val_mean"], cmap="rocket_r", s=26, edgecolor="k", lw=0.3)
    fig.colorbar(sc, ax=ax, label="reward bin reached", pad=0.01)
    rep = an.fit_report(t)
    p = (rep.get("n_star_fit") or {}).get("params")
    if an.has_params(p):
        cs = np.geomspace(rec["compute"].min(), rec["compute"].max(), 200)
        ax.plot(cs, an.nstar_curve(p, cs), color="k", ls="--", lw=2)
    style.compute_axis(ax)
    style.log2_axis(ax, "y", rec["n"], label="n")
    ax.set_title("record points of every n in (C, n) space")
    h, lab = style.n_handles(pair, lw=6)
    h += [
        Line2D([], [], ls="", marker="o", ms=3, color="0.5", alpha=0.6),
        Line2D([], [], color="0.4", ls="--", lw=1.2),
        Line2D([], [], ls="", marker="o", ms=7, color="0.6", mec="k"),
        Line2D([], [], color="k", ls="--", lw=2),
    ]
    lab += ["evaluation point", "seed mean", "record-breaking point", "fitted n*(C) (right)"]
    style.outside_legend(fig, h, lab, where="bottom")
    style.title(fig, "15", f"frontier point detection per n (easy, bp = {BP})")
    return fig


def summary(tables):
    t = subset(tables[JOINT_EASY.name], bp=BP)
    rec = _records(t)
    per = rec.groupby("n").size()
    return {
        "records_per_n": {str(int(k)): int(v) for k, v in per.items()},
        "fit": plots.frontier_numbers(an.fit_report(t))["fit"],
    }


def ours(s):
    return (
        "record-breaking points per n: "
        + ", ".join(f"n = {k}: {v}" for k, v in s["records_per_n"].items())
        + f"; log2 n*(C): {s['fit']}."
    )


SPEC = FigureSpec(
    id="fig15",
    paper="15",
    title="Frontier point detection per n",
    studies=STUDIES,
    make=make,
    summary=summary,
    ours=ours,
    paper_finding="The earliest compute at which each n reaches a higher reward bin marks its frontier "
    "points; "
    "a scaling law fitted through them gives n*(C).",
)
