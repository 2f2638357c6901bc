"""Paper Fig 18-19: frontiers under a fixed total batch B = bp * n, Easy (18) and Hard (19)."""

from __future__ import annotations

from paper_figs import analysis as an
from paper_figs import plots, style
from paper_figs.catalog import FIXED_EASY, FIXED_HARD, subset
from paper_figs.specs import FigureSpec

STUDIES = (FIXED_EASY, FIXED_HARD)


@style.styled
def make(tables):
    return plots.frontier_grid(
        tables, STUDIES, "batch", "B",
        (4.2, 2.9), "18-19",
        "frontiers at fixed batch B = bp * n (top: easy, bottom: hard)",
    )


def summary(tables):
    return {
        f"{st.dataset} B={B}": plots.frontier_numbers(an.fit_report(subset(tables[st.name], batch=B)))
        for st in STUDIES
        for B in sorted(tables[st.name]["batch"].unique())
    }


def ours(s):
    return (
        "determined n* lowest -> highest compute: "
        + "; ".join(f"{k}: {plots.determined_span(v)}" for k, v in s.items())
        + "."
    )


SPEC = FigureSpec(
    id="fig18_19",
    paper="18-19",
    title="Frontiers at fixed total batch",
    studies=STUDIES,
    make=make,
    summary=summary,
    ours=ours,
    paper_finding="At fixed B the optimum moves to larger n as compute grows; noisier and non-monotone on "
    "Hard.",
)
