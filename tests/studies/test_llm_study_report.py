"""isocompute.reports.llm_study: the real-model study's grid and its generated report (on simulator runs
standing in for the LLM's, so the report's code runs in CI in seconds)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from isocompute.reports import llm_study
from studies.config import RunConfig, StudiesError
from studies.executors import run_sweep
from studies.store import ResultStore


def test_grid_order_puts_every_seed_of_the_main_grid_first():
    cfgs = llm_study.grid_configs(seeds=3, budget=512)
    k = len(llm_study.NS)
    assert [(c.seed, c.n) for c in cfgs[: 3 * k]] == [(s, n) for s in range(3) for n in llm_study.NS]
    assert all(c.lr == llm_study.BASE_LR for c in cfgs[: 3 * k])
    lo, hi, lr = llm_study.NS[0], llm_study.NS[-1], llm_study.BASE_LR
    # then the lr bracket of seed 0 (x3, then /3), then x3 on the other seeds
    assert [(c.seed, c.n, c.lr) for c in cfgs[3 * k:]] == [
        (0, lo, lr * 3), (0, hi, lr * 3), (0, lo, lr / 3), (0, hi, lr / 3),
        (1, lo, lr * 3), (1, hi, lr * 3), (2, lo, lr * 3), (2, hi, lr * 3)]
    assert len({c.run_id for c in cfgs}) == len(cfgs)
    assert all(c.backend == "llm" and c.bp == 8 and c.lr_rule == "sqrt" for c in cfgs)


def test_report_is_generated_from_the_stored_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(llm_study, "BASE_LR", 0.1)  # a simulator-sized lr for the stand-in runs
    base = RunConfig(backend="sim", model="interference", bp=8, budget=512, lr=0.1, lr_rule="sqrt",
                     n_evals=8, d=64, d_val=64)
    cfgs = [base.replace(n=n, seed=s) for s in range(2) for n in llm_study.NS]
    cfgs += [base.replace(n=n, lr=0.3, seed=s) for s in range(2) for n in (2, 16)]
    with ResultStore(tmp_path / "res", study="n-vs-m") as store:
        run_sweep(cfgs, store, jobs=1, progress=False)
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- llm-study:begin -->\nold\n<!-- llm-study:end -->\nrest\n")
    out = llm_study.report(str(tmp_path / "res"), str(tmp_path / "docs"), sim_seeds=2, readme=str(readme))
    docs = tmp_path / "docs"
    for f in ("table.csv", "fit.json", "fit.txt", "frontier.png", "sim_fit.json", "README.md"):
        assert (docs / f).stat().st_size > 0, f
    table = pd.read_csv(docs / "table.csv")
    assert table.run_id.nunique() == len(cfgs) and set(table.lr_base) == {0.1, 0.3}
    fit = json.loads((docs / "fit.json").read_text())
    assert fit["frontier"] and {c["n"] for c in fit["curves"]} <= set(llm_study.NS)
    # the best n at the budget is the one with the highest mean final val_mean over seeds
    last = table.sort_values("compute").groupby("run_id").tail(1)
    means = last[last.lr_base == 0.1].groupby("n").val_mean.mean()
    assert out["n_best"] == int(means.idxmax())
    text = readme.read_text()
    assert "old" not in text and out["summary"] in text and text.startswith("intro\n") and "rest" in text
    md = (docs / "README.md").read_text()
    assert out["verdict"] in md and "| 16 |" in md
    # the report regenerates from its own committed table.csv (no store) with the same verdict, and the
    # verdict reads n* at the budget as the one estimator's set (studies.fit.nstar)
    from studies.fit.nstar import n_star_sets, set_text

    again = llm_study.report(str(docs / "table.csv"), str(tmp_path / "docs2"), sim_seeds=2, readme=None)
    assert again["verdict"] == out["verdict"]
    ns = n_star_sets(table[table.lr_base == 0.1], "val_mean", "n")
    assert f"is {{{set_text(ns.sets[-1], llm_study.NS)}}}" in out["verdict"]
    assert pd.read_csv(tmp_path / "docs2" / "table.csv").equals(table)


def test_report_refuses_a_table_that_is_not_its_own(tmp_path):
    bad = tmp_path / "t.csv"
    pd.DataFrame({"run_id": ["a"], "n": [2], "compute": [0], "val_mean": [0.1]}).to_csv(bad, index=False)
    with pytest.raises(StudiesError, match="no lr_base column"):
        llm_study.runs_table(str(bad))
