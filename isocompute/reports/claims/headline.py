"""The headline figure of README.md, drawn by the claims report from finding 1's own runs.

One row per lr choice of finding 1 (nstar.lr_choices): the paper's recipe (sqrt rule, base lr tuned on
seeds the report never shows) and the preset's constant lr (a sensitivity row), so the figure never shows
n*(C) at one lr without the other beside it. Per row: the frontier of each policy the plan runs at that lr
(tabular on its training problems, interference on held-out problems), n*(C) of both (the estimator of
`isocompute fit`, studies.fit.nstar: determined points filled, the set the seeds cannot tell apart shaded),
and the reward at stake per budget (what n* gains over the best small n, with its 95% interval; the stakes
of f1_measure's n* rows). The panels are paper_figs' (plots.n_curves, plots.nstar_panel) in paper_figs'
style, so the README's figure reads like the gallery's. The README caption quotes the same numbers
(isocompute.reports.readme.headline_caption, from the report's JSON).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from isocompute.reports.claims.common import ClaimsMode, budget_text, n_star_cell
from isocompute.reports.claims.judge import EQUIVALENCE_MARGIN
from studies.declared import Tables

ROLES = ("tabular", "interference")
"""Panel order of the policies (the paper's contrast: tabular left, interference right)."""
STAKE_OFFSET = {"tabular": 0.93, "interference": 1.07}
"""Horizontal nudge (a factor of the budget) of each policy's stake, so the two intervals never overlap."""


def row_title(row: dict, top: float) -> str:
    """'paper's recipe: sqrt rule, base lr 0.003 (interference), 0.01 (tabular) tuned on held-out seeds' or
    'constant lr 0.1 (the preset's; a sensitivity row)', with the row's gain of large n at the top budget
    `top`."""
    if row["key"] == "recipe":
        lrs = ", ".join(f"{r['base_lr']:g} ({role})" for role, r in row["roles"].items()
                        if r["base_lr"] is not None)
        head = f"paper's recipe: sqrt rule, base lr {lrs} tuned on held-out seeds"
    elif row["key"] == "constant":
        head = f"constant lr {row['lr']:g} (the preset's; a sensitivity row)"
    else:
        head = "the backend's own recipe and lr"
    g = row["gain"]
    gain = (f"   |   interference at {budget_text(top)}, best large n - best small n: {g['iv'].text()}"
            if "n_small" in g else "")
    return head + gain


def figure(tables: Tables, plan: ClaimsMode, x: dict) -> Figure:
    """The headline figure from finding 1's numbers `x` (nstar.f1_measure, its "lr_choices") and the tables
    of the runs they were measured on."""
    from paper_figs import style

    return style.styled(_draw)(tables, plan, x)


def _draw(tables: Tables, plan: ClaimsMode, x: dict) -> Figure:
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    from paper_figs import plots, style
    from paper_figs.headline import PRESET_COLORS, SHORT

    rows = x["lr_choices"]
    roles = [r for r in ROLES if any(r in row["roles"] for row in rows)]
    ncols = len(roles) + 2
    panel = (4.4, 3.5)
    fig = plt.figure(figsize=(panel[0] * ncols, (panel[1] + 0.45) * len(rows)), layout="constrained")
    subs = np.atleast_1d(fig.subfigures(len(rows), 1))
    ns: set = set()
    for sub, row in zip(subs, rows, strict=True):
        sub.suptitle(row_title(row, plan.top), fontsize=12, fontweight="bold")
        axes = sub.subplots(1, ncols, squeeze=False)[0]
        ax_star, ax_stake = axes[-2], axes[-1]
        notes, row_ns, staked = [], set(), False
        for ax, role in zip(axes, roles, strict=False):
            r = row["roles"].get(role)
            if r is None:
                style.empty_panel(ax, f"no {role} runs at this lr")
                continue
            t = tables[r["study"]]
            row_ns |= {float(v) for v in t["n"].unique()}
            rep = plots.n_curves(ax, t, r["metric"])
            ax.set_title(f"{role} policy ({SHORT[r['metric']]})")
            plots.nstar_panel(ax_star, rep, color_by_reward=False, color=PRESET_COLORS[role], label=role)
            if r["rows"]:
                top = r["rows"][-1]
                notes.append(f"{role}: n* at {budget_text(top['budget'])} is {n_star_cell(top)}")
            staked |= _stakes(ax_stake, r["rows"], role, PRESET_COLORS[role])
        ns |= row_ns
        if row_ns:  # every n of the grid on the axis, so each tie's shaded set lies inside it
            style.log2_axis(ax_star, "y", row_ns, label="compute-optimal n*")
            ax_star.set_ylim(min(row_ns) / 1.3, max(row_ns) * 1.3)
        ax_star.set_title("compute-optimal n*(C)")
        if notes:
            ax_star.text(0.03, 0.97, "\n".join(notes), ha="left", va="top", fontsize=9,
                         transform=ax_star.transAxes,
                         bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "0.8"})
        if not staked:
            ax_stake.text(0.5, 0.5, "no stake: it needs two seeds or more", ha="center", va="center",
                          transform=ax_stake.transAxes, color="0.35")
        ax_stake.axhline(0.0, color="0.3", lw=0.8)
        ax_stake.axhspan(-EQUIVALENCE_MARGIN, EQUIVALENCE_MARGIN, color="0.85", alpha=0.5, lw=0, zorder=0)
        style.compute_axis(ax_stake)
        ax_stake.set_ylabel("reward at stake (n* - best small n)")
        ax_stake.set_title("the reward at stake")
    handles, labels = style.n_handles(ns)
    handles += [style.frontier_handle()[0], Patch(color="0.6", alpha=0.3, lw=0),
                Patch(color="0.85", alpha=0.5, lw=0)]
    labels += [style.frontier_handle()[1], "n* a tie: the set of n the seeds cannot tell apart",
               f"equivalence margin +-{EQUIVALENCE_MARGIN:g}"]
    handles += [Line2D([], [], color=PRESET_COLORS[r], marker="o", lw=2) for r in roles]
    labels += [f"{r}: n*(C) where determined; stake with its 95% interval" for r in roles]
    style.outside_legend(fig, handles, labels, where="bottom")
    seeds = f"seeds {plan.seeds_text()}"
    choices = f"{len(rows)} lr choices" if len(rows) > 1 else "its lr"
    fig.suptitle(f"Finding 1 at {choices}: frontiers, n*(C) and the reward at stake (claims report, "
                 f"{plan.name} mode, {seeds}, bp = {plan.bp}, easy)", fontsize=13)
    return fig


