"""`isocompute report claims --backend llm --lm tiny --quick`: the claims report on the shipped tiny LM (real
runs, a few minutes on 2 cores: marker slow), and its one-line refusals."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from isocompute.cli import main
from isocompute.reports.claims.common import MODES, TINY_QUICK
from isocompute.reports.claims.report import default_results, render


def test_the_tiny_plan_runs_the_tiny_lm_and_keeps_its_own_results():
    assert MODES[("tiny", True)] is TINY_QUICK and TINY_QUICK.backend == "llm"
    assert TINY_QUICK.presets["interference"] == {"lm": "tiny"}
    assert str(default_results(TINY_QUICK)) == "results/claims/tiny"
    md = render(TINY_QUICK, [], 1.0, default_results(TINY_QUICK))
    assert "`isocompute report claims --backend llm --lm tiny --quick`" in md


@pytest.mark.parametrize("args", [["--lm", "tiny"], ["--backend", "sim", "--lm", "tiny"], ["--lm", "gpt2"]])
def test_bad_lm_is_one_line_and_exit_2(args, tmp_path):
    r = CliRunner().invoke(main, ["claims", "--quick", "--results", str(tmp_path / "r"), *args])
    assert r.exit_code == 2
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_claims_on_the_tiny_lm_run_through_the_pipeline(tmp_path, monkeypatch):
    """The command at a smaller plan (the committed quick plan takes ~2 min: 6 runs of 2^14 rollouts)."""
    from dataclasses import replace

    from isocompute.reports.claims import common, report
    from studies import presets

    small = replace(TINY_QUICK, top=2**9, side_top=2**9, ns=(2, 4), side_ns=(2, 4), bp=4, large_min=4,
                    pass1_ns=(2, 4))
    monkeypatch.setitem(common.MODES, ("tiny", True), small)
    monkeypatch.setitem(report.MODES, ("tiny", True), small)
    monkeypatch.setitem(presets.PRESETS, "tiny", {"interference": {"lm": "tiny", "d_val": 16, "n_evals": 4}})
    out = tmp_path / "claims.md"
    r = CliRunner().invoke(main, ["claims", "--backend", "llm", "--lm", "tiny", "--quick", "--jobs", "2",
                                  "--results", str(tmp_path / "results"), "--out", str(out)])
    assert r.exit_code == 0, r.output
    md = out.read_text()
    assert "Claims report (tiny-quick mode, llm backend, lm tiny)" in md
    summary = json.loads(out.with_suffix(".json").read_text())
    assert summary["plan"] == "tiny-quick"
    runs = list((tmp_path / "results").rglob("*.parquet")) + list((tmp_path / "results").rglob("*.jsonl"))
    assert runs, "the tiny plan wrote no run files"
    for key in ("f1", "f5", "f10"):  # the sections that apply to a real model measured, not refused
        assert f"| [Finding {key[1:]}:" in md
        assert "refused" not in md.split(f'<a id="{key}"></a>')[1].split("\n## ")[0]
