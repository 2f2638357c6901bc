"""Paper Fig 12: the n-scaling trend under other "base models" = other policy models / interference
strengths."""

from __future__ import annotations

from paper_figs import analysis as an
from paper_figs import plots, style
from paper_figs.catalog import BUDGET, SEEDS, subset
from paper_figs.specs import POW2, FigureSpec, StudySpec

VARIANTS = (
    ("linear", (("preset", "linear"),)),
    ("interference, share 0.5", (("preset", "interference"), ("options", (("share", 0.5),)))),
    ("interference, share 1", (("preset", "interference"), ("options", (("share", 1.0),)))),
)
"""Policy roles of studies.presets.PRESETS (swap stronger presets in there); `share` is the sandbox's sharing
knob."""
STUDIES = tuple(
    StudySpec(
        f"models-{ds}", kind="n-vs-m", dataset=ds, n=POW2, budget=BUDGET, seeds=SEEDS, variants=VARIANTS
    )
    for ds in ("easy", "hard")
)
LABELS = [v for v, _ in VARIANTS]


@style.styled
def make(tables):
    fig, axes = style.subplots(2, len(LABELS), panel=(3.9, 2.9))
    ns = set()
    for row, st in enumerate(STUDIES):
        t = tables[st.name]
        for col, lab in enumerate(LABELS):
            sub = subset(t, variant=lab)
            ns |= set(sub["n"].unique())
            ax = axes[row, col]
            plots.n_curves(ax, sub)
            ax.set_title(f"{st.dataset}: {lab}", fontsize=11)
            if col:
                ax.set_ylabel("")
    style.n_legend(fig, ns, [style.frontier_handle()])
    style.title(fig, "12", "other policy models and interference strengths")
    return fig


def summary(tables):
    return {
        f"{st.dataset}: {lab}": plots.frontier_numbers(an.fit_report(subset(tables[st.name], variant=lab)))
        for st in STUDIES
        for lab in LABELS
    }


def ours(s):
    return (
        "frontier n* where determined, lowest -> highest compute: "
        + "; ".join(f"{k} {plots.determined_span(v)}" for k, v in s.items())
        + "."
    )


SPEC = FigureSpec(
    id="fig12",
    paper="12",
    title="Other policy models / interference strengths",
    studies=STUDIES,
    make=make,
    summary=summary,
    ours=ours,
    paper_finding="Qwen3-4B and Llama-3.1-8B show the same trend (larger n wins at high compute) but "
    "saturate at "
    "different n (16-64).",
)
