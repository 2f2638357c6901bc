"""`isocompute report claims --quick`: one command writes a report with a verdict for the theory
and every finding 1-11 of docs/PAPER.md, each backed by numbers; the numbers are those of the runs in its
results directory, and n* is the frontier of studies.fit.frontier (the estimator of `isocompute fit`)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from click.testing import CliRunner

from isocompute.cli import main
from isocompute.reports.claims import QUICK, SECTIONS, VERDICTS
from isocompute.reports.claims.common import n_star_cell, n_star_rows
from isocompute.reports.claims.nstar import RECIPE_ROW, f1_measure, theory_measure
from isocompute.reports.claims.report import studies_of, tune
from studies.declared import Tables, study_configs
from studies.fit.report import fit_report
from studies.presets import PRESETS

pytestmark = pytest.mark.slow  # one whole quick report (~40 s on one core), shared by the module

KEYS = ["theory"] + [f"f{i}" for i in range(1, 12)] + ["mechanism"]


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("claims")
    out, results = tmp / "CLAIMS.md", tmp / "results"
    res = CliRunner().invoke(main, ["claims", "--quick", "--results", str(results), "--out", str(out)])
    assert res.exit_code == 0, res.output
    plan = tuned_quick(results)
    runs = {
        name: study_configs(st, PRESETS["sim"], "sim") for name, st in studies_of(SECTIONS, plan).items()
    }
    return res.output, out.read_text(), Tables(results, runs), out


def tuned_quick(results):
    """The quick plan with the base lrs its tuning stage chose (the runs are in `results`: nothing reruns)."""
    return tune(QUICK, SECTIONS, results, 1, False, lambda s: None)[0]


def test_quick_report_has_a_verdict_for_every_claim(quick_report):
    stdout, md, _, _ = quick_report
    verdicts = dict(
        line.split(maxsplit=1) for line in stdout.splitlines() if line.split()[:1] and line.split()[0] in KEYS
    )
    assert sorted(verdicts, key=KEYS.index) == KEYS
    assert all(v in VERDICTS for v in verdicts.values()), verdicts
    for key in KEYS:
        m = re.search(rf'<a id="{key}"></a>(.*?)\*\*Verdict: ([^.]+)\.\*\*', md, re.S)
        assert m and m.group(2) == verdicts[key]
        assert re.search(r"\d\.\d{3}|\b\d+x\b", m.group(1)), f"section {key} shows no measured number"


def test_quick_report_says_it_is_quick_and_reproduces_the_theory(quick_report):
    _, md, _, _ = quick_report
    assert "Quick mode" in md and f"Seeds: {QUICK.seeds}" in md
    m = re.search(r'<a id="theory"></a>.*?\*\*Verdict: ([^.]+)\.', md, re.S)
    assert m.group(1) == "reproduced"


def test_reported_n_star_is_the_frontier_of_fit_report(quick_report):
    """The n* of the report at any compute is the n, and its set the set, of `isocompute fit`'s frontier on
    the same table."""
    _, _, tables, out = quick_report
    table = tables[tuned_quick(out.parent / "results").study("inter").name]
    rep = fit_report(table, extrapolate=False)
    pts = rep["frontier"][::5]
    rows = n_star_rows(table, [p["compute"] for p in pts])
    assert [r["n_star"] for r in rows] == [p["n"] for p in pts]
    assert [r["set"] for r in rows] == [p["set"] for p in pts]


def test_reported_rewards_are_the_seed_records_of_the_runs(quick_report):
    """Theory rows: reward = mean over seeds of each n* run's best train_mean up to the budget; the f1 per-n
    table: the final val_mean of each run at the top budget."""
    _, md, tables, out = quick_report
    plan = tuned_quick(out.parent / "results")
    x = theory_measure(tables, plan)
    tab = tables[f"{QUICK.name}/tabular"]
    for r in x["rows"]:
        runs = tab[(tab["n"] == r["n_star"]) & (tab["compute"] <= r["budget"])]
        assert r["mean"] == pytest.approx(runs.groupby("run_id")["train_mean"].max().mean(), abs=1e-12)
        assert f"{n_star_cell(r)} ({r['mean']:.3f} ± {r['ci']:.3f}" in md
    f1 = f1_measure(tables, plan)
    inter = tables[plan.study("inter").name]
    last = inter.sort_values("compute").groupby("run_id").tail(1)
    for n, (m, _) in f1["per_n"][f"{RECIPE_ROW} (final)"].items():
        assert m == pytest.approx(last.loc[last["n"] == n, "val_mean"].mean(), abs=1e-12)
    assert np.isfinite(f1["treatments"][RECIPE_ROW]["record"]["diff"])


def test_quick_report_json_makes_a_true_readme_paragraph_and_caption(quick_report):
    """The README generator on a quick report's JSON: it quotes finding 1's interval under the recipe with
    its base lr, and says "grows with compute" only where that verdict is reproduced."""
    import json

    from isocompute.reports import readme

    stdout, md, _, out = quick_report
    summary = json.loads(out.with_suffix(".json").read_text())
    f1 = summary["f1"]["recipe"]
    par = readme.claims_paragraph(summary)
    cap = readme.headline_caption(summary)
    assert f"base lr {f1['base_lr']:g} chosen on tuning seeds" in par
    assert f"{f1['gain']['estimate']:+.4f} [{f1['gain']['lo']:+.4f}, {f1['gain']['hi']:+.4f}]" in par
    assert f"finding 1: {summary['verdicts']['f1']}" in par or f"Easy): {summary['verdicts']['f1']}" in par
    assert ("grows with compute" in cap) == (summary["verdicts"]["f1"] == "reproduced")
    assert "constant lr" in cap


def test_quick_report_draws_the_headline_and_its_caption_quotes_the_tables(quick_report):
    """The report writes README's headline figure beside itself (with --docs: docs/figs/headline.png), one
    row per lr choice of finding 1; the caption made from its JSON quotes the numbers finding 1 measures
    on the runs."""
    import json

    from test_claims_headline import assert_caption_quotes

    from isocompute.reports import readme
    from isocompute.reports.claims.headline import figure, row_title
    from isocompute.reports.cli.claims import headline_path

    _, _, tables, out = quick_report
    assert headline_path(out).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    plan = tuned_quick(out.parent / "results")
    x = f1_measure(tables, plan)
    assert [r["key"] for r in x["lr_choices"]] == ["recipe", "constant"]
    fig = figure(tables, plan, x)
    assert [s._suptitle.get_text() for s in fig.subfigs] == [row_title(r, plan.top) for r in x["lr_choices"]]
    assert all(len(s.axes) == 4 for s in fig.subfigs)  # both policies' frontiers, n*(C), the stake
    summary = json.loads(out.with_suffix(".json").read_text())
    assert_caption_quotes(readme.headline_caption(summary), x, plan, summary["verdicts"]["f1"])


def test_quick_report_runs_what_the_pre_refactor_report_ran(quick_report, tmp_path):
    """The house refactor moved code, not results (tests/pre_refactor.py): every run that the pre-refactor
    quick report and this one both declare is the same table bit for bit. The report has since moved its
    sections to the paper's tuned recipe, which the old one never ran; the runs both run (tabular,
    constant-lr rows, the mechanism study) are compared."""
    import pandas as pd
    from pre_refactor import run_old

    old_results = tmp_path / "r-old"
    args = ["claims", "--quick", "--jobs", "1", "--out", str(tmp_path / "old.md"),
            "--results", str(old_results)]
    run_old(f"import sys\nfrom isocompute.cli import main\nsys.exit(main({args!r}))")
    new_results = quick_report[3].parent / "results"

    def tables(root):
        return {str(f.relative_to(root)): pd.read_parquet(f) for f in sorted(root.rglob("*.parquet"))}

    old, new = tables(old_results), tables(new_results)
    both = old.keys() & new.keys()
    assert old and len(both) >= len(old) // 3, (len(both), len(old))
    for name in both:
        pd.testing.assert_frame_equal(new[name], old[name], check_exact=True, obj=name)
