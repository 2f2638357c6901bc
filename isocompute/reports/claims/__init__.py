"""The claims report (`isocompute report claims`): each section of docs/CLAIMS.md as declared studies, a
measurement and a pure verdict rule (isocompute/reports/claims/report.py renders them; the click commands are
isocompute/reports/cli/claims.py and groupstd.py)."""

from isocompute.reports.claims.common import FULL, LLM_QUICK, QUICK, VERDICTS, ClaimsMode, Section
from isocompute.reports.claims.report import SECTIONS, build_report

__all__ = ["FULL", "LLM_QUICK", "QUICK", "SECTIONS", "VERDICTS", "ClaimsMode", "Section", "build_report"]
