"""Paper Fig 8: the n maximising best@k vs worst@k at the largest compute, for each bp, Easy and Hard."""

from __future__ import annotations

import numpy as np

from paper_figs import analysis as an
from paper_figs import style
from paper_figs.catalog import JOINT_EASY, JOINT_HARD
from paper_figs.specs import FigureSpec
from studies.fit.analyses import optimal_by_metric

STUDIES = (JOINT_EASY, JOINT_HARD)
METRICS = ("val_best_k", "val_worst_k")


def _best_n(tables):
    """{dataset: {metric: {bp: n*}}}: the n with the best final metric per bp at the largest common compute
    (studies.fit.analyses.optimal_by_metric, ties to the smaller n)."""
    out = {}
    for st in STUDIES:
        opt = optimal_by_metric(tables[st.name], METRICS, by="n", per="bp")
        out[st.dataset] = {
            m: {int(r["bp"]): float(r["n_star"]) for _, r in g.iterrows()} for m, g in opt.groupby("metric")
        }
    return out


@style.styled
def make(tables):
    best = _best_n(tables)
    k = an.k_of(tables[JOINT_EASY.name]) or "k"
    fig, axes = style.subplots(1, 2, sharey=True)
    labels = {"val_best_k": f"best@{k} (coverage)", "val_worst_k": f"worst@{k} (sharpening)"}
    allv = []
    for ax, st in zip(axes[0], STUDIES, strict=True):
        bps = sorted(best[st.dataset][METRICS[0]])
        x = np.arange(len(bps))
        for i, m in enumerate(METRICS):
            v = [best[st.dataset][m][b] for b in bps]
            allv += v
            ax.bar(
                x + (i - 0.5) * 0.38, v, width=0.36, bottom=1, color=style.VARIANT_COLORS[i], label=labels[m]
            )
        top = tables[st.name].groupby("bp")["n"].max()
        ax.scatter(
            x,
            [top[b] for b in bps],
            marker="_",
            s=900,
            color="k",
            lw=1.5,
            zorder=3,
            label="largest n in the grid (bp * n <= bmax)",
        )
        ax.set_xticks(x, [str(b) for b in bps])
        ax.set_xlabel("problems per step bp")
        ax.set_title(st.dataset)
    style.log2_axis(axes[0, 0], "y", [1] + allv, label="optimal n at the common budget")
    h, lab = axes[0, 0].get_legend_handles_labels()
    style.outside_legend(fig, h, lab, where="bottom")
    style.title(fig, "8", f"optimal n for best@{k} vs worst@{k}")
    return fig


def summary(tables):
    return {
        ds: {m: {str(b): v for b, v in d.items()} for m, d in v.items()} for ds, v in _best_n(tables).items()
    }


def ours(s):
    parts = []
    for ds, v in s.items():
        b = np.exp2(np.mean(np.log2([x for x in v["val_best_k"].values()])))
        w = np.exp2(np.mean(np.log2([x for x in v["val_worst_k"].values()])))
        parts.append(f"{ds}: geometric-mean optimal n {b:.0f} for best@k vs {w:.0f} for worst@k")
    return "; ".join(parts) + " (over bp)."


SPEC = FigureSpec(
    id="fig08",
    paper="8",
    title="Optimal n for best@k vs worst@k",
    studies=STUDIES,
    make=make,
    summary=summary,
    ours=ours,
    paper_finding="Easy: the optimal n for worst@4 exceeds that for best@4 (n sharpens); Hard: best@4 "
    "needs the "
    "larger n (n expands coverage).",
)
