"""plot_frontier: panels, axes, colour scale and saved files (paper Fig 6-7 layout)."""

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure
from synthetic_curves import synthetic_table

from studies.fit.frontier import FrontierFit
from studies.fit.plots import plot_frontier, save_figure

SPECS = {4: (0.25, 0.52, 1e4, 1.5), 8: (0.25, 0.60, 3e4, 1.3), 16: (0.25, 0.66, 1e5, 1.1)}


@pytest.fixture(scope="module")
def table():
    return synthetic_table(SPECS, seeds=2, points=30, rng=np.random.default_rng(0))


def test_plot_frontier_panels_and_scales(table):
    fig = plot_frontier(table, metric="val_mean", by="n")
    assert isinstance(fig, Figure)
    ax, ax2, cbar = fig.axes
    assert ax.get_xscale() == "log" and ax2.get_xscale() == "log" and ax2.get_yscale() == "log"
    assert ax.get_xlabel() == "compute (rollouts)" and ax.get_ylabel() == "val_mean"
    # one fitted line per n plus the dashed frontier
    lines = ax.get_lines()
    assert len(lines) == len(SPECS) + 1 and lines[-1].get_linestyle() == "--"
    ff = FrontierFit().fit(table)
    np.testing.assert_allclose(lines[-1].get_ydata(), ff.frontier_["reward"])
    # n* axis and colour bar labelled in powers of two
    assert [t.get_text() for t in ax2.get_yticklabels()] == ["$2^{2}$", "$2^{3}$", "$2^{4}$"]
    assert [t.get_text() for t in cbar.get_yticklabels()] == ["$2^{2}$", "$2^{3}$", "$2^{4}$"]
    assert any("sigmoid fit" in t.get_text() for t in ax2.get_legend().get_texts())


def test_plot_frontier_saves_png_and_pdf(table, tmp_path):
    plot_frontier(table, out=tmp_path / "a.png")
    assert (tmp_path / "a.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    fit = FrontierFit(smooth=3).fit(table)
    plot_frontier(table, fit=fit, out=tmp_path / "sub" / "b")
    assert (tmp_path / "sub" / "b.png").stat().st_size > 1000
    assert (tmp_path / "sub" / "b.pdf").read_bytes()[:5] == b"%PDF-"
    with pytest.raises(ValueError, match="cannot save"):
        save_figure(Figure(), tmp_path / "c.jpgx")


def test_plot_frontier_single_configuration_and_text_by(table):
    one = table.loc[table.n == 8]
    fig = plot_frontier(one)
    assert len(fig.axes) == 2  # no colour bar for a single configuration
    named = table.assign(policy=table["n"].map({4: "a", 8: "b", 16: "c"}))
    fig = plot_frontier(named, by="policy")
    assert "not a positive number" in fig.axes[1].texts[0].get_text()
    with pytest.raises(ValueError, match="lacks column"):
        plot_frontier(pd.DataFrame({"run_id": ["a"], "compute": [1.0]}))


def test_degenerate_curve_is_drawn_as_its_record_points_not_a_constant(table):
    """A configuration with 3 points has no sigmoid: it is drawn dotted through its record points (what the
    frontier uses), labelled "(no fit)", instead of the degenerate fit's flat line at their mean."""
    few = pd.DataFrame(
        {"run_id": "x", "compute": [2e4, 8e4, 3e5], "n": 64, "bp": 32, "seed": 0, "val_mean": [0.3, 0.5, 0.7]}
    )
    t = pd.concat([table, few], ignore_index=True)
    fig = plot_frontier(t, metric="val_mean", by="n")
    (line,) = [ln for ln in fig.axes[0].get_lines() if ln.get_label() == "n=64 (no fit)"]
    assert line.get_linestyle() == ":"
    y = line.get_ydata()
    assert y[0] == pytest.approx(0.3) and y[-1] == pytest.approx(0.7) and np.ptp(y) > 0.3
