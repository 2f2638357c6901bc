"""Paper Fig 9: under a fixed total batch B = bp * n, the optimal n*(M) and bp*(M) = B / n* (Easy)."""

from __future__ import annotations

import numpy as np
from matplotlib.lines import Line2D

from paper_figs import analysis as an
from paper_figs import plots, style
from paper_figs.catalog import FIXED_EASY
from paper_figs.specs import FigureSpec
from studies.fit.analyses import fixed_batch_optimum

STUDIES = (FIXED_EASY,)


def _optimum(tables):
    """studies.fit.analyses.fixed_batch_optimum: frontier n*(M), bp*(M) per batch and the n* sigmoid in M."""
    opt = fixed_batch_optimum(tables[FIXED_EASY.name])
    return opt, opt.attrs.get("n_star_fit", {})


@style.styled
def make(tables):
    opt, fits = _optimum(tables)
    fig, axes = style.subplots(1, 2)
    handles, labels = [], []
    for i, (B, f) in enumerate(opt.groupby("batch")):
        c = style.VARIANT_COLORS[i % len(style.VARIANT_COLORS)]
        det = f["determined"].astype(bool)  # a tie (the seeds cannot tell) is drawn hollow: no trend point
        for ax, col in ((axes[0, 0], "n_star"), (axes[0, 1], "bp_star")):
            ax.scatter(f["m"][det], f[col][det], s=16, color=c)
            ax.scatter(f["m"][~det], f[col][~det], s=16, facecolors="none", edgecolors=c)
        p = (fits.get(int(B)) or {}).get("params")
        r2 = (fits.get(int(B)) or {}).get("r2")
        if an.has_params(p) and r2 is not None and r2 >= plots.MIN_R2:
            ms = np.geomspace(f["m"].min(), f["m"].max(), 200)
            nfit = an.nstar_curve(p, ms)
            axes[0, 0].plot(ms, nfit, color=c, lw=2)
            axes[0, 1].plot(ms, B / nfit, color=c, lw=2)
        handles.append(Line2D([], [], color=c, marker="o", lw=2))
        drawn = r2 is not None and r2 >= plots.MIN_R2
        labels.append(
            f"B = {int(B)}"
            + (f" (fit r2 {r2:.2f}{'' if drawn else ', not drawn'})" if r2 is not None else "")
        )
    for ax, col, name in ((axes[0, 0], "n_star", "n*(M)"), (axes[0, 1], "bp_star", "bp*(M) = B / n*")):
        style.compute_axis(ax, "steps")
        style.log2_axis(ax, "y", opt[col], label=name)
    axes[0, 0].set_title("rollouts per problem")
    axes[0, 1].set_title("problems per step")
    style.outside_legend(
        fig, handles, labels, "fixed batch (points: frontier, hollow where n* is a tie; lines: sigmoid fit)",
        where="bottom"
    )
    style.title(fig, "9", "fixed batch B = bp * n: optimal n*(M) and bp*(M) (easy)")
    return fig


def summary(tables):
    opt, _ = _optimum(tables)
    out = {}
    for B, f in opt.groupby("batch"):
        f = f.sort_values("m")
        det = f[f["determined"].astype(bool)]
        f = det if not det.empty else f  # the determined points; all of them where none is
        out[str(int(B))] = {
            "determined": int(len(det)),
            "M_lo": float(f["m"].iloc[0]),
            "M_hi": float(f["m"].iloc[-1]),
            "n_lo": float(f["n_star"].iloc[0]),
            "n_hi": float(f["n_star"].iloc[-1]),
        }
    return out


def ours(s):
    return (
        "; ".join(
            f"B = {B}: determined n* {v['n_lo']:.0f} at M = {v['M_lo']:.0f} -> {v['n_hi']:.0f} at M = "
            f"{v['M_hi']:.0f}" if v.get("determined", 1) else f"B = {B}: n* undetermined at every M (ties)"
            for B, v in s.items()
        )
        + "."
    )


SPEC = FigureSpec(
    id="fig09",
    paper="9",
    title="Fixed batch: n*(M) and bp*(M)",
    studies=STUDIES,
    make=make,
    summary=summary,
    ours=ours,
    paper_finding="On Easy, at fixed B, n*(M) rises as a sigmoid in the number of steps M and bp*(M) falls.",
)
