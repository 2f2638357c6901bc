"""README's headline figure and caption, drawn by the claims report from finding 1's numbers: on synthetic
learning curves in every study of the quick plan's finding 1, the figure has one row per lr choice (the
paper's recipe with its tuned base lrs, the preset's constant lr), each with both policies, and the caption's
numbers are the ones finding 1 measured on the tables."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from synthetic_curves import synthetic_table

from isocompute.reports import readme
from isocompute.reports.claims import QUICK
from isocompute.reports.claims.common import budget_text
from isocompute.reports.claims.headline import figure, row_title, write
from isocompute.reports.claims.nstar import (
    F1,
    RECIPE_ROW,
    _tabular,
    _tabular_recipe,
    constant_label,
    f1_measure,
    f1_studies,
)
from isocompute.reports.claims.report import Outcome

BASE_LR = {"interference": 0.003, "tabular": 0.03}
"""Base lrs a tuning stage chose (made up: the figure and caption quote whatever it chose)."""


def _plan():
    return replace(QUICK, tuned=(("quick/inter", BASE_LR["interference"]),
                                 ("quick/tabular-recipe", BASE_LR["tabular"])))


def _table(i: int, tabular: bool):
    """One study's runs: sigmoids whose best n grows with compute (interference) or stays small (tabular),
    made different per study by `i`; both reward columns, as the simulator writes them."""
    rng = np.random.default_rng(i)
    specs = {}
    for n in QUICK.ns:
        k = np.log2(n)
        a = 0.9 - 0.02 * k if tabular else 0.7 + 0.03 * k + 0.002 * i
        specs[n] = (0.3, a, 300.0 * n ** (0.3 if tabular else 0.8), 1.2)
    t = synthetic_table(specs, seeds=QUICK.seeds, points=24, c_max=float(QUICK.top), noise=0.004, rng=rng)
    return t.assign(train_mean=t["val_mean"])


@pytest.fixture(scope="module")
def f1():
    plan = _plan()
    tabular = {_tabular(plan).name, _tabular_recipe(plan).name} | {_tabular(plan, lr).name for lr in plan.lrs}
    tables = {st.name: _table(i, st.name in tabular) for i, st in enumerate(f1_studies(plan))}
    return plan, tables, f1_measure(tables, plan)


def test_the_figure_has_a_row_per_lr_choice_with_both_policies(f1, tmp_path):
    plan, tables, x = f1
    rows = x["lr_choices"]
    assert [r["key"] for r in rows] == ["recipe", "constant"]
    assert [r["treatment"] for r in rows] == [RECIPE_ROW, constant_label(0.1, 0.1)]
    assert all(set(r["roles"]) == {"tabular", "interference"} for r in rows)
    assert [r["roles"]["interference"]["base_lr"] for r in rows] == [BASE_LR["interference"], None]
    assert rows[0]["roles"]["tabular"]["base_lr"] == BASE_LR["tabular"]
    fig = figure(tables, plan, x)
    subs = fig.subfigs
    assert [s._suptitle.get_text() for s in subs] == [row_title(r, plan.top) for r in rows]
    assert "base lr 0.003 (interference), 0.03 (tabular)" in subs[0]._suptitle.get_text()
    assert subs[1]._suptitle.get_text().startswith("constant lr 0.1")
    for s in subs:  # two frontiers, n*(C), the stake
        assert [a.get_title() for a in s.axes] == [
            "tabular policy (training reward)", "interference policy (validation reward)",
            "compute-optimal n*(C)", "the reward at stake"]
    out = write(tmp_path / "h.png", tables, plan, x)
    assert out == tmp_path / "h.png" and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _cell(rows):
    top = rows[-1]
    members = top["set"]
    return f"{{{top['set_text']}}} (a tie)" if len(members) > 1 else top["set_text"]


def assert_caption_quotes(cap: str, x: dict, plan, verdict: str) -> None:
    """The caption quotes finding 1's numbers `x` (nstar.f1_measure on the tables): each lr choice's base
    lrs or constant, interference's and the tabular policy's n* at the top budget with the stake, the
    top-budget gain of large n, and the verdict on the recipe row."""
    tr = x["treatments"]
    top = budget_text(plan.top)
    rec, const = tr[RECIPE_ROW], tr[constant_label(0.1, 0.1)]
    assert f"base lr {x['base_lr']:g} (interference) and {x['tabular_base_lr']:g} (tabular) chosen on " \
           "tuning seeds" in cap
    for t in (rec, const):
        iv = t["record"]["iv"]
        assert f"n = {t['record']['n_large']} − n = {t['record']['n_small']}: {iv.estimate:+.4f} " \
               f"[{iv.lo:+.4f}, {iv.hi:+.4f}]" in cap
    recipe_part, const_part = cap.split("Bottom, ")
    assert f"interference n* at {top} is {_cell(rec['rows'])}" in recipe_part
    assert f"tabular n* at {top} is {_cell(x['tabular_recipe_rows'])}" in recipe_part
    assert f"interference n* at {top} is {_cell(const['rows'])}" in const_part
    assert f"tabular n* at {top} is {_cell(x['tabular_rows'])}" in const_part
    assert const_part.startswith("the preset's constant lr 0.1 (a sensitivity row")
    for part, t in ((recipe_part, rec), (const_part, const)):
        st = t["rows"][-1]["stake"]
        if st.estimate == 0 and st.lo == 0 and st.hi == 0:
            assert "with nothing at stake" in part
        else:
            assert f"gaining {st.estimate:+.4f} [{st.lo:+.4f}, {st.hi:+.4f}]" in part
    if verdict == "reproduced":
        assert "n*(C) grows with compute: finding 1 reproduced" in recipe_part
    else:
        assert f"the claims report's verdict on finding 1: {verdict}" in recipe_part
        assert "grows with compute" not in cap


def test_the_caption_quotes_what_finding_1_measured(f1):
    plan, _, x = f1
    out = Outcome(F1, numbers=x, verdict="inconclusive", by_set=(("0..2", "inconclusive", ""),))
    assert x["base_lr"] == BASE_LR["interference"] and x["tabular_base_lr"] == BASE_LR["tabular"]
    assert_caption_quotes(readme.headline_caption(readme.summary_of(plan, [out])), x, plan, "inconclusive")
    grow = readme.headline_caption(readme.summary_of(plan, [replace(out, verdict="reproduced")]))
    assert_caption_quotes(grow, x, plan, "reproduced")
