"""One visual language for every figure.

- n (rollouts per problem) is a sequential colour scale indexed by log2 n over a fixed range, so the same
n has
  the same colour in every figure; legends label it as powers of two.
- Compute is in rollouts on a log axis ("compute C (rollouts)"); tokens get their own label.
- Every figure title names the paper figure it mirrors; legends sit outside the axes so they never cover data.
- Fonts and sizes are chosen so a figure stays readable at the ~800 px a README shows.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Sequence

import matplotlib

matplotlib.use("Agg")  # figures are files; never open a window (CI, headless machines)

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.colors import Normalize  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator  # noqa: E402

from studies.fit.plots import n_cmap  # noqa: E402, F401  (one colour scale of n for studies and paper_figs)

LOG2_N_RANGE = (1.0, 9.0)
"""log2 n mapped onto the colour scale: n = 2 (lightest) .. n = 512 (darkest; larger n are clipped to it)."""

COMPUTE_LABEL = "compute C (rollouts)"
TOKENS_LABEL = "compute (generated tokens)"
FRONTIER_COLOR = "black"
FIT_COLOR = "#d62728"  # the paper's red sigmoid fits (Fig 7, 21, 24)
RECORD_COLOR = "#ff7f0e"  # the paper's orange record-breaking points (Fig 5)
RAW_COLOR = "0.6"
VARIANT_COLORS = ("#0173b2", "#de8f05", "#029e73", "#cc78bc", "#ca9161", "#56b4e9")
"""Categorical colours (seaborn colorblind) for things that are not n: variants, metrics, presets."""

METRIC_LABELS = {
    "val_mean": "validation reward (avg@k)",
    "train_mean": "training reward (avg@k)",
    "val_best_k": "validation best@k (pass@k)",
    "val_worst_k": "validation worst@k",
    "val_zero_frac": "share of val. problems with pass@1 = 0",
}

RC = {
    "figure.dpi": 100,
    "savefig.dpi": 110,
    "font.size": 11,
    "axes.titlesize": 12,
    "axes.labelsize": 11,
    "xtick.labelsize": 10,
    "ytick.labelsize": 10,
    "legend.fontsize": 10,
    "legend.title_fontsize": 10,
    "figure.titlesize": 13,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def rc() -> dict:
    """seaborn's whitegrid theme plus our sizes, as an rc dict (applied in a context, never globally)."""
    out = dict(sns.axes_style("whitegrid"))
    out.update(sns.plotting_context("notebook", font_scale=1.0))
    out.update(RC)
    return out


def styled(make: Callable[..., Figure]) -> Callable[..., Figure]:
    """Decorator: run a figure function inside our rc context so fonts and grids apply to every artist."""

    @functools.wraps(make)
    def wrapper(*args, **kwargs) -> Figure:
        with plt.rc_context(rc()):
            return make(*args, **kwargs)

    return wrapper


def subplots(nrows: int = 1, ncols: int = 1, *, panel: tuple[float, float] = (4.6, 3.4), **kwargs):
    """A constrained-layout grid of panels of the given size in inches (README-sized when saved at 110
    dpi)."""
    kwargs.setdefault("squeeze", False)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(panel[0] * ncols, panel[1] * nrows), layout="constrained", **kwargs
    )
    return fig, axes


def n_color(n: float):
    """Colour of one n value; the same n gets the same colour in every figure (fixed log2 range)."""
    lo, hi = LOG2_N_RANGE
    x = (math.log2(float(n)) - lo) / (hi - lo)
    return n_cmap()(min(max(x, 0.0), 1.0))


def n_label(n: float) -> str:
    """Power-of-two label, e.g. 'n = 2^5 = 32' rendered with mathtext; non-powers fall back to the number."""
    k = math.log2(float(n))
    if abs(k - round(k)) < 1e-9:
        return rf"$2^{{{int(round(k))}}}$ = {int(n)}"
    return f"{n:g}"


def n_handles(ns: Iterable[float], **line_kw) -> tuple[list[Line2D], list[str]]:
    ns = sorted({float(v) for v in ns})
    kw = {"lw": 2.5} | line_kw
    return [Line2D([], [], color=n_color(v), **kw) for v in ns], [n_label(v) for v in ns]


