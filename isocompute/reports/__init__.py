"""Report generators on top of the study pipeline: the claims report, the allocators report, the
LLM-study report and the predict evaluation, each a click command under `isocompute report ...`.

Arrows: `isocompute.cli -> isocompute.reports -> studies`; nothing below imports a report."""
