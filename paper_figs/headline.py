"""Our headline figure: tabular vs interference frontiers and n*(C) side by side (PAPER.md theory,
Section 5.1).

Claim 1 of the theory: a tabular softmax learner is M-favouring (small n, many steps wins at every budget);
interference across problems moves the optimum to larger n as compute grows (paper Fig 6-7).
"""

from __future__ import annotations

from matplotlib.lines import Line2D

from paper_figs import analysis as an
from paper_figs import plots, style
from paper_figs.catalog import HEADLINE_INTERFERENCE, HEADLINE_TABULAR
from paper_figs.specs import FigureSpec

PRESET_COLORS = {"tabular": "0.35", "interference": "#e8710a"}
METRIC = "train_mean"
"""Training reward: the theory's object (Sec. 5.1), and the only reward a tabular policy can move (its
held-out
problems share no parameters with the training problems, so its validation reward is flat by construction)."""
STUDIES = (HEADLINE_TABULAR, HEADLINE_INTERFERENCE)
ROLES = (("tabular", HEADLINE_TABULAR.name), ("interference", HEADLINE_INTERFERENCE.name))


@style.styled
def make(tables):
    fig, axes = style.subplots(1, 3, panel=(4.4, 3.5))
    ns = set()
    for ax, (role, name) in zip(axes[0, :2], ROLES, strict=True):
        t = tables[name]
        ns |= set(t["n"].unique())
        plots.n_curves(ax, t, METRIC)
        ax.set_title(f"{role} policy")
    ax = axes[0, 2]
    for role, name in ROLES:
        rep = an.fit_report(tables[name], METRIC)
        plots.nstar_panel(ax, rep, color_by_reward=False, color=PRESET_COLORS[role], label=role)
    ax.set_title("compute-optimal n*(C)")
    extra = [plots.style.frontier_handle()] + [
        (Line2D([], [], color=c, marker="o", lw=2), f"n*(C), {r}") for r, c in PRESET_COLORS.items()
    ]
    style.n_legend(fig, ns, extra)
    style.title(
        fig,
        "",
        "Tabular vs interference policy: training-reward frontiers and n*(C) (easy, bp = 32; "
        "cf. paper Fig. 6-7)",
    )
    return fig


def summary(tables):
    out = {}
    for role, name in ROLES:
        rep = an.fit_report(tables[name], METRIC)
        nums = plots.frontier_numbers(rep)
        fin = an.final_values(tables[name], METRIC)
        small = fin[fin["n"] <= 4][METRIC].max()
        large = fin[fin["n"] >= 32][METRIC].max()
        out[role] = nums | {"final_large_minus_small": float(large - small)}
    return out


def ours(s):
    t, i = s["tabular"], s["interference"]
    return (
        f"tabular: n* = {plots.fmt_n(t['n_lo'])} at C = {plots.fmt_c(t['C_lo'])} and "
        f"{plots.fmt_n(t['n_hi'])} at C = {plots.fmt_c(t['C_hi'])}; interference: n* = "
        f"{plots.fmt_n(i['n_lo'])} -> {plots.fmt_n(i['n_hi'])} over the same range; at the budget the best "
        f"large n (>= 32) minus the best small n (<= 4): tabular {t['final_large_minus_small']:+.3f}, "
        f"interference {i['final_large_minus_small']:+.3f} training reward."
    )


SPEC = FigureSpec(
    id="headline",
    paper="",
    title="Tabular vs interference: frontiers and n*(C)",
    studies=STUDIES,
    make=make,
    summary=summary,
    ours=ours,
    paper_finding="Theory (Sec. 5.1): a tabular learner prefers many small steps (n* stays small); "
    "interference "
    "across problems makes n* grow with compute, as the paper measures on LLMs.",
)
