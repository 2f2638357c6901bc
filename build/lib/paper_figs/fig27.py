"""Paper Fig 27: how the training pass@1 distribution evolves over compute, small vs large n."""

from __future__ import annotations

import numpy as np

from paper_figs import style
from paper_figs.catalog import JOINT_EASY, JOINT_HARD, pass1_of, subset
from paper_figs.fig11 import BP, STUCK, pick_ns
from paper_figs.specs import FigureSpec
from studies.fit.distribution import pass1_stats

STUDIES = (JOINT_EASY, JOINT_HARD)
BINS = np.linspace(0, 1, 11)


def _hist(tables, st, n):
    """(computes, bins x computes share matrix) pooled over seeds for one n."""
    t = subset(tables[st.name], bp=BP)
    t = t[t["n"] == n]
    p1 = pass1_of(tables, st.name, t, "train")
    cs = np.sort(p1["compute"].unique())
    H = np.zeros((len(BINS) - 1, len(cs)))
    for j, c in enumerate(cs):
        v = p1.loc[p1["compute"] == c, "pass1"].to_numpy(dtype=float)
        H[:, j] = np.histogram(v, bins=BINS)[0] / max(v.size, 1)
    return cs, H


@style.styled
def make(tables):
    fig, axes = style.subplots(2, 2, panel=(4.3, 2.7), sharex=True, sharey=True)
    panels = []
    for row, st in enumerate(STUDIES):
        for col, n in enumerate(pick_ns(subset(tables[st.name], bp=BP))):
            cs, H = _hist(tables, st, n)
            keep = cs > 0
            panels.append((axes[row, col], st.dataset, n, cs[keep], H[:, keep]))
    vmax = max([float(H.max()) for *_, H in panels if H.size] + [1e-9])
    mesh = None
    for ax, ds, n, cs, H in panels:
        if len(cs) < 2:
            style.empty_panel(ax, "fewer than two snapshots")
            continue
        edges = np.sqrt(cs[1:] * cs[:-1])
        xe = np.concatenate([[cs[0] ** 2 / edges[0]], edges, [cs[-1] ** 2 / edges[-1]]])
        mesh = ax.pcolormesh(xe, BINS, H, cmap="mako_r", vmin=0, vmax=vmax, shading="flat")
        style.compute_axis(ax)
        ax.set_title(f"{ds}, n = {n}")
        x0 = min(p[3][0] for p in panels if len(p[3]))
        if cs[0] > 4 * x0:  # a large n takes its first step later: say so instead of leaving a blank
            ax.text(
                (x0 * cs[0]) ** 0.5,
                0.5,
                "before the\nfirst step",
                ha="center",
                va="center",
                fontsize=9,
                color="0.4",
            )
    for ax in axes[:, 0]:
        ax.set_ylabel("training pass@1")
    for ax in axes[0]:
        ax.set_xlabel("")
    if mesh is not None:
        fig.colorbar(mesh, ax=axes, label="share of problems", fraction=0.04, pad=0.01)
    style.title(fig, "27", f"dynamics of the training pass@1 distribution (bp = {BP})")
    return fig


def summary(tables):
    out = {}
    for st in STUDIES:
        t = subset(tables[st.name], bp=BP)
        for n in pick_ns(t):
            p1 = pass1_of(tables, st.name, t[t["n"] == n], "train")
            s = pass1_stats(p1, zero_tol=STUCK).groupby("compute")["zero_frac"].mean()
            out[f"{st.dataset}_n{n}"] = {"zero_first": float(s.iloc[0]), "zero_last": float(s.iloc[-1])}
    return out


def ours(s):
    return (
        f"share of training problems at pass@1 <= {STUCK}, initial -> final snapshot: "
        + ", ".join(
            f"{k.replace('_n', ' n = ')} {100 * v['zero_first']:.0f}% -> {100 * v['zero_last']:.0f}%"
            for k, v in s.items()
        )
        + "."
    )


SPEC = FigureSpec(
    id="fig27",
    paper="27",
    title="Dynamics of pass@1 distributions",
    studies=STUDIES,
    make=make,
    summary=summary,
    ours=ours,
    paper_finding="On Easy, small n polarises over training (mass near 1, a persistent mass at 0); large "
    "n stays "
    "dispersed; on Hard, large n steadily shrinks the zero mass.",
)
