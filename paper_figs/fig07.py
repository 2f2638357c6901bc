"""Paper Fig 7: compute-optimal n*(C) at bp = 32 with a sigmoid fit of log2 n* against log C."""

from __future__ import annotations

from paper_figs import analysis as an
from paper_figs import plots, style
from paper_figs.catalog import JOINT_EASY, JOINT_HARD, subset
from paper_figs.specs import FigureSpec

STUDIES = (JOINT_EASY, JOINT_HARD)
BP = 32
SMOOTH = 3
"""Running-average window (grid points) of log2 n*, as the paper plots (studies.fit.frontier `smooth`)."""


@style.styled
def make(tables):
    fig, axes = style.subplots(1, 2, panel=(4.8, 3.4))
    for ax, st in zip(axes[0], STUDIES, strict=True):
        rep = an.fit_report(subset(tables[st.name], bp=BP), smooth=SMOOTH)
        plots.nstar_panel(ax, rep)
        ax.set_title(f"{st.dataset} (bp = {BP})")
    plots.nstar_legend(fig, SMOOTH)
    style.title(fig, "7", f"compute-optimal n*(C), bp = {BP}")
    return fig


def summary(tables):
    return {
        st.dataset: plots.frontier_numbers(an.fit_report(subset(tables[st.name], bp=BP), smooth=SMOOTH))
        for st in STUDIES
    }


def ours(s):
    return "log2 n* against log C: " + "; ".join(
        f"{ds}: {v['fit']}; {plots.span_phrase(v)}"
        for ds, v in ((ds, s[ds]) for ds in ("easy", "hard"))
    ) + "."


SPEC = FigureSpec(
    id="fig07",
    paper="7",
    title="Compute-optimal n*(C) with sigmoid fits",
    studies=STUDIES,
    make=make,
    summary=summary,
    ours=ours,
    paper_finding="n*(C) rises roughly linearly in log-log, then saturates (Easy ~512, Hard ~128 with "
    "Qwen2.5-7B); a sigmoid in log C fits it.",
)
