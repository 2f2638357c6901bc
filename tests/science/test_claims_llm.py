"""`isocompute report claims --backend llm --quick` runs the same report code on the llm backend: the sections
that apply to a real model measure and judge, the rest are refused in one line each. The backend registry's
llm adapter is replaced by a fake that answers each llm RunConfig with a tiny simulator run (seconds); the
real model runs the same path in `test_claims_llm_real_model` (marker llm)."""

from __future__ import annotations

import re

import pytest

from isocompute.reports.claims import LLM_QUICK, SECTIONS, VERDICTS, build_report
from studies import backends
from studies.config import RunConfig


class FakeLLM:
    """Registered as "llm": accepts the CPU preset's options, runs interference on the simulator instead."""

    name = "llm"

    def validate(self, cfg: RunConfig) -> None:
        assert cfg.backend == "llm" and cfg.option("engine") is not None

    def needs_gpu(self, cfg: RunConfig) -> bool:
        return False

    def run(self, cfg: RunConfig, progress: bool = False) -> backends.RunOutput:
        sim = RunConfig(
            backend="sim",
            model="interference",
            n=cfg.n,
            bp=cfg.bp,
            budget=cfg.budget,
            seed=cfg.seed,
            problem_seed=cfg.problem_seed,
            d=64,
            d_val=16,
            n_evals=8,
        )
        out = backends.get_backend("sim").run(sim)
        out.table["run_id"] = cfg.run_id
        out.table["backend"] = "llm"
        out.table["tokens"] = out.table["compute"] * 12.0  # a real LM generates tokens; the sim preset none
        p1 = out.pass1
        out.pass1 = p1[p1["split"] == "val"].assign(run_id=cfg.run_id)  # the llm backend snapshots val only
        return out


@pytest.fixture
def fake_llm(monkeypatch):
    monkeypatch.setitem(backends.BACKENDS, "llm", FakeLLM())


def test_llm_quick_report_measures_what_applies_and_refuses_the_rest(fake_llm, tmp_path):
    md, outcomes = build_report(LLM_QUICK, tmp_path / "results", jobs=1)
    live = {o.section.key: o for o in outcomes if o.numbers is not None}
    assert sorted(live) == sorted(s.key for s in SECTIONS if "llm" in s.backends) == ["f1", "f10", "f5"]
    assert all(o.verdict in VERDICTS for o in live.values())
    for o in outcomes:
        m = re.search(rf'<a id="{o.section.key}"></a>(.*?)(?=\n## |\Z)', md, re.S)
        if o.numbers is None:
            assert o.verdict == "refused" and "refused on the llm backend: " in o.reason
            assert m.group(1).strip().count("\n") == 2  # the paper line, then one line why
    assert "Claims report (llm-quick mode, llm backend)" in md and "Seeds: 1" in md
    assert live["f1"].numbers["tabular_ok"] is None and "tabular control: n/a" in live["f1"].reason
    f5 = live["f5"].numbers["rows"]
    assert {r["split"] for r in f5} == {"val"} and {r["stat"] for r in f5} == {
        "zero_frac",
        "one_frac",
        "mean",
    }
    # the three sections share the preset's three runs (n = 2, 4, 8): nothing runs twice
    assert len(list((tmp_path / "results" / "runs").glob("*.pass1.parquet"))) == 3
    md2, _ = build_report(LLM_QUICK, tmp_path / "results", jobs=1)
    assert md2.split("\n", 3)[3] == md.split("\n", 3)[3]  # same numbers from the stored runs


@pytest.mark.llm
def test_claims_llm_real_model(tmp_path):
    """The real SmolLM2 through transformers generate at the smallest sizes: n = 2 and 4 at bp 2 to a budget
    of 8 rollouts (3 GRPO steps in all; ~30 s on one core)."""
    from dataclasses import replace

    from studies import presets

    plan = replace(
        LLM_QUICK,
        name="llm-tiny",
        ns=(2, 4),
        side_ns=(2, 4),
        top=8,
        side_top=8,
        bp=2,
        pass1_ns=(2, 4),
        small_max=2,
        large_min=4,
    )
    # float32: transformers generate under bf16 autocast (CPU_LLM's dtype with AMX) is the slow path on CPU;
    # no train-sample evaluation (f1 and f5 read val): half of the run's time went to evaluating
    tiny = dict(presets.CPU_LLM) | {"engine": "hf", "max_new_tokens": 8, "d_val": 4, "n_evals": 2,
                                    "engine_dtype": "float32", "train_dtype": "float32", "train_eval": False}
    old = presets.PRESETS["llm"]
    presets.PRESETS["llm"] = {"interference": tiny}
    try:
        md, outcomes = build_report(
            plan, tmp_path / "results", jobs=1, sections=tuple(s for s in SECTIONS if s.key in ("f1", "f5"))
        )
    finally:
        presets.PRESETS["llm"] = old
    assert {o.section.key: o.verdict in VERDICTS for o in outcomes} == {"f1": True, "f5": True}