def _stakes(ax, rows: list[dict], role: str, color) -> bool:
    """The stake of each budget's n* as a point with its 95% interval (a bare point where n* is the best
    small n itself: nothing at stake); budgets without a stake are left out. Whether any was drawn."""
    pts = [(r["budget"], r["stake"]) for r in rows if r.get("stake") is not None
           and np.isfinite(r["stake"].estimate)]
    if not pts:
        return False
    b = np.array([p[0] for p in pts]) * STAKE_OFFSET.get(role, 1.0)
    est = np.array([p[1].estimate for p in pts])
    lo = np.array([p[1].lo if np.isfinite(p[1].lo) else p[1].estimate for p in pts])
    hi = np.array([p[1].hi if np.isfinite(p[1].hi) else p[1].estimate for p in pts])
    ax.errorbar(b, est, yerr=[est - lo, hi - est], fmt="o", ms=5, color=color, capsize=3, lw=1.4)
    return True


def write(path: Path, tables: Tables, plan: ClaimsMode, x: dict) -> Path:
    """Draw the headline figure and save it as `path` (PNG; paper_figs.build.save: no dates in the file, so
    the same runs give the same bytes)."""
    import matplotlib.pyplot as plt

    from paper_figs.build import save

    fig = figure(tables, plan, x)
    try:
        (out,) = save(fig, path.parent, path.stem, formats=(path.suffix.lstrip(".") or "png",))
    finally:
        plt.close(fig)
    return out
