"""Paper Fig 24: n*(C) with compute measured in generated tokens vs in rollouts."""

from __future__ import annotations

from paper_figs import analysis as an
from paper_figs import plots, style
from paper_figs.catalog import BUDGET, SEEDS
from paper_figs.specs import POW2, FigureSpec, StudySpec

STUDIES = (
    StudySpec(
        "tokens-easy",
        kind="n-vs-m",
        dataset="easy",
        n=POW2,
        budget=BUDGET,
        seeds=SEEDS,
        base=(("options", (("response_len", 300.0),)),),
    ),
)
"""The simulator's response-length model (mean 300 tokens at the start) makes `tokens` grow as real runs
do."""


@style.styled
def make(tables):
    t = tables["tokens-easy"]
    fig, axes = style.subplots(1, 2, panel=(4.8, 3.4))
    for ax, x in zip(axes[0], ("tokens", "compute"), strict=True):
        plots.nstar_panel(ax, an.fit_report(t, x=x), unit="tokens" if x == "tokens" else "rollouts")
    axes[0, 0].set_title("token-based compute")
    axes[0, 1].set_title("rollout-based compute")
    plots.nstar_legend(fig)
    bp = ", ".join(str(int(b)) for b in sorted(set(t["bp"])))
    style.title(fig, "24", f"n*(C) in tokens vs rollouts (easy, bp = {bp})", style.engine_of(t))
    return fig


def summary(tables):
    t = tables["tokens-easy"]
    return {x: plots.frontier_numbers(an.fit_report(t, x=x)) for x in ("tokens", "compute")}


def ours(s):
    a, b = s["tokens"], s["compute"]
    return (
        f"tokens: {plots.span_phrase(a)} ({a['fit']}); rollouts: "
        f"{plots.span_phrase(b)} ({b['fit']})."
    )


SPEC = FigureSpec(
    id="fig24",
    paper="24",
    title="Token-based vs rollout-based compute",
    studies=STUDIES,
    make=make,
    summary=summary,
    ours=ours,
    paper_finding="The n*(C) sigmoid has the same shape whether compute counts generated tokens or rollouts.",
    backends=("sim", "llm"),
)
