"""Paper Fig 13: training-set size D. A small D saturates n* earlier and large n overfits (val falls,
train rises)."""

from __future__ import annotations

from matplotlib.lines import Line2D

from paper_figs import analysis as an
from paper_figs import plots, style
from paper_figs.catalog import BUDGET, SEEDS, subset
from paper_figs.specs import POW2, FigureSpec, StudySpec

DS = (1024, 64)
STUDIES = (
    StudySpec(
        "datasize-easy",
        kind="n-vs-m",
        dataset="easy",
        n=POW2,
        budget=BUDGET,
        seeds=SEEDS,
        variants=tuple((f"D = {d}", (("d", d),)) for d in DS),
    ),
)
LABELS = [f"D = {d}" for d in DS]


@style.styled
def make(tables):
    t = tables[STUDIES[0].name]
    fig, axes = style.subplots(1, len(LABELS), sharey=True)
    ns = set()
    for ax, lab in zip(axes[0], LABELS, strict=True):
        sub = subset(t, variant=lab)
        ns |= set(sub["n"].unique())
        plots.n_curves(ax, sub)
        big = sub[sub["n"] == sub["n"].max()]
        tr = an.seed_mean(big, "train_mean", ["n"])
        tr = tr[tr["compute"] > 0]
        ax.plot(tr["compute"], tr["train_mean"], color=style.n_color(big["n"].max()), ls=":", lw=2)
        ax.set_title(f"easy, {lab}")
    axes[0, 1].set_ylabel("")
    style.n_legend(
        fig,
        ns,
        [
            style.frontier_handle(),
            (Line2D([], [], color="0.3", ls=":", lw=2), "training reward\n(largest n)"),
        ],
    )
    style.title(fig, "13", "training-set size D")
    return fig


def summary(tables):
    t = tables[STUDIES[0].name]
    out = {}
    for lab in LABELS:
        sub = subset(t, variant=lab)
        fin = an.final_values(sub[sub["n"] == sub["n"].max()], "val_mean")
        tr = an.final_values(sub[sub["n"] == sub["n"].max()], "train_mean")
        out[lab] = plots.frontier_numbers(an.fit_report(sub)) | {
            "gap": float(tr["train_mean"].iloc[0] - fin["val_mean"].iloc[0]),
            "n_big": int(sub["n"].max()),
        }
    return out


def ours(s):
    return (
        "; ".join(
            f"{k}: n* at the top {plots.fmt_n(v['n_hi'])} (largest on the frontier "
            f"{plots.fmt_n(v['n_max'])}), train - val gap of n = {v['n_big']} at the budget {v['gap']:+.3f}"
            for k, v in s.items()
        )
        + "."
    )


SPEC = FigureSpec(
    id="fig13",
    paper="13",
    title="Training-set size D",
    studies=STUDIES,
    make=make,
    summary=summary,
    ours=ours,
    paper_finding="With D = 6k reward scales up to n = 512; with D = 500 the frontier saturates at n = "
    "256 and "
    "n = 512 overfits.",
)
