"""Quick figures of the fitting workflow from learning-curve tables (`isocompute plot`; paper Fig 6-7).

Built on `matplotlib.figure.Figure`, not pyplot: no global backend or figure state is touched, so it works
headless and in worker processes, and saving goes through the Agg canvas (PNG) or the PDF/SVG backends.
Figures are drawn from tables, never from inside a simulator or trainer.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Colormap, LinearSegmentedColormap, LogNorm, Normalize
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from studies.files import FIGURE_SUFFIXES
from studies.fit.frontier import FrontierFit

N_CMAP = "viridis_r"
"""Sequential map for n (shared with paper_figs.style): reversed so small n is light and large n dark, and
cut before the pale yellow end, which is unreadable on white."""
N_CMAP_CUT = (0.18, 1.0)


def n_cmap() -> Colormap:
    """The colour scale of n in every figure of the project."""
    lo, hi = N_CMAP_CUT
    return LinearSegmentedColormap.from_list("n_scale", colormaps[N_CMAP](np.linspace(lo, hi, 256)))


def _pow2_label(v: float) -> str:
    """ "2^k" for powers of two (the paper's grids), the plain value otherwise."""
    k = np.log2(v) if v > 0 else np.nan
    if np.isfinite(k) and abs(k - round(k)) < 1e-9:
        return f"$2^{{{int(round(k))}}}$"
    return f"{v:g}"


def plot_frontier(
    table: pd.DataFrame,
    metric: str = "val_mean",
    by: str = "n",
    out: str | Path | None = None,
    fit: FrontierFit | None = None,
    title: str | None = None,
    model: str | None = None,
    **fit_kwargs,
) -> Figure:
    """Two panels: left, per-configuration fitted sigmoids with raw and record-breaking points against
    compute (log axis, rollouts) and the frontier dashed (paper Fig 6); right, n*(C) on a log2 axis with its
    sigmoid fit (paper Fig 7). Configurations use a sequential colour scale with log2 labels.

    `fit`: a FrontierFit already fitted on `table` (else one is fitted with `fit_kwargs`). `out`: a .png, .pdf
    or .svg path, or a path without suffix to write both .png and .pdf. Returns the Figure.

    How sure (studies.fit.nstar): the frontier is the best's measured seed-mean record with its interval
    shaded; on the right, n* is a filled point only where it is determined, and where the seeds cannot tell
    configurations apart the band from the smallest to the largest member of the set is shaded, with no
    point in it (no tie is drawn as a point of the trend); when no n improved at all the left panel says so,
    with the preset `model`'s metric hint. The n* sigmoid is drawn only when the determined points show a
    trend (`FrontierFit.n_star_shape_`), else the panel says why not.
    """
    from studies.fit.certainty import no_improvement_note

    ff = fit if fit is not None else FrontierFit(metric=metric, by=by, **fit_kwargs).fit(table)
    metric, by, x = ff.metric, ff.by, ff.x
    keys = list(ff.curves_)
    numeric = ff._numeric_by(keys)
    cmap = n_cmap()
    if numeric and len(keys) > 1:
        norm = LogNorm(vmin=float(min(keys)), vmax=float(max(keys)))
    else:
        norm = Normalize(vmin=0, vmax=max(len(keys) - 1, 1))

    def colour(i, k):
        return cmap(norm(float(k)) if numeric and len(keys) > 1 else norm(i))

    fig = Figure(figsize=(11, 4.2), layout="constrained")
    ax, ax2 = fig.subplots(1, 2)
    raw = table.loc[pd.to_numeric(table[x], errors="coerce") > 0]
    for i, k in enumerate(keys):
        c = colour(i, k)
        pts = raw.loc[raw[by] == k]
        ax.scatter(pts[x], pts[metric], s=3, color=c, alpha=0.15, linewidths=0, rasterized=True)
        rec = ff.records_.loc[ff.records_["_group"] == k]
        ax.scatter(rec[x], rec[metric], s=10, color=c, edgecolors="k", linewidths=0.3, zorder=3)
        lo, hi = ff.ranges_[k]
        C = np.geomspace(lo, hi, 200)
        label = f"{by}={k:g}" if numeric else f"{by}={k}"
        if ff.curves_[k].ok_:
            ax.plot(C, ff.curves_[k].predict(C), color=c, lw=1.6, label=label)
        else:  # too few points for a sigmoid: the record points joined
            ax.plot(C, ff.record_curve(k, C), color=c, lw=1.2, ls=":", label=f"{label} (no fit)")
    fr = ff.frontier_
    none_improved = ff.nstar_.none_improved
    level = f"{ff.nstar_.level:.0%}"
    ax.fill_between(fr[x], fr["reward_lo"], fr["reward_hi"], color="0.5", alpha=0.25, lw=0, zorder=4,
                    label=f"{level} interval of the best")
    ax.plot(fr[x], fr["reward"], "k--", lw=1.4, label="frontier (best measured)", zorder=4)
    if none_improved:
        ax.text(0.5, 0.5, "\n".join(_wrap(no_improvement_note(metric, by, model), 48)), ha="center",
                va="center", transform=ax.transAxes, fontsize=9, color="tab:red",
                bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "tab:red"})
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(NullFormatter())  # narrow ranges label every minor tick, overlapping
    ax.set_xlabel(f"{x} (rollouts)" if x == "compute" else x)
    ax.set_ylabel(metric)
    ax.set_title("fitted curves and measured frontier")
    ax.grid(alpha=0.3, which="both", lw=0.4)

    if numeric and not fr.empty:
        nstar = fr[by].to_numpy(dtype=float)
        fitted = fr["determined"].to_numpy(dtype=bool)  # the points of the n* sigmoid fit
        tie = fr["tie"].to_numpy(dtype=bool)
        det = fitted & ~tie  # a tie is never a point of the trend, even where it lies above an earlier set
        alone = ~fitted & ~tie
        if tie.any():
            tie_blocks(ax2, fr[x], fr[by + "_lo"], fr[by + "_hi"], tie,
                       label=f"tie: {by} within the best's {level} interval")
            cx = [c for c, s, t in zip(fr[x], fr["set"], tie, strict=True) if t for _ in s]
            cy = [float(v) for s, t in zip(fr["set"], tie, strict=True) if t for v in s]
            ax2.scatter(cx, cy, s=6, marker="_", color="0.35", linewidths=0.8, zorder=2)
        if det.any():
            ax2.scatter(
                fr[x][det],
                nstar[det],
                c=[colour(keys.index(k), k) for k in fr[by][det]],
                s=22,
                edgecolors="k",
                linewidths=0.3,
                zorder=3,
                label=f"{by}*(C), determined",
            )
        if alone.any():
            ax2.scatter(fr[x][alone], nstar[alone], s=22, facecolors="none", edgecolors="0.55",
                        linewidths=0.8, zorder=3, label=f"only {by} with data")
        if by + "_smooth" in fr.columns:
            ax2.plot(fr[x], fr[by + "_smooth"], color="0.4", lw=1.0, label="running average")
        if ff.n_star_shape_ == "sigmoid":
            dx = fr[x][fitted]
            C = np.geomspace(dx.min(), dx.max(), 200)
            r2 = ff.n_star_fit_.r2_
            ax2.plot(
                C,
                ff.predict_n_star(C),
                color="tab:red",
                lw=1.8,
                label=f"sigmoid fit of log2 {by}* (r2={r2:.2f})",
            )
        else:
            ch = ff.change_
            why = ("no n* sigmoid: nothing improved" if none_improved else
                   f"no {by}* sigmoid: a per-{by} fit is degenerate" if not ff.fits_usable_ else
                   f"no {by}* sigmoid: no determined rise or fall of {by}*" if not (ch["rise"] or ch["fall"])
                   else f"no {by}* sigmoid drawn: {ff.n_star_fit_.status_}" if not ff.n_star_fit_.ok_ else
                   f"no {by}* sigmoid drawn: r2 = {ff.n_star_fit_.r2_:.2f} < 0.5 (noisy {by}*)")
            ax2.text(0.98, 0.04, why, ha="right", va="bottom", transform=ax2.transAxes, fontsize=8,
                     color="0.3")
        ax2.set_xscale("log")
        ax2.xaxis.set_minor_formatter(NullFormatter())
        ax2.set_yscale("log", base=2)
        ax2.set_yticks(keys, [_pow2_label(float(k)) for k in keys])
        ax2.minorticks_off()
        ax2.set_ylim(float(min(keys)) / 1.3, float(max(keys)) * 1.3)
        ax2.legend(fontsize=8, loc="upper left")
    else:
        ax2.text(
            0.5,
            0.5,
            f"{by} is not a positive number:\nno {by}*(C) fit",
            ha="center",
            va="center",
            transform=ax2.transAxes,
        )
    ax2.set_xlabel(f"{x} (rollouts)" if x == "compute" else x)
    ax2.set_ylabel(f"{by}*")
    ax2.set_title(f"compute-optimal {by}")
    ax2.grid(alpha=0.3, lw=0.4)

    if numeric and len(keys) > 1:
        cb = fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=[ax, ax2], pad=0.01, aspect=30)
        cb.set_ticks(keys, labels=[_pow2_label(float(k)) for k in keys])
        cb.minorticks_off()
        cb.set_label(by)
    else:
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    if out is not None:
        save_figure(fig, out)
    return fig


