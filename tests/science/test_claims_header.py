"""The claims report header names the command that regenerates it (--results when not the default)."""

from __future__ import annotations

from pathlib import Path

from studies.claims.common import PLANS
from studies.claims.report import render


def _cmd(plan, results):
    line = render(plan, [], 1.0, results).splitlines()[2]
    return line.split("`")[1]


def test_header_names_a_non_default_results_dir():
    assert _cmd(PLANS[("sim", False)], Path("results/mech12")) == "isocompute claims --results results/mech12"


def test_header_omits_the_default_results_dir():
    assert _cmd(PLANS[("sim", True)], Path("results/claims/sim")) == "isocompute claims --quick"
    assert _cmd(PLANS[("llm", True)], Path("results/claims/llm")) == "isocompute claims --backend llm --quick"
