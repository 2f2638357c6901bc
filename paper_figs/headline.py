"""`make demo`'s figure: tabular vs interference frontiers and n*(C) side by side (docs/PAPER.md Section 5.1).

Claim 1 of the theory: a tabular softmax learner is M-favouring (small n, many steps wins at every budget);
interference across problems moves the optimum to larger n as compute grows (paper Fig 6-7). Drawn at the
simulator's default constant lr from the demo's runs (`isocompute figs --only headline`, into
results/demo/headline.png); it is not in the gallery (`gallery=False`): README's headline figure,
docs/figs/headline.png, is the claims report's, from finding 1's runs under the paper's tuned recipe and the
constant lr side by side (isocompute/reports/claims/headline.py, which draws with this module's colours).
"""

from __future__ import annotations

import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from paper_figs import analysis as an
from paper_figs import plots, style
from paper_figs.catalog import HEADLINE_INTERFERENCE, HEADLINE_TABULAR
from paper_figs.specs import FigureSpec
from studies.presets import DEMO_ROLES, preset_lr

PRESET_COLORS = {"tabular": "0.35", "interference": "#e8710a"}
METRICS = {role: metric for role, metric, _ in DEMO_ROLES}
"""As in `isocompute demo` (studies.presets.DEMO_ROLES): the tabular policy is read on its training problems
(the theory's object, Sec. 5.1; its held-out problems share no parameters, so its validation reward is flat
by construction), the interference policy on held-out validation problems (the paper's metric)."""
STUDIES = (HEADLINE_TABULAR, HEADLINE_INTERFERENCE)
ROLES = (("tabular", HEADLINE_TABULAR.name), ("interference", HEADLINE_INTERFERENCE.name))
SHORT = {"train_mean": "training reward", "val_mean": "validation reward"}


@style.styled
def make(tables):
    fig, axes = style.subplots(1, 3, panel=(4.4, 3.6))
    ns = set()
    for ax, (role, name) in zip(axes[0, :2], ROLES, strict=True):
        t = tables[name]
        ns |= set(t["n"].unique())
        plots.n_curves(ax, t, METRICS[role])
        ax.set_title(f"{role} policy ({SHORT[METRICS[role]]})")
    ax = axes[0, 2]
    for role, name in ROLES:
        rep = an.fit_report(tables[name], METRICS[role])
        plots.nstar_panel(ax, rep, color_by_reward=False, color=PRESET_COLORS[role], label=role)
    ax.set_title("compute-optimal n*(C)")
    style.n_legend(fig, ns)
    shaded = Patch(color="0.6", alpha=0.3, lw=0)
    handles = [style.frontier_handle()[0], shaded] + [
        Line2D([], [], color=c, marker="o", lw=2) for c in PRESET_COLORS.values()
    ]
    labels = [style.frontier_handle()[1], "n* a tie: the set of n the seeds cannot tell apart"] + [
        f"n*(C) where determined (+ sigmoid fit where a trend), {r}" for r in PRESET_COLORS
    ]
    style.outside_legend(fig, handles, labels, where="bottom")
    lr = preset_lr("sim", "interference")
    style.title(
        fig, "", f"Tabular vs interference policy: frontiers and n*(C) at the untuned constant lr {lr:g} "
        "(easy, bp = 32; cf. paper Fig. 6-7; under the tuned recipe: docs/CLAIMS.md)"
    )
    return fig


def nstar_tables(tables) -> str:
    """The n*(C) table of each preset, every 4th frontier compute: frontier reward, n* (its set and "(tie)"
    where the seeds cannot tell n apart, studies.fit.nstar) and the sigmoid fit of log2 n* on the determined
    points where it describes a trend (what the figure draws)."""
    from studies.fit.nstar import set_text

    parts = []
    for role, name in ROLES:
        rep = an.fit_report(tables[name], METRICS[role])
        fr = an.frontier_frame(rep)
        f = an.nstar_fit(rep) if an.nstar_trend(rep) else None
        grid = [c["n"] for c in rep.get("curves", [])]
        tab = pd.DataFrame(
            {
                "compute": fr["compute"].map(lambda v: f"{v:.3g}"),
                SHORT[METRICS[role]].replace(" ", "_"): fr["reward"].map(lambda v: f"{v:.4f}"),
                "n*": [set_text(s, grid) + (" (tie)" if t else "")
                       for s, t in zip(fr["set"], fr["tie"], strict=True)],
                "n*_fit": [f"{v:.3g}" for v in 2.0 ** f.predict(fr["compute"])] if f is not None else "",
            }
        )
        parts.append(f"n*(C), {role} policy:\n" + tab.iloc[::4].to_string(index=False))
    return "\n\n".join(parts)


def summary(tables):
    out = {}
    for role, name in ROLES:
        metric = METRICS[role]
        nums = plots.frontier_numbers(an.fit_report(tables[name], metric))
        fin = an.final_values(tables[name], metric)
        small = fin[fin["n"] <= 4][metric].max()
        large = fin[fin["n"] >= 32][metric].max()
        out[role] = nums | {"final_large_minus_small": float(large - small)}
    return out


def ours(s):
    t, i = s["tabular"], s["interference"]
    return (
        f"easy, bp = 32: tabular (training reward) {plots.nstar_span(t)}; interference (validation reward) "
        f"{plots.nstar_span(i)}; at the budget, best large n (>= 32) minus best small n (<= 4): "
        f"tabular {t['final_large_minus_small']:+.3f}, interference {i['final_large_minus_small']:+.3f}."
    )


SPEC = FigureSpec(
    id="headline",
    paper="",
    title="Tabular vs interference: frontiers and n*(C)",
    studies=STUDIES,
    make=make,
    text=nstar_tables,
    summary=summary,
    ours=ours,
    paper_finding="Theory (Sec. 5.1): a tabular learner prefers many small steps (n* stays small); "
    "interference "
    "across problems makes n* grow with compute, as the paper measures on LLMs.",
    gallery=False,
)
