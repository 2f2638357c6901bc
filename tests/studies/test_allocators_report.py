"""isocompute.reports.allocators.compare: interpolation at C, n* envelope and paired SEs on a synthetic
table."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from isocompute.reports.allocators import at_budget, compare


def _table():
    rows = []
    for seed in range(3):
        for alloc, slope in (("fixed-n2", 1.0), ("fixed-n8", 2.0), ("knapsack", 2.0 + 0.1 * (seed + 1))):
            for c in (0, 100, 400):
                v = 0.0 if c == 0 else slope * math.log(c / 100) + seed
                rows.append({"run_id": f"{alloc}-{seed}", "allocator": alloc, "seed": seed, "n": 8,
                             "compute": c, "m": c // 10, "val_mean": v})
    return pd.DataFrame(rows)


def test_at_budget_interpolates_in_log_compute():
    pts = at_budget(_table(), "val_mean", 200).set_index("run_id")
    assert pts.loc["fixed-n8-0", "value"] == pytest.approx(2.0 * math.log(2))  # halfway in log: 0 .. 2 log 4
    assert pts.loc["fixed-n8-0", "compute"] == 200


def test_compare_envelope_and_paired_se():
    star, df = compare(_table(), "val_mean", 400)
    assert star == "fixed-n8"
    k = df.set_index("allocator").loc["knapsack"]
    diffs = [0.1 * (s + 1) * math.log(4) for s in range(3)]
    mean = sum(diffs) / 3
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / 2)
    assert k["diff"] == pytest.approx(mean) and k["se"] == pytest.approx(sd / math.sqrt(3))
    assert k["seeds"] == 3


def test_llm_section_pairs_base_lr_runs_only(monkeypatch, tmp_path):
    """The LLM section compares allocators with the study's base-lr fixed runs; the lr-bracket runs (here a
    fixed-n2 at 3x the lr, far better) must not become the envelope."""
    import isocompute.reports.llm_study as llm_study
    from isocompute.reports.allocators import llm_section

    t = _table()
    t["lr_base"] = llm_study.BASE_LR
    extra = t.loc[t["allocator"] == "fixed-n2"].copy()
    extra["lr_base"] = 3 * llm_study.BASE_LR
    extra["val_mean"] += 100.0
    extra["run_id"] += "-x3"
    same = t.loc[t["allocator"] == "fixed-n8"].copy()  # a history rule that never had a history
    same["allocator"] = "skip-zero-var"
    same["run_id"] += "-szv"
    t = pd.concat([t, extra, same], ignore_index=True)
    t = t.assign(model="smollm2", dataset="easy", bp=8, zero_var_frac=0.25)
    monkeypatch.setattr(llm_study, "runs_table", lambda results: t)
    (tmp_path / "easy.train.jsonl").write_text("{}\n" * 5)
    rec = {"config": {"allocator": "skip-zero-var", "dataset": "easy", "bp": 8,
                      "options": {"data_dir": str(tmp_path)}}}
    monkeypatch.setattr("studies.results_dir.finished_records", lambda results: {"x": rec})
    lines = llm_section(tmp_path)
    text = "\n".join(lines)
    assert "skip-zero-var: every evaluation equals fixed-n8's on every seed" in text
    assert "40 steps x bp 8 = 320 problem draws from a training split of 5 problems" in text
    assert "no problem has a history" not in text  # 320 draws from 5 problems revisit them
    assert "knapsack: every" not in text
    row = next(x for x in lines if x.startswith("| knapsack |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    mean = sum(0.1 * (s + 1) * math.log(4) for s in range(3)) / 3
    assert cells[-5].startswith(f"{mean:+.4f}")  # the C = 400 cell: vs the envelope fixed-n8
    assert " / 400: n8. " in "\n".join(lines)
