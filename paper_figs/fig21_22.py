"""Paper Fig 21-22: joint (bp, n, M) optimisation: the frontier over all (bp, n) and n*(C) with a sigmoid
fit."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from paper_figs import analysis as an
from paper_figs import plots, style
from paper_figs.catalog import JOINT_EASY, JOINT_HARD
from paper_figs.specs import FigureSpec
from studies.fit.sigmoid import SigmoidFit

STUDIES = (JOINT_EASY, JOINT_HARD)
_CODE = 1_000_000  # cfg = bp * _CODE + n, a numeric key so studies' fit_report can group by configuration


def joint_report(t):
    """Frontier over every (bp, n) configuration (studies.fit.frontier with by = configuration) and the
    sigmoid fit of log2 n* against C (studies.fit.sigmoid.SigmoidFit) on its determined points
    (analysis.undetermined)."""
    rep = an.fit_report(t.assign(cfg=t["bp"] * _CODE + t["n"]), by="cfg")
    fr = an.frontier_frame(rep, "cfg")
    fr["bp"], fr["n"] = fr["cfg"] // _CODE, fr["cfg"] % _CODE
    fr["undetermined"] = an.undetermined(fr)
    ok = (fr["compute"] > 0) & ~fr["undetermined"]
    lo, hi = np.log2(t["n"].min()), np.log2(t["n"].max())
    fit = SigmoidFit(y_bounds=(lo, hi)).fit(fr.loc[ok, "compute"], np.log2(fr.loc[ok, "n"]))
    return rep, fr, fit


@style.styled
def make(tables):
    fig, axes = style.subplots(2, 2, panel=(4.6, 3.0))
    for c, st in enumerate(STUDIES):
        t = tables[st.name]
        rep, fr, fit = joint_report(t)
        ax = axes[0, c]
        for cur in rep.get("curves", []):
            sub = t[(t["bp"] * _CODE + t["n"]) == cur["cfg"]]
            cs = np.geomspace(max(sub["compute"][sub["compute"] > 0].min(), 1), sub["compute"].max(), 80)
            ax.plot(cs, an.curve(cur["params"], cs), color="0.8", lw=1)
        seg = (fr["cfg"] != fr["cfg"].shift()).cumsum()
        span = math.log(fr["compute"].max() / fr["compute"].min()) or 1.0
        labelled = 0
        for _, g in fr.groupby(seg, sort=True):
            nxt = fr.loc[g.index.max() + 1 : g.index.max() + 1]  # join each segment to the next one
            gg = pd.concat([g, nxt])
            ax.plot(
                gg["compute"],
                gg["reward"],
                color=style.n_color(g["n"].iloc[0]),
                lw=3.5,
                solid_capstyle="butt",
            )
            # label only segments that hold the frontier over >= 10% of the log-compute range
            if math.log(gg["compute"].max() / g["compute"].min()) >= 0.1 * span:
                r = g.iloc[len(g) // 2]
                ax.annotate(
                    f"({int(r['bp'])}, {int(r['n'])})",
                    (r["compute"], r["reward"]),
                    fontsize=8.5,
                    xytext=(3, -13),
                    textcoords="offset points",
                    ha="left",
                    color="0.15",
                )
                labelled += 1
        style.compute_axis(ax)
        ax.set_ylabel(style.metric_label("val_mean", an.k_of(t)))
        ax.set_title(f"{st.dataset}: frontier over (bp, n)")
        ax = axes[1, c]
        det, und = fr[~fr["undetermined"]], fr[fr["undetermined"]]
        norm = style.norm_for(fr["reward"])
        sc = ax.scatter(det["compute"], det["n"], c=det["reward"], cmap="rocket_r", norm=norm, s=18, zorder=3)
        ax.scatter(
            und["compute"],
            und["n"],
            s=18,
            zorder=3,
            facecolors="none",
            edgecolors=plt.get_cmap("rocket_r")(norm(und["reward"])),
        )
        if fit.ok_ and fit.r2_ >= plots.MIN_R2:
            cs = np.geomspace(det["compute"].min(), det["compute"].max(), 200)
            ax.plot(cs, 2.0 ** fit.predict(cs), color=style.FIT_COLOR, lw=2)
        fig.colorbar(sc, ax=ax, label="frontier reward", pad=0.01)
        style.compute_axis(ax)
        style.log2_axis(ax, "y", fr["n"], label="n*(C)")
        ax.set_title(f"{st.dataset}: n*(C), {plots.sigmoid_text(fit)}", fontsize=9)
    style.outside_legend(
        fig,
        [
            Line2D([], [], color="0.8", lw=1),
            Line2D([], [], color=style.n_color(16), lw=3.5),
            Line2D([], [], color=style.FIT_COLOR, lw=2),
            Line2D([], [], ls="", marker="o", mfc="none", color="0.3"),
        ],
        [
            "fitted curve of each (bp, n)",
            "frontier, coloured by n, labelled (bp, n)",
            "sigmoid fit of log2 n* (filled points)",
            plots.HOLLOW_LABEL,
        ],
        where="bottom",
    )
    style.title(fig, "21-22", "joint optimisation over (bp, n, M)")
    return fig


def summary(tables):
    out = {}
    for st in STUDIES:
        rep, fr, fit = joint_report(tables[st.name])
        det = fr[~fr["undetermined"]]
        det = det if not det.empty else fr
        out[st.dataset] = {
            "n_lo": float(det["n"].iloc[0]),
            "n_hi": float(det["n"].iloc[-1]),
            "bp_values": sorted({int(v) for v in fr["bp"]}),
            "fit": plots.sigmoid_text(fit),
        }
    return out


def ours(s):
    return (
        "; ".join(
            f"{ds}: determined n* {v['n_lo']:.0f} -> {v['n_hi']:.0f} ({v['fit']}), frontier bp in "
            f"{{{', '.join(map(str, v['bp_values']))}}}"
            for ds, v in s.items()
        )
        + "."
    )


SPEC = FigureSpec(
    id="fig21_22",
    paper="21-22",
    title="Joint optimisation over (bp, n, M)",
    studies=STUDIES,
    make=make,
    summary=summary,
    ours=ours,
    paper_finding="Under joint optimisation n*(C) still rises as a sigmoid in C; bp matters little within "
    "32..1024.",
)
