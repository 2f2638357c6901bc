"""The claims report (`isocompute claims`): each section of docs/CLAIMS.md as declared studies, a measurement
and a pure verdict rule (studies/claims/report.py renders them; the click command is `claims`)."""

from studies.claims.common import FULL, LLM_QUICK, QUICK, VERDICTS, Plan, Section
from studies.claims.report import SECTIONS, build_report, claims

__all__ = ["FULL", "LLM_QUICK", "QUICK", "SECTIONS", "VERDICTS", "Plan", "Section", "build_report", "claims"]
