"""Paper Fig 3: regularisation ablations (none, KL, KL + entropy, + zero-variance filtering), Easy and
Hard."""

from __future__ import annotations

from paper_figs import analysis as an
from paper_figs import plots, style
from paper_figs.catalog import BUDGET, SEEDS
from paper_figs.specs import FigureSpec, StudySpec

KL, ENT = 0.05, 0.01
VARIANTS = (
    ("none", ()),
    (f"KL {KL}", (("kl_coef", KL),)),
    (f"KL {KL} + entropy {ENT}", (("kl_coef", KL), ("entropy_coef", ENT))),
    (
        "KL + entropy + zero-var. filter",
        (("kl_coef", KL), ("entropy_coef", ENT), ("zero_variance_filter", True)),
    ),
)
STUDIES = tuple(
    StudySpec(f"reg-{ds}", kind="n-vs-m", dataset=ds, n=(16,), budget=BUDGET, seeds=SEEDS, variants=VARIANTS)
    for ds in ("easy", "hard")
)
ORDER = [v for v, _ in VARIANTS]


@style.styled
def make(tables):
    fig, axes = style.subplots(1, 2)
    colors = {}
    for ax, st in zip(axes[0], STUDIES, strict=True):
        colors = plots.variant_curves(ax, tables[st.name], order=ORDER)
        ax.set_title(f"{st.dataset} (bp = 32, n = 16)")
    plots.variant_legend(fig, colors, "regularisation")
    style.title(fig, "3", "regularisation ablations")
    return fig


def summary(tables):
    out = {}
    for st in STUDIES:
        fin = an.final_values(tables[st.name], "val_mean", ["variant"]).set_index("variant")["val_mean"]
        out[st.dataset] = {"best": str(fin.idxmax()), "final": {k: float(v) for k, v in fin.items()}}
    return out


def ours(s):
    parts = []
    for ds, v in s.items():
        none = v["final"].get("none", float("nan"))
        parts.append(
            f"{ds}: best = {v['best']} ({v['final'][v['best']]:.3f} vs {none:.3f} without regularisation)"
        )
    return "; ".join(parts) + "."


SPEC = FigureSpec(
    id="fig03",
    paper="3",
    title="Regularisation ablations",
    studies=STUDIES,
    make=make,
    summary=summary,
    ours=ours,
    paper_finding="KL + entropy is best on Easy; on Hard the regularisers destabilise training and no "
    "regularisation is best.",
)
