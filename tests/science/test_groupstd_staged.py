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


def test_the_groupstd_block_survives_a_mechanisms_regeneration(tmp_path):
    from isocompute.reports.claims.groupstd_report import LINK_BEGIN, LINK_END
    from isocompute.reports.claims.report import kept_blocks
    from studies.files import write_marked_block

    doc = tmp_path / "MECHANISMS.md"
    doc.write_text("# Mechanisms\n")
    write_marked_block(doc, LINK_BEGIN, LINK_END, "simulator verdict")
    write_marked_block(doc, LINK_BEGIN, LINK_END, "simulator verdict, rerun")
    text = doc.read_text()
    assert "simulator verdict, rerun" in text and text.count("simulator") == 1
    assert "simulator verdict, rerun" in kept_blocks(doc)  # a regeneration of the mechanisms report keeps it


@pytest.mark.slow
def test_the_tiny_lm_quick_experiment_end_to_end(tmp_path):
    """`isocompute report groupstd --backend llm --quick`: the tiny-LM experiment's machinery on real runs."""
    from click.testing import CliRunner

    from isocompute.reports.cli.groupstd import groupstd

    out = tmp_path / "GS.md"
    res = CliRunner().invoke(groupstd, ["--backend", "llm", "--quick", "--results", str(tmp_path / "r"),
                                        "--out", str(out), "--jobs", "2"])
    assert res.exit_code == 0, res.output
    md = out.read_text()
    assert "Tiny LM (llm backend): n vs m" in md and "Verdict (n vs m, the study's rule, read at KL" in md
    assert "lm = tiny" in md and "AdamW base-lr grid 0.0003, 0.001 at B_ref = 64 under the sqrt rule" in md
    reading = md.split("## Reading")[1].split("\n## ")[0]
    assert "- group + KL 0.1: top-budget record reward n=2:" in reading and "- none + KL 0.1:" in reading
    assert "shown if `group-kl0.1`" in md and "`group-kl1`" not in md and "Not run" not in md
    assert "What this study was: GRPO on the tiny LM with n <= 4 at bp 4" in md


def _arm(diff: float) -> dict:
    c = {"n_small": 2, "n_large": 32, "diff": diff, "lo": diff - 0.01, "hi": diff + 0.01}
    return {"top": c, "stars": [2, 2], "to_plateau": {"need": {2: 2.0**14, 32: None}},
            "rows": [{"per_n": {2: (0.7, 0.01), 32: (0.6, 0.01)}}]}


def test_reading_names_the_arms_the_study_ran():
    """The tiny-LM size ran `group-kl0.1` and `none-kl0.1`; its Reading section describes those (it was empty
    when the code looked up the simulator's arm names)."""
    from isocompute.reports.claims.groupstd_report import reading

    x = {"size": SIZES["llm"], "arms": {"group-kl0.1": _arm(-0.1), "none-kl0.1": _arm(-0.09)}}
    lines = reading(x)
    assert lines[:2] == ["## Reading", ""] and len(lines) == 4
    assert lines[2].startswith("- group + KL 0.1: top-budget record reward n=2: 0.700, n=32: 0.600; "
                               "largest n loses (n=32 − n=2 = -0.1000")
    sim = {"size": SIZES["full"], "arms": {"group-kl0": _arm(0.0), "group-kl1": _arm(0.05)}}
    text = "\n".join(reading(sim))
    assert "- group, no KL: at the top budget the largest n does not differ" in text
    assert "- group + KL 1: top-budget record reward" in text and "largest n wins" in text


def test_the_full_tiny_lm_report_is_refused_in_one_line(tmp_path):
    """Its runs were never committed, so nothing can regenerate its page: `--backend llm` without --quick
    says so in one line, exit 2, and writes nothing."""
    from click.testing import CliRunner

    from isocompute.cli import main
    from isocompute.reports.cli.groupstd import TINY_REFUSAL

    (tmp_path / "M.md").write_text("# M\n")
    res = CliRunner().invoke(main, ["report", "groupstd", "--backend", "llm", "--results",
                                    str(tmp_path / "store"), "--out", str(tmp_path / "GS.md"), "--fig",
                                    str(tmp_path / "f.png"), "--link", str(tmp_path / "M.md")])
    assert res.exit_code == 2 and res.output.strip() == f"error: {TINY_REFUSAL}"
    assert not (tmp_path / "store").exists() and not (tmp_path / "GS.md").exists()
    assert (tmp_path / "M.md").read_text() == "# M\n"
