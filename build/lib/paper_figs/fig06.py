"""Paper Fig 6: validation reward vs compute per n at bp = 32, Easy and Hard, with the compute-optimal
frontier."""

from __future__ import annotations

from paper_figs import analysis as an
from paper_figs import plots, style
from paper_figs.catalog import JOINT_EASY, JOINT_HARD, subset
from paper_figs.specs import FigureSpec

STUDIES = (JOINT_EASY, JOINT_HARD)
BP = 32


@style.styled
def make(tables):
    fig, axes = style.subplots(1, 2)
    ns = set()
    for ax, st in zip(axes[0], STUDIES, strict=True):
        t = subset(tables[st.name], bp=BP)
        ns |= set(t["n"].unique())
        plots.n_curves(ax, t)
        ax.set_title(f"{st.dataset} (bp = {BP})")
    style.n_legend(fig, ns, [style.frontier_handle()])
    style.title(fig, "6", f"validation reward vs compute, bp = {BP}")
    return fig


def summary(tables):
    return {
        st.dataset: plots.frontier_numbers(an.fit_report(subset(tables[st.name], bp=BP))) for st in STUDIES
    }


def ours(s):
    e, h = s["easy"], s["hard"]
    return (
        f"easy: {plots.nstar_span(e)} (frontier reward at the top {e['R_hi']:.3f}); "
        f"hard: {plots.nstar_span(h)} ({h['R_hi']:.3f})."
    )


SPEC = FigureSpec(
    id="fig06",
    paper="6",
    title="Validation reward vs compute per n (bp = 32)",
    studies=STUDIES,
    make=make,
    summary=summary,
    ours=ours,
    paper_finding="The frontier shifts to larger n as compute grows; small n plateaus early; Hard "
    "saturates at "
    "a smaller n than Easy.",
)
