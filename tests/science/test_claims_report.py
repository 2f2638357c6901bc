"""`isocompute claims --quick` (issue 4): one command writes a report with a verdict for the theory and every
finding 1-11 of PAPER.md, each backed by numbers (about a minute on 2 cores)."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from isocompute.cli import main
from studies.claims import QUICK, VERDICTS

KEYS = ["theory"] + [f"f{i}" for i in range(1, 12)]


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("claims")
    out = tmp / "CLAIMS.md"
    res = CliRunner().invoke(main, ["claims", "--quick", "--results", str(tmp / "cache"), "--out", str(out)])
    assert res.exit_code == 0, res.output
    return res.output, out.read_text()


def test_quick_report_has_a_verdict_for_every_claim(quick_report):
    stdout, md = quick_report
    verdicts = dict(line.split(maxsplit=1) for line in stdout.splitlines() if line.split()[:1]
                    and line.split()[0] in KEYS)
    assert sorted(verdicts, key=KEYS.index) == KEYS
    assert all(v in VERDICTS for v in verdicts.values()), verdicts
    for key in KEYS:
        m = re.search(rf'<a id="{key}"></a>(.*?)\*\*Verdict: ([^.]+)\.\*\*', md, re.S)
        assert m and m.group(2) == verdicts[key]
        assert re.search(r"\d\.\d{3}|\b\d+x\b", m.group(1)), f"section {key} shows no measured number"


def test_quick_report_says_it_is_quick_and_reproduces_claim1(quick_report):
    _, md = quick_report
    assert "Quick mode" in md and f"Seeds: {QUICK.seeds}" in md
    m = re.search(r'<a id="theory"></a>.*?\*\*Verdict: ([^.]+)\.', md, re.S)
    assert m.group(1) == "reproduced"
