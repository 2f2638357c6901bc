"""Paper Fig 26: decoupled baseline. Large group n/n_est vs small n with the small or a large baseline
group."""

from __future__ import annotations

from paper_figs import analysis as an
from paper_figs import plots, style
from paper_figs.catalog import BUDGET, SEEDS
from paper_figs.specs import FigureSpec, StudySpec

LARGE, SMALL = 64, 16
VARIANTS = (
    (f"{LARGE}/{LARGE}", (("n", LARGE),)),
    (f"{SMALL}/{LARGE} (decoupled)", (("n", SMALL), ("n_est", LARGE))),
    (f"{SMALL}/{SMALL}", (("n", SMALL),)),
)
"""Labels read n_train / n_est as in the paper (256/256, 64/256, 64/64 at bp = 128, scaled down here)."""
STUDIES = (
    StudySpec(
        "baseline-easy",
        kind="n-vs-m",
        dataset="easy",
        n=(LARGE,),
        budget=BUDGET,
        seeds=SEEDS,
        variants=VARIANTS,
    ),
)
ORDER = [v for v, _ in VARIANTS]


@style.styled
def make(tables):
    fig, axes = style.subplots(1, 1, panel=(6.0, 3.6))
    styles = {
        ORDER[0]: {"color": style.n_color(LARGE)},
        ORDER[1]: {"color": style.n_color(SMALL), "ls": "--"},
        ORDER[2]: {"color": style.n_color(SMALL)},
    }
    colors = plots.variant_curves(axes[0, 0], tables["baseline-easy"], order=ORDER, styles=styles)
    axes[0, 0].set_title("easy, bp = 32 (band: +-1 s.e. over seeds)")
    plots.variant_legend(fig, colors, "n_train / n_est", where="right")
    style.title(fig, "26", "decoupled baseline estimation")
    return fig


def summary(tables):
    fin = an.final_values(tables["baseline-easy"], "val_mean", ["variant"]).set_index("variant")
    return {
        v: {"final": float(fin.loc[v, "val_mean"]), "se": float(fin.loc[v, "se"])}
        for v in ORDER
        if v in fin.index
    }


def ours(s):
    return (
        "final validation reward (n_train/n_est): "
        + ", ".join(f"{k} {v['final']:.3f} +- {v['se']:.3f}" for k, v in s.items())
        + "."
    )


SPEC = FigureSpec(
    id="fig26",
    paper="26",
    title="Decoupled baseline",
    studies=STUDIES,
    make=make,
    summary=summary,
    ours=ours,
    paper_finding="256/256 > 64/256 ~ 64/64: a better baseline helps little; most of the gain of large n is "
    "exploration.",
)