def outside_legend(fig: Figure, handles, labels, title: str | None = None, *, where: str = "right") -> None:
    """A figure-level legend outside every axes (never covers data); `where` is 'right' or 'bottom'."""
    if not handles:
        return
    if where == "bottom":
        # as many columns as fit the figure's width (about 7 px per character at 10 pt, plus the handle)
        width_px = fig.get_figwidth() * fig.dpi
        per = max(len(str(lab)) for lab in labels) * 7 + 60
        ncols = max(1, min(len(labels), 6, int(width_px // per)))
        fig.legend(handles, labels, title=title, loc="outside lower center", ncols=ncols, frameon=False)
    else:
        fig.legend(handles, labels, title=title, loc="outside right center", frameon=False)


def n_legend(
    fig: Figure,
    ns: Iterable[float],
    extra: Sequence[tuple[Line2D, str]] = (),
    title: str = "n (rollouts\nper problem)",
) -> None:
    """The shared n key: one entry per n (power-of-two labels) plus extra entries (frontier, fit ...)."""
    handles, labels = n_handles(ns)
    for h, lab in extra:
        handles.append(h)
        labels.append(lab)
    outside_legend(fig, handles, labels, title)


def frontier_handle(label: str = "frontier (max over n)") -> tuple[Line2D, str]:
    return Line2D([], [], color=FRONTIER_COLOR, lw=2.2, ls="--"), label


def compute_axis(ax: Axes, unit: str = "rollouts") -> None:
    """Log x axis with units; `unit` is 'rollouts', 'tokens' or 'steps'."""
    ax.set_xscale("log")
    ax.set_xlabel({"rollouts": COMPUTE_LABEL, "tokens": TOKENS_LABEL, "steps": "steps M"}.get(unit, unit))


def log2_axis(
    ax: Axes, axis: str = "y", values: Iterable[float] | None = None, label: str | None = None
) -> None:
    """A log2 axis whose ticks are powers of two labelled 2^k (n, bp); values choose the tick range."""
    set_scale = ax.set_yscale if axis == "y" else ax.set_xscale
    set_scale("log", base=2)
    target = ax.yaxis if axis == "y" else ax.xaxis
    if values is not None:
        vals = [float(v) for v in values if v and np.isfinite(v) and v > 0]
        if vals:
            lo, hi = int(math.floor(math.log2(min(vals)))), int(math.ceil(math.log2(max(vals))))
            step = max(1, (hi - lo + 1) // 7)
            target.set_major_locator(FixedLocator([2.0**k for k in range(lo, hi + 1, step)]))
    target.set_major_formatter(
        FuncFormatter(lambda v, _: f"$2^{{{int(round(math.log2(v)))}}}$" if v > 0 else "")
    )
    target.set_minor_locator(NullLocator())
    target.set_minor_formatter(NullFormatter())
    if label:
        (ax.set_ylabel if axis == "y" else ax.set_xlabel)(label)


def metric_label(metric: str, k: int | None = None) -> str:
    text = METRIC_LABELS.get(metric, metric)
    if k is not None:
        text = text.replace("@k", f"@{int(k)}")
    return text


def title(fig: Figure, paper: str, text: str, engine: str = "simulator") -> None:
    """Figure title naming the paper figure it mirrors and what ran it: 'Paper Fig. 6 (simulator): ...'."""
    fig.suptitle(f"Paper Fig. {paper} ({engine}): {text}" if paper else text)


def engine_of(t) -> str:
    """What made a table's runs, for a title: "simulator", or the llm backend's model (e.g. "LM tiny")."""
    if "backend" not in t or t.empty or str(t["backend"].iloc[0]) == "sim":
        return "simulator"
    return f"LM {t['model'].iloc[0]}" if "model" in t else "LM"


def empty_panel(ax: Axes, message: str) -> None:
    """A panel with no data says so in words instead of showing empty axes."""
    ax.text(
        0.5,
        0.5,
        message,
        transform=ax.transAxes,
        ha="center",
        va="center",
        fontsize=10,
        color="0.35",
        wrap=True,
    )
    ax.set_xticks([])
    ax.set_yticks([])


def norm_for(values: Iterable[float]) -> Normalize:
    vals = np.asarray(list(values), dtype=float)
    vals = vals[np.isfinite(vals)]
    if vals.size == 0:
        return Normalize(0, 1)
    lo, hi = float(vals.min()), float(vals.max())
    return Normalize(lo, hi if hi > lo else lo + 1e-9)
