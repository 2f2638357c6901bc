"""Run statuses, as the engines' results and the studies store write them.

An engine's run ends OK or DIVERGED (non-finite parameters or metrics: the curve stops there, the rows so far
are kept). The store records a finished run as DONE or DIVERGED, a run whose worker raised as FAILED, and a
run not (or no longer) recorded as PENDING."""

from __future__ import annotations

OK = "ok"
"""An engine's run that reached its budget."""
DIVERGED = "diverged"
"""A run stopped by non-finite values; its step and reason are kept beside it."""
DONE = "done"
"""The store's record of a run that reached its budget."""
FAILED = "failed"
"""The store's record of a run whose worker raised (the error is kept; the run is retried next time)."""
PENDING = "pending"
"""The store's state of a run without a finished record."""
FINISHED = (DONE, DIVERGED)
"""Store statuses of runs that need no rerun."""


def recorded(engine_status: str) -> str:
    """The store's status of an engine result: DIVERGED stays DIVERGED, anything else is DONE."""
    return DIVERGED if engine_status == DIVERGED else DONE
