"""Paper Fig 25: the n-scaling trend under PPO (Easy, Hard) and CISPO (Easy) objectives."""

from __future__ import annotations

from paper_figs import analysis as an
from paper_figs import plots, style
from paper_figs.catalog import BUDGET, SEEDS
from paper_figs.specs import POW2, FigureSpec, StudySpec

CASES = (("ppo", "easy"), ("ppo", "hard"), ("cispo", "easy"))
EPOCHS, MINIBATCHES = 2, 4
"""Several updates per batch: with one on-policy update the ratio is 1, so PPO and CISPO equal plain PG."""
STUDIES = tuple(
    StudySpec(
        f"{obj}-{ds}",
        kind="n-vs-m",
        dataset=ds,
        n=POW2,
        budget=BUDGET,
        seeds=SEEDS,
        base=(("objective", obj), ("options", (("ppo_epochs", EPOCHS), ("minibatches", MINIBATCHES)))),
    )
    for obj, ds in CASES
)


@style.styled
def make(tables):
    fig, axes = style.subplots(1, 3, panel=(4.0, 3.3), sharey=False)
    ns = set()
    for ax, st, (obj, ds) in zip(axes[0], STUDIES, CASES, strict=True):
        t = tables[st.name]
        ns |= set(t["n"].unique())
        plots.n_curves(ax, t)
        ax.set_title(f"{obj.upper()}, {ds}")
    for ax in axes[0, 1:]:
        ax.set_ylabel("")
    style.n_legend(fig, ns, [style.frontier_handle()])
    style.title(
        fig,
        "25",
        f"other RL objectives (PPO-clip, CISPO; {EPOCHS} epochs x {MINIBATCHES} minibatches "
        f"per batch), bp = 32",
    )
    return fig


def summary(tables):
    return {st.name: plots.frontier_numbers(an.fit_report(tables[st.name])) for st in STUDIES}


def ours(s):
    return (
        "determined n* lowest -> highest compute: "
        + "; ".join(f"{k}: {plots.determined_span(v)}" for k, v in s.items())
        + "."
    )


SPEC = FigureSpec(
    id="fig25",
    paper="25",
    title="PPO and CISPO",
    studies=STUDIES,
    make=make,
    summary=summary,
    ours=ours,
    paper_finding="With PPO and CISPO, larger n becomes increasingly favourable as compute grows, as with "
    "GRPO.",
)
