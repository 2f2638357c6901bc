"""The claims report header names the command that regenerates it (--results when not the default)."""

from __future__ import annotations

from pathlib import Path

from isocompute.reports.claims.common import MODES
from isocompute.reports.claims.report import render


def _cmd(plan, results):
    line = render(plan, [], 1.0, results).splitlines()[2]
    return line.split("`")[1]


def test_header_names_a_non_default_results_dir():
    cmd = _cmd(MODES[("sim", False)], Path("results/mech12"))
    assert cmd == "isocompute report claims --results results/mech12"


def test_header_omits_the_default_results_dir():
    assert _cmd(MODES[("sim", True)], Path("results/claims/sim")) == "isocompute report claims --quick"
    cmd = _cmd(MODES[("llm", True)], Path("results/claims/llm"))
    assert cmd == "isocompute report claims --backend llm --quick"