def tie_blocks(ax, compute, lo, hi, tie, color="0.6", alpha=0.3, label: str | None = None) -> None:
    """Shade n*'s set where it is a tie: one block per tie compute from the set's smallest to its largest
    member (on a log2 axis, a little beyond both), reaching halfway (in log C) to the neighbouring computes,
    so a tie is an area and never a point of the trend. compute, lo, hi, tie: sequences of one length."""
    xs = np.asarray(compute, dtype=float)
    lo, hi, tie = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float), np.asarray(tie, dtype=bool)
    if not tie.any():
        return
    mid = np.sqrt(xs[1:] * xs[:-1]) if xs.size > 1 else np.empty(0)
    left = np.concatenate([[xs[0] ** 2 / mid[0] if mid.size else xs[0] / 1.2], mid])
    right = np.concatenate([mid, [xs[-1] ** 2 / mid[-1] if mid.size else xs[-1] * 1.2]])
    first = int(np.argmax(tie))
    for j in np.flatnonzero(tie):
        ax.fill_between([left[j], right[j]], lo[j] / 1.15, hi[j] * 1.15, color=color, alpha=alpha, lw=0,
                        zorder=1, label=label if j == first else None)


def _wrap(text: str, width: int) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width)


def save_figure(fig: Figure, out: str | Path) -> list[Path]:
    """Save as PNG/PDF/SVG by suffix; a path without a suffix gets both .png and .pdf. Returns the paths."""
    out = Path(out)
    if out.suffix.lower() in FIGURE_SUFFIXES:
        paths = [out]
    elif out.suffix == "":
        paths = [out.with_suffix(".png"), out.with_suffix(".pdf")]
    else:
        raise ValueError(f"cannot save a figure as {out.suffix!r}: use one of {', '.join(FIGURE_SUFFIXES)}")
    from studies.files import atomic_save_figure

    for p in paths:
        p.parent.mkdir(parents=True, exist_ok=True)
        atomic_save_figure(fig, p, dpi=150)  # a killed plot leaves no truncated image
    return paths
