"""Paper Fig 16-17: compute-optimal frontiers maximising over n, one panel per bp, Easy (16) and Hard (17)."""

from __future__ import annotations

from paper_figs import analysis as an
from paper_figs import plots, style
from paper_figs.catalog import JOINT_EASY, JOINT_HARD, subset
from paper_figs.specs import FigureSpec

STUDIES = (JOINT_EASY, JOINT_HARD)


@style.styled
def make(tables):
    return plots.frontier_grid(
        tables, STUDIES, "bp", "bp",
        (3.7, 2.8), "16-17",
        "frontiers over n for each bp (top: easy, bottom: hard)",
    )


def summary(tables):
    return {
        f"{st.dataset} bp={bp}": plots.frontier_numbers(an.fit_report(subset(tables[st.name], bp=bp)))
        for st in STUDIES
        for bp in sorted(tables[st.name]["bp"].unique())
    }


def ours(s):
    return (
        "determined n* lowest -> highest compute (frontier reward at the top): "
        + "; ".join(
            f"{k}: {plots.determined_span(v)} ({v['R_hi']:.3f})"
            for k, v in s.items()
        )
        + "."
    )


SPEC = FigureSpec(
    id="fig16_17",
    paper="16-17",
    title="Frontiers over n for each bp",
    studies=STUDIES,
    make=make,
    summary=summary,
    ours=ours,
    paper_finding="For every bp the frontier moves to larger n as compute grows, on Easy and on Hard.",
)
