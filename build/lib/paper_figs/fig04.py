"""Paper Fig 4: learning-rate scaling with batch B = bp * n: constant, linear or sqrt(B / B_ref)."""

from __future__ import annotations

from paper_figs import analysis as an
from paper_figs import plots, style
from paper_figs.catalog import BUDGET, SEEDS, subset
from paper_figs.specs import FigureSpec, StudySpec

RULES = ("constant", "sqrt", "linear")
NS = (8, 32, 128)
STUDIES = (
    StudySpec(
        "lr-easy",
        kind="n-vs-m",
        dataset="easy",
        n=NS,
        budget=BUDGET,
        seeds=SEEDS,
        variants=tuple((r, (("lr_rule", r),)) for r in RULES),
    ),
)


@style.styled
def make(tables):
    t = tables["lr-easy"]
    ns = sorted(t["n"].unique())
    fig, axes = style.subplots(1, len(ns), panel=(3.8, 3.2), sharey=True)
    colors = {}
    for ax, n in zip(axes[0], ns, strict=True):
        sub = subset(t, n=n)
        colors = plots.variant_curves(ax, sub, order=list(RULES))
        fin = an.final_values(sub, "val_mean", ["variant"])["val_mean"]
        same = len(fin) > 1 and float(fin.max() - fin.min()) < 1e-12
        ax.set_title(
            f"B = {int(sub['batch'].iloc[0])} (n = {n})"
            + ("\n= reference batch: rules coincide" if same else "")
        )
    for ax in axes[0, 1:]:
        ax.set_ylabel("")
    plots.variant_legend(fig, colors, "lr rule: lr, lr * sqrt(B / B_ref) or lr * B / B_ref (bp = 32)")
    style.title(fig, "4", "learning-rate scaling with batch size")
    return fig


def summary(tables):
    fin = an.final_values(tables["lr-easy"], "val_mean", ["n", "batch", "variant"])
    top = fin[fin["batch"] == fin["batch"].max()].set_index("variant")["val_mean"]
    return {
        "batch": int(fin["batch"].max()),
        "best": str(top.idxmax()),
        "final": {k: float(v) for k, v in top.items()},
    }


def ours(s):
    f = s["final"]
    return (
        f"at B = {s['batch']} the best rule is {s['best']}; final validation reward "
        + ", ".join(f"{r} {f.get(r, float('nan')):.3f}" for r in RULES)
        + "."
    )


SPEC = FigureSpec(
    id="fig04",
    paper="4",
    title="Learning-rate scaling rules",
    studies=STUDIES,
    make=make,
    summary=summary,
    ours=ours,
    paper_finding="Square-root scaling of the learning rate with B beats constant and linear (unstable) "
    "scaling "
    "at large batch.",
)
