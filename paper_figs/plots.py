"""Drawing primitives shared by the figure modules (reward-vs-compute per n with frontier, n*(C) panels).

Everything here draws from tables and from `studies` fit reports; nothing here fits (see analysis.py).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from paper_figs import analysis as an
from paper_figs import style
from studies.fit.plots import tie_blocks
from studies.fit.render import nstar_fit_text
from studies.fit.sigmoid import FIT_OK


def n_curves(
    ax: Axes,
    table: pd.DataFrame,
    metric: str = "val_mean",
    *,
    by: str = "n",
    raw: bool = True,
    fits: bool = True,
    frontier: bool = True,
    report: dict | None = None,
    x: str = "compute",
    unit: str = "rollouts",
) -> dict | None:
    """Reward vs compute, one colour per n: seed-mean curves (thin), fitted sigmoids (solid) and the frontier
    (black dashed) of `studies.fit.report.fit_report` (paper Fig 6 layout). Returns the report it drew."""
    if table.empty:
        style.empty_panel(ax, "no runs")
        return None
    if (fits or frontier) and report is None:
        report = an.fit_report(table, metric=metric, by=by, x=x)
    sm = an.seed_mean(table, metric, [by], x=x)
    sm = sm[sm[x] > 0]
    for v, g in sm.groupby(by, sort=True):
        kw = {"color": style.n_color(v)} if by == "n" else {}
        ax.plot(
            g[x],
            g[metric],
            lw=1.0 if fits else 1.8,
            alpha=0.45 if fits else 0.95,
            marker="o",
            ms=2.5 if fits else 3.5,
            **kw,
        )
    if fits and report:
        for c in report.get("curves", []):
            g = sm[sm[by] == c[by]]
            # a degenerate fit (too few points) is a constant, not a curve: the seed-mean line above shows
            # the data, and the frontier uses its record points (studies.fit.frontier)
            if g.empty or c.get("status", FIT_OK) != FIT_OK or not an.has_params(c["params"]):
                continue
            cs = np.geomspace(g[x].min(), g[x].max(), 120)
            kw = {"color": style.n_color(c[by])} if by == "n" else {}
            ax.plot(cs, an.curve(c["params"], cs), lw=2.0, **kw)
    if frontier and report:
        fr = an.frontier_frame(report, by)
        if not fr.empty:
            ax.plot(fr["compute"], fr["reward"], color=style.FRONTIER_COLOR, lw=2.2, ls="--", zorder=5)
    style.compute_axis(ax, unit)
    ax.set_ylabel(style.metric_label(metric, an.k_of(table)))
    return report


def nstar_panel(
    ax: Axes,
    report: dict | None,
    *,
    by: str = "n",
    unit: str = "rollouts",
    fit: bool = True,
    color_by_reward: bool = True,
    label: str | None = None,
    color=None,
) -> None:
    """n*(C) of a fit report (studies.fit.nstar): determined points filled (colour = frontier reward, paper
    Fig 7, or `color`), ties shaded from the smallest to the largest n of their set with no point (a tie is
    no point of the trend), the only n with data hollow; the report's sigmoid of log2 n* (red) only when it
    describes a determined trend."""
    fr = an.frontier_frame(report or {}, by)
    if fr.empty:
        style.empty_panel(ax, "no frontier")
        return
    y = fr[by + "_smooth"] if by + "_smooth" in fr.columns else fr[by]
    tie = fr["tie"].astype(bool) if "tie" in fr.columns else pd.Series(False, index=fr.index)
    fitted = ~an.undetermined(fr)  # the points the report's n* fit used
    det = fitted & ~tie  # a tie is never a point of the trend, even where it lies above an earlier set
    alone = ~fitted & ~tie
    if tie.any():
        tie_blocks(ax, fr["compute"], fr[by + "_lo"], fr[by + "_hi"], tie, color=color or "0.6", alpha=0.18)
    if color_by_reward:
        norm = style.norm_for(fr["reward"])
        sc = ax.scatter(fr["compute"][det], y[det], c=fr["reward"][det], cmap="rocket_r", s=22, zorder=3,
                        norm=norm)
        ax.scatter(fr["compute"][alone], y[alone], s=22, zorder=3, facecolors="none",
                   edgecolors=plt.get_cmap("rocket_r")(norm(fr["reward"][alone])))
        cb = ax.figure.colorbar(sc, ax=ax, pad=0.01, fraction=0.05)
        cb.set_label("frontier reward")
    else:
        ax.scatter(fr["compute"][det], y[det], s=18, color=color, zorder=3, label=label)
        ax.scatter(fr["compute"][alone], y[alone], s=18, facecolors="none", edgecolors=color, zorder=3)
    f = an.nstar_fit(report or {}, by) if fit else None
    if f is not None and an.nstar_trend(report or {}) and fitted.any():
        d = fr[fitted]
        cs = np.geomspace(d["compute"].min(), d["compute"].max(), 200)
        ax.plot(cs, 2.0 ** f.predict(cs), color=color or style.FIT_COLOR, lw=2.0, zorder=4)
    style.compute_axis(ax, unit)
    style.log2_axis(ax, "y", fr[by], label=f"compute-optimal {by}*")


MIN_R2 = 0.5
"""Sigmoid fits of n* explaining less than half the variance are not drawn (a line through nothing
misleads)."""


def fit_handle(label: str = "sigmoid fit of log2 n* (determined points)") -> tuple[Line2D, str]:
    return Line2D([], [], color=style.FIT_COLOR, lw=2.0), label


def frontier_numbers(report: dict | None, by: str = "n") -> dict:
    """Gallery numbers of one frontier: n* at the lowest and the highest compute where it is determined (see
    `analysis.undetermined`; the first and last points when it is determined nowhere), the largest
    determined n*, the reward at the highest compute, the r2 of the n* fit and what that fit is in words
    (`fit`: studies.fit.render.nstar_fit_text, the words of `isocompute fit`)."""
    fr = an.frontier_frame(report or {}, by)
    nan = float("nan")
    if fr.empty:
        return {"C_lo": nan, "C_hi": nan, "n_lo": nan, "n_hi": nan, "n_max": nan, "R_hi": nan, "r2": nan,
                "fit": "no frontier", "determined": 0}
    f = an.nstar_fit(report or {}, by)
    det = fr[~an.undetermined(fr)]
    det = det if not det.empty else fr
    return {
        "C_lo": float(det["compute"].iloc[0]),
        "C_hi": float(det["compute"].iloc[-1]),
        "n_lo": float(det[by].iloc[0]),
        "n_hi": float(det[by].iloc[-1]),
        "n_max": float(det[by].max()),
        "R_hi": float(fr["reward"].iloc[-1]),
        "r2": float(f.r2_) if f is not None else nan,
        "fit": nstar_fit_text(report or {}),
        "determined": int((~an.undetermined(fr)).sum()),
    }


def determined_span(v: dict) -> str:
    """'2 -> 64' between the lowest and the highest compute where n* is determined (frontier_numbers), or
    'undetermined (ties)' where it is determined at no compute."""
    if not v.get("determined", 1):
        return "undetermined (ties)"
    return f"{fmt_n(v['n_lo'])} -> {fmt_n(v['n_hi'])}"


def span_phrase(v: dict) -> str:
    """'determined n* 2 -> 64' or 'n* undetermined (ties)' (determined_span as a phrase of its own)."""
    span = determined_span(v)
    return f"n* {span}" if not v.get("determined", 1) else f"determined n* {span}"


def sigmoid_text(fit) -> str:
    """A figure's own sigmoid of log2 n* in words: "sigmoid r2 0.92" where it is drawn (fitted, r2 >=
    MIN_R2), else why not."""
    if fit.ok_ and fit.r2_ >= MIN_R2:
        return f"sigmoid r2 {fit.r2_:.2f}"
    if not fit.ok_:
        return f"no sigmoid ({fit.status_})"
    return f"no sigmoid drawn (r2 {fit.r2_:.2f} < {MIN_R2})"


def _num(v) -> float:
    """Report values as floats (reports write None for nan)."""
    return float("nan") if v is None else float(v)


def fmt_c(c: float) -> str:
    """Compute in rollouts for gallery lines: 3.3e5 style (two significant digits)."""
    if not np.isfinite(c):
        return "n/a"
    return f"{c:.1e}".replace("e+0", "e").replace("e+", "e")


def fmt_n(v: float) -> str:
    return "n/a" if not np.isfinite(v) else f"{int(round(v))}"


def variant_curves(
    ax: Axes,
    table: pd.DataFrame,
    metric: str = "val_mean",
    *,
    by: str = "variant",
    order: list | None = None,
    styles: dict | None = None,
) -> dict:
    """Seed-mean metric vs compute, one categorical colour per value of `by` (variants, rules, presets), with
    a band of +-1 standard error over seeds. Returns {value: colour} for the legend."""
    sm = an.seed_mean(table, metric, [by])
    sm = sm[sm["compute"] > 0]
    values = order or sorted(sm[by].unique(), key=str)
    colors = {}
    for i, v in enumerate(values):
        g = sm[sm[by] == v]
        if g.empty:
            continue
        st = {"color": style.VARIANT_COLORS[i % len(style.VARIANT_COLORS)], "lw": 2.0} | (styles or {}).get(
            v, {}
        )
        ax.plot(g["compute"], g[metric], **st)
        ax.fill_between(
            g["compute"], g[metric] - g["se"], g[metric] + g["se"], color=st["color"], alpha=0.15, lw=0
        )
        colors[v] = st
    style.compute_axis(ax)
    ax.set_ylabel(style.metric_label(metric, an.k_of(table)))
    return colors


def variant_legend(fig, colors: dict, title: str | None = None, where: str = "bottom") -> None:
    handles = [Line2D([], [], **st) for st in colors.values()]
    style.outside_legend(fig, handles, [str(v) for v in colors], title, where=where)


def nstar_legend(fig, smooth: int = 1) -> None:
    """Bottom legend of n*(C) panels: what the filled and hollow points and the red line are."""
    pts = Line2D([], [], ls="", marker="o", color="0.3")
    hollow = Line2D([], [], ls="", marker="o", mfc="none", color="0.3")
    what = "frontier n*" + (f" (running average over {smooth} grid points)" if smooth > 1 else "")
    style.outside_legend(
        fig, [pts, hollow, fit_handle()[0]], [what, HOLLOW_LABEL, fit_handle()[1]], where="bottom"
    )


HOLLOW_LABEL = "hollow: the only n with data; shaded: n* a tie (the set of n the seeds cannot tell apart)"


def nstar_span(v: dict) -> str:
    """'determined n* 4 at C = 2.0e2 -> 64 at C = 2.6e5' from frontier_numbers (the lowest and highest
    compute where n* is one n the seeds tell apart), or 'n* undetermined (ties)' where it is nowhere."""
    if not v.get("determined", 1):
        return "n* undetermined (ties)"
    return (f"determined n* {fmt_n(v['n_lo'])} at C = {fmt_c(v['C_lo'])} -> {fmt_n(v['n_hi'])} at C = "
            f"{fmt_c(v['C_hi'])}")


def frontier_grid(
    tables, studies, column: str, symbol: str, panel: tuple[float, float], fig_id: str, what: str
):
    """Rows = studies (easy, hard), columns = the values of `column` (bp or batch): n-curves with their
    frontier in each panel (paper Fig 16-19)."""
    from paper_figs.catalog import subset

    values = sorted(tables[studies[0].name][column].unique())
    fig, axes = style.subplots(len(studies), len(values), panel=panel, sharex=True, sharey="row")
    ns = set()
    for r, st in enumerate(studies):
        for c, v in enumerate(values):
            sub = subset(tables[st.name], **{column: v})
            ns |= set(sub["n"].unique())
            n_curves(axes[r, c], sub)
            axes[r, c].set_title(f"{st.dataset}, {symbol} = {v}")
            if c:
                axes[r, c].set_ylabel("")
    style.n_legend(fig, ns, [style.frontier_handle()])
    style.title(fig, fig_id, what)
    return fig
