"""No measured number in README.md is typed by hand: every decimal or ± outside code and marked
blocks fails, and the generated blocks equal what isocompute.reports.readme makes from their data files."""

from __future__ import annotations

import json
from pathlib import Path

from isocompute.reports import readme

ROOT = Path(__file__).resolve().parents[2]


def test_the_rule_flags_prose_numbers_only():
    text = "\n".join([
        "n = 256 beats n = 8 by +0.0264 ± 0.0106 at 3.6e7 rollouts/s.",
        "Python 3.11, arXiv 2603.12151, budget 2^18, 8 seeds, SmolLM2-135M.",
        "```bash", "isocompute run --lr 0.03", "```",
        "inline `--lr 0.1` is code.",
        "<!-- x:begin -->", "generated 0.5", "<!-- x:end -->",
        "<!-- y -->", "generated 1.25", "<!-- y -->",
        "v1.2 of a file name like a.b.c is not a number; 0.75 is.",
        "Ray >= 2.59 is a version, so is version 1.5; 2.5 is not.",
    ])
    got = readme.stray_numbers(text)
    assert got == [(1, "+0.0264"), (1, "±"), (1, "0.0106"), (1, "3.6e7"), (13, "0.75"), (14, "2.5")], got


def test_readme_has_no_typed_numbers():
    stray = readme.stray_numbers((ROOT / "README.md").read_text())
    assert not stray, f"README numbers outside generated blocks (line, number): {stray}"


def test_readme_blocks_are_generated_from_their_data():
    text = (ROOT / "README.md").read_text()
    cj = ROOT / readme.CLAIMS_JSON
    summary = json.loads(cj.read_text()) if cj.exists() else None
    assert f"{readme.CLAIMS_BEGIN}\n{readme.claims_paragraph(summary)}\n{readme.CLAIMS_END}" in text
    fp32, bf16 = (json.loads((ROOT / p).read_text()) for p in readme.ROLLOUT_JSONS)
    assert f"{readme.ROLLOUT_MARK}\n{readme.rollout_paragraph(fp32, bf16)}\n{readme.ROLLOUT_MARK}" in text


def test_claims_paragraph_quotes_the_summary():
    c = {"n_small": 8, "n_large": 256, "diff": 0.0264, "ci": 0.0106, "wins": 8, "seeds": 8}
    s = {"plan": "full", "seeds": 8, "verdicts": {"theory": "reproduced", "f1": "partly", "f5": "reproduced"},
         "f1": {"preset": {"lr": {"lr": 0.1}, "n_star": [8, 32, 256], "record": c, "final": c},
                "envelope": {"record": c | {"diff": 0.0001}, "final": None},
                "sqrt": {"record": c | {"diff": -0.02}, "base": "0.001"}},
         "mechanisms": {"rises": [], "of": 7}}
    p = readme.claims_paragraph(s)
    assert "n* goes from 8 to 256" in p and "+0.0264 ± 0.0106" in p and "+0.0001 ± 0.0106" in p
    assert "-0.0200 ± 0.0106" in p and "chosen 0.001" in p and "0 of the 7" in p
    assert "finding 1: partly" in p
    assert "+0." not in readme.claims_paragraph(None)
