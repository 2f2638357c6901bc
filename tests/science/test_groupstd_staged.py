"""The staged build (tuning seeds on the whole lr grid, then the reported seeds at the chosen lrs only) gives
the readout of the unstaged one: same choices, contrasts and n*(C), from fewer runs."""

from __future__ import annotations

from dataclasses import replace

import pytest

from isocompute.reports.claims.groupstd import SIZES, build


@pytest.mark.slow
def test_staged_build_reads_out_as_the_full_grid(tmp_path):
    size = replace(SIZES["quick"], batch=None)  # the n-vs-m part (the staged LM size has no fixed batch)
    full, _, _ = build(size, tmp_path / "full", jobs=1)
    staged, t, _ = build(replace(size, staged=True), tmp_path / "staged", jobs=1)
    for key in full["arms"]:
        a, b = full["arms"][key], staged["arms"][key]
        assert [r["lr"] for r in a["rows"]] == [r["lr"] for r in b["rows"]]
        assert [r["extreme"] for r in a["rows"]] == [r["extreme"] for r in b["rows"]]
        assert [r["per_n"] for r in a["rows"]] == [r["per_n"] for r in b["rows"]]
        assert a["stars"] == b["stars"] and a["stars_ci"] == b["stars_ci"]
    assert full["verdict"] == staged["verdict"]
    runs = sum(len(v) for v in t.runs.values())
    assert runs < full["wall"]["runs"]  # the reported seeds ran at the chosen lrs only


def test_the_two_experiments_keep_their_own_blocks_in_mechanisms(tmp_path):
    from isocompute.reports.claims.groupstd_report import link_markers
    from isocompute.reports.claims.report import kept_blocks
    from studies.files import write_marked_block

    doc = tmp_path / "MECHANISMS.md"
    doc.write_text("# Mechanisms\n")
    write_marked_block(doc, *link_markers("sim"), "simulator verdict")
    write_marked_block(doc, *link_markers("llm"), "tiny LM verdict")
    write_marked_block(doc, *link_markers("sim"), "simulator verdict, rerun")
    text = doc.read_text()
    assert "simulator verdict, rerun" in text and "tiny LM verdict" in text and text.count("simulator") == 1
    kept = kept_blocks(doc)  # a regeneration of the mechanisms report keeps both
    assert "tiny LM verdict" in kept and "simulator verdict, rerun" in kept


@pytest.mark.slow
def test_the_tiny_lm_quick_experiment_end_to_end(tmp_path):
    """`isocompute report groupstd --backend llm --quick`: the tiny-LM experiment's machinery on real runs."""
    from click.testing import CliRunner

    from isocompute.reports.claims.groupstd_report import groupstd

    out = tmp_path / "GS.md"
    res = CliRunner().invoke(groupstd, ["--backend", "llm", "--quick", "--results", str(tmp_path / "r"),
                                        "--out", str(out), "--jobs", "2"])
    assert res.exit_code == 0, res.output
    md = out.read_text()
    assert "Tiny LM (llm backend): n vs m" in md and "Verdict (n vs m, the issue's rule)" in md
    assert "lm = tiny" in md and "AdamW lr grid" in md
