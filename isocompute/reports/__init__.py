"""Report generators on top of the study pipeline: the claims report, the allocators report, the
LLM-study report, the predict evaluation, the README's generated blocks and the tiny-LM study, each a library
module here and a click command under `isocompute report ...` in isocompute/reports/cli/.

Arrows: `isocompute.cli -> isocompute.reports -> studies`; nothing below imports a report, and no report's
library module imports a command line module (tests/test_arrows.py)."""
