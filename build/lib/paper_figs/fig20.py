"""Paper Fig 20: the extremely hard set (pass@128 = 0): best@k rewards large n, worst@k a moderate n."""

from __future__ import annotations

from paper_figs import analysis as an
from paper_figs import plots, style
from paper_figs.catalog import BUDGET, SEEDS
from paper_figs.specs import POW2, FigureSpec, StudySpec

STUDIES = (StudySpec("nvm-xhard", kind="n-vs-m", dataset="xhard", n=POW2, budget=BUDGET, seeds=SEEDS),)
METRICS = ("val_best_k", "val_worst_k")


@style.styled
def make(tables):
    t = tables["nvm-xhard"]
    fig, axes = style.subplots(1, 2)
    for ax, m in zip(axes[0], METRICS, strict=True):
        plots.n_curves(ax, t, m)
    axes[0, 0].set_title("coverage")
    axes[0, 1].set_title("sharpening")
    style.n_legend(fig, t["n"].unique(), [style.frontier_handle()])
    style.title(fig, "20", "extremely hard set (xhard), bp = 32")
    return fig


def summary(tables):
    t = tables["nvm-xhard"]
    return {m: plots.frontier_numbers(an.fit_report(t, metric=m)) for m in METRICS}


def ours(s):
    b, w = s["val_best_k"], s["val_worst_k"]
    return (
        f"n* at the top compute: {plots.fmt_n(b['n_hi'])} for best@k (reward {b['R_hi']:.3f}) vs "
        f"{plots.fmt_n(w['n_hi'])} for worst@k (reward {w['R_hi']:.3f})."
    )


SPEC = FigureSpec(
    id="fig20",
    paper="20",
    title="Extremely hard set: best@k vs worst@k",
    studies=STUDIES,
    make=make,
    summary=summary,
    ours=ours,
    paper_finding="Larger n improves best@4 at higher compute, while worst@4 is maximised by a moderate n "
    "= 64.",
)
