"""One preset table per backend (studies.presets), read by every consumer of a policy role: the headline
figure and the claims report declaring one configuration declare one run id, so a store one of them filled
is reused by the other and nothing runs twice."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from isocompute.reports.claims import groupstd
from isocompute.reports.claims.common import LLM_QUICK, QUICK, TINY_QUICK, Section
from isocompute.reports.claims.recipe import PRESET_LR
from paper_figs import build
from paper_figs.catalog import HEADLINE_INTERFERENCE, HEADLINE_TABULAR
from studies import backends
from studies.declared import study_configs
from studies.presets import DEMO_BASE, DEMO_ROLES, PRESETS, preset_lr, presets_for

SMALL = {"n": (2, 4), "seeds": 1, "budget": 2**12}
"""A size of the headline's studies that runs in seconds: n = 2 and 4 at bp 32, one seed."""


def test_every_consumer_reads_the_one_table():
    assert QUICK.presets is presets_for("sim") is PRESETS["sim"]
    assert LLM_QUICK.presets is presets_for("llm") is PRESETS["llm"]
    assert TINY_QUICK.presets is presets_for("llm", "tiny") is PRESETS["tiny"]
    assert groupstd.SIZES["quick"].presets is PRESETS["sim"]
    assert groupstd.SIZES["llm"].presets is PRESETS["tiny"]
    # the simulator's roles leave lr to its default, which the claims report names the preset lr
    assert all("lr" not in fields for fields in PRESETS["sim"].values())
    assert QUICK.preset_lr("tabular") == preset_lr("sim", "interference") == 0.1
    assert LLM_QUICK.preset_lr() is None


def test_the_allocators_study_reads_the_one_table():
    """Its simulator parts are roles of the simulator's table, read on the demo's metric of the role, centred
    on the role's preset lr; its tiny-LM parts run the tiny LM's role (the committed store's ids)."""
    from isocompute.reports import alloc_study

    metric = {role: m for role, m, _ in DEMO_ROLES}
    for model, _, m in alloc_study.SIM_PRESETS:
        assert model in PRESETS["sim"] and m == metric[model]
    for plan in (*alloc_study.PLANS.values(), *alloc_study.QUICK.values()):
        for part in plan.parts:
            if part.backend == "sim":
                assert alloc_study.role_fields(part) is PRESETS["sim"][part.model]
                assert part.lr_centre == alloc_study.SIM_LR == preset_lr("sim", part.model)
            else:
                assert alloc_study.role_fields(part) == PRESETS["tiny"]["interference"] == {"lm": "tiny"}


def _pairs():
    """(headline figure's study, the claims report's study of the same configuration): the tabular theory
    sweep at its preset lr, and the interference lr study's constant lr at the preset's (0.1)."""
    plan = replace(QUICK, name="shared", seeds=SMALL["seeds"], top=SMALL["budget"], ns=SMALL["n"], d=None)
    # the claims runs take no pass@1 snapshots; the figure's spec, resized as `--size` does, says so too
    figs = [replace(st, **SMALL, base=(*st.base, ("snapshots", False)))
            for st in (HEADLINE_TABULAR, HEADLINE_INTERFERENCE)]
    claims = [plan.study("tabular", preset="tabular", lr=PRESET_LR, **DEMO_BASE),
              plan.study("inter-lr0.1", lr=0.1, **DEMO_BASE)]
    return plan, figs, claims


def test_the_headline_and_the_claims_report_declare_one_run_id():
    plan, figs, claims = _pairs()
    for fig, claim in zip(figs, claims, strict=True):
        f = [c for _, c in study_configs(fig, build.presets_for("sim"), "sim")]
        c = [c for _, c in study_configs(claim, plan.presets, plan.backend)]
        assert f == c and len({x.run_id for x in f}) == 2


class _Refuse(backends.SimAdapter):
    """A simulator that must not be asked to run anything."""

    def run(self, cfg, progress=False):
        raise AssertionError(f"{cfg.run_id} ran again")

    def run_many(self, cfgs, threads=None):
        raise AssertionError(f"{cfgs[0].run_id} ran again")


def test_the_claims_report_reuses_the_headline_figures_runs(tmp_path, monkeypatch):
    from isocompute.reports.claims.report import run_seed_set

    plan, figs, claims = _pairs()
    results = tmp_path / "results"
    build.run_studies({st.name: st for st in figs}, results, "sim", jobs=1, progress=False)
    stored = {p.name: p.stat().st_mtime_ns for p in (results / "runs").iterdir()}
    assert len([p for p in stored if p.endswith(".parquet") and ".pass1" not in p]) == 4

    tables = {}

    def measure(t, p):
        tables.update({st.name: t[st.name] for st in claims})
        return {}

    monkeypatch.setitem(backends.BACKENDS, "sim", _Refuse())
    section = Section("shared", "shared runs", "", lambda p: tuple(claims), measure,
                      lambda x: ("measured", ""), lambda x: [], lambda p: "")
    done = run_seed_set(plan, results, jobs=1, sections=(section,))
    assert done.outcomes[0].verdict == "measured"
    assert {p.name: p.stat().st_mtime_ns for p in (results / "runs").iterdir()} == stored
    fig_tables = build.Tables(results, {st.name: study_configs(st, presets_for("sim"), "sim") for st in figs})
    for fig, claim in zip(figs, claims, strict=True):
        pd.testing.assert_frame_equal(tables[claim.name], fig_tables[fig.name], check_exact=True)
