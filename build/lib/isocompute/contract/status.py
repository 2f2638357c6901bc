"""Run statuses, as the engines' results and the studies store write them.

One vocabulary from engine to store: an engine's run ends DONE or DIVERGED (non-finite parameters or metrics:
the curve stops there, the rows so far are kept), and the store records it as such; a run whose worker raised
is FAILED, a run not (or no longer) recorded PENDING. (A fit's status, "ok" or why not, is another idea:
studies.fit.sigmoid.FIT_OK.)"""

from __future__ import annotations

DIVERGED = "diverged"
"""A run stopped by non-finite values; its step and reason are kept beside it."""
DONE = "done"
"""A run that reached its budget."""
FAILED = "failed"
"""The store's record of a run whose worker raised (the error is kept; the run is retried next time)."""
PENDING = "pending"
"""The store's state of a run without a finished record."""
FINISHED = (DONE, DIVERGED)
"""Store statuses of runs that need no rerun."""
